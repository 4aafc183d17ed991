"""Static memory planning: hand cases, interval-graph optimality, a brute-force checker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmsim.errors import TmsimError
from tmsim.layout.addresses import Layout, Strategy, check_layout, plan_memory
from tmsim.workload.zoo import training_graph_of


def test_disjoint_lifetimes_share_addresses() -> None:
    layout = plan_memory([100, 100, 100], [0, 1, 2], [0, 1, 2], alignment_bytes=1)
    assert layout.offsets_bytes.tolist() == [0, 0, 0]
    assert layout.pool_bytes == 100
    assert layout.fragmentation == 0.0


def test_overlapping_lifetimes_stack() -> None:
    layout = plan_memory([10, 30, 20], [0, 0, 1], [2, 1, 2], alignment_bytes=1)
    # largest first: b at 0; c conflicts with a and b; a conflicts with both
    assert layout.offsets_bytes.tolist() == [50, 0, 30]
    assert layout.pool_bytes == 60 == layout.peak_live_bytes


def test_best_fit_takes_the_tightest_gap() -> None:
    # Placed largest first: d [0,100), a [100,140), f [140,170), c [170,195), g [195,219).
    # When e arrives (kernels 2-3), a and c are dead: holes of 40 B at 100 and 25 B at 170.
    sizes = [100, 40, 30, 25, 24, 20]
    first = [0, 0, 0, 0, 0, 2]
    last = [3, 1, 3, 1, 3, 3]
    ff = plan_memory(sizes, first, last, Strategy.FIRST_FIT, alignment_bytes=1)
    bf = plan_memory(sizes, first, last, Strategy.BEST_FIT, alignment_bytes=1)
    assert ff.offsets_bytes.tolist() == [0, 100, 140, 170, 195, 100]
    assert bf.offsets_bytes.tolist() == [0, 100, 140, 170, 195, 170]
    check_layout(ff, sizes, first, last)
    check_layout(bf, sizes, first, last)


def test_alignment() -> None:
    layout = plan_memory([1, 65, 3], [0, 0, 0], [0, 0, 0], alignment_bytes=64)
    assert sorted(layout.offsets_bytes.tolist()) == [0, 128, 192]
    assert layout.pool_bytes == 256


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([1, 2], [0], [0]), "one length"),
        (([0], [0], [0]), "size must be positive"),
        (([4], [3], [1]), "first kernel after last"),
    ],
)
def test_bad_input(args: tuple[list[int], list[int], list[int]], message: str) -> None:
    with pytest.raises(TmsimError, match=message):
        plan_memory(*args)
    with pytest.raises(TmsimError, match="unknown memory-planning strategy"):
        plan_memory([1], [0], [0], strategy="worst-fit")


def test_checker_catches_an_overlap() -> None:
    bad = Layout(
        np.array([0, 8], dtype=np.int64),
        np.array([10, 10], dtype=np.int64),
        20,
        20,
        Strategy.FIRST_FIT,
    )
    with pytest.raises(TmsimError, match="overlap in address at kernel 1"):
        check_layout(bad, [10, 10], [0, 1], [1, 2])


intervals = st.lists(
    st.tuples(st.integers(1, 5000), st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=60
)


@settings(max_examples=150, deadline=None)
@given(intervals, st.sampled_from(list(Strategy)))
def test_layouts_are_valid_and_bounded(
    bufs: list[tuple[int, int, int]], strategy: Strategy
) -> None:
    sizes = [s for s, _, _ in bufs]
    first = [f for _, f, _ in bufs]
    last = [f + d for _, f, d in bufs]
    layout = plan_memory(sizes, first, last, strategy, alignment_bytes=1)
    check_layout(layout, sizes, first, last)
    assert layout.peak_live_bytes <= layout.pool_bytes <= sum(sizes)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=60))
def test_equal_sizes_are_packed_optimally(spans: list[tuple[int, int]]) -> None:
    # Interval graphs are perfect: greedy in start order needs exactly max-overlap slots.
    first = [f for f, _ in spans]
    last = [f + d for f, d in spans]
    layout = plan_memory([64] * len(spans), first, last)
    assert layout.pool_bytes == layout.peak_live_bytes


def test_zoo_graph_layout_is_close_to_peak() -> None:
    g = training_graph_of("resnet50", 8)
    for strategy in Strategy:  # every one, including the pick of the smallest
        layout = plan_memory(g.sizes_bytes, g.live_first, g.live_last, strategy)
        check_layout(layout, g.sizes_bytes, g.live_first, g.live_last)
        assert layout.fragmentation < 0.25


def test_start_order_beats_size_order_where_lifetimes_chain() -> None:
    # Largest first: the 12 (kernel 3) and the 11 (kernels 0-1) both at 0, the 7 (kernels
    # 2-4) above the 12 at 12, and the 3 (kernels 0-2) fits neither below nor between: on top,
    # 22 bytes. In order of first use the 11 and 3 go first and the 7 reuses the dead 11's
    # addresses: 19, the peak.
    sizes = [12, 11, 3, 7]
    first = [3, 0, 0, 2]
    last = [3, 1, 2, 4]
    by_size = plan_memory(sizes, first, last, Strategy.FIRST_FIT, alignment_bytes=1)
    by_start = plan_memory(sizes, first, last, Strategy.FIRST_FIT_START, alignment_bytes=1)
    best = plan_memory(sizes, first, last, Strategy.SMALLEST, alignment_bytes=1)
    assert by_size.pool_bytes == 22
    assert by_start.pool_bytes == 19 == by_start.peak_live_bytes
    assert best.pool_bytes == 19 and best.strategy is Strategy.FIRST_FIT_START
    check_layout(best, sizes, first, last)
