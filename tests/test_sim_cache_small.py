"""A 2LM cache of a few lines walks as fast as a large one: an access many times the cache's
size costs a bounded number of waves (a few laps to fill the ways and settle, then the laps
that can only miss are skipped in one step), and the walk is still exact (a brute-force
reference, one block at a time)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cache_waves import counted_waves
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hw_cache import RefCache, as_rows

from hwmodels import DramCache, load_preset, new_cache_state, simulate_accesses
from tmsim.cost import CostModel
from tmsim.sim import replay_cache
from tmsim.sim.addresses import step_accesses, step_layout
from tmsim.workload.zoo import training_graph_of

LINE = 64
MM = load_preset("cascadelake-2lm")


def tiny(lines: int, associativity: int = 1, **policy: bool) -> DramCache:
    return DramCache("DRAM", "PMM", lines * LINE, LINE, associativity, **policy)


@pytest.mark.parametrize("associativity", [1, 2, 4])
@pytest.mark.parametrize("write", [False, True])
def test_a_long_access_takes_a_bounded_number_of_waves(associativity: int, write: bool) -> None:
    """A million blocks through a cache of one set: every block misses, a written one is
    written back when the next lap evicts it, and the walk takes a few dozen waves."""
    cache = tiny(associativity, associativity)
    state = new_cache_state(cache)
    blocks = 10**6
    with counted_waves() as waves:
        t = simulate_accesses(state, [0], [blocks * LINE], write)
    assert waves[0] <= 4 * associativity + 16
    assert t.misses.tolist() == [blocks] and t.hits.tolist() == [0]
    assert t.writebacks.tolist() == [blocks - associativity if write else 0]
    # the state is the one a block-by-block walk leaves: the last blocks, newest last
    assert sorted(state.tags[0].tolist()) == list(range(blocks - associativity, blocks))


def test_a_no_allocate_write_over_a_small_cache_is_bounded_and_finds_its_lines() -> None:
    cache = tiny(4, 2, write_allocate=False)
    state = new_cache_state(cache)
    simulate_accesses(state, [1000 * LINE, 5 * LINE], [LINE, LINE], False)  # two lines in
    with counted_waves() as waves:
        t = simulate_accesses(state, [0], [10**6 * LINE], True)
    assert waves[0] <= 4 * 2 + 16
    assert t.hits.tolist() == [2] and t.misses.tolist() == [10**6 - 2]
    assert state.dirty.sum() == 2  # the two lines hit are dirty now


laps = st.lists(
    st.tuples(
        st.integers(0, 40 * 4 * LINE),  # start: anywhere in a few dozen caches of 4 lines
        st.one_of(st.integers(0, 6 * LINE), st.integers(20 * LINE, 200 * LINE)),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    seq=laps,
    sets=st.sampled_from([1, 2, 3]),
    assoc=st.sampled_from([1, 2, 3]),
    write_back=st.booleans(),
    write_allocate=st.booleans(),
    block_lines=st.sampled_from([1, 2]),
)
def test_small_caches_walk_exactly_as_block_by_block(
    seq: list[tuple[int, int, bool]],
    sets: int,
    assoc: int,
    write_back: bool,
    write_allocate: bool,
    block_lines: int,
) -> None:
    block = block_lines * LINE
    cache = DramCache("DRAM", "PMM", sets * assoc * block, LINE, assoc, write_back, write_allocate)
    ref = RefCache(cache, block)
    expected = [ref.access(s, n, w) for s, n, w in seq]
    state = new_cache_state(cache, block)
    got = as_rows(
        simulate_accesses(state, [a[0] for a in seq], [a[1] for a in seq], [a[2] for a in seq])
    )
    assert got == expected
    # and the state carries on as the reference's: one more pass over everything agrees
    again = [ref.access(s, n, w) for s, n, w in seq]
    starts, lengths, writes = zip(*seq, strict=True)
    assert as_rows(simulate_accesses(state, starts, lengths, writes)) == again


def test_a_one_line_cache_replays_a_real_step_in_few_waves() -> None:
    """ResNet-50 at batch 2 (hundreds of megabytes of accesses) behind a cache of one 64-byte
    line: a few waves per access, where a lap at a time took millions."""
    graph = training_graph_of("resnet50", 2)
    assert MM.cache is not None
    one_line = replace(MM, cache=replace(MM.cache, capacity_bytes=LINE))
    n_accesses = step_accesses(graph, CostModel(graph, one_line), step_layout(graph)).kernel.size
    with counted_waves() as waves:
        ct = replay_cache(graph, one_line)
    assert waves[0] <= 2 * 24 * n_accesses  # two walks (warm), a bounded number each
    assert int(ct.hits.sum()) <= n_accesses  # one line holds little a later access finds
    assert ct.trace.simulated_s > 0
