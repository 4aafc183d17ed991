"""The 2LM cache state machine: required behaviours, traffic rule, and a brute-force reference."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodels import (
    CacheTraffic,
    DramCache,
    HardwareModelError,
    load_preset,
    new_cache_state,
    simulate_accesses,
)
from hwmodels.cachestate import MAX_FRAMES

KiB = 1024
LINE = 64


def small_cache(
    capacity: int = 16 * KiB,
    associativity: int = 1,
    write_back: bool = True,
    write_allocate: bool = True,
) -> DramCache:
    return DramCache("DRAM", "PMM", capacity, LINE, associativity, write_back, write_allocate)


# --- brute-force reference: one block at a time, dicts and lists -------------------------


@dataclass
class RefCache:
    """Per-block model written as directly as possible from the traffic rule."""

    cache: DramCache
    block: int
    sets: dict[int, list[list[int]]] = field(default_factory=dict)  # set -> [tag, dirty, used]
    clock: int = 0

    @property
    def n_sets(self) -> int:
        return self.cache.capacity_bytes // self.cache.associativity // self.block

    def access(self, start: int, length: int, write: bool) -> dict[str, int]:
        out = dict.fromkeys(("hits", "misses", "fills", "writebacks", "cr", "cw", "br", "bw"), 0)
        if length == 0:
            return out
        c = self.cache
        for blk in range(start // self.block, (start + length - 1) // self.block + 1):
            self.clock += 1
            s, tag = blk % self.n_sets, blk // self.n_sets
            ways = self.sets.setdefault(s, [])
            line = next((w for w in ways if w[0] == tag), None)
            out["cr"] += 1  # every access reads the cache tier (tag and data, or tag)
            if line is not None:
                out["hits"] += 1
                line[2] = self.clock
                if write:
                    out["cw"] += 1
                    if c.write_back:
                        line[1] = 1
                    else:
                        out["bw"] += 1
                continue
            out["misses"] += 1
            if write and not c.write_allocate:
                out["bw"] += 1  # straight to the backing tier
                continue
            if len(ways) == c.associativity:
                victim = min(ways, key=lambda w: w[2])  # least recently used
                ways.remove(victim)
                if victim[1]:
                    out["writebacks"] += 1
                    out["bw"] += 1
            if write:
                out["cw"] += 1
                if c.write_back:
                    ways.append([tag, 1, self.clock])
                else:
                    out["bw"] += 1
                    ways.append([tag, 0, self.clock])
            else:
                out["fills"] += 1
                out["br"] += 1
                out["cw"] += 1
                ways.append([tag, 0, self.clock])
        return out


def as_rows(t: CacheTraffic) -> list[dict[str, int]]:
    b = t.block_bytes
    return [
        {
            "hits": int(t.hits[i]),
            "misses": int(t.misses[i]),
            "fills": int(t.fills[i]),
            "writebacks": int(t.writebacks[i]),
            "cr": int(t.cache_read_bytes[i]) // b,
            "cw": int(t.cache_write_bytes[i]) // b,
            "br": int(t.backing_read_bytes[i]) // b,
            "bw": int(t.backing_write_bytes[i]) // b,
        }
        for i in range(t.hits.size)
    ]


accesses = st.lists(
    st.tuples(
        # start: anywhere in 6 cache sizes (so tags differ), or at a multiple of a quarter
        # cache, where buffers collide on the same sets
        st.one_of(st.integers(0, 96 * KiB), st.integers(0, 24).map(lambda k: k * 4 * KiB)),
        # length: short (batched) or long (more than 256 blocks: cut into slices)
        st.one_of(st.integers(0, 2 * KiB), st.integers(16 * KiB, 40 * KiB)),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(
    seq=accesses,
    assoc=st.sampled_from([1, 2, 4]),
    write_back=st.booleans(),
    write_allocate=st.booleans(),
    block_lines=st.sampled_from([1, 2, 4]),
    split=st.integers(0, 25),
)
def test_vectorized_matches_brute_force(
    seq: list[tuple[int, int, bool]],
    assoc: int,
    write_back: bool,
    write_allocate: bool,
    block_lines: int,
    split: int,
) -> None:
    cache = small_cache(
        16 * KiB, associativity=assoc, write_back=write_back, write_allocate=write_allocate
    )
    block = block_lines * LINE
    ref = RefCache(cache, block)
    expected = [ref.access(s, n, w) for s, n, w in seq]
    # Two calls on one state: the state must carry over exactly.
    state = new_cache_state(cache, block)
    got: list[dict[str, int]] = []
    for part in (seq[:split], seq[split:]):
        starts = [a[0] for a in part]
        lengths = [a[1] for a in part]
        writes = [a[2] for a in part]
        got += as_rows(simulate_accesses(state, starts, lengths, writes))
    assert got == expected


def test_streaming_scan_larger_than_cache_misses_every_block() -> None:
    cache = small_cache(64 * KiB)
    state = new_cache_state(cache)
    size = 4 * cache.capacity_bytes
    t = simulate_accesses(state, [0, 0], [size, size], False)
    blocks = size // LINE
    assert t.misses.tolist() == [blocks, blocks]  # the second pass finds nothing left
    assert t.hits.tolist() == [0, 0]
    assert t.backing_read_bytes.tolist() == [size, size]  # every block comes from the PMM


def test_working_set_smaller_than_cache_hits_after_first_touch() -> None:
    cache = small_cache(64 * KiB)
    state = new_cache_state(cache)
    size = 48 * KiB
    t = simulate_accesses(state, [4096, 4096, 4096], [size, size, size], [False, True, False])
    blocks = size // LINE
    assert t.misses.tolist() == [blocks, 0, 0]
    assert t.hits.tolist() == [0, blocks, blocks]
    assert int(t.backing_read_bytes.sum()) == size
    assert int(t.backing_write_bytes.sum()) == 0  # the dirty lines are still resident


def test_buffers_mapping_to_the_same_sets_evict_each_other() -> None:
    cache = small_cache(64 * KiB)
    state = new_cache_state(cache)
    size = 16 * KiB
    a, b = 0, cache.capacity_bytes  # one cache size apart: the same sets
    c = size  # the sets just after a's: no conflict with a
    t = simulate_accesses(state, [a, b, a, b, c, a, c], [size] * 7, False)
    blocks = size // LINE
    assert t.misses.tolist() == [blocks] * 6 + [0]
    assert t.hits.tolist() == [0] * 6 + [blocks]


def test_dirty_victims_are_written_back_clean_ones_are_not() -> None:
    cache = small_cache(64 * KiB)
    size = 8 * KiB
    conflict = cache.capacity_bytes
    dirty_state = new_cache_state(cache)
    t = simulate_accesses(dirty_state, [0, conflict], [size, size], [True, False])
    assert t.writebacks.tolist() == [0, size // LINE]
    assert t.backing_write_bytes.tolist() == [0, size]
    clean_state = new_cache_state(cache)
    t = simulate_accesses(clean_state, [0, conflict], [size, size], [False, False])
    assert t.writebacks.tolist() == [0, 0]
    assert t.backing_write_bytes.tolist() == [0, 0]


def test_traffic_rule_per_block_by_hand() -> None:
    """reference/hardware.md, Memory Mode: the per-access traffic of each case, one block."""
    cache = small_cache(4 * KiB)
    state = new_cache_state(cache)
    conflict = cache.capacity_bytes
    t = simulate_accesses(
        state,
        [0, 0, 0, conflict, conflict],
        [LINE] * 5,
        [False, False, True, True, False],
    )
    rows = as_rows(t)
    # read miss: cache read (tag+data), backing read, fill write into the cache
    assert rows[0] == dict(hits=0, misses=1, fills=1, writebacks=0, cr=1, cw=1, br=1, bw=0)
    # read hit: the cache read only
    assert rows[1] == dict(hits=1, misses=0, fills=0, writebacks=0, cr=1, cw=0, br=0, bw=0)
    # write hit: tag read plus cache write; the line becomes dirty
    assert rows[2] == dict(hits=1, misses=0, fills=0, writebacks=0, cr=1, cw=1, br=0, bw=0)
    # write miss over the dirty line: tag read, cache write, write-back of the victim
    assert rows[3] == dict(hits=0, misses=1, fills=0, writebacks=1, cr=1, cw=1, br=0, bw=1)
    # read hit on the line just written (write-allocate installed it)
    assert rows[4] == dict(hits=1, misses=0, fills=0, writebacks=0, cr=1, cw=0, br=0, bw=0)


def test_write_through_and_no_write_allocate() -> None:
    size = 4 * KiB
    wt = new_cache_state(small_cache(write_back=False))
    t = simulate_accesses(wt, [0, 0, 64 * KiB], [size] * 3, [True, True, False])
    # every write reaches the backing tier; nothing is ever dirty, so no write-backs
    assert t.backing_write_bytes.tolist() == [size, size, 0]
    assert t.writebacks.tolist() == [0, 0, 0]
    nwa = new_cache_state(small_cache(write_allocate=False))
    t = simulate_accesses(nwa, [0, 0], [size, size], [True, False])
    # the write miss bypasses the cache, so the following read still misses
    assert t.cache_write_bytes.tolist() == [0, size]
    assert t.backing_write_bytes.tolist() == [size, 0]
    assert t.misses.tolist() == [size // LINE, size // LINE]


def test_two_way_lru_keeps_two_conflicting_buffers_and_evicts_the_oldest() -> None:
    cache = small_cache(32 * KiB, associativity=2)
    way = cache.capacity_bytes // 2  # addresses one way apart share a set
    size = 4 * KiB
    a, b, c = 0, way, 2 * way
    state = new_cache_state(cache)
    t = simulate_accesses(state, [a, b, a, b, c, b, a], [size] * 7, False)
    blocks = size // LINE
    # a and b coexist; c evicts a (least recent), so b still hits and a misses again
    assert t.hits.tolist() == [0, 0, blocks, blocks, 0, blocks, 0]


def test_results_converge_as_block_size_shrinks() -> None:
    """Coarse blocks only round each range out to whole blocks: the error in every counter is
    bounded by a few blocks per access, and vanishes at the line size."""
    rng = np.random.default_rng(7)
    n = 60
    starts = rng.integers(0, 1 << 21, n) // LINE * LINE  # line-aligned, not block-aligned
    lengths = rng.integers(8 * KiB, 128 * KiB, n) // LINE * LINE
    writes = rng.random(n) < 0.4
    cache = small_cache(512 * KiB)
    exact = RefCache(cache, LINE)
    ref = [
        exact.access(int(s), int(k), bool(w))
        for s, k, w in zip(starts, lengths, writes, strict=True)
    ]
    ref_bytes = {k: sum(r[k] for r in ref) * LINE for k in ("cr", "cw", "br", "bw")}
    errors = []
    for block in (LINE, 256, 1024, 4096):
        t = simulate_accesses(new_cache_state(cache, block), starts, lengths, writes)
        got = {"cr": t.cache_read_bytes, "cw": t.cache_write_bytes}
        got |= {"br": t.backing_read_bytes, "bw": t.backing_write_bytes}
        err = max(abs(int(got[k].sum()) - ref_bytes[k]) for k in ref_bytes)
        # Rounding adds at most one block at each end of an access; that partial block can
        # change one hit into a miss (or back) for it and for one later access, each moving
        # at most two blocks of traffic on a tier.
        assert err <= 8 * block * n
        errors.append(err)
    assert errors[0] == 0
    assert errors[-1] > 0  # the knob matters at all


def test_state_is_explicit_and_copyable() -> None:
    cache = small_cache()
    state = new_cache_state(cache)
    simulate_accesses(state, [0], [4 * KiB], True)
    snapshot = state.copy()
    again = simulate_accesses(state, [0], [4 * KiB], False)
    assert int(again.hits[0]) == 4 * KiB // LINE
    fresh = simulate_accesses(new_cache_state(cache), [0], [4 * KiB], False)
    assert int(fresh.hits[0]) == 0  # no hidden state shared between states
    assert snapshot.dirty[: 4 * KiB // LINE, 0].all()


def test_2lm_preset_cache_runs_at_a_coarse_block() -> None:
    """reference/hardware.md: 2LM is a direct-mapped, write-back cache with 64 B lines."""
    cache = load_preset("cascadelake-2lm").cache
    assert cache is not None
    assert (cache.line_bytes, cache.associativity, cache.write_back) == (64, 1, True)
    with pytest.raises(HardwareModelError, match="use a block of at least"):
        new_cache_state(cache)  # 192 GiB / 64 B is more than MAX_FRAMES frames
    state = new_cache_state(cache, 1 << 20)
    assert state.n_sets == 192 * 1024 <= MAX_FRAMES
    gib = 1 << 30
    t = simulate_accesses(state, [0, 192 * gib, 0], [gib] * 3, [True, False, False])
    assert t.writebacks.tolist() == [0, 1024, 0]  # 1 GiB of 1 MiB blocks written back
    assert t.misses.tolist() == [1024, 1024, 1024]


@pytest.mark.parametrize(
    ("kw", "block", "match"),
    [
        ({}, 96, "multiple of line_bytes"),
        ({}, 0, "multiple of line_bytes"),
        ({"capacity": 3 * 4096}, 8192, "does not divide"),
    ],
)
def test_bad_block_sizes_are_rejected(kw: dict[str, int], block: int, match: str) -> None:
    cache = small_cache(kw.get("capacity", 16 * KiB))
    with pytest.raises(HardwareModelError, match=match):
        new_cache_state(cache, block)


def test_bad_accesses_and_caches_are_rejected() -> None:
    state = new_cache_state(small_cache())
    with pytest.raises(HardwareModelError, match="must be >= 0"):
        simulate_accesses(state, [0], [-1], False)
    with pytest.raises(HardwareModelError, match="1-D of one length"):
        simulate_accesses(state, [0, 1], [1], False)
    with pytest.raises(HardwareModelError, match="1-D of one length"):
        simulate_accesses(state, [0, 1], [1, 1], [True])
    with pytest.raises(HardwareModelError, match="not a multiple"):
        small_cache(1000)
    with pytest.raises(HardwareModelError, match="same tier"):
        replace(small_cache(), backing_tier="DRAM")
    with pytest.raises(HardwareModelError, match="associativity"):
        small_cache(associativity=0)
