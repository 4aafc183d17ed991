"""Vectorized state machine of a :class:`~hwmodels.cache.DramCache`.

Accesses are address ranges, replayed in order, each walking its range in ascending address
order in *blocks*: ``block_bytes`` is a multiple of the line size and is the accuracy/speed
knob. A block stands for its aligned group of lines; in a direct-mapped cache those lines map
to an aligned group of sets and always share their fate, so whole-block accesses are simulated
exactly, and the only error of a coarse block is the rounding of each range out to whole
blocks.

How it is fast: two accesses to different sets are independent, and within a stretch of at
most ``n_sets`` consecutive blocks every set is touched at most once. So a range is cut at
multiples of ``n_sets`` blocks into pieces with one tag each ("laps" of the cache), and each
piece is one vectorized compare-and-update ("wave") on a contiguous slice of the tag and dirty
arrays. Short accesses are batched: their blocks are ranked by how many earlier blocks of the
batch hit the same set, and each rank is one wave of gathers and scatters, which keeps the
per-set order.

However small the cache, an access costs a bounded number of waves (at most
``2 * associativity + 4`` and the partial laps at its ends; one step for a write that
allocates nothing), so a cache of one line walks a step as fast as a large one. An access
walked lap by lap fills each set's ways with its own blocks: after ``associativity`` full laps
every set holds the access's last ``associativity`` tags, and from the next lap on every lap
misses everywhere, evicting the set's least recent block, which the access itself installed
(dirty if it writes to a write-back cache). Those laps change nothing but the tags and LRU
stamps, each one lap on, so whole multiples of ``associativity`` of them are skipped at once
(:func:`_run_long`). A long write that allocates nothing changes no tag at all, so a frame hits
if and only if it holds a block of the range (:func:`_run_bypass`). Both give exactly what
walking the laps one by one gives.

The state (:class:`CacheState`) is an explicit mutable object owned by the caller: it is large
(one tag per block frame) and updated in place, so that a caller replaying 10^4 kernels does
not copy it 10^4 times. :meth:`CacheState.copy` snapshots it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.cache import DramCache
from hwmodels.cachestate import CacheState, wave
from hwmodels.errors import HardwareModelError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Accesses of fewer blocks than this are batched into waves; longer ones are cut into
#: slices. Both paths give identical results; this only trades Python overhead for sorting.
_SHORT_BLOCKS = 256
#: Most blocks in one batch of short accesses (bounds the temporary arrays).
_BATCH_BLOCKS = 1 << 20


@dataclass(frozen=True, slots=True)
class CacheTraffic:
    """What each access did, one entry per access (numpy int64 arrays of equal length).

    Counts in blocks: ``hits``, ``misses`` (``hits + misses`` = blocks touched), ``fills``
    (blocks read from the backing tier and written into the cache: read misses), ``writebacks``
    (dirty victims written to the backing tier). Traffic in bytes on each tier:
    ``cache_read_bytes``, ``cache_write_bytes``, ``backing_read_bytes``,
    ``backing_write_bytes``. ``block_bytes`` is the block size used.
    """

    block_bytes: int
    hits: IntArray
    misses: IntArray
    fills: IntArray
    writebacks: IntArray
    cache_read_bytes: IntArray
    cache_write_bytes: IntArray
    backing_read_bytes: IntArray
    backing_write_bytes: IntArray

    def total(self) -> dict[str, int]:
        """Sums over all accesses, by field name (the block size under ``block_bytes``)."""
        out = {"block_bytes": self.block_bytes}
        for name in (
            "hits",
            "misses",
            "fills",
            "writebacks",
            "cache_read_bytes",
            "cache_write_bytes",
            "backing_read_bytes",
            "backing_write_bytes",
        ):
            out[name] = int(getattr(self, name).sum())
        return out


def simulate_accesses(
    state: CacheState,
    starts: npt.ArrayLike,
    lengths: npt.ArrayLike,
    is_write: npt.ArrayLike,
) -> CacheTraffic:
    """Replay accesses in order against ``state`` (updated in place); return each one's traffic.

    Access ``i`` covers bytes ``[starts[i], starts[i] + lengths[i])`` and is a write if
    ``is_write[i]`` (a scalar applies to all). A range is rounded out to whole blocks; an empty
    range touches nothing. Raises :class:`HardwareModelError` if the arrays are not 1-D of one
    length, or a start or length is negative. Speed (``python -m bench cache_sim``): long
    ranges cost a few nanoseconds per block, short accesses about 100 ns per block; a range
    of many laps of a small cache costs at most ``2 * associativity + 4`` of its laps and the
    partial ones at its ends (see the module documentation), however long.
    """
    s = np.asarray(starts, dtype=np.int64)
    n = np.asarray(lengths, dtype=np.int64)
    w = np.asarray(is_write, dtype=np.bool_)
    if w.ndim == 0:
        w = np.broadcast_to(w, s.shape)
    if s.ndim != 1 or n.shape != s.shape or w.shape != s.shape:
        raise HardwareModelError(
            "cache accesses: starts, lengths and is_write must be 1-D of one length (or "
            f"is_write a scalar), got shapes {s.shape}, {n.shape} and {w.shape}"
        )
    if s.size and (s.min() < 0 or n.min() < 0):
        raise HardwareModelError("cache accesses: starts and lengths must be >= 0")
    b = state.block_bytes
    first = s // b
    count = np.where(n > 0, (s + n - 1) // b - first + 1, 0)
    hits = np.zeros(s.size, dtype=np.int64)
    wbs = np.zeros(s.size, dtype=np.int64)
    # an access of more laps than the walk settles in is long, however few its blocks
    settled = (2 * state.cache.associativity + 4) * state.n_sets
    long_idx = np.flatnonzero((count >= _SHORT_BLOCKS) | (count >= settled))
    lo = 0
    for i in [*long_idx.tolist(), s.size]:
        if lo < i:  # the short accesses between two long ones, in order
            _run_short(state, first, count, w, lo, i, hits, wbs)
        if i < s.size:
            hits[i], wbs[i] = _run_long(state, int(first[i]), int(count[i]), bool(w[i]))
        lo = i + 1
    return _traffic(state.cache, b, count, hits, wbs, w)


def _traffic(
    cache: DramCache, b: int, n: IntArray, h: IntArray, wb: IntArray, w: BoolArray
) -> CacheTraffic:
    """Per-access counts and bytes from blocks touched, hits and write-backs (traffic rule)."""
    miss = n - h
    zero = np.zeros_like(n)
    fills = np.where(w, zero, miss)
    written_to_cache = n if cache.write_allocate else h
    cache_writes = np.where(w, written_to_cache, miss)
    if not cache.write_back:
        write_through = n  # every written block goes to the backing tier
    elif not cache.write_allocate:
        write_through = miss  # write misses bypass the cache
    else:
        write_through = zero
    backing_writes = wb + np.where(w, write_through, zero)
    return CacheTraffic(
        block_bytes=b,
        hits=h,
        misses=miss,
        fills=fills,
        writebacks=wb,
        cache_read_bytes=n * b,
        cache_write_bytes=cache_writes * b,
        backing_read_bytes=fills * b,
        backing_write_bytes=backing_writes * b,
    )


def _run_long(state: CacheState, first: int, count: int, write: bool) -> tuple[int, int]:
    """One long access: pieces of constant tag on contiguous set slices (laps), those past the
    ``2 * associativity`` full laps after which every lap misses everywhere skipped in whole
    multiples of ``associativity`` (see the module documentation). Returns (hits, wbs)."""
    cache = state.cache
    n_sets, ways = state.n_sets, cache.associativity
    end = first + count
    if write and not cache.write_allocate and (end - 1) // n_sets - first // n_sets > 1:
        return _run_bypass(state, first, count)
    hits = wbs = 0
    block = first
    full = 0  # full laps walked
    while block < end:
        tag, s0 = divmod(block, n_sets)
        if s0 == 0 and full >= 2 * ways:
            skip = (end - block) // n_sets // ways * ways
            if skip:  # every frame holds a block this access installed, each lap one back
                wbs += skip * n_sets * int(write and cache.write_back)
                state.tags += skip
                state.last_use += skip
                state.clock += skip
                block += skip * n_sets
                continue
        stop = min(end, (tag + 1) * n_sets)
        idx = slice(s0, s0 + stop - block)
        hit, wb = wave(state, idx, np.int64(tag), np.bool_(write))
        hits += int(np.count_nonzero(hit))
        wbs += int(np.count_nonzero(wb))
        full += int(stop - block == n_sets)
        block = stop
    return hits, wbs


def _run_bypass(state: CacheState, first: int, count: int) -> tuple[int, int]:
    """A long write to a cache that does not allocate on a write miss, in one step: no wave
    changes a tag, so a frame hits if and only if it holds a block of the range, in the wave
    of the block's lap, which marks it dirty (write-back) and stamps it. Returns (hits, wbs):
    a write that allocates nothing evicts nothing."""
    n_sets = state.n_sets
    tags = state.tags
    held = tags * n_sets + np.arange(n_sets, dtype=np.int64)[:, None]  # block of each frame
    hit = (tags >= 0) & (held >= first) & (held < first + count)
    if state.cache.write_back:
        state.dirty |= hit
    if state.cache.associativity > 1:  # the wave of lap p runs at clock + p + 1
        state.last_use[hit] = state.clock + 1 + tags[hit] - first // n_sets
    state.clock += (first + count - 1) // n_sets - first // n_sets + 1
    return int(np.count_nonzero(hit)), 0


def _run_short(
    state: CacheState,
    first: IntArray,
    count: IntArray,
    w: BoolArray,
    lo: int,
    hi: int,
    hits: IntArray,
    wbs: IntArray,
) -> None:
    """Accesses ``lo:hi`` (all short), in batches of at most ``_BATCH_BLOCKS`` blocks."""
    cum = np.cumsum(count[lo:hi])
    start = lo
    while start < hi:
        base = int(cum[start - lo - 1]) if start > lo else 0
        # Largest stop with at most _BATCH_BLOCKS blocks, and at least one access.
        stop = lo + int(np.searchsorted(cum, base + _BATCH_BLOCKS, side="right"))
        stop = max(stop, start + 1)
        _run_batch(
            state,
            first[start:stop],
            count[start:stop],
            w[start:stop],
            hits[start:stop],
            wbs[start:stop],
        )
        start = stop


def _run_batch(
    state: CacheState,
    first: IntArray,
    count: IntArray,
    w: BoolArray,
    hits_out: IntArray,
    wbs_out: IntArray,
) -> None:
    """Short accesses as waves of distinct sets; writes per-access hits and wbs into the outs."""
    total = int(count.sum())
    if total == 0:
        return
    offsets = np.cumsum(count) - count
    access = np.repeat(np.arange(count.size), count)
    blocks = first[access] + (np.arange(total) - offsets[access])
    sets = blocks % state.n_sets
    tags = blocks // state.n_sets
    writes = w[access]
    # Rank of each block among the blocks of the batch hitting the same set, in order.
    order = np.argsort(sets, kind="stable")
    sorted_sets = sets[order]
    new_group = np.empty(total, dtype=np.bool_)
    new_group[0] = True
    np.not_equal(sorted_sets[1:], sorted_sets[:-1], out=new_group[1:])
    pos = np.arange(total)
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    rank = np.empty(total, dtype=np.int64)
    rank[order] = pos - group_start
    hit = np.empty(total, dtype=np.bool_)
    wb = np.empty(total, dtype=np.bool_)
    if rank.max() == 0:
        hit[:], wb[:] = wave(state, sets, tags, writes)
    else:
        by_rank = np.argsort(rank, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(rank))))
        for r in range(bounds.size - 1):
            sel = by_rank[bounds[r] : bounds[r + 1]]
            hit[sel], wb[sel] = wave(state, sets[sel], tags[sel], writes[sel])
    nonempty = np.flatnonzero(count)
    hits_out[nonempty] = np.add.reduceat(hit, offsets[nonempty], dtype=np.int64)
    wbs_out[nonempty] = np.add.reduceat(wb, offsets[nonempty], dtype=np.int64)
