"""``tmsim compare``: every strategy planned, validated and simulated; the MILP chain; tables."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cli.main import main
from tmsim.comparison import CompareSettings, Row, compare, rows_frame
from tmsim.errors import TmsimError
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain.plan import plan_milp, plan_milp_chain
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.results import read_table
from tmsim.strategies import applicable, compared_by_default
from tmsim.workload.zoo import training_graph_of

CPU = load_preset("cascadelake-optane")
GPU = load_preset("rtx2080ti-pcie3")
REL = 1e-9


@pytest.fixture(scope="module")
def cpu_rows() -> list[Row]:
    graph = training_graph_of("vgg19", 2)
    settings = CompareSettings(
        plan=PlanSettings(capacity=Capacity.parse("4:1"), time_limit_s=None, window=1)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # HiGHS at its limit
        return compare(graph, CPU, settings)


def by_name(rows: list[Row]) -> dict[str, Row]:
    return {r.strategy: r for r in rows}


def test_every_cpu_strategy_is_present_valid_and_ordered(cpu_rows: list[Row]) -> None:
    rows = by_name(cpu_rows)
    cpu = [
        "all-fast",
        "all-slow",
        "first-touch",
        "first-touch-pages",
        "greedy",
        "checkpoint",
        "selective",
        "static",
        "sync",
        "async",
        "async-aware",
        "2lm",
    ]
    assert [r.strategy for r in cpu_rows] == list(compared_by_default(CPU)) == cpu
    # the formulations that recompute apply too, but run only when named
    rc = ["remat", "static-rc", "sync-rc", "async-rc"]
    assert list(applicable(CPU)) == [*cpu[:-1], *rc, cpu[-1]]
    # VGG19's weights and their momentum alone exceed 4:1's DRAM: recomputing activations
    # cannot fit the step, and the row says by how much
    for name in ("checkpoint", "selective"):
        assert "bytes more than the limit" in rows[name].error
    cpu_rows = [r for r in cpu_rows if r.strategy not in ("checkpoint", "selective")]
    assert all(not r.error for r in cpu_rows), [r.error for r in cpu_rows]
    assert all(r.valid for r in cpu_rows)
    fast = rows["all-fast"].simulated_s
    assert rows["all-fast"].slowdown == 1.0
    for r in cpu_rows:
        assert r.simulated_s >= fast * (1 - REL), r.strategy
        assert r.slowdown == pytest.approx(r.simulated_s / fast, rel=REL)
    # The MILP is never worse than first-touch under the cost model; simulated, its plans are
    # synchronous or static, which contention cannot slow (no overlap). Only the fitted
    # controller's device-switch cost charges a kernel that mixes DRAM and PMM traffic alone
    # (0.09% on sync here, measured; tests/test_sim_replay.py checks that nothing else does).
    for name in ("static", "sync"):
        assert rows[name].predicted_s <= rows["first-touch"].predicted_s * (1 + REL)
        assert rows[name].predicted_s * (1 - 1e-9) <= rows[name].simulated_s
        assert rows[name].simulated_s <= rows[name].predicted_s * 1.005
    assert rows["sync"].simulated_s <= rows["first-touch"].simulated_s
    assert rows["sync"].predicted_s <= rows["static"].predicted_s * (1 + REL)
    assert rows["async"].predicted_s <= rows["sync"].predicted_s * (1 + REL)
    # all-slow uses no fast memory; the others stay within the compared capacity
    assert rows["all-slow"].fast_peak_bytes == 0
    limit = rows["sync"].fast_limit_bytes
    for name in ("first-touch", "static", "sync", "async"):
        assert rows[name].fast_peak_bytes <= limit
    assert rows["static"].moved_bytes == 0 < rows["sync"].moved_bytes


def test_2lm_row_simulates_the_cache_at_the_compared_capacity(cpu_rows: list[Row]) -> None:
    rows = by_name(cpu_rows)
    lm = rows["2lm"]
    assert lm.status == "simulated" and math.isnan(lm.predicted_s)
    assert 0 < lm.hit_rate < 1
    assert 0 < lm.fast_peak_bytes <= lm.fast_limit_bytes == rows["sync"].fast_limit_bytes
    assert lm.moved_bytes > 0
    # the cache is at best as fast as all-DRAM (it also reads tags) ...
    assert lm.simulated_s > rows["all-fast"].simulated_s


def test_gpu_strategies_and_unified_memory() -> None:
    graph = training_graph_of("resnet50", 2)
    assert "unified-memory" in applicable(GPU) and "2lm" not in applicable(GPU)
    settings = CompareSettings(
        plan=PlanSettings(capacity=Capacity.parse("1:1"), time_limit_s=None, window=1),
        strategies=("all-fast", "sync", "unified-memory"),
    )
    rows = by_name(compare(graph, GPU, settings))
    assert list(rows) == ["all-fast", "sync", "unified-memory"]
    um = rows["unified-memory"]
    assert not um.error and um.valid
    assert um.simulated_s > rows["all-fast"].simulated_s
    assert 0 < um.fast_peak_bytes <= um.fast_limit_bytes
    assert rows["sync"].valid and rows["sync"].fast_peak_bytes <= rows["sync"].fast_limit_bytes


def test_milp_chain_gives_what_each_formulation_gives_alone() -> None:
    graph = training_graph_of("vgg19", 2)
    opts = PlanSettings(capacity=Capacity.parse("4:1"), time_limit_s=60)
    chain = plan_milp_chain(graph, CPU, opts, Formulation.SYNC)
    assert set(chain) == {Formulation.STATIC, Formulation.SYNC}
    alone = plan_milp(graph, CPU, opts, Formulation.SYNC)
    got = chain[Formulation.SYNC]
    assert not isinstance(got, TmsimError)
    assert got.predicted_s == pytest.approx(alone.predicted_s, rel=REL)
    assert got.planner == alone.planner == "milp-sync"


def test_milp_chain_records_a_failing_formulation() -> None:
    graph = training_graph_of("resnet50", 2)
    chain = plan_milp_chain(
        graph,
        GPU,
        PlanSettings(capacity=Capacity.parse("4:1"), time_limit_s=None),
        Formulation.SYNC,
    )
    # nothing fits on the device without moving, so static fails and sync starts cold
    assert isinstance(chain[Formulation.STATIC], TmsimError)
    assert "nothing moves" in str(chain[Formulation.STATIC])
    assert not isinstance(chain[Formulation.SYNC], TmsimError)


def test_bad_requests_are_refused() -> None:
    graph = training_graph_of("resnet50", 2)
    with pytest.raises(TmsimError, match="unknown strategy 'best'"):
        compare(graph, CPU, CompareSettings(strategies=("best",)))
    with pytest.raises(TmsimError, match="'unified-memory' does not apply"):
        compare(graph, CPU, CompareSettings(strategies=("unified-memory",)))
    with pytest.raises(TmsimError, match="two addressable tiers"):
        compare(graph, load_preset("cascadelake-2lm"), CompareSettings())


def test_a_failing_strategy_is_a_row_not_a_crash() -> None:
    graph = training_graph_of("resnet50", 2)
    tiny = graph.peak_live_bytes // 50  # below what some kernel needs at once on a GPU
    settings = CompareSettings(
        plan=PlanSettings(capacity=Capacity.of_bytes(tiny), time_limit_s=None),
        strategies=("all-fast", "sync"),
    )
    rows = by_name(compare(graph, GPU, settings))
    assert not rows["all-fast"].error
    assert rows["sync"].status == "error" and "kernel" in rows["sync"].error
    assert math.isnan(rows["sync"].simulated_s)
    frame = rows_frame(list(rows.values()))
    assert list(frame["strategy"]) == ["all-fast", "sync"]


def test_cli_json_table_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp.csv"
    argv = [
        "compare",
        "resnet50",
        "--batch",
        "2",
        "--ratio",
        "4:1",
        "--strategies",
        "all-fast,first-touch,2lm",
        "--json",
        "--quiet",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["strategy"] for r in rows] == ["all-fast", "first-touch", "2lm"]
    for r in rows:
        assert r["simulated_s"] > 0 and "predicted_s" in r
    assert rows[2]["predicted_s"] is None
    frame, meta = read_table(out)
    assert list(frame["strategy"]) == ["all-fast", "first-touch", "2lm"]
    assert meta["graph"] == "resnet50-b2" and meta["provenance"]["solver"] == "HIGHS"
    assert meta["settings"]["plan"]["capacity"] == "4:1"
    assert main(["compare", "resnet50", "--batch", "2", "--strategies", "all-fast"]) == 0
    err = capsys.readouterr()
    assert "all-fast" in err.out and "slowdown" in err.out and "[1/1] all-fast" in err.err


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "resnet50", "--batch", "2", "--strategies", "nope", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tmsim: error: unknown strategy 'nope'") and "\n" not in err


def test_rows_are_values() -> None:
    row = Row("sync", "milp-sync", "optimal", simulated_s=2.0)
    assert replace(row, slowdown=2.0).slowdown == 2.0
    assert math.isnan(row.predicted_s)


def test_all_fast_on_a_fast_tier_too_small_grows_it_and_says_so() -> None:
    """The slowdowns' reference stays the oracle; the plan itself would not fit the machine."""
    graph = training_graph_of("vgg19", 2)
    small = CPU.with_tier_capacity("DRAM", graph.peak_live_bytes // 2)
    settings = CompareSettings(plan=PlanSettings(capacity=Capacity.parse("4:1")))
    rows = by_name(compare(graph, small, replace(settings, strategies=("all-fast", "greedy"))))
    fast = rows["all-fast"]
    assert fast.valid and fast.slowdown == 1.0
    assert (
        fast.status == f"heuristic; tier 'DRAM' grown to the step's peak, {graph.peak_live_bytes} B"
    )
    assert rows["greedy"].valid and rows["greedy"].slowdown > 1.0
    roomy = by_name(compare(graph, CPU, replace(settings, strategies=("all-fast",))))["all-fast"]
    assert roomy.status == "heuristic" and roomy.simulated_s == pytest.approx(fast.simulated_s)
