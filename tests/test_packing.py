"""The exact layout search: a hand case, brute force on tiny instances, properties, zoo graphs,
and a plan that the heuristics' layout sent back to the solver."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmsim.layout.fast_tier as layout_module
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.layout.addresses import SMALLEST_OF, Strategy, check_layout, fit_memory, plan_memory
from tmsim.layout.fast_tier import fast_buffers, fast_layout, overflow_bytes
from tmsim.layout.packing import fit
from tmsim.layout.sections import NONE, cover_min, span_max, span_sums
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain import plan as chain
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import training_graph_of

MB = 1_000_000

# Four buffers over kernels 1-8: d (10) [1, 6], b (60) [2, 5], c (20) [6, 8], a (50) [7, 8].
# Live bytes peak at 70 (b + d, then a + c). Largest first puts b and a at 0 and c on a at 50;
# d meets b [0, 60) and c [50, 70): on top at 70, a pool of 80. Best fit does the same, and by
# start d goes to 0, b to 10, c to 0 (d and b are dead), a to 20: 80 again. Yet d at 0, b at
# 10, a at 0 and c at 50 fit in 70: c and d meet only at kernel 6, at 50 and 0.
HOLE = ([10, 60, 20, 50], [1, 2, 6, 7], [6, 5, 8, 8])


def test_the_search_fills_the_hole_the_heuristics_leave() -> None:
    sizes, first, last = HOLE
    for strategy in SMALLEST_OF:
        assert plan_memory(sizes, first, last, strategy, alignment_bytes=1).pool_bytes == 80
    packed = plan_memory(sizes, first, last, Strategy.PACKED, alignment_bytes=1)
    check_layout(packed, sizes, first, last)
    assert packed.pool_bytes == packed.peak_live_bytes == 70
    assert packed.strategy is Strategy.PACKED
    fitted = fit_memory(sizes, first, last, 70, alignment_bytes=1)
    assert fitted.pool_bytes == 70 and fitted.strategy is Strategy.PACKED
    assert fit_memory(sizes, first, last, 70, alignment_bytes=1, node_limit=0).pool_bytes == 80
    # below the peak no layout fits: the search lays the buffers out at the peak, so that
    # what overflows is the excess of live bytes alone (the heuristics alone without it)
    below = fit_memory(sizes, first, last, 65, alignment_bytes=1)
    check_layout(below, sizes, first, last)
    assert below.pool_bytes == 70 and below.strategy is Strategy.PACKED
    alone = fit_memory(sizes, first, last, 65, alignment_bytes=1, node_limit=0)
    assert alone.pool_bytes == 80 and alone.strategy is Strategy.FIRST_FIT
    # nothing fits in 69 bytes, and the search proves it
    none = fit(np.array(sizes), np.array(first), np.array(last), 69, 10**6)
    assert none.offsets_bytes is None and none.exhausted


def lowest_fit_optimum(sizes: list[int], first: list[int], last: list[int]) -> int:
    """The least pool, by brute force over orders: each buffer in turn at the lowest offset
    where it meets no buffer placed before it.

    This finds the optimum: take an optimal layout and place its buffers in order of offset.
    By induction each lands at or below its optimal offset, because every buffer placed
    before it that is live with it ends at or below its own optimal end, which is at or
    below this buffer's optimal offset; so that offset is free and the lowest free one is no
    higher."""
    n, best = len(sizes), None
    for order in itertools.permutations(range(n)):
        offset: list[int] = [0] * n
        placed: list[int] = []
        for i in order:
            taken = sorted(
                (offset[j], offset[j] + sizes[j])
                for j in placed
                if first[j] <= last[i] and first[i] <= last[j]
            )
            at = 0
            for lo, hi in taken:
                if lo - at >= sizes[i]:
                    break
                at = max(at, hi)
            offset[i] = at
            placed.append(i)
        pool = max(o + s for o, s in zip(offset, sizes, strict=True))
        best = pool if best is None else min(best, pool)
    assert best is not None
    return best


def enumerated_optimum(sizes: list[int], first: list[int], last: list[int]) -> int:
    """The least pool, by trying every tuple of offsets below the sum of the sizes."""
    total, best = sum(sizes), sum(sizes)
    pairs = [
        (i, j)
        for i in range(len(sizes))
        for j in range(i)
        if first[i] <= last[j] and first[j] <= last[i]
    ]
    for offset in itertools.product(range(total), repeat=len(sizes)):
        pool = max(o + s for o, s in zip(offset, sizes, strict=True))
        if pool < best and all(
            offset[i] + sizes[i] <= offset[j] or offset[j] + sizes[j] <= offset[i] for i, j in pairs
        ):
            best = pool
    return best


def buffers(max_size: int, max_count: int) -> st.SearchStrategy[list[tuple[int, int, int]]]:
    """(size, first kernel, kernels after it) triples."""
    triple = st.tuples(st.integers(1, max_size), st.integers(0, 5), st.integers(0, 4))
    return st.lists(triple, min_size=1, max_size=max_count)


def unzip(bufs: list[tuple[int, int, int]]) -> tuple[list[int], list[int], list[int]]:
    return [s for s, _, _ in bufs], [f for _, f, _ in bufs], [f + d for _, f, d in bufs]


@settings(max_examples=60, deadline=None)
@given(buffers(3, 4))
def test_the_brute_force_agrees_with_every_offset_tried(bufs: list[tuple[int, int, int]]) -> None:
    assert lowest_fit_optimum(*unzip(bufs)) == enumerated_optimum(*unzip(bufs))


@settings(max_examples=150, deadline=None)
@given(buffers(40, 6))
def test_the_search_is_exact_on_tiny_instances(bufs: list[tuple[int, int, int]]) -> None:
    sizes, first, last = unzip(bufs)
    best = lowest_fit_optimum(sizes, first, last)
    packed = plan_memory(sizes, first, last, Strategy.PACKED, alignment_bytes=1, node_limit=10**6)
    check_layout(packed, sizes, first, last)
    assert packed.pool_bytes == best
    arrays = np.array(sizes), np.array(first), np.array(last)
    below = fit(*arrays, best - 1, 10**6)
    assert below.offsets_bytes is None and below.exhausted  # a proof that nothing smaller fits
    at = fit(*arrays, best, 10**6)
    assert at.offsets_bytes is not None and int((at.offsets_bytes + arrays[0]).max()) <= best


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 5000), st.integers(0, 30), st.integers(0, 10)),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from([1, 64]),
    st.integers(0, 400),
)
def test_packed_layouts_are_valid_bounded_and_no_worse(
    bufs: list[tuple[int, int, int]], alignment: int, nodes: int
) -> None:
    sizes, first, last = unzip(bufs)
    old = plan_memory(sizes, first, last, Strategy.SMALLEST, alignment, node_limit=nodes)
    new = plan_memory(sizes, first, last, Strategy.PACKED, alignment, node_limit=nodes)
    check_layout(new, new.aligned_bytes, first, last)
    assert new.peak_live_bytes <= new.pool_bytes <= old.pool_bytes
    assert np.all(new.offsets_bytes % alignment == 0)
    capacity = new.peak_live_bytes + (new.pool_bytes - new.peak_live_bytes) // 2
    fitted = fit_memory(sizes, first, last, capacity, alignment, node_limit=nodes)
    check_layout(fitted, fitted.aligned_bytes, first, last)
    assert fitted.pool_bytes <= old.pool_bytes
    if fitted.strategy is Strategy.PACKED:
        assert fitted.pool_bytes <= capacity
    searched = fit(fitted.aligned_bytes, np.array(first), np.array(last), capacity, nodes)
    assert searched.nodes <= nodes


def test_a_node_limit_must_not_be_negative() -> None:
    with pytest.raises(TmsimError, match="node_limit must be >= 0"):
        plan_memory([1], [0], [0], Strategy.PACKED, node_limit=-1)


@pytest.mark.parametrize(("model", "batch"), [("resnet50", 8), ("vgg19", 16)])
def test_zoo_graphs_lay_out_at_the_bound(model: str, batch: int) -> None:
    """Every tensor of the step over its live range: the three heuristics leave 4 KB
    (ResNet-50) and 9.4 MB (VGG19) of holes at the peak; the search leaves none."""
    g = training_graph_of(model, batch)
    args = (g.sizes_bytes, g.live_first, g.live_last)
    old = plan_memory(*args, Strategy.SMALLEST)
    new = plan_memory(*args, Strategy.PACKED)
    check_layout(new, new.aligned_bytes, g.live_first, g.live_last)
    assert old.pool_bytes > old.peak_live_bytes
    assert new.pool_bytes == new.peak_live_bytes


def nine_kernels() -> Graph:
    """:data:`HOLE` as activations of a nine-kernel step (sizes in MB), every kernel memory
    bound: kept in DRAM, nothing needs Optane."""
    f = Phase.FORWARD
    tensors = [
        Tensor("d", 10 * MB, Role.ACTIVATION),
        Tensor("b", 60 * MB, Role.ACTIVATION),
        Tensor("c", 20 * MB, Role.ACTIVATION),
        Tensor("a", 50 * MB, Role.ACTIVATION),
    ]
    operands: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
        ((), ()),
        ((), ("d",)),
        ((), ("b",)),
        ((), ()),
        ((), ()),
        (("b",), ()),
        (("d",), ("c",)),
        ((), ("a",)),
        (("a", "c"), ()),
    ]
    kernels = [
        Kernel(f"k{i}", "relu", ins, outs, f, 10**6) for i, (ins, outs) in enumerate(operands)
    ]
    return Graph("nine", tensors, kernels)


def test_a_plan_whose_bytes_fit_is_not_sent_back_for_the_heuristics_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The static MILP keeps all four tensors in 70 MB of DRAM (the peak of live bytes). The
    heuristics lay them out in 80 MB, so AutoTM's loop lowered the limit and solved again,
    and the plan that laid out sent the 60 MB tensor to Optane, 3.5 times slower. The search
    lays the first plan out in its 70 MB."""
    graph, platform = nine_kernels(), load_preset("cascadelake-optane")
    assert list(graph.live_first) == HOLE[1] and list(graph.live_last) == HOLE[2]
    opts = PlanSettings(capacity=Capacity.of_bytes(70 * MB), time_limit_s=None)
    new = chain.plan_milp(graph, platform, opts, "static")
    assert new.stats is not None and new.stats.rounds == 1
    assert sorted(fast_buffers(new, graph, platform)[0].tolist()) == [
        10 * MB,
        20 * MB,
        50 * MB,
        60 * MB,
    ]
    assert not overflow_bytes(new, graph, platform, 70 * MB).any()
    assert fast_layout(new, graph, platform).pool_bytes == 70 * MB
    old_overflow = overflow_bytes(new, graph, platform, 70 * MB, node_limit=0)
    assert old_overflow.max() == 10 * MB  # d ends at 80 MB, from kernel 1 to 6
    # the check with the heuristics' layouts alone, as before the search existed
    monkeypatch.setattr(layout_module, "fit_memory", functools.partial(fit_memory, node_limit=0))
    old = chain.plan_milp(graph, platform, opts, "static")
    assert old.stats is not None and old.stats.rounds == 2
    assert old.predicted_s > 3 * new.predicted_s


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40), st.integers(-50, 50)), max_size=30)
)
def test_section_sums_maxima_and_minima(spans: list[tuple[int, int, int]]) -> None:
    length = 41
    start = np.array([a for a, _, _ in spans], dtype=np.int64)
    stop = np.minimum(start + np.array([w for _, w, _ in spans], dtype=np.int64), length)
    values = np.array([v for _, _, v in spans], dtype=np.int64)
    sums = np.zeros(length, dtype=np.int64)
    least = np.full(length, NONE, dtype=np.int64)
    for a, z, v in zip(start, stop, values, strict=True):
        sums[a:z] += v
        least[a:z] = np.minimum(least[a:z], v)
    assert span_sums(start, stop, values, length).tolist() == sums.tolist()
    assert cover_min(start, stop, values, length).tolist() == least.tolist()
    log2 = np.array([0] + [w.bit_length() - 1 for w in range(1, length + 1)], dtype=np.int64)
    assert cover_min(start, stop, values, length, log2).tolist() == least.tolist()
    table = np.arange(length, dtype=np.int64) * 7 % 11
    expected = [int(table[a:z].max()) for a, z in zip(start, stop, strict=True)]
    assert span_max(table, start, stop).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 2**63 - 1), min_size=1, max_size=20), st.integers(0, 62))
def test_floor_log2_is_exact_on_either_side_of_float_precision(
    values: list[int], shift: int
) -> None:
    from tmsim.layout.sections import floor_log2

    # around powers of two, where a rounded logarithm would be off by one
    near = [max(1, (1 << shift) + d) for d in (-1, 0, 1)]
    for group in (values, near, [v for v in values if v < 2**53] or [1]):
        v = np.array(group, dtype=np.int64)
        assert floor_log2(v).tolist() == [int(x).bit_length() - 1 for x in group]


def test_the_search_is_deterministic_and_counts_its_nodes() -> None:
    g = training_graph_of("vgg19", 16)
    peak = int(occupancy(g.live_first, g.live_last, g.sizes_bytes, len(g.kernels)).max())
    runs = [fit(g.sizes_bytes, g.live_first, g.live_last, peak, 5_000) for _ in range(2)]
    assert runs[0].offsets_bytes is not None and runs[1].offsets_bytes is not None
    assert runs[0].offsets_bytes.tolist() == runs[1].offsets_bytes.tolist()
    assert runs[0].nodes == runs[1].nodes <= 5_000
    cut = fit(g.sizes_bytes, g.live_first, g.live_last, peak, 10)
    assert cut.nodes == 10 and cut.offsets_bytes is None and not cut.exhausted
