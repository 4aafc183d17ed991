"""The command line starts without the heavy libraries: building its parsers, ``--version``,
``--help`` and parsing a command's arguments import none of numpy, SciPy, cvxpy, HiGHS,
pandas, pyarrow, SimPy, matplotlib or torch (checked in a fresh interpreter, whose
``sys.modules`` says what was imported); the light copies of names and defaults the parsers use
(:mod:`tmsim.cli.catalog`, :data:`tmsim.cli.main.DEFERRED`) equal the library's. How fast it
starts is measured by ``python -m bench cli_startup``, not here."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tmsim.cli import catalog
from tmsim.cli.main import DEFERRED, build_parser

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "numpy",
    "scipy",
    "cvxpy",
    "highspy",
    "pandas",
    "pyarrow",
    "simpy",
    "matplotlib",
    "hwmodels",
    "torch",
    "torchvision",
)

#: Runs in a fresh interpreter: argv[1] is the Python statement to run, then prints the
#: heavy top-level packages that are in sys.modules as JSON.
_PROBE = f"""
import json, sys
try:
    exec(sys.argv[1])
except SystemExit:
    pass
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({list(HEAVY)!r}))
print(json.dumps(heavy))
"""


def heavy_imports(statement: str) -> list[str]:
    """The heavy packages ``statement`` imports, run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, statement],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.mark.parametrize(
    "statement",
    [
        "import tmsim.cli.main as m; m.build_parser()",
        "import tmsim.cli.main as m; m.main(['--version'])",
        "import tmsim.cli.main as m; m.main(['--help'])",
        "import tmsim.cli.main as m; m.main(['plan', '--help'])",
        "import tmsim.cli.main as m; m.main(['compare', '--help'])",
        "import tmsim.cli.main as m; m.main(['sweep', '--help'])",
        "import tmsim.cli.main as m; m.main(['reproduce', '--help'])",
        "import tmsim.cli.main as m; m.main(['graph', '--help'])",
        "import tmsim.cli.main as m; m.main(['import', '--help'])",
        "import tmsim.cli.main as m; m.main(['plan', 'vgg19', '--window', '0'])",
    ],
)
def test_starting_the_command_line_imports_no_heavy_library(statement: str) -> None:
    assert heavy_imports(statement) == []


def test_parsing_every_light_command_imports_no_heavy_library() -> None:
    argvs = [
        ["models"],
        ["platforms"],
        ["platform", "a100-pcie4", "--json"],
        ["graph", "vgg19", "--batch", "2", "--dtype", "fp16", "--json"],
        ["plan", "--file", "g.json", "--mode", "async", "--window", "3", "--gap", "0.5"],
        ["plan", "vgg19", "--time-limit", "10", "--node-limit", "0", "--out", "p.json"],
        ["compare", "vgg19", "--strategies", "greedy,sync", "--interference", "none", "--quiet"],
        ["sweep", "spec.toml", "--out", "d", "--workers", "2", "--limit", "3", "--dry-run"],
        ["reproduce", "--out", "d", "--only", "a,b", "--dask", "tcp://h:1", "--quick"],
        ["import", "torchvision:resnet50", "--input", "3x224x224", "--out", "g.json"],
    ]
    statement = (
        "import tmsim.cli.main as m\n"
        f"for argv in {argvs!r}:\n"
        "    m.build_parser().parse_args(argv)\n"
    )
    assert heavy_imports(statement) == []


def test_the_catalog_mirrors_the_library() -> None:
    from tmsim.planners import PLANNERS
    from tmsim.sweeps.engine import FORMATS
    from tmsim.workload.tensors import DTYPE_BYTES
    from tmsim.workload.zoo import MODELS

    assert tuple(MODELS) == catalog.MODEL_NAMES
    assert tuple(sorted(DTYPE_BYTES)) == catalog.DTYPES
    assert catalog.PLANNER_NAMES == PLANNERS
    assert catalog.TABLE_FORMATS == FORMATS
    from tmsim.cli.args import MAX_NODES
    from tmsim.planners.settings import MAX_NODE_LIMIT

    assert MAX_NODES == MAX_NODE_LIMIT


def test_the_options_show_the_planner_settings_own_defaults() -> None:
    """No mirror: ``plan --help`` shows ``PlanSettings``' defaults, and a command given no
    planner option plans with ``PlanSettings()`` itself."""
    from tmsim.cli.args import settings_from_args
    from tmsim.planners import PlanSettings

    parser = build_parser()
    args = parser.parse_args(["plan", "vgg19"])
    assert settings_from_args(args) == PlanSettings()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["plan"].format_help()
    d = PlanSettings()
    for shown in (f"({d.solver})", f"({d.time_limit_s:g})", f"({d.gap})", f"({d.window})"):
        assert shown in text, shown


def _commands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    """Each subcommand of ``parser`` with the help ``--help`` lists."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help for a in sub._choices_actions}


def test_deferred_commands_are_listed_with_their_own_help() -> None:
    light, full = _commands(build_parser()), _commands(build_parser(deferred=True))
    assert light == full
    assert set(DEFERRED) <= set(full)
    assert all(full[name] == text for name, text in DEFERRED.items())


def test_a_deferred_command_gets_its_own_parser_when_it_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tmsim.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["simulate", "--help"])
    assert info.value.code == 0
    assert "--cache-mode MODEL" in capsys.readouterr().out
