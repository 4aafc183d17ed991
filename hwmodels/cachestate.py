"""A simulated cache's state and the one vectorized step that updates it.

:class:`CacheState` holds a :class:`~hwmodels.cache.DramCache`'s tags, dirty bits and LRU
stamps, simulated in blocks; :func:`wave` applies one block access to each of several sets
at once (no set twice), the step :mod:`hwmodels.cachesim` walks whole accesses with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.cache import DramCache
from hwmodels.errors import HardwareModelError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Most block frames a state may hold (tags, dirty bits and, if associative, LRU stamps: at
#: most 17 bytes each); a bigger cache needs a bigger block.
MAX_FRAMES = 1 << 28


@dataclass(slots=True, eq=False)
class CacheState:
    """Tags, dirty bits and LRU stamps of a cache simulated with blocks of ``block_bytes``.

    ``tags[s, w]`` is the tag (block index // n_sets) held in way ``w`` of set ``s``, or -1 when
    the frame is empty; ``last_use`` orders the ways of a set for LRU replacement (-1: never
    used; empty when direct-mapped). Created by :func:`new_cache_state`, updated in place by
    :func:`simulate_accesses`.
    """

    cache: DramCache
    block_bytes: int
    n_sets: int
    tags: IntArray
    dirty: BoolArray
    last_use: IntArray
    clock: int = 0

    def copy(self) -> CacheState:
        """An independent snapshot of this state."""
        return CacheState(
            self.cache,
            self.block_bytes,
            self.n_sets,
            self.tags.copy(),
            self.dirty.copy(),
            self.last_use.copy(),
            self.clock,
        )


def new_cache_state(cache: DramCache, block_bytes: int | None = None) -> CacheState:
    """An empty (all frames invalid, clean) state of ``cache`` with blocks of ``block_bytes``.

    ``block_bytes`` defaults to the line size. Raises :class:`HardwareModelError` if the block
    is not a multiple of the line, does not divide the capacity of one way, or gives more than
    :data:`MAX_FRAMES` frames.
    """
    block = cache.line_bytes if block_bytes is None else block_bytes
    n_sets = cache.check_block_bytes(block)
    frames = n_sets * cache.associativity
    if frames > MAX_FRAMES:
        raise HardwareModelError(
            f"cache: block_bytes {block} gives {frames} frames for a "
            f"{cache.capacity_bytes}-byte cache (at most {MAX_FRAMES}); use a block of at least "
            f"{cache.capacity_bytes // MAX_FRAMES} bytes"
        )
    shape = (n_sets, cache.associativity)
    return CacheState(
        cache,
        block,
        n_sets,
        np.full(shape, -1, dtype=np.int64),
        np.zeros(shape, dtype=np.bool_),
        # A direct-mapped cache has no replacement choice, so it keeps no LRU stamps.
        np.full(shape if cache.associativity > 1 else (0, 0), -1, dtype=np.int64),
    )


def wave(
    state: CacheState,
    idx: slice | IntArray,
    tag: np.int64 | IntArray,
    write: np.bool_ | BoolArray,
) -> tuple[BoolArray, BoolArray]:
    """Apply one block access to each set in ``idx`` (no set twice). Returns (hit, writeback)."""
    cache = state.cache
    state.clock += 1
    if cache.associativity == 1:
        return _wave_direct(state, idx, tag, write)
    return _wave_assoc(state, idx, tag, write)


def _wave_direct(
    state: CacheState,
    idx: slice | IntArray,
    tag: np.int64 | IntArray,
    write: np.bool_ | BoolArray,
) -> tuple[BoolArray, BoolArray]:
    cache = state.cache
    tags = state.tags[:, 0]
    dirty = state.dirty[:, 0]
    current = tags[idx]
    hit: BoolArray = np.equal(current, tag)
    old_dirty = dirty[idx]
    # Every miss allocates, except a write miss without write-allocate. Empty frames are
    # never dirty, so "dirty victim" needs no validity check.
    allocate = ~hit if cache.write_allocate else ~hit & ~write
    wb: BoolArray = old_dirty & allocate
    if cache.write_back:
        dirty[idx] = (old_dirty & ~allocate) | (write & (hit | allocate))
    if cache.write_allocate:
        tags[idx] = tag  # hits already hold the tag, misses take it
    else:
        tags[idx] = np.where(allocate, tag, current)
    return hit, wb


def _wave_assoc(
    state: CacheState,
    idx: slice | IntArray,
    tag: np.int64 | IntArray,
    write: np.bool_ | BoolArray,
) -> tuple[BoolArray, BoolArray]:
    cache = state.cache
    rows = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
    tag_col = np.broadcast_to(tag, rows.shape)
    write_col = np.broadcast_to(write, rows.shape)
    match = state.tags[rows] == tag_col[:, None]
    hit: BoolArray = match.any(axis=1)
    # Empty frames carry last_use -1, so the LRU choice takes them first.
    way = np.where(hit, match.argmax(axis=1), state.last_use[rows].argmin(axis=1))
    allocate = ~hit if cache.write_allocate else ~hit & ~write_col
    old_dirty = state.dirty[rows, way]
    wb: BoolArray = old_dirty & allocate
    touched = hit | allocate
    if cache.write_back:
        state.dirty[rows, way] = (old_dirty & ~allocate) | (write_col & touched)
    state.tags[rows[allocate], way[allocate]] = tag_col[allocate]
    state.last_use[rows[touched], way[touched]] = state.clock
    return hit, wb


__all__ = ["MAX_FRAMES", "CacheState", "new_cache_state", "wave"]
