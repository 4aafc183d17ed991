"""Placing one buffer among those already placed: the step every heuristic layout repeats.

A buffer of ``need`` bytes live from kernel ``lo`` to ``hi`` may not overlap in address any
placed buffer live at one of those kernels. Among the free gaps between those buffers (in
order of address) it takes the lowest that holds it (first fit) or the smallest (best fit, the
lowest on a tie), else the place on top of them all. Two arenas give the same offsets:

- :class:`ScanArena` keeps the placed buffers in numpy arrays by address and masks those live
  with the new one: O(n) element work per buffer, but a fixed cost of some 30 us in numpy
  calls (0.2 s for the 8,749 buffers of the GPU DenseNet-264 b128 offload plan);
- :class:`KernelArena` keeps, per kernel, the address ranges live there in a sorted Python
  list: a placement reads the lists of its own kernels and an insertion writes them, so its
  cost is the buffers live with it and its span in kernels. It is the faster one where
  buffers live a few kernels each among few others (that offload plan: 0.04 s).

:func:`arena_for` picks one from the buffers' live ranges; either gives the same layout.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tmsim.intervals import occupancy

IntArray = npt.NDArray[np.int64]

#: Above every offset: the end of the gap on top of all placed buffers.
_TOP = np.iinfo(np.int64).max
#: :func:`arena_for` keeps lists per kernel while the buffers span at most this many kernels
#: on average (the insertions) and at most :data:`MOST_LIVE` are live at any one kernel (the
#: Python scan of a placement).
MEAN_SPAN = 8
MOST_LIVE = 256


def align(values: IntArray, alignment: int) -> IntArray:
    """``values`` rounded up to multiples of ``alignment``."""
    return -(-values // alignment) * alignment


class Arena(Protocol):
    """Placed buffers, and where the next one goes."""

    def offset(self, need: int, lo: int, hi: int, best_fit: bool, alignment: int) -> int:
        """Offset for ``need`` bytes live from kernel ``lo`` to ``hi``: the lowest aligned gap
        between placed buffers live at some of those kernels that holds it (the smallest such
        gap with ``best_fit``, the lowest on a tie), else on top of them all."""
        ...

    def add(self, offset: int, size: int, lo: int, hi: int) -> None:
        """Place ``size`` bytes at ``offset``, live from kernel ``lo`` to ``hi``."""
        ...


class ScanArena:
    """The placed buffers in order of offset (address ranges and live kernel ranges), so that
    a placement scans the gaps between those live with it without sorting them again."""

    def __init__(self, capacity: int) -> None:
        self._cols = np.zeros((4, capacity), dtype=np.int64)  # start, end, first, last
        self._n = 0

    def offset(self, need: int, lo: int, hi: int, best_fit: bool, alignment: int) -> int:
        """As :meth:`Arena.offset`."""
        start, end, first, last = self._cols[:, : self._n]
        live = (first <= hi) & (last >= lo)
        return _scan_gaps(start[live], end[live], need, best_fit, alignment)

    def add(self, offset: int, size: int, lo: int, hi: int) -> None:
        """As :meth:`Arena.add`; at most ``capacity`` buffers in all."""
        n = self._n
        at = int(np.searchsorted(self._cols[0, :n], offset, side="right"))
        self._cols[:, at + 1 : n + 1] = self._cols[:, at:n]
        self._cols[:, at] = (offset, offset + size, lo, hi)
        self._n = n + 1


def _scan_gaps(starts: IntArray, ends: IntArray, need: int, best_fit: bool, alignment: int) -> int:
    """:meth:`Arena.offset` among occupied ``[start, end)`` ranges given in order of start.
    The order of ranges with the same start does not matter: no gap lies between them."""
    if starts.size == 0:
        return 0
    # Free gaps lie between the running maximum end of earlier ranges and the next start.
    ends_so_far = np.maximum.accumulate(ends)
    gap_lo = np.concatenate(([0], ends_so_far))
    gap_hi = np.concatenate((starts, [_TOP]))
    if alignment != 1:
        gap_lo = align(gap_lo, alignment)
    fits = gap_hi - gap_lo >= need
    candidates = np.flatnonzero(fits[:-1])  # gaps below the top of the occupied ranges
    if candidates.size == 0:
        return int(gap_lo[-1])
    if not best_fit:
        return int(gap_lo[candidates[0]])
    room = (gap_hi - gap_lo)[candidates]
    return int(gap_lo[candidates[np.argmin(room)]])


class KernelArena:
    """Per kernel, the ``(start, end)`` address ranges of the placed buffers live there, in
    order: a placement merges the lists of its kernels (a buffer met twice bounds no gap of
    its own) and scans them in Python."""

    def __init__(self, kernels: int) -> None:
        self._at: list[list[tuple[int, int]]] = [[] for _ in range(kernels)]

    def offset(self, need: int, lo: int, hi: int, best_fit: bool, alignment: int) -> int:
        """As :meth:`Arena.offset`; kernels below the ``kernels`` given."""
        ranges = self._at[lo] if lo == hi else heapq.merge(*self._at[lo : hi + 1])
        top = 0  # the highest end so far
        foot = 0  # the foot of the next gap: ``top`` aligned
        best = -1
        best_room = 0
        for start, end in ranges:
            room = start - foot
            if room >= need:
                if not best_fit:
                    return foot
                if best < 0 or room < best_room:
                    best, best_room = foot, room
            if end > top:
                top = end
                foot = -(-end // alignment) * alignment
        return best if best >= 0 else foot

    def add(self, offset: int, size: int, lo: int, hi: int) -> None:
        """As :meth:`Arena.add`."""
        span = (offset, offset + size)
        for k in range(lo, hi + 1):
            bisect.insort(self._at[k], span)


def arena_for(lo: IntArray, hi: IntArray) -> Arena:
    """An empty arena for buffers live over kernels ``[lo, hi]``: per kernel where they live
    a few kernels each among few others (:data:`MEAN_SPAN`, :data:`MOST_LIVE`), else the scan
    of all placed buffers. Either places every buffer at the same offset."""
    n = int(lo.size)
    if n == 0 or int(lo.min()) < 0:
        return ScanArena(n)
    kernels = int(hi.max()) + 1
    spans = int((hi - lo).sum()) + n
    if spans > MEAN_SPAN * n or kernels > MEAN_SPAN * n:  # long spans, or kernels without
        return ScanArena(n)
    live = occupancy(lo, hi, np.ones(n, dtype=np.int64), kernels)
    if int(live.max()) > MOST_LIVE:
        return ScanArena(n)
    return KernelArena(kernels)


__all__ = ["Arena", "KernelArena", "ScanArena", "align", "arena_for"]
