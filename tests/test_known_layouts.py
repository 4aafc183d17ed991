"""Layouts known by construction: first fit below a capacity (buffers left out where they
would end above it), the layout of a plan read from known offsets, and the MILP's heuristic
start, which lays out by construction, so that a solve stopped at once returns a plan that
lays out without a search."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_graph_properties import graphs

import tmsim.layout.fast_tier as layout_module
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.layout.addresses import (
    Layout,
    Strategy,
    check_layout,
    fit_below,
    fit_memory,
    plan_memory,
)
from tmsim.layout.fast_tier import (
    fast_buffers,
    fast_keys,
    fast_layout,
    known_layout,
    laid_out_overflow_bytes,
    overflow_bytes,
)
from tmsim.planners.milp.chain.plan import plan_milp
from tmsim.planners.milp.chain.starts import static_tiers
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.settings import PlanSettings
from tmsim.plans.validate import validate
from tmsim.profiles import cost_model
from tmsim.workload.graph import Graph

CPU = load_preset("cascadelake-optane")
MB = 1 << 20

buffers = st.lists(
    st.tuples(st.integers(1, 64), st.integers(0, 12), st.integers(0, 6)), min_size=1, max_size=30
)


def _arrays(items: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sizes, first and last kernels of ``buffers`` drawn as (size, first, width)."""
    sizes = np.array([s for s, _, _ in items], dtype=np.int64)
    first = np.array([a for _, a, _ in items], dtype=np.int64)
    return sizes, first, first + np.array([w for _, _, w in items], dtype=np.int64)


@settings(max_examples=150, deadline=None)
@given(items=buffers, share=st.floats(0.0, 1.2))
def test_first_fit_below_a_capacity_keeps_a_layout_that_fits(
    items: list[tuple[int, int, int]], share: float
) -> None:
    sizes, first, last = _arrays(items)
    ff = plan_memory(sizes, first, last, Strategy.FIRST_FIT, alignment_bytes=1)
    capacity = int(share * ff.pool_bytes)
    offsets = fit_below(sizes, first, last, capacity)
    kept = offsets >= 0
    assert np.all(offsets[kept] + sizes[kept] <= capacity)
    if kept.any():
        layout = Layout(offsets[kept], sizes[kept], capacity, 0, Strategy.FIRST_FIT)
        check_layout(layout, sizes[kept], first[kept], last[kept])
    # a buffer is left out only where it would not fit below the capacity on its own
    # (first fit places it at or above 0), and with room for first fit's whole pool nothing
    # is left out and the offsets are first fit's
    assert np.all(kept | (sizes > capacity) | (capacity < ff.pool_bytes))
    if capacity >= ff.pool_bytes:
        assert kept.all() and offsets.tolist() == ff.offsets_bytes.tolist()


def test_first_fit_below_by_hand_and_its_errors() -> None:
    # largest first: 30 at 0, 20 above it at 30 would end at 50 > 40: left out; 10 at 30
    offsets = fit_below([10, 30, 20], [0, 0, 0], [1, 1, 1], 40)
    assert offsets.tolist() == [30, 0, -1]
    with pytest.raises(TmsimError, match="size must be positive"):
        fit_below([0], [0], [0], 10)
    with pytest.raises(TmsimError, match="first kernel after last"):
        fit_below([1], [2], [1], 10)


@settings(max_examples=20, deadline=None)
@given(graphs(dtypes=("fp32",), unit_bytes=MB), st.floats(0.1, 0.9))
def test_a_static_solve_stopped_at_once_returns_a_start_that_lays_out(
    graph: Graph, share: float
) -> None:
    limit = max(int(share * graph.peak_live_bytes), 1)
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), time_limit_s=1e-6)
    try:
        plan = plan_milp(graph, CPU, opts, "static")
    except TmsimError:
        return  # nothing the heuristics place fits: no start to check
    assert validate(plan, graph, CPU).ok
    # independently of how the chain knew it: the fast buffers lay out in the limit, by the
    # heuristics and the exact search
    assert not overflow_bytes(plan, graph, CPU, limit).any()
    # and the layout the start came with is one: every buffer of the plan in it, no two
    # buffers live together overlapping, all below the limit
    tiers, known = static_tiers(
        cost_model(graph, CPU, None), Formulation.STATIC, False, limit, opts
    )
    assert tiers is not None
    layout = known_layout(plan, graph, CPU, known)
    assert layout is not None and layout.pool_bytes <= limit
    check_layout(layout, *fast_buffers(plan, graph, CPU))


def test_a_known_layout_is_read_for_a_plan_whose_buffers_it_holds() -> None:
    from tmsim.workload.zoo import training_graph_of

    graph = training_graph_of("vgg19", 2)
    limit = graph.peak_live_bytes // 3
    plan = plan_milp(graph, CPU, PlanSettings(capacity=Capacity.of_bytes(limit)), "static")
    sizes, first, last = fast_buffers(plan, graph, CPU)
    fast = [r for r in plan.residency if r.tier == CPU.tiers[0].name]
    offsets = plan_memory(sizes, first, last, Strategy.FIRST_FIT, alignment_bytes=1)
    known = {
        (graph.tensor_index(r.tensor), r.first, r.last): int(o)
        for r, o in zip(fast, offsets.offsets_bytes, strict=True)
    }
    assert fast_keys(plan, graph, CPU) == list(known)  # the keys, in fast_buffers order
    layout = known_layout(plan, graph, CPU, known)
    assert layout is not None
    assert layout.offsets_bytes.tolist() == offsets.offsets_bytes.tolist()
    assert layout.pool_bytes == offsets.pool_bytes
    # one buffer it does not hold: nothing is known
    known.pop(next(iter(known)))
    assert known_layout(plan, graph, CPU, known) is None


@settings(max_examples=100, deadline=None)
@given(items=buffers, squeeze=st.floats(0.0, 1.0))
def test_a_layout_that_misses_the_capacity_overflows_no_more_than_the_heuristics(
    items: list[tuple[int, int, int]], squeeze: float
) -> None:
    sizes, first, last = _arrays(items)
    heuristic = plan_memory(sizes, first, last, Strategy.SMALLEST, alignment_bytes=1)
    # a capacity between the peak of live bytes and the heuristics' pool
    peak = heuristic.peak_live_bytes
    capacity = peak + int(squeeze * (heuristic.pool_bytes - peak))
    # one node: the search in the capacity gives up at once, and the pools above it are tried
    got = fit_memory(sizes, first, last, capacity, 1, node_limit=1)
    check_layout(got, sizes, first, last)
    assert got.pool_bytes <= heuristic.pool_bytes
    assert got.pool_bytes == int((got.offsets_bytes + sizes).max())


def test_a_plan_laid_out_by_a_known_layout_is_not_searched_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tmsim.workload.zoo import training_graph_of

    graph = training_graph_of("vgg19", 2)
    limit = graph.peak_live_bytes // 3
    plan = plan_milp(graph, CPU, PlanSettings(capacity=Capacity.of_bytes(limit)), "static")
    assert plan.fast_limit_bytes == limit
    searched = fast_layout(plan, graph, CPU)  # the search the check makes, in the limit
    check_layout(searched, *fast_buffers(plan, graph, CPU))
    keys = dict(zip(fast_keys(plan, graph, CPU), searched.offsets_bytes.tolist(), strict=True))
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Layout:
        calls.append(1)
        return fit_memory(*args, **kwargs)

    monkeypatch.setattr(layout_module, "fit_memory", counted)
    # the first known layout that holds every buffer is read, no search
    lacking = dict(keys)
    lacking.pop(next(iter(lacking)))
    overflow, got = laid_out_overflow_bytes(plan, graph, CPU, limit, [{}, lacking, keys])
    assert calls == [] and not overflow.any() and got == keys
    # none holds them all: searched for, the same search, verdict and layout as above
    overflow, got = laid_out_overflow_bytes(plan, graph, CPU, limit, [lacking])
    assert calls == [1]
    assert not overflow.any() and got == keys
    # a limit the plan's buffers overflow: no layout handed on
    tight = int(searched.peak_live_bytes) - 1  # more bytes live at once than it holds
    overflow, got = laid_out_overflow_bytes(plan, graph, CPU, tight, [])
    assert overflow.any() and got == {}
