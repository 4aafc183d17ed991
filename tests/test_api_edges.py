"""The Python API refuses at its edge what the command line refuses, through the same checks,
and a ``Plan`` checks its fields when it is made (also by ``dataclasses.replace``).

Each case here was accepted before (a wrong answer, an error row or a traceback deep inside);
the fuzzer at the end drives the API's entry points with arguments of every kind and holds
each call to a correct answer or a one-line ``TmsimError``/``TypeError``/``ValueError``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tmsim
from hwmodels.timing import MoveMode
from tmsim.cli import args as cli_args
from tmsim.cli.main import main
from tmsim.planners.settings import INT_RANGES
from tmsim.plans.values import Move, Residency

GRAPH = tmsim.graph("vgg19", batch=2)
CPU = tmsim.platform("cascadelake-optane")
GPU = tmsim.platform("rtx2080ti-pcie3")


@pytest.fixture(scope="module")
def greedy() -> tmsim.Plan:
    return tmsim.plan(GRAPH, CPU, "greedy", fast="4:1")


# ------------------------------------------------------------------ one set of checks
CLI_TYPES = {
    "node_limit": cli_args.node_limit_arg,
    "lp_iterations": cli_args.lp_iterations_arg,
    "window": cli_args.window_arg,
    "recompute_depth": cli_args.recompute_depth_arg,
}


@pytest.mark.parametrize("name", sorted(CLI_TYPES))
def test_the_command_line_and_the_settings_take_the_same_range(name: str) -> None:
    low, high, _ = INT_RANGES[name]
    parse = CLI_TYPES[name]
    for value in (low, high):
        assert parse(str(value)) == value
        assert getattr(tmsim.PlanSettings(**{name: value}), name) == value
    for value in (low - 1, high + 1):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(str(value))
        with pytest.raises(tmsim.TmsimError, match=f"{name} must be an integer from {low}"):
            tmsim.PlanSettings(**{name: value})


def test_a_window_of_zero_is_refused_by_the_api_as_by_the_command_line() -> None:
    with pytest.raises(tmsim.TmsimError, match="window must be an integer from 1 to 10000"):
        tmsim.plan(GRAPH, CPU, "async", fast="4:1", window=0)


def test_comparing_no_strategy_is_refused() -> None:
    with pytest.raises(tmsim.TmsimError, match="name at least one strategy"):
        tmsim.compare(GRAPH, CPU, [], fast="4:1")


@pytest.mark.parametrize("block", [0, 3, 100])
def test_a_2lm_block_the_cache_cannot_walk_is_refused_not_an_error_row(block: int) -> None:
    with pytest.raises(tmsim.TmsimError, match="positive multiple of the cache line"):
        tmsim.compare(GRAPH, CPU, ["2lm"], fast="4:1", cache_block_bytes=block)


def test_the_command_line_refuses_that_block_too(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", "vgg19", "--batch", "2", "--strategies", "2lm", "--block-bytes", "3"]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "multiple of the cache line" in err


def test_a_strategy_that_does_not_apply_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(tmsim.TmsimError, match="'vdnn' does not apply to platform"):
        tmsim.plan(GRAPH, CPU, "vdnn", fast="4:1")
    assert main(["plan", "vgg19", "--batch", "2", "--mode", "vdnn"]) == 2
    assert "does not apply" in capsys.readouterr().err
    assert tmsim.plan(GRAPH, GPU, "vdnn").planner == "vdnn"


def test_a_graph_file_must_hold_the_graph(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine.json", tmp_path / "other.json"
    tmsim.save(GRAPH, mine)
    tmsim.save(tmsim.graph("vgg19", batch=4), other)
    made = tmsim.plan(GRAPH, CPU, "greedy", fast="4:1", graph_file=mine)
    assert made.graph_identity is not None and made.graph_identity.source.value == "file"
    with pytest.raises(tmsim.TmsimError, match=r"(?i)no such file"):
        tmsim.plan(GRAPH, CPU, "greedy", fast="4:1", graph_file=tmp_path / "missing.json")
    with pytest.raises(tmsim.TmsimError, match="sha256"):
        tmsim.plan(GRAPH, CPU, "greedy", fast="4:1", graph_file=other)


def test_a_sweep_takes_whole_workers_only() -> None:
    grid = {"model": ["vgg19"], "batch": [2], "platform": ["cascadelake-optane"]}
    spec = {"grid": {**grid, "strategy": ["all-slow"], "ratio": ["4:1"]}}
    for workers in (1.5, 0, True, "2"):
        with pytest.raises(tmsim.TmsimError, match="workers must be a whole number"):
            tmsim.sweep(spec, workers=workers)  # type: ignore[arg-type]


# ------------------------------------------------------------------ a plan's own fields
@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"residency": ("x", "y")}, TypeError, r"Plan.residency\[0\] must be a Residency"),
        ({"residency": [Residency("a", "DRAM", 0, 1)]}, TypeError, "Plan.residency must be"),
        ({"predicted_s": "fast"}, TypeError, "Plan.predicted_s must be a number"),
        ({"predicted_s": True}, TypeError, "Plan.predicted_s must be a number"),
        ({"fast_limit_bytes": 10**30}, ValueError, "Plan.fast_limit_bytes must fit"),
        ({"fast_limit_bytes": 2.5}, TypeError, "Plan.fast_limit_bytes must be an int"),
        ({"operand_tiers": ((1,),)}, TypeError, r"Plan.operand_tiers\[0\] must be"),
        ({"initial_tiers": {"w": "DRAM"}}, TypeError, r"Plan.initial_tiers\['w'\]"),
        ({"host_kernels": (0.5,)}, TypeError, r"Plan.host_kernels\[0\] must be an int"),
        ({"graph": None}, TypeError, "Plan.graph must be a string"),
        ({"stats": "optimal"}, TypeError, "Plan.stats must be SolverStats"),
    ],
)
def test_a_plan_checks_its_fields_when_made(
    greedy: tmsim.Plan, change: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        replace(greedy, **change)


def test_a_move_given_its_mode_as_text_is_refused(greedy: tmsim.Plan) -> None:
    good = Move("t", "DRAM", "PMM", 1, MoveMode.SYNC)
    assert replace(greedy, moves=(good,)).moves == (good,)
    with pytest.raises(TypeError, match=r"Plan.moves\[0\].mode must be a MoveMode"):
        replace(greedy, moves=(Move("t", "DRAM", "PMM", 1, "sync"),))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Plan.moves\[0\].kernel must be an int"):
        replace(greedy, moves=(Move("t", "DRAM", "PMM", "1", MoveMode.SYNC),))  # type: ignore[arg-type]


# ------------------------------------------------------------------ the fuzzer
ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(-3, 3), max_size=2),
    st.sampled_from(["4:1", "0:1", "1:0", "24GiB", "-1", "nan", "sync", "greedy", "none"]),
)
SETTING_NAMES = (
    "window",
    "gap",
    "node_limit",
    "lp_iterations",
    "recompute_depth",
    "time_limit_s",
    "max_rounds",
    "offload_min_bytes",
    "prefetch_ahead",
    "energy_weight_s_per_j",
    "solver",
    "layout",
    "nonsense",
)
ALLOWED = (tmsim.TmsimError, TypeError, ValueError)


def _one_line(exc: BaseException) -> bool:
    text = str(exc)
    return bool(text) and "\n" not in text and "Traceback" not in text


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    strategy=st.sampled_from(["all-fast", "all-slow", "greedy", "first-touch", "vdnn", "x"]) | ODD,
    fast=ODD,
    name=st.sampled_from(SETTING_NAMES),
    value=ODD,
)
def test_fuzzed_plan_calls_answer_or_refuse_in_one_line(
    strategy: Any, fast: Any, name: str, value: Any
) -> None:
    try:
        made = tmsim.plan(GRAPH, CPU, strategy, fast=fast, **{name: value})
    except ALLOWED as exc:
        assert _one_line(exc), repr(exc)
        return
    assert isinstance(made, tmsim.Plan)
    assert tmsim.validate(made, GRAPH, CPU).ok


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    strategies=st.one_of(
        ODD, st.lists(st.sampled_from(["all-fast", "greedy", "2lm", "sync", "x"]), max_size=2)
    ),
    block=ODD,
    interference=ODD,
    workers=ODD,
)
def test_fuzzed_compare_calls_answer_or_refuse_in_one_line(
    strategies: Any, block: Any, interference: Any, workers: Any
) -> None:
    kw = {"cache_block_bytes": block, "interference": interference, "workers": workers}
    if isinstance(strategies, list) and "sync" in strategies:
        kw["time_limit_s"] = None  # the same answer on any load; tiny graph, solves at once
    try:
        table = tmsim.compare(GRAPH, CPU, strategies, fast="4:1", **kw)
    except ALLOWED as exc:
        assert _one_line(exc), repr(exc)
        return
    assert len(table) >= 1
    assert not table.error.str.contains("Traceback").any()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(interference=ODD, check=ODD, profile=ODD, fast=ODD)
def test_fuzzed_replays_and_limits_answer_or_refuse_in_one_line(
    interference: Any, check: Any, profile: Any, fast: Any
) -> None:
    made = tmsim.plan(GRAPH, CPU, "all-slow")
    try:
        run = tmsim.simulate(
            made, GRAPH, CPU, interference=interference, check=check, profile=profile
        )
    except ALLOWED as exc:
        assert _one_line(exc), repr(exc)
    else:
        assert run.step_time_s > 0
    try:
        limit = tmsim.fast_limit(GRAPH, CPU, fast)
    except ALLOWED as exc:
        assert _one_line(exc), repr(exc)
    else:
        assert 0 < limit <= CPU.tiers[0].capacity_bytes
