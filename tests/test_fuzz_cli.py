"""Fuzzing the command line: every argument list either runs or is refused in one line, never
with a traceback, and a value the command line must refuse is never accepted (Hypothesis).

Each subcommand gets argument lists built from its own options, with values drawn from valid
ones, boundary values, garbage (empty and blank strings, nan, inf, huge and negative numbers,
unknown names, line breaks) and unknown options, in any order. :func:`tmsim.cli.main.main`
runs in this process, in a scratch folder, and the oracle (:func:`check`) requires:

- exit code 0: something was reported (``--json``: one JSON document on stdout), and no value
  the command line's rules refuse (:data:`RULES`) was among the arguments;
- exit code 2: one line on stderr, ``tmsim...: error: ...``; only an error found while the
  command ran (``tmsim: error:``) may follow progress lines (a sweep's bar), never a usage
  error (``tmsim CMD: error:``);
- exit code 1 (a plan the validator refused, failed sweep points or figures): the last line on
  stderr is the one error line, after the command's reports of what failed;
- nothing else: no other exit code, no exception but :class:`SystemExit`.

The workloads are tiny so that a run takes seconds: a four-kernel graph file, VGG19 at batch
1 or 2 for the heuristics (huge batches the command line accepts are the graph builder's to
refuse), the MILPs only on the graph file; ``compare`` runs with ``--quiet`` (its progress
shares stderr). ``sweep`` runs its points in this process (``--workers`` is drawn only with
``--dry-run``) and draws ``--dask`` only blank (an address would be dialled); ``reproduce``
runs two stand-in figures; ``simulate`` replays a saved plan of the graph file or walks
VGG19's step in 2LM, without ``--timeline`` (matplotlib takes seconds to import); ``import``
traces a one-layer model from a file in the scratch folder (without torch, every run is
refused in one line).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_graphs import tiny_step

from tmsim.cli.main import main
from tmsim.figures import FigureRegistry
from tmsim.results import read_table, write_table
from tmsim.workload.files import save_graph

Argv = list[str]
#: Tokens of one option and whether the command line must refuse them.
Arg = tuple[Argv, bool]

ERROR_LINE = re.compile(r"^tmsim( [a-z]+)?: error: .")
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parses(convert: Callable[[str], Any], test: Callable[[Any], bool]) -> Callable[[str], bool]:
    """Whether a value converts and its conversion passes ``test``."""

    def ok(value: str) -> bool:
        try:
            return bool(test(convert(value)))
        except ValueError:
            return False

    return ok


def text(value: str) -> bool:
    return bool(value.strip()) and "\0" not in value


def _shape_ok(value: str) -> bool:
    """Whether ``tmsim import`` takes ``value`` as one sample's shape."""
    from argparse import ArgumentTypeError

    from tmsim.cli.torchimport import shape_arg

    try:
        shape_arg(value)
    except ArgumentTypeError:
        return False
    return True


#: The command line's rules: option -> whether a value is acceptable (options not named here
#: are judged by the library, in one line too).
RULES: dict[str, Callable[[str], bool]] = {
    "--batch": parses(int, lambda v: 1 <= v < 2**63),
    "--window": parses(int, lambda v: 1 <= v <= 10_000),
    "--node-limit": parses(int, lambda v: 0 <= v < 2**31),
    "--lp-iterations": parses(int, lambda v: 1 <= v < 2**31),
    "--gap": parses(float, lambda v: 0 <= v <= 1),
    "--time-limit": lambda v: (
        v.strip().lower() == "none" or parses(float, lambda t: math.isfinite(t) and t > 0)(v)
    ),
    "--workers": parses(int, lambda v: 1 <= v < 2**63),
    "--limit": parses(int, lambda v: 1 <= v < 2**63),
    "--strategies": lambda v: text(v) and all(p.strip() for p in v.split(",")),
    "--only": lambda v: text(v) and all(p.strip() for p in v.split(",")),
    **dict.fromkeys(["--out", "--save", "--file", "--platform", "--solver", "--dask"], text),
    **dict.fromkeys(["--input", "--target"], lambda v: _shape_ok(v)),
    "--name": text,
    "--profile": text,
}

BLANK = ["", " ", "\t", "\n"]
NUMBERS = ["0", "-1", "-0", "1.5", "nan", "inf", "-inf", "1e999", "1_0", "0x10", "1e3"]
HUGE = [str(2**31), str(2**63), "9" * 30, str(-(2**63))]
WORDS = ["x", "-", "--", "é", "a\nb", "a,b", ",", "a\0b"]
#: Garbage for any value.
GARBAGE = st.sampled_from(BLANK + NUMBERS + HUGE + WORDS)
#: Garbage for a name: also short random text.
NAME_GARBAGE = GARBAGE | st.text(max_size=6)


def option(flag: str, valid: list[str], garbage: st.SearchStrategy[str] = GARBAGE) -> Any:
    """``[flag, value]`` with a valid, boundary or garbage value, and whether it is refused."""
    rule = RULES.get(flag)
    values = st.sampled_from(valid) | garbage if valid else garbage
    return values.map(lambda v: ([flag, v], rule is not None and not rule(v)))


def flag(name: str) -> Any:
    """A flag without a value."""
    return st.just(([name], False))


@dataclass(frozen=True)
class Scratch:
    """The scratch folder the command line runs in, and the files it offers."""

    root: Path
    graph: str
    plan: str
    spec: str
    registry: FigureRegistry


@st.composite
def combine(draw: st.DrawFn, head: Argv, parts: Sequence[Any], required: Sequence[Any] = ()) -> Arg:
    """``head``, then each of ``required``, then some of ``parts`` in a drawn order; and,
    now and then, an unknown option or a stray word at the end."""
    chosen = [draw(p) for p in required]
    chosen += [draw(p) for p in parts if draw(st.booleans())]
    chosen = draw(st.permutations(chosen)) if chosen else []
    argv, bad = list(head), False
    for tokens, refused in chosen:
        argv += tokens
        bad = bad or refused
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["--bogus", "--bogus=1", "stray", "-z"])))
        bad = True
    return argv, bad


@st.composite
def graph_source(draw: st.DrawFn, s: Scratch, zoo: bool = True) -> Arg:
    """A zoo model at a small batch, or a graph file (``--batch`` with a file is refused)."""
    if zoo and draw(st.booleans()):
        model = draw(st.sampled_from(["vgg19", "vgg19", "alexnet"]) | NAME_GARBAGE)
        absurd = st.sampled_from([*NUMBERS, *HUGE, str(10**12), str(2**62), str(2**63 - 1)])
        batch, refused = draw(option("--batch", ["1", "2"], absurd))
        dtype = draw(st.sampled_from([[], ["--dtype", "fp16"], ["--dtype", "fp7"]]))
        return [model, *batch, *dtype], refused or dtype[-1:] == ["fp7"]
    path, refused = draw(option("--file", [s.graph, s.graph, "missing.json"]))
    if draw(st.integers(0, 5)) == 0:
        return [*path, "--batch", "2"], True
    return path, refused


def solver_options() -> list[Any]:
    return [
        option("--gap", ["0", "0.01", "1"]),
        option("--time-limit", ["5", "0.5", "1e-9"]),
        option("--node-limit", ["0", "20", str(2**31 - 1)]),
        option("--lp-iterations", ["0", "1", "50", str(2**31 - 1), str(2**31)]),
        option("--window", ["1", "2", "15", "10000", "10001"]),
        option("--solver", ["HIGHS", "NOPE"], NAME_GARBAGE),
    ]


def capacity() -> Any:
    return st.one_of(
        option("--ratio", ["4:1", "1:1", "0:1", "4:0", "1e9999999:1"]),
        option("--fast-bytes", ["3e9", "1GB", "24GiB", "0", "1e9999999", "1.5GX"]),
    )


def profile() -> Any:
    """``--profile``: measured times of the graph file's kernels, or a file that is none."""
    return option("--profile", ["prof.csv", "prof.csv", "missing.csv", "tiny.json"])


def platform() -> Any:
    return option("--platform", ["cascadelake-optane", "rtx2080ti-pcie3", "nowhere"])


@st.composite
def plan_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    heuristics = ["all-fast", "all-slow", "first-touch", "greedy", "vdnn"]
    mode = draw(st.sampled_from([*heuristics, "static", "sync", "async"]) | NAME_GARBAGE)
    source = draw(graph_source(s, zoo=mode in heuristics))
    parts = [capacity(), platform(), *solver_options(), profile()]
    parts += [option("--out", ["plan.json", "no/such/dir/plan.json"]), flag("--json")]
    argv, bad = draw(combine(["plan", *source[0], "--mode", mode], parts))
    return argv, bad or source[1]


@st.composite
def compare_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    known = ["all-fast", "all-slow", "first-touch", "greedy", "vdnn", "2lm", "sync", "nope"]
    chosen = draw(st.lists(st.sampled_from(known), min_size=1, max_size=3))
    strategies = option("--strategies", [",".join(chosen), " greedy , all-fast"], NAME_GARBAGE)
    parts = [
        capacity(),
        platform(),
        *solver_options(),
        profile(),
        st.just((["--interference", "none"], False)),
    ]
    parts += [flag("--json")]
    parts += [
        option("--block-bytes", ["4096", "64KiB", "0", "3", "-1"]),
        option("--out", ["t.csv", "t.parquet", "t.txt"]),
    ]
    return draw(combine(["compare", "--file", s.graph, "--quiet"], parts, required=[strategies]))


@st.composite
def sweep_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    spec = draw(st.sampled_from([s.spec, s.spec, s.graph, "missing.toml"]) | GARBAGE)
    parts = [
        option("--format", ["csv", "parquet", "xls"]),
        option("--limit", ["1", "2", "100"]),
        option("--dask", [], st.sampled_from(BLANK)),
    ]
    dry = draw(st.booleans())
    if dry:
        parts += [flag("--dry-run"), option("--workers", ["1", "2", "64"])]
    required = [option("--out", ["sweep", "sweep", "other"])]
    argv, bad = draw(combine(["sweep", spec], parts, required))
    if not dry and "--dask" not in argv:
        argv += ["--workers", "1"]  # points in this process: a pool takes seconds to start
    return argv, bad or not text(spec)


@st.composite
def reproduce_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    parts = [
        flag("--quick"),
        flag("--force"),
        flag("--plot-only"),
        option("--only", ["one", "two,one", "one,one", "three"], NAME_GARBAGE),
        st.one_of(option("--workers", ["1", "2"]), option("--dask", ["tcp://h:1"])),
    ]
    required = [option("--out", ["figs", "figs", "other"])]
    return draw(combine(["reproduce"], parts, required))


@st.composite
def simulate_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    parts = [st.just((["--interference", "none"], False)), flag("--json")]
    if draw(st.booleans()):
        model = draw(st.sampled_from(["vgg19", "alexnet"]) | NAME_GARBAGE)
        batch = draw(st.sampled_from(["1", "2", "0", "-1"]) | GARBAGE)
        parts += [flag("--cold"), option("--block-bytes", ["4096", "65536", "0", "3", "-64"])]
        argv, _ = draw(combine(["simulate", "--cache-mode", model, "--batch", batch], parts))
    else:
        parts += [option("--file", [s.graph]), option("--platform", ["cascadelake-optane"])]
        parts.append(profile())
        argv, _ = draw(combine(["simulate", s.plan], parts))
    return argv, False  # its rules are the simulate command's own


@st.composite
def small_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    """The top level, ``models``, ``platforms``, ``platform`` and ``graph``."""
    kind = draw(st.sampled_from(["top", "models", "platforms", "platform", "graph"]))
    if kind == "top":
        argv = draw(st.sampled_from([[], ["--version"], ["--help"], ["nope"], ["-x"], [""]]))
        return argv, argv not in (["--version"], ["--help"])
    if kind in ("models", "platforms"):
        return draw(combine([kind], []))
    if kind == "platform":
        name = draw(st.sampled_from(["a100-pcie4", "cascadelake-2lm", "nowhere"]) | GARBAGE)
        argv, bad = draw(combine(["platform", name], [flag("--json")]))
        return argv, bad or not text(name)
    source = draw(graph_source(s))
    parts = [option("--save", ["g.json", "no/such/dir/g.json"]), flag("--json")]
    argv, bad = draw(combine(["graph", *source[0]], parts))
    return argv, bad or source[1]


@st.composite
def import_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    """``import``: a one-layer model in a file of the scratch folder (traced in a fraction
    of a second; without torch every run is refused in one line), torchvision's names or
    garbage, with small shapes."""
    mine = f"{s.root / 'tinymodel.py'}:build"
    if draw(st.integers(0, 3)) == 0:  # a valid command now and then: garbage is the rule
        loss = draw(st.sampled_from([[], ["--loss", "mse"], ["--loss", "sum"]]))
        extra = draw(st.sampled_from([[], ["--json"], ["--dtype", "bf16"], ["--target", ":int64"]]))
        return ["import", mine, "--input", "4", "--out", "g.json", *loss, *extra], False
    known = [mine, mine, mine, "torchvision:nope", "nowhere.py:build", "json:dumps"]
    model = draw(st.sampled_from(known) | NAME_GARBAGE)
    shapes = ["4", "4", "4:fp32", "3x4", "0", "4:fp7", "x", ":int64", "4:int64"]
    parts = [
        option("--batch", ["1", "2"]),
        option("--target", [":int64", "3:fp32", "3", "2x2"]),
        option("--loss", ["cross_entropy", "mse", "sum", "hinge"]),
        option("--optimizer", ["sgd", "adam", "adamw", "lbfgs"]),
        option("--dtype", ["fp32", "bf16", "int8"]),
        option("--name", ["tiny", "a b"]),
        flag("--json"),
    ]
    required = [option("--input", shapes), option("--out", ["g.json", "no/such/dir/g.json"])]
    argv, bad = draw(combine(["import", model], parts, required))
    return argv, bad or not text(model)


@st.composite
def profile_argv(draw: st.DrawFn, s: Scratch) -> Arg:
    """``profile``: ``import``'s model and step arguments on the scratch folder's one-layer
    model (measured in a fraction of a second on the CPU), with profile's own options."""
    mine = f"{s.root / 'tinymodel.py'}:build"
    if draw(st.integers(0, 3)) == 0:
        extra = draw(st.sampled_from([[], ["--tier", "DRAM"], ["--loss", "mse"]]))
        argv = ["profile", mine, "--input", "4", "--out", "p.csv", "--graph", "g.json"]
        return [*argv, "--repeats", "1", "--warmup", "0", *extra], False
    model = draw(st.sampled_from([mine, mine, "torchvision:nope"]) | NAME_GARBAGE)
    parts = [
        option("--batch", ["1", "2"]),
        option("--device", ["cpu", "cuda", "tpu", "cuda:7"]),
        option("--tier", ["host", "DRAM", ""]),
        option("--warmup", ["0", "1", "-1", "x"]),
        option("--repeats", ["1", "0", "100001"]),
        option("--loss", ["mse", "hinge"]),
    ]
    required = [
        option("--input", ["4", "0", "4:fp7"]),
        option("--out", ["p.csv", "no/such/dir/p.csv"]),
        option("--graph", ["g.json", "no/such/dir/g.json"]),
    ]
    argv, bad = draw(combine(["profile", model], parts, required))
    if "--repeats" not in argv:
        argv += ["--repeats", "1", "--warmup", "0"]
    return argv, bad or not text(model)


def run(argv: Argv, s: Scratch) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``tmsim ARGV`` run in ``s.root``."""
    out, err = io.StringIO(), io.StringIO()
    redirect = contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)
    with contextlib.chdir(s.root), redirect[0], redirect[1]:
        try:
            code = main(argv, s.registry)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 99)
    return code, out.getvalue(), err.getvalue()


def is_progress(lines: list[str]) -> bool:
    """Whether ``lines`` are progress reports and warnings (a sweep's bar and skipped points,
    a figure's steps), which may come before an error found while a command runs."""
    reports = ("sweep ", "[", "    ", "tmsim: warning: ", "tmsim: skipped ")
    return bool(lines) and all(line.startswith(reports) for line in lines)


def check(argv: Argv, refused: bool, code: int, out: str, err: str) -> None:
    """The oracle of the module documentation."""
    lines = err.splitlines()
    assert "Traceback" not in err, err
    if code == 0:
        assert not refused, f"accepted: {argv!r}"
        assert out.strip() or err.strip()
        if "--json" in argv and not {"-h", "--help"} & set(argv):
            json.loads(out)
    elif code in (1, 2):
        assert lines and ERROR_LINE.match(lines[-1]), err
        before = lines[:-1]
        assert not any(ERROR_LINE.match(line) for line in before), err
        if code == 2:  # a usage error is alone; one found while running may follow progress
            usage = lines[-1].startswith("tmsim ")
            assert not before or (not usage and is_progress(before)), err
    else:
        pytest.fail(f"exit code {code} for {argv!r}")


def _stand_in(name: str) -> types.ModuleType:
    """A figure module whose compute writes a two-row table and whose plot one file."""
    mod = types.ModuleType(f"stand_in.{name}")

    @dataclass(frozen=True)
    class Config:
        rows: int = 2

    def compute(config: Config, out_dir: Path, progress: Any = None, **where: Any) -> Path:
        frame = pd.DataFrame({"x": list(range(config.rows))})
        return write_table(frame, Path(out_dir) / f"{name}.parquet", {"rows": config.rows})

    def plot(data: Path, out_dir: Path) -> list[Path]:
        target = Path(out_dir) / f"{name}.png"
        target.write_bytes(b"x" * len(read_table(data)[0]))
        return [target]

    mod.NAME, mod.TITLE, mod.Config, mod.QUICK = name, name, Config, Config(rows=1)  # type: ignore[attr-defined]
    mod.compute, mod.plot = compute, plot  # type: ignore[attr-defined]
    return mod


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Scratch:
    root = tmp_path_factory.mktemp("cli")
    save_graph(tiny_step(), root / "tiny.json")
    (root / "prof.csv").write_text("kernel,placement,seconds\nf2,DRAM|DRAM,0.01\n", "utf-8")
    (root / "tinymodel.py").write_text(
        "import torch\n\ndef build():\n    return torch.nn.Linear(4, 3)\n", encoding="utf-8"
    )
    (root / "spec.toml").write_text(
        '[grid]\nmodel = "vgg19"\nbatch = 1\nplatform = "cascadelake-optane"\n'
        'ratio = "4:1"\nstrategy = ["all-fast", "greedy"]\n',
        encoding="utf-8",
    )
    mods = {n: _stand_in(n) for n in ("one", "two")}
    files = (str(root / name) for name in ("tiny.json", "plan.json", "spec.toml"))
    s = Scratch(root, *files, FigureRegistry(tuple(mods), mods.__getitem__))
    code, _, err = run(["plan", "--file", s.graph, "--mode", "greedy", "--out", s.plan], s)
    assert code == 0, err
    return s


ARGVS = {
    "small": small_argv,
    "plan": plan_argv,
    "compare": compare_argv,
    "sweep": sweep_argv,
    "reproduce": reproduce_argv,
    "simulate": simulate_argv,
    "import": import_argv,
    "profile": profile_argv,
}


@pytest.mark.parametrize("command", list(ARGVS))
@EXAMPLES
@given(data=st.data())
def test_every_argument_list_runs_or_is_refused_in_one_line(
    scratch: Scratch, command: str, data: st.DataObject
) -> None:
    argv, refused = data.draw(ARGVS[command](scratch), label="argv")
    check(argv, refused, *run(argv, scratch))


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["compare", "--strategies", ""], 2),
        (["compare", "--strategies", ",greedy"], 2),
        (["compare", "--strategies", "nope"], 2),
        (["compare", "--strategies", "greedy,greedy"], 0),
        (["compare", "--strategies", "greedy", "--block-bytes", "0"], 2),
        (["compare", "--strategies", "greedy", "--fast-bytes", "3e9"], 0),
        (["plan", "--mode", "async", "--window", "0"], 2),
        (["plan", "--mode", "async", "--window", "1"], 0),
        (["plan", "--mode", "sync", "--node-limit", str(2**31)], 2),
        (["plan", "--mode", "sync", "--node-limit", "0"], 0),
        (["plan", "--mode", "greedy", "--batch", "1"], 2),
    ],
)
def test_boundaries_on_the_graph_file(scratch: Scratch, argv: Argv, code: int) -> None:
    full = [argv[0], "--file", scratch.graph, *argv[1:]]
    if argv[0] == "compare":
        full.append("--quiet")
    got, out, err = run(full, scratch)
    assert got == code, err
    check(full, code != 0, got, out, err)


@pytest.mark.parametrize(
    "option",
    [["--workers", "0"], ["--limit", "0"], ["--out", ""], ["--workers", "1", "--dask", "h:1"]],
)
def test_sweep_options_are_refused_while_parsing(scratch: Scratch, option: Argv) -> None:
    argv = ["sweep", "spec.toml", "--out", "s", "--dry-run", *option]
    code, out, err = run(argv, scratch)
    assert code == 2 and err.startswith("tmsim sweep: error: argument "), err
    check(argv, True, code, out, err)
