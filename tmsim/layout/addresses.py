"""Static memory planning: give every buffer an address from the live ranges.

Buffers whose live ranges (inclusive kernel intervals) intersect must not overlap in address;
buffers that are never live at the same time may share addresses. The pool is the smallest
contiguous region that holds every buffer at its offset. Its size is at least the peak of live
bytes; the excess is fragmentation.

Offline strategies:

- ``first-fit``: largest first (ties by start), each at the lowest aligned offset where it fits;
- ``best-fit``: largest first, each in the smallest gap between conflicting buffers that fits
  it (lowest offset on a tie), else on top of them;
- ``first-fit-start``: in order of first use (ties largest first), lowest offset, as a
  running allocator would place them;
- ``smallest``: all three, keeping the smallest pool (first listed wins a tie);
- ``packed``: the smallest of the three, then the exact search of :mod:`tmsim.layout.packing`
  for a smaller pool: first one at the peak of live bytes (the lower bound), then by
  bisection, within a limit on search nodes. When it visits every node it needs, the pool is
  the least possible; otherwise it is the smallest found, never larger than ``smallest``'s.

:func:`fit_memory` answers the question a planner asks (does a plan lay out in its limit?):
the three strategies in turn, and when none fits, the search for a layout in the limit.

Each heuristic placement looks among the buffers already placed (:mod:`tmsim.layout.arena`):
O(n^2) element work in all where buffers live long, 0.2 to 0.3 s for the 5,042 buffers of
DenseNet-264 b32 on the RTX 2080 Ti. A search
node costs O(n) element work (0.2 to 0.3 ms at 1,000 to 5,000 buffers on a 2-core machine);
the node limit, not wall-clock time, bounds the search, so that results do not depend on the
machine's load.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.layout.arena import align, arena_for
from tmsim.layout.packing import fit, smallest

IntArray = npt.NDArray[np.int64]
DEFAULT_ALIGNMENT_BYTES = 64
#: Search nodes :attr:`Strategy.PACKED` and :func:`fit_memory` may spend by default. A layout
#: in a limit is usually found in about as many nodes as there are buffers; the plans of the
#: conventional and GPU sets that the heuristics did not lay out took up to 11,899 (ResNet-200
#: b512 at 1:1, 3,009 buffers). The whole limit takes some 6 to 10 s at 1,000 to 5,000 buffers.
DEFAULT_NODE_LIMIT = 30_000
#: :func:`fit_memory`'s default budget: :data:`NODES_PER_BUFFER` nodes per buffer, at least
#: :data:`MIN_NODES` and at most :data:`DEFAULT_NODE_LIMIT`. A layout the search finds takes
#: about as many nodes as there are buffers, up to about five times as many on large plans (the
#: sets above; Inception v4 b2 on the RTX 2080 Ti at 3/4 of its peak: 8,647 for 1,729
#: buffers) and ten on small ones (VGG19 b2 there: 2,121 for 229), while one it does not find
#: spends the whole budget for nothing (two plans of Inception v4 b16 at 4:1, 1,647 and 1,981
#: buffers, found none in 200,000 nodes; 30,000 cost them 6 to 9 s each).
NODES_PER_BUFFER = 5
MIN_NODES = 10_000
#: Most pools :func:`fit_memory` tries between the capacity and the heuristics' smallest pool
#: when no layout fits the capacity, each one descent of the search (as many nodes as buffers):
#: on VGG19 b8's asynchronous plan at 4:1 on Optane (250 buffers, 89 bytes below its 444 MB)
#: first fit overflowed by 20.3 MB and the search laid it out 5.1 MB over.
PROBES = 3


def default_node_limit(buffers: int) -> int:
    """:func:`fit_memory`'s search budget for ``buffers`` buffers by default."""
    return min(DEFAULT_NODE_LIMIT, max(MIN_NODES, NODES_PER_BUFFER * buffers))


class Strategy(StrEnum):
    """How a buffer's offset is chosen among the places it fits."""

    FIRST_FIT = "first-fit"
    BEST_FIT = "best-fit"
    FIRST_FIT_START = "first-fit-start"
    SMALLEST = "smallest"
    PACKED = "packed"


@dataclass(frozen=True)
class Layout:
    """Offsets of buffers in one pool.

    ``offsets_bytes[i]`` is the offset of buffer ``i`` (in the order given to
    :func:`plan_memory`) and ``aligned_bytes[i]`` its size rounded up to the alignment;
    ``pool_bytes`` the pool size; ``peak_live_bytes`` the maximum over
    kernels of the bytes of buffers live there (aligned sizes), a lower bound on the pool.
    """

    offsets_bytes: IntArray
    aligned_bytes: IntArray
    pool_bytes: int
    peak_live_bytes: int
    strategy: Strategy

    @property
    def ends_bytes(self) -> IntArray:
        """End address (exclusive) of every buffer."""
        return self.offsets_bytes + self.aligned_bytes

    @property
    def fragmentation(self) -> float:
        """Share of the pool that is never needed at the peak: ``1 - peak / pool`` (0 if empty)."""
        return 1.0 - self.peak_live_bytes / self.pool_bytes if self.pool_bytes else 0.0


#: The strategies :attr:`Strategy.SMALLEST` tries, in order (the first of the smallest wins).
SMALLEST_OF = (Strategy.FIRST_FIT, Strategy.BEST_FIT, Strategy.FIRST_FIT_START)


def plan_memory(
    sizes_bytes: npt.ArrayLike,
    first: npt.ArrayLike,
    last: npt.ArrayLike,
    strategy: Strategy | str = Strategy.FIRST_FIT,
    alignment_bytes: int = DEFAULT_ALIGNMENT_BYTES,
    node_limit: int = DEFAULT_NODE_LIMIT,
) -> Layout:
    """Lay out buffers of ``sizes_bytes`` live over kernels ``[first, last]`` (inclusive).

    Every offset is a multiple of ``alignment_bytes`` and every size is rounded up to it.
    ``node_limit`` bounds the search of :attr:`Strategy.PACKED` (other strategies ignore it).
    Raises :class:`~tmsim.errors.TmsimError` for arrays of different lengths, a non-positive
    size or alignment, ``first > last``, a negative node limit, or an unknown strategy.
    """
    try:
        strat = Strategy(strategy)
    except ValueError:
        known = [s.value for s in Strategy]
        raise TmsimError(f"unknown memory-planning strategy {strategy!r}; known: {known}") from None
    aligned, lo, hi = _checked(sizes_bytes, first, last, alignment_bytes, node_limit)
    if strat in (Strategy.SMALLEST, Strategy.PACKED):
        tries = [_layout(aligned, lo, hi, s, alignment_bytes) for s in SMALLEST_OF]
        best = min(tries, key=lambda layout: layout.pool_bytes)
        if strat is Strategy.SMALLEST or best.pool_bytes == best.peak_live_bytes:
            return best
        found = smallest(aligned, lo, hi, best.offsets_bytes, best.peak_live_bytes, node_limit)
        if found.pool_bytes == best.pool_bytes:
            return best
        return Layout(found.offsets_bytes, aligned, found.pool_bytes, best.peak_live_bytes, strat)
    return _layout(aligned, lo, hi, strat, alignment_bytes)


def fit_memory(
    sizes_bytes: npt.ArrayLike,
    first: npt.ArrayLike,
    last: npt.ArrayLike,
    capacity_bytes: int,
    alignment_bytes: int = DEFAULT_ALIGNMENT_BYTES,
    node_limit: int | None = None,
) -> Layout:
    """A layout in ``capacity_bytes`` if one is found, else the smallest of the heuristics'.

    The strategies of :data:`SMALLEST_OF` are tried in turn and the first whose pool fits is
    returned. If none fits but the peak of live bytes does, the search of
    :func:`tmsim.layout.packing.fit` looks for a layout in ``capacity_bytes`` within
    ``node_limit`` nodes and what it finds is returned, as :attr:`Strategy.PACKED`. When it
    finds none, pools above the capacity are tried, halving the heuristics' overflow while one
    descent of the search lays the buffers out (at most :data:`PROBES`, each as many nodes as
    buffers), and the smallest layout found is returned. Otherwise (more bytes live at once
    than the capacity holds, so that no layout fits) the search looks for a layout in that
    peak, and the smallest of the heuristics' layouts (the first on a tie) is returned where
    it finds none.
    ``node_limit=0`` keeps the heuristics alone; None gives :func:`default_node_limit` of the
    buffers. Raises as :func:`plan_memory`.
    """
    if node_limit is None:
        node_limit = default_node_limit(int(np.size(sizes_bytes)))
    aligned, lo, hi = _checked(sizes_bytes, first, last, alignment_bytes, node_limit)
    best: Layout | None = None
    for strategy in SMALLEST_OF:
        tried = _layout(aligned, lo, hi, strategy, alignment_bytes)
        if tried.pool_bytes <= capacity_bytes:
            return tried
        if best is None or tried.pool_bytes < best.pool_bytes:
            best = tried
    assert best is not None  # SMALLEST_OF is not empty
    if node_limit > 0 and best.peak_live_bytes <= capacity_bytes:
        found = fit(aligned, lo, hi, capacity_bytes, node_limit)
        if found.offsets_bytes is not None:
            return _packed(found.offsets_bytes, aligned, best.peak_live_bytes)
        # none in the capacity: a pool between it and the heuristics' overflows by less, and
        # what overflows is what a caller takes off its limits (one descent per try, halving
        # the overflow while the search finds a layout)
        over = best.pool_bytes - capacity_bytes
        for _ in range(PROBES):
            over //= 2
            probe = fit(aligned, lo, hi, capacity_bytes + over, aligned.size)
            if probe.offsets_bytes is None or over == 0:
                break
            best = _packed(probe.offsets_bytes, aligned, best.peak_live_bytes)
    elif node_limit > 0 and best.pool_bytes > best.peak_live_bytes:
        # more bytes live at once than the capacity: a layout at that peak overflows by them
        # alone, where the heuristics' adds their fragmentation (a plan solved to the limit
        # within the solver's tolerance: GPU VGG19 b128 sync-rc at 0.6 of its peak held 5 kB
        # over it, and first fit 331 MB)
        found = fit(aligned, lo, hi, best.peak_live_bytes, node_limit)
        if found.offsets_bytes is not None:
            return _packed(found.offsets_bytes, aligned, best.peak_live_bytes)
    return best


def _packed(offsets: IntArray, aligned: IntArray, peak_live_bytes: int) -> Layout:
    """The layout the exact search found (``offsets`` of buffers of ``aligned`` bytes)."""
    pool = int((offsets + aligned).max())
    return Layout(offsets, aligned, pool, peak_live_bytes, Strategy.PACKED)


def fit_below(
    sizes_bytes: npt.ArrayLike, first: npt.ArrayLike, last: npt.ArrayLike, capacity_bytes: int
) -> IntArray:
    """Offsets that first fit gives the buffers (byte-exact, largest first, ties by first
    kernel, as :attr:`Strategy.FIRST_FIT`), leaving out every buffer that would end above
    ``capacity_bytes`` (offset -1): the buffers it keeps lay out below the capacity by
    construction, and the ones left out leave their room to the rest. Raises as
    :func:`plan_memory`."""
    aligned, lo, hi = _checked(sizes_bytes, first, last, 1, 0)
    n = aligned.size
    offsets = np.full(n, -1, dtype=np.int64)
    arena = arena_for(lo, hi)
    for i in np.lexsort((np.arange(n), lo, -aligned)).tolist():
        need, a, b = int(aligned[i]), int(lo[i]), int(hi[i])
        at = arena.offset(need, a, b, False, 1)
        if at + need <= capacity_bytes:
            offsets[i] = at
            arena.add(at, need, a, b)
    return offsets


def _checked(
    sizes_bytes: npt.ArrayLike,
    first: npt.ArrayLike,
    last: npt.ArrayLike,
    alignment_bytes: int,
    node_limit: int,
) -> tuple[IntArray, IntArray, IntArray]:
    """Aligned sizes, first and last kernels as int64 arrays; raises as :func:`plan_memory`."""
    size = np.asarray(sizes_bytes, dtype=np.int64)
    lo = np.asarray(first, dtype=np.int64)
    hi = np.asarray(last, dtype=np.int64)
    if not (size.shape == lo.shape == hi.shape) or size.ndim != 1:
        raise TmsimError("sizes, first and last must be 1-D arrays of one length")
    if alignment_bytes <= 0:
        raise TmsimError(f"alignment_bytes must be positive, got {alignment_bytes}")
    if node_limit < 0:
        raise TmsimError(f"node_limit must be >= 0, got {node_limit}")
    if np.any(size <= 0):
        raise TmsimError(f"buffer {int(np.argmax(size <= 0))}: size must be positive")
    if np.any(lo > hi):
        raise TmsimError(f"buffer {int(np.argmax(lo > hi))}: first kernel after last kernel")
    return align(size, alignment_bytes), lo, hi


def _layout(
    aligned: IntArray, lo: IntArray, hi: IntArray, strat: Strategy, alignment: int
) -> Layout:
    n = aligned.size
    offsets = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return Layout(offsets, aligned, 0, 0, strat)
    if strat is Strategy.FIRST_FIT_START:
        order = np.lexsort((np.arange(n), -aligned, lo))
    else:
        order = np.lexsort((np.arange(n), lo, -aligned))
    best_fit = strat is Strategy.BEST_FIT
    arena = arena_for(lo, hi)
    for i in order.tolist():
        need, a, b = int(aligned[i]), int(lo[i]), int(hi[i])
        at = arena.offset(need, a, b, best_fit, alignment)
        offsets[i] = at
        arena.add(at, need, a, b)
    pool = int((offsets + aligned).max())
    return Layout(offsets, aligned, pool, _peak(aligned, lo, hi), strat)


def _peak(sizes: IntArray, lo: IntArray, hi: IntArray) -> int:
    return int(occupancy(lo, hi, sizes, int(hi.max()) + 1).max())


def check_layout(
    layout: Layout, sizes_bytes: npt.ArrayLike, first: npt.ArrayLike, last: npt.ArrayLike
) -> None:
    """Raise :class:`TmsimError` naming two buffers that are live together and overlap.

    Independent of how the layout was made: a sweep over kernels, comparing the address
    ranges of the buffers live at each, sorted by offset.
    """
    size = np.asarray(sizes_bytes, dtype=np.int64)
    lo = np.asarray(first, dtype=np.int64)
    hi = np.asarray(last, dtype=np.int64)
    off = layout.offsets_bytes
    if np.any(off < 0) or np.any(off + size > layout.pool_bytes):
        raise TmsimError("a buffer lies outside the pool")
    for k in np.unique(lo):
        live = np.flatnonzero((lo <= k) & (hi >= k))
        by_offset = live[np.argsort(off[live], kind="stable")]
        reach = np.maximum.accumulate(off[by_offset] + size[by_offset])
        clash = np.flatnonzero(off[by_offset][1:] < reach[:-1])
        if clash.size:
            a, b = by_offset[clash[0]], by_offset[clash[0] + 1]
            raise TmsimError(f"buffers {a} and {b} overlap in address at kernel {k}")
