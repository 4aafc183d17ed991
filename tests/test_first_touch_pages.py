"""First touch by pages (tmsim.sim.firsttouch): pages of the memory plan's pool given to tiers in
the order they are first touched, checked by hand on a tiny step; the step between all-slow
and all-fast, equal to each at the ends of the capacity range and never slower with more fast
memory (property tests); and the strategy's row in ``tmsim compare``."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from tiny_graphs import tiny_graphs

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.comparison import CompareSettings, compare
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.sim import replay
from tmsim.sim.addresses import RangeSet, step_layout
from tmsim.sim.firsttouch import first_touch, replay_first_touch_pages
from tmsim.strategies import STRATEGIES, applicable
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import training_graph_of

CPU = load_preset("cascadelake-optane")
GPU = load_preset("rtx2080ti-pcie3")
KiB = 4096  # one page
REL = 1e-9


def reuse_step() -> Graph:
    """``x -> a -> b -> c``: the input ``x`` (2 pages), ``a`` (3 pages, dead after k1), ``b``
    (2 pages), ``c`` (3 pages, laid out where ``a`` was)."""
    f = Phase.FORWARD
    tensors = [
        Tensor("x", 2 * KiB, Role.INPUT),
        Tensor("a", 3 * KiB, Role.ACTIVATION),
        Tensor("b", 2 * KiB, Role.ACTIVATION),
        Tensor("c", 3 * KiB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k0", "relu", ("x",), ("a",), f),
        Kernel("k1", "relu", ("a",), ("b",), f),
        Kernel("k2", "relu", ("b",), ("c",), f),
    ]
    return Graph("reuse", tensors, kernels)


# ---------------------------------------------------------------------- by hand
def test_a_range_set_reports_what_a_range_adds() -> None:
    seen = RangeSet()
    assert seen.add(10, 20) == [(10, 20)]
    assert seen.add(15, 30) == [(20, 30)]
    assert seen.add(0, 40) == [(0, 10), (30, 40)]
    assert seen.add(5, 35) == [] and seen.add(7, 7) == []
    assert seen.add(50, 60) == [(50, 60)] and seen.add(40, 50) == [(40, 50)]
    assert seen.covered == 60


def test_pages_go_to_tiers_in_first_touch_order() -> None:
    # Pages of 100 bytes; the first tier takes 3. Touch 1 reaches pages 0-2 (first tier);
    # touch 2 pages 1-3, of which only 3 is new (second tier); touch 3 page 5 (second tier).
    pages = first_touch([0, 150, 500], [250, 200, 50], [3, 10], page_bytes=100)
    assert pages.pages == (3, 2) and pages.touched_pages == 5
    assert [s.tolist() for s in pages.starts_page] == [[0], [3, 5]]
    assert [e.tolist() for e in pages.ends_page] == [[3], [4, 6]]
    # [250, 400): 50 bytes of page 2 (first tier), all of page 3 (second); page 4 untouched.
    split = pages.bytes_by_tier([250, 0, 400], [150, 600, 100])
    assert split.tolist() == [[50, 100], [300, 200], [0, 0]]
    with pytest.raises(TmsimError, match="reach 5 pages of 100 bytes; the tiers take 4"):
        first_touch([0, 150, 500], [250, 200, 50], [3, 1], page_bytes=100)
    with pytest.raises(TmsimError, match="page_bytes"):
        first_touch([0], [1], [1], page_bytes=0)


def test_a_fast_page_serves_every_tensor_laid_out_over_it() -> None:
    g = reuse_step()
    # first fit: a at pages 0-2, x at 3-4, b at 5-6, c over a's pages 0-2
    assert step_layout(g).offsets_bytes.tolist() == [3 * KiB, 0, 5 * KiB, 0]
    out = replay_first_touch_pages(g, CPU, fast_limit_bytes=4 * KiB, level=InterferenceLevel.NONE)
    # x is touched before the step (DRAM pages 3, 4); k0 writes a: pages 0, 1 take the last
    # two DRAM pages, page 2 goes to PMM; k1 writes b on new pages 5, 6 (PMM); k2 writes c on
    # a's pages: two thirds DRAM.
    assert out.pages.pages == (4, 3) and out.fast_bytes == 4 * KiB
    assert [s.tolist() for s in out.pages.starts_page] == [[0, 3], [2, 5]]
    reads = [r.read_bytes for r in out.trace.records]  # (DRAM, PMM)
    writes = [r.write_bytes for r in out.trace.records]
    assert reads == [(2 * KiB, 0), (2 * KiB, KiB), (0, 2 * KiB)]
    assert writes == [(2 * KiB, KiB), (0, 2 * KiB), (2 * KiB, KiB)]
    # No compute: each kernel is its launch and its bytes at the cost model's per-byte rates.
    cost = CostModel(g, CPU)
    want = sum(
        cost.launch_s
        + float(np.dot(reads[k], cost.read_s_per_byte[k]))
        + float(np.dot(writes[k], cost.write_s_per_byte[k]))
        for k in range(3)
    )
    assert out.simulated_s == pytest.approx(want, rel=1e-12)
    assert out.trace.predicted_s == pytest.approx(want, rel=1e-12)
    assert [r.fast_resident_bytes for r in out.trace.records] == [4 * KiB] * 3
    # One flow per kernel and nothing beside it: contention changes nothing here.
    assert replay_first_touch_pages(g, CPU, fast_limit_bytes=4 * KiB).simulated_s == (
        pytest.approx(want, rel=1e-12)
    )
    # In pages of 2 KiB the fast tier takes 8 of them: x's 4, then a's first 4 (of 6).
    half = replay_first_touch_pages(
        g, CPU, fast_limit_bytes=4 * KiB, page_bytes=KiB // 2, level=InterferenceLevel.NONE
    )
    assert half.pages.pages == (8, 6)
    assert half.trace.records[0].write_bytes == (2 * KiB, KiB)


def test_bad_inputs_are_refused() -> None:
    g = reuse_step()
    with pytest.raises(TmsimError, match="reach only tier"):
        replay_first_touch_pages(g, GPU)
    with pytest.raises(TmsimError, match="fast_limit_bytes must be >= 0"):
        replay_first_touch_pages(g, CPU, fast_limit_bytes=-1)
    with pytest.raises(TmsimError, match="above tier 'DRAM'"):
        replay_first_touch_pages(g, CPU, fast_limit_bytes=CPU.tiers[0].capacity_bytes + 1)
    with pytest.raises(TmsimError, match="page_bytes"):
        replay_first_touch_pages(g, CPU, page_bytes=0)


# ---------------------------------------------------------------------- properties
def _ends(g: Graph) -> tuple[float, float, int]:
    """The all-fast and all-slow plans' simulated step times (the default interference level)
    and the pool in whole pages; checks on the way that with the pool all in DRAM, or none
    of it, the cost model's time is the plan's prediction."""
    pool = -(-step_layout(g).pool_bytes // KiB) * KiB
    ends = []
    for name, limit in (("all-fast", pool), ("all-slow", 0)):
        p = plan(name, g, CPU)
        mine = replay_first_touch_pages(
            g, CPU, fast_limit_bytes=limit, level=InterferenceLevel.NONE
        )
        assert mine.simulated_s == pytest.approx(p.predicted_s, rel=REL)
        assert mine.trace.predicted_s == pytest.approx(p.predicted_s, rel=REL)
        ends.append(replay(p, g, CPU).simulated_s)
    return ends[0], ends[1], pool


@hsettings(max_examples=25, deadline=None)
@given(tiny_graphs)
def test_the_step_runs_from_all_slow_to_all_fast_as_fast_memory_grows(g: Graph) -> None:
    fast, slow, pool = _ends(g)
    times = [
        replay_first_touch_pages(g, CPU, fast_limit_bytes=int(f * pool)).simulated_s
        for f in np.linspace(0.0, 1.0, 9)
    ]
    assert times[0] == pytest.approx(slow, rel=REL)
    assert times[-1] == pytest.approx(fast, rel=REL)
    # a page moved to DRAM never costs more: DRAM's per-byte rates beat PMM's on the preset
    assert all(b <= a * (1 + REL) for a, b in itertools.pairwise(times))


def test_a_zoo_step_at_both_ends_and_in_between() -> None:
    g = training_graph_of("resnet50", 2)
    fast, slow, pool = _ends(g)
    assert replay_first_touch_pages(g, CPU, fast_limit_bytes=pool).simulated_s == (
        pytest.approx(fast, rel=REL)
    )
    assert replay_first_touch_pages(g, CPU, fast_limit_bytes=0).simulated_s == (
        pytest.approx(slow, rel=REL)
    )
    limit = pool // 5
    out = replay_first_touch_pages(g, CPU, fast_limit_bytes=limit)
    assert fast < out.simulated_s < slow
    assert out.fast_bytes <= limit and 0 < out.fast_share < 1
    # every byte an operand reads or writes is on some tier, counted once
    moved = [sum(r.read_bytes) + sum(r.write_bytes) for r in out.trace.records]
    assert moved == out.accessed_bytes.tolist()


# ---------------------------------------------------------------------- compare
def test_the_strategy_is_a_cpu_simulation_with_a_colour_of_its_own() -> None:
    s = STRATEGIES["first-touch-pages"]
    assert s.kind.value == "simulation"
    assert "first-touch-pages" in applicable(CPU) and "first-touch-pages" not in applicable(GPU)
    others = {x.color for n, x in STRATEGIES.items() if n != s.name}
    assert s.color not in others


def test_its_row_in_compare_beside_tensor_first_touch() -> None:
    g = training_graph_of("inception_v4", 4)
    settings = CompareSettings(
        plan=PlanSettings(capacity=Capacity.parse("4:1")),
        strategies=("all-fast", "all-slow", "first-touch", "first-touch-pages"),
    )
    rows = {r.strategy: r for r in compare(g, CPU, settings)}
    row = rows["first-touch-pages"]
    assert not row.error and row.valid and row.status == "simulated"
    assert row.moved_bytes == 0 and math.isnan(row.hit_rate)
    assert 0 < row.fast_peak_bytes <= row.fast_limit_bytes == rows["first-touch"].fast_limit_bytes
    # nothing overlaps; only the fitted controller's device-switch cost charges a kernel that
    # mixes DRAM and PMM traffic alone (0.08% here, measured)
    assert row.predicted_s * (1 - 1e-9) <= row.simulated_s <= row.predicted_s * 1.005
    assert 1 < row.slowdown < rows["all-slow"].slowdown
    # the page size is a setting of the comparison
    big = CompareSettings(
        plan=settings.plan, strategies=("first-touch-pages",), page_bytes=2 * 1024 * KiB
    )
    assert compare(g, CPU, big)[0].fast_peak_bytes % (2 * 1024 * KiB) == 0
