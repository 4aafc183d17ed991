"""The public API of ``import tmsim``: its names, their doctests, one-line errors for bad input,
notebook displays, and tables with the command line's columns and metadata."""

from __future__ import annotations

import doctest
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmsim
from tmsim.api.inputs import capacity
from tmsim.capacity import Capacity

#: The public names: removing or renaming one is a decision, made here.
PUBLIC = [
    "MODELS",
    "PRESETS",
    "STRATEGIES",
    "CacheRun",
    "Capacity",
    "Graph",
    "InterferenceLevel",
    "MemoryReuse",
    "Plan",
    "PlanSettings",
    "Platform",
    "Profile",
    "Run",
    "StepEnergy",
    "Strategy",
    "TmsimError",
    "Validation",
    "__version__",
    "applicable",
    "calibrate",
    "compare",
    "fast_limit",
    "figure",
    "figure_names",
    "graph",
    "graph_of",
    "import_torch",
    "load_graph",
    "load_plan",
    "memory_reuse",
    "plan",
    "plan_chain",
    "plan_table",
    "platform",
    "profile",
    "read_profile",
    "read_table",
    "save",
    "simulate",
    "simulate_cache",
    "sweep",
    "validate",
    "write_table",
]

DOCTESTED = [
    "tmsim",
    "tmsim.api.inputs",
    "tmsim.api.runs",
    "tmsim.api.tables",
    "tmsim.api.sweeps",
    "tmsim.api.graphs",
    "tmsim.api.cache",
    "tmsim.api.memory",
    "tmsim.api.summaries",
    "tmsim.api.figures",
    "tmsim.api.files",
    "tmsim.levels",
    "tmsim.capacity",
    "hwmodels.display",
]


def test_the_public_names_are_the_list() -> None:
    assert tmsim.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(tmsim, name) is not None
    assert set(dir(tmsim)) >= set(PUBLIC)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = tmsim.nope  # type: ignore[attr-defined]


def test_import_tmsim_loads_nothing_heavy() -> None:
    code = "import sys, tmsim; print(sorted(m for m in ('numpy', 'pandas', 'cvxpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", DOCTESTED)
def test_docstring_examples_run(module: str) -> None:
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(importlib.import_module(module), optionflags=flags, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.fixture(scope="module")
def small() -> tuple[tmsim.Graph, tmsim.Platform]:
    return tmsim.graph("vgg19", batch=8), tmsim.platform()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tmsim.graph("vgg19", batch=0), "batch must be a whole number >= 1, got 0"),
        (lambda: tmsim.graph("vgg19", batch=True), "batch must be a whole number >= 1"),
        (lambda: tmsim.graph("vgg19", dtype="fp7"), "dtype must be one of"),
        (lambda: tmsim.graph("no/such/file.json"), "neither a zoo model"),
        (lambda: tmsim.platform("no-such-preset"), "neither a platform preset"),
        (lambda: tmsim.platform(overrides={"tiers.DRAM.nope": 1}), "nope"),
        (lambda: tmsim.platform(overrides={"tiers.DRAM.capacity_GiB": -1}), "capacity"),
        (lambda: tmsim.platform(overrides={"": 1}), "dotted path"),
        # a line break in a key the caller gave is escaped, as the command line prints it
        (lambda: tmsim.platform(overrides={"\n": 1}), "unknown field(s) \\n"),
        (lambda: tmsim.sweep({"\n": 0}), "\\n: unknown key"),
    ],
)
def test_bad_inputs_are_one_line_errors(call: object, message: str) -> None:
    with pytest.raises(tmsim.TmsimError) as info:
        call()  # type: ignore[operator]
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_graph_file_is_loaded_and_refuses_zoo_arguments(tmp_path: Path) -> None:
    from tmsim.workload.files import save_graph

    g = tmsim.graph("vgg19", batch=4)
    path = tmp_path / "g.json"
    save_graph(g, path)
    assert tmsim.graph(path) == g
    with pytest.raises(tmsim.TmsimError, match="batch shapes a zoo model"):
        tmsim.graph(path, batch=4)
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(tmsim.TmsimError):
        tmsim.graph(tmp_path / "bad.json")


def test_a_platform_file_and_overrides_on_a_platform_object(tmp_path: Path) -> None:
    from hwmodels.presets import save_platform

    base = tmsim.platform()
    path = tmp_path / "mine.toml"
    save_platform(base, path)
    assert tmsim.platform(path) == base
    slower = tmsim.platform(base, {"tiers.PMM.read_bw_GBps": 18.8})
    assert slower.tier("PMM").read_bw_bytes_per_s == pytest.approx(18.8e9)
    assert tmsim.platform(path, {"tiers.PMM.read_bw_GBps": 18.8}) == slower
    assert tmsim.platform(base) is base


@pytest.mark.parametrize(
    ("fast", "expected"),
    [
        ("4:1", Capacity.of_ratio(4, 1)),
        ("24GiB", Capacity.of_bytes(24 * 2**30)),
        (3e9, Capacity.of_bytes(3_000_000_000)),
        (1000, Capacity.of_bytes(1000)),
        (None, None),
    ],
)
def test_fast_takes_every_form_of_the_command_line(fast: object, expected: object) -> None:
    assert capacity(fast) == expected  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.booleans(), st.none()))
def test_any_fast_value_parses_or_is_a_one_line_error(fast: object) -> None:
    try:
        got = capacity(fast)  # type: ignore[arg-type]
    except tmsim.TmsimError as exc:
        assert "\n" not in str(exc)
        return
    assert got is None or isinstance(got, Capacity)


def test_plan_refuses_unknown_strategies_and_settings(
    small: tuple[tmsim.Graph, tmsim.Platform],
) -> None:
    g, p = small
    with pytest.raises(tmsim.TmsimError, match="unknown strategy 'fastest'"):
        tmsim.plan(g, p, "fastest")
    with pytest.raises(tmsim.TmsimError, match="is simulated, not planned"):
        tmsim.plan(g, p, "2lm")
    with pytest.raises(tmsim.TmsimError, match="bad planner setting"):
        tmsim.plan(g, p, "sync", gap=2.0)
    with pytest.raises(tmsim.TmsimError, match="bad planner setting"):
        tmsim.plan(g, p, "sync", window="wide")


def test_plan_settings_reach_the_planner(small: tuple[tmsim.Graph, tmsim.Platform]) -> None:
    g, p = small
    plan = tmsim.plan(g, p, "sync", fast="4:1", time_limit_s=None, gap=0.05)
    assert plan.options["gap"] == 0.05
    assert plan.stats is not None and plan.stats.gap <= 0.05 + 1e-9
    assert plan.fast_limit_bytes == Capacity.of_ratio(4, 1).fast_bytes(g.peak_live_bytes)


def test_simulate_checks_the_plan_belongs(small: tuple[tmsim.Graph, tmsim.Platform]) -> None:
    g, p = small
    plan = tmsim.plan(g, p, "all-slow")
    with pytest.raises(tmsim.TmsimError, match="the plan is for graph 'vgg19-b8' with sha256"):
        tmsim.simulate(plan, tmsim.graph("vgg19", batch=4), p)
    gpu = tmsim.platform("rtx2080ti-pcie3")
    with pytest.raises(tmsim.TmsimError, match="for platform 'cascadelake-optane'"):
        tmsim.simulate(plan, g, gpu)
    with pytest.raises(tmsim.TmsimError, match="interference level"):
        tmsim.simulate(plan, g, p, interference="loud")


def test_a_run_agrees_with_its_trace_and_draws(
    small: tuple[tmsim.Graph, tmsim.Platform], tmp_path: Path
) -> None:
    g, p = small
    plan = tmsim.plan(g, p, "greedy", fast="4:1")
    run = tmsim.simulate(plan, g, p, interference="none")
    # without contention the replay is the cost model's world: simulated = predicted
    assert run.step_time_s == pytest.approx(plan.predicted_s, rel=1e-9)
    assert len(run.records) == len(run.trace.records)
    assert run.records["end_s"].max() == pytest.approx(run.step_time_s)
    assert run.summary()["interference"] == "none"
    fig = run.timeline(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 0
    assert len(fig.axes) == 2
    with pytest.raises(tmsim.TmsimError, match=r"a timeline is a \.png, \.pdf or \.svg file"):
        run.timeline(tmp_path / "t.gif")


def test_notebook_displays(small: tuple[tmsim.Graph, tmsim.Platform]) -> None:
    g, p = small
    plan = tmsim.plan(g, p, "first-touch", fast="1:1")
    run = tmsim.simulate(plan, g, p)
    for obj, title in ((p, "Platform"), (plan, "Plan"), (run, "Run of plan")):
        html = obj._repr_html_()  # type: ignore[attr-defined]
        assert html.startswith(f"<table><caption>{title}") and html.endswith("</table>")
        text = repr(obj)
        assert text.startswith(title) and len(text.splitlines()) >= 5
    assert "first-touch" in repr(plan) and "vgg19-b8" in repr(run)
    assert "tier DRAM" in repr(p) and "copy PMM-&gt;DRAM" in p._repr_html_()


def test_compare_has_the_columns_and_metadata_of_the_cli_table(
    small: tuple[tmsim.Graph, tmsim.Platform], tmp_path: Path
) -> None:
    from tmsim.results import read_table

    g, p = small
    strategies = ["all-fast", "all-slow", "greedy"]
    table = tmsim.compare(g, p, strategies, fast="4:1", interference="bandwidth", time_limit_s=120)
    out = tmp_path / "c.parquet"
    cmd = [sys.executable, "-m", "tmsim.cli.main", "compare", "vgg19", "--batch", "8"]
    cmd += ["--ratio", "4:1", "--strategies", ",".join(strategies), "--interference"]
    cmd += ["bandwidth", "--time-limit", "120", "--out", str(out), "--quiet"]
    subprocess.run(cmd, check=True, capture_output=True)
    cli, meta = read_table(out)
    assert list(table.columns) == list(cli.columns)
    pd.testing.assert_frame_equal(
        table.drop(columns=["solve_s"]), cli.drop(columns=["solve_s"]), check_dtype=False
    )
    assert set(table.attrs) == set(meta)
    assert table.attrs["settings"] == meta["settings"]
    json.dumps(table.attrs)  # JSON-ready, as the file's


def test_compare_refuses_bad_input(small: tuple[tmsim.Graph, tmsim.Platform]) -> None:
    g, p = small
    with pytest.raises(tmsim.TmsimError, match="unknown strategy"):
        tmsim.compare(g, p, ["all-fast", "fastest"])
    with pytest.raises(tmsim.TmsimError, match="unknown compare setting 'ratio'"):
        tmsim.compare(g, p, ratio="4:1")
    with pytest.raises(tmsim.TmsimError, match="does not apply"):
        tmsim.compare(g, p, ["vdnn"])
    for workers in (0, -1, 1.5, True, "2"):
        with pytest.raises(tmsim.TmsimError, match="workers must be a whole number >= 1"):
            tmsim.compare(g, p, ["all-fast"], workers=workers)  # type: ignore[arg-type]


def test_sweep_from_a_dict_and_a_file_agree(tmp_path: Path) -> None:
    spec = {
        "sweep": {"name": "api"},
        "grid": {
            "model": ["vgg19"],
            "batch": [4],
            "platform": ["cascadelake-optane"],
            "strategy": ["all-slow", "greedy"],
            "ratio": ["4:1"],
        },
    }
    from_dict = tmsim.sweep(spec, out=tmp_path / "a")
    import tomli_w

    (tmp_path / "api.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    from_file = tmsim.sweep(tmp_path / "api.toml")
    cols = ["key", "strategy", "simulated_s", "slowdown"]
    pd.testing.assert_frame_equal(from_dict[cols], from_file[cols])
    assert set(from_dict.strategy) == {"all-fast", "all-slow", "greedy"}
    assert from_dict.attrs["failures"] == [] and "provenance" in from_dict.attrs
    assert (tmp_path / "a" / "results.parquet").is_file()
    with pytest.raises(tmsim.TmsimError, match="grid"):
        tmsim.sweep({"sweep": {"name": "x"}})
    with pytest.raises(tmsim.TmsimError, match="Client"):
        tmsim.sweep(spec, client=object())


#: Any value a caller might pass by mistake, of every Python type the API meets.
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["vgg19", "4:1", "fp16", "controller", "x" * 300, "\0", "."]),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
TINY_GRAPH = tmsim.graph("vgg19", batch=2)
OPTANE = tmsim.platform()
SETTINGS = ["gap", "time_limit_s", "window", "node_limit", "solver", "lp_iterations", "layout"]
OVERRIDES = ["tiers.DRAM.capacity_GiB", "tiers.PMM.read_bw_GBps", "compute.cores", "name", "tiers"]


def _one_line_or_answer(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except tmsim.TmsimError as exc:
        assert "\n" not in str(exc)
        return None


@settings(max_examples=60, deadline=None)
@given(ANY, st.sampled_from(SETTINGS), st.sampled_from(OVERRIDES))
def test_any_argument_gives_an_answer_or_a_one_line_error(
    value: object, setting: str, override: str
) -> None:
    got = _one_line_or_answer(lambda: tmsim.graph(value))  # type: ignore[arg-type]
    assert got is None or isinstance(got, tmsim.Graph)
    got = _one_line_or_answer(lambda: tmsim.graph("vgg19", batch=value, dtype=value))  # type: ignore[arg-type]
    assert got is None or isinstance(got, tmsim.Graph)
    got = _one_line_or_answer(lambda: tmsim.platform(value))  # type: ignore[arg-type]
    assert got is None or isinstance(got, tmsim.Platform)
    got = _one_line_or_answer(lambda: tmsim.platform(OPTANE, {override: value}))
    assert got is None or isinstance(got, tmsim.Platform)
    got = _one_line_or_answer(lambda: tmsim.platform("cascadelake-optane", value))  # type: ignore[arg-type]
    assert got is None or isinstance(got, tmsim.Platform)
    got = _one_line_or_answer(lambda: tmsim.plan(TINY_GRAPH, OPTANE, value))  # type: ignore[arg-type]
    assert got is None or isinstance(got, tmsim.Plan)
    got = _one_line_or_answer(lambda: tmsim.plan(TINY_GRAPH, OPTANE, "greedy", **{setting: value}))
    assert got is None or isinstance(got, tmsim.Plan)
    plan = tmsim.plan(TINY_GRAPH, OPTANE, "all-slow")
    for call in (
        lambda: tmsim.simulate(plan, TINY_GRAPH, OPTANE, interference=value),  # type: ignore[arg-type]
        lambda: tmsim.simulate(value, TINY_GRAPH, OPTANE),  # type: ignore[arg-type]
        lambda: tmsim.simulate(plan, value, OPTANE),  # type: ignore[arg-type]
    ):
        got = _one_line_or_answer(call)
        assert got is None or isinstance(got, tmsim.Run)
    for call in (
        # None (every strategy) is a valid answer tested above; here only what may be wrong
        lambda: tmsim.compare(TINY_GRAPH, OPTANE, value or ["x"], fast="4:1"),  # type: ignore[arg-type]
        lambda: tmsim.compare(TINY_GRAPH, OPTANE, ["all-fast"], fast=value),  # type: ignore[arg-type]
        lambda: tmsim.compare(TINY_GRAPH, OPTANE, ["all-fast"], workers=value),  # type: ignore[arg-type]
        lambda: tmsim.sweep(value),  # type: ignore[arg-type]
        lambda: tmsim.read_table(value),  # type: ignore[arg-type]
    ):
        got = _one_line_or_answer(call)
        assert got is None or isinstance(got, pd.DataFrame)
    assert _one_line_or_answer(lambda: tmsim.figure(value, pd.DataFrame())) is None  # type: ignore[arg-type]
    assert _one_line_or_answer(lambda: tmsim.save(value, "never-written.json")) is None  # type: ignore[arg-type]
    got = _one_line_or_answer(lambda: tmsim.load_plan(value))  # type: ignore[arg-type]
    assert got is None or isinstance(got, tmsim.Plan)


def test_a_preset_through_the_api_is_the_preset() -> None:
    from hwmodels.presets import load_preset, preset_names

    for name in preset_names():
        assert tmsim.platform(name) == load_preset(name)
    assert set(tmsim.PRESETS) == set(preset_names())


def test_plan_chain_solves_each_formulation_once_from_the_one_it_contains() -> None:
    g, p = tmsim.graph("vgg19", batch=4), tmsim.platform()
    chain = tmsim.plan_chain(g, p, ["async", "async-aware"], fast="4:1", time_limit_s=None)
    assert list(chain) == ["static", "sync", "async", "async-aware"]
    times = [plan.predicted_s for plan in chain.values() if isinstance(plan, tmsim.Plan)]
    assert len(times) == 4 and times[1] <= times[0] * (1 + 1e-9)
    alone = tmsim.plan(g, p, "sync", fast="4:1", time_limit_s=None)
    assert alone.predicted_s == pytest.approx(times[1], rel=1e-9)
    settings = tmsim.PlanSettings(capacity=tmsim.Capacity.of_ratio(4, 1), time_limit_s=None)
    assert tmsim.plan_chain(g, p, "sync", settings=settings)["sync"].predicted_s == times[1]
    with pytest.raises(tmsim.TmsimError, match="unknown MILP formulation 'greedy'"):
        tmsim.plan_chain(g, p, "greedy")
    with pytest.raises(tmsim.TmsimError, match="not both"):
        tmsim.plan_chain(g, p, "sync", settings=settings, gap=0.1)
    assert tmsim.fast_limit(g, p, "4:1") == chain["sync"].fast_limit_bytes  # type: ignore[union-attr]


def test_save_and_load_every_kind_of_object(tmp_path: Path) -> None:
    g, p = tmsim.graph("vgg19", batch=2), tmsim.platform()
    plan = tmsim.plan(g, p, "greedy", fast="4:1")
    run = tmsim.simulate(plan, g, p)
    tmsim.save(g, tmp_path / "g.json")
    tmsim.save(plan, tmp_path / "p.json")
    tmsim.save(p, tmp_path / "m.toml")
    tmsim.save(run, tmp_path / "r.parquet")
    assert tmsim.graph(tmp_path / "g.json") == g
    assert tmsim.load_plan(tmp_path / "p.json") == plan
    assert tmsim.platform(tmp_path / "m.toml") == p
    assert (tmp_path / "r.parquet").stat().st_size > 0
    # a saved plan of a zoo graph replays from the command line alone
    cmd = [sys.executable, "-m", "tmsim.cli.main", "simulate", str(tmp_path / "p.json"), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert json.loads(out.stdout)["simulated_s"] == pytest.approx(run.step_time_s, rel=1e-9)
    with pytest.raises(tmsim.TmsimError, match=r"a Plan is saved as a \.json file"):
        tmsim.save(plan, tmp_path / "p.toml")
    with pytest.raises(tmsim.TmsimError, match="cannot write it"):
        tmsim.save(g, tmp_path / "missing" / "g.json")
    with pytest.raises(tmsim.TmsimError, match="cannot read it"):
        tmsim.load_plan(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("[]", encoding="utf-8")
    with pytest.raises(tmsim.TmsimError):
        tmsim.load_plan(tmp_path / "bad.json")
