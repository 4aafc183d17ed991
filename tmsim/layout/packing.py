"""Exact placement of buffers under a capacity: a branch and bound with a work limit.

The decision problem: give buffers of ``sizes`` live over kernels ``[first, last]`` offsets so
that buffers live together never overlap in address and every buffer ends at or below a
capacity. It is dynamic storage allocation, NP-hard (Garey and Johnson 1979, problem SR2),
and what MiniMalloc solves exactly (M. D. Moffitt, "MiniMalloc: A Lightweight Memory
Allocator for Hardware-Accelerated Machine Learning", ASPLOS 2023). This search follows that
paper's ideas, written here over numpy arrays, on time cut into sections
(:mod:`tmsim.layout.sections`):

- *canonical solutions*: any layout can be pushed down until each buffer rests at 0 or on a
  buffer live with it, and then read in order of (offset, preorder rank). So buffers are
  placed in that order, each at its *minimum offset* (the highest top among the placed
  buffers live with it), and never before the (offset, rank) placed last;
- *dominance*: no buffer is placed at or above the lowest top that an unplaced buffer would
  have at its minimum offset: that buffer could always drop into the space below;
- *section inference*: the buffers still to place in a section stack above its floor (the
  highest top placed there, the offset placed last, and the lowest minimum offset of those
  buffers, below which nothing can fill it), so the floor plus their bytes must fit;
- *dynamic decomposition*: when no unplaced buffer spans a section boundary any more, the two
  sides no longer constrain each other and are laid out one after the other; a side once laid
  out is not revisited when a later side fails.

Buffers of equal minimum offset are tried in a static preorder: :data:`PREORDERS` names six
in the paper's letters (``T``: the most bytes live in a section the buffer spans, ``W``: its
width in kernels, ``A``: its area, bytes times kernels; largest first, ties by index), which
:func:`fit` runs in turn under node limits that double, as MiniMalloc does.

Work is counted in search nodes (placements tried), never in seconds, so a result does not
depend on the machine or its load. A search that visits its whole tree without finding a
layout proves that none fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmsim.layout.sections import cover_min, floor_log2, sections, span_max, span_sums

IntArray = npt.NDArray[np.int64]

#: Static preorders tried in turn, in the letters of the MiniMalloc paper: its three (``TWA``,
#: ``WAT``, ``TAW``) and the other orders of the letters. No one order lays out every plan of
#: the conventional and GPU sets that the heuristics do not: at ResNet-200 b512 on Optane at
#: 1:1 only ``TWA`` found the sync plan's layout and only ``ATW`` and ``AWT`` the static
#: plan's; for Inception v4 b256's async plan on the RTX 2080 Ti only ``WTA`` did.
PREORDERS = ("TWA", "ATW", "WTA", "WAT", "TAW", "AWT")


@dataclass(frozen=True)
class Fit:
    """What a search under a capacity found.

    ``offsets_bytes`` is a layout whose buffers all end at or below the capacity, or None;
    ``exhausted`` is True when the search visited its whole tree, so that None proves that no
    layout fits; ``nodes`` counts the placements tried.
    """

    offsets_bytes: IntArray | None
    exhausted: bool
    nodes: int


@dataclass(frozen=True)
class _Part:
    """Unplaced buffers ``bufs`` over sections ``[s0, s1)`` that nothing else constrains, the
    (offset, rank) placed before them, and how many choice points there were when they were
    first worked on (None: not yet)."""

    bufs: IntArray
    s0: int
    s1: int
    last_offset: int
    last_rank: int
    height: int | None = None


_Goals = tuple[_Part, "_Goals"] | None


@dataclass
class _Choice:
    """A choice point: the trail length to undo to, the goals then, the buffers to try."""

    mark: int
    goals: tuple[_Part, _Goals]
    candidates: IntArray
    tried: int = 0


class _Search:
    """One depth-first search under ``capacity`` with one preorder; its state is restored on
    backtracking from a trail of the array slices each step overwrote."""

    def __init__(
        self, size: IntArray, lo: IntArray, hi: IntArray, capacity: int, rank: IntArray
    ) -> None:
        self.size, self.capacity, self.rank = size, capacity, rank
        self.sa, self.sb, k = sections(lo, hi)
        n = size.size
        self.offset = np.full(n, -1, dtype=np.int64)
        self.min_offset = np.zeros(n, dtype=np.int64)
        self.floor = np.zeros(k, dtype=np.int64)
        self.remaining = span_sums(self.sa, self.sb, size, k)
        # unplaced buffers spanning the boundary between sections j and j + 1
        self.cuts = span_sums(self.sa, self.sb - 1, np.ones(n, dtype=np.int64), max(k - 1, 0))
        # the lowest minimum offset of the unplaced buffers in each section
        self.log2 = floor_log2(np.arange(1, k + 2, dtype=np.int64))  # of 1 .. k + 1
        self.log2 = np.concatenate(([0], self.log2))  # indexed by the length itself
        self.lowest = cover_min(self.sa, self.sb, self.min_offset, k, self.log2)
        self.after: IntArray = np.zeros(0, dtype=np.int64)
        self.trail: list[tuple[IntArray, slice | IntArray | int, IntArray | int]] = []

    def _set(self, arr: IntArray, idx: slice | IntArray | int, value: IntArray | int) -> None:
        old = arr[idx]
        self.trail.append((arr, idx, old.copy() if isinstance(old, np.ndarray) else old))
        arr[idx] = value

    def _undo(self, mark: int) -> None:
        while len(self.trail) > mark:
            arr, idx, old = self.trail.pop()
            arr[idx] = old

    def _unplaced(self, part: _Part) -> IntArray:
        out: IntArray = part.bufs[self.offset[part.bufs] < 0]
        return out

    def _candidates(self, part: _Part) -> IntArray:
        """Unplaced buffers of ``part`` that may come next, in the order to try them."""
        u = self._unplaced(part)
        mo, r = self.min_offset[u], self.rank[u]
        top = mo + self.size[u]
        after = (mo > part.last_offset) | ((mo == part.last_offset) & (r > part.last_rank))
        ok = after & (mo < top.min()) & (top <= self.capacity)
        out: IntArray = u[ok][np.lexsort((r[ok], mo[ok]))]
        return out

    def _place(self, b: int, part: _Part) -> bool:
        """Place ``b`` at its minimum offset; False when the inference then fails."""
        o = int(self.min_offset[b])
        top = o + int(self.size[b])
        h0, h1 = int(self.sa[b]), int(self.sb[b])
        self._set(self.offset, b, o)
        self._set(self.floor, slice(h0, h1), top)
        self._set(self.remaining, slice(h0, h1), self.remaining[h0:h1] - self.size[b])
        self._set(self.cuts, slice(h0, h1 - 1), self.cuts[h0 : h1 - 1] - 1)
        u = self._unplaced(part)
        self.after = u  # what ``_split`` works on
        sa, sb = self.sa[u], self.sb[u]
        near = (sa < h1) & (sb > h0)
        raised = near & (self.min_offset[u] < top)
        if raised.any():
            self._set(self.min_offset, u[raised], top)
            h0, h1 = min(h0, int(sa[raised].min())), max(h1, int(sb[raised].max()))
            near = (sa < h1) & (sb > h0)
        # the lowest minimum offsets change only where b or a raised buffer lies
        start, stop = np.maximum(sa[near], h0) - h0, np.minimum(sb[near], h1) - h0
        lowest = cover_min(start, stop, self.min_offset[u[near]], h1 - h0, self.log2)
        self._set(self.lowest, slice(h0, h1), lowest)
        sec = slice(part.s0, part.s1)
        rem = self.remaining[sec]
        need = np.maximum(np.maximum(self.floor[sec], self.lowest[sec]), o) + rem
        return not bool(((rem > 0) & (need > self.capacity)).any())

    def _split(self, part: _Part, b: int, rest: _Goals) -> _Goals:
        """The goals once ``b`` is placed: ``part``'s unplaced buffers, cut into independent
        parts where no unplaced buffer spans a boundary any more (tightest part first)."""
        u = self.after  # ``part``'s unplaced buffers once ``b`` is placed
        last = (int(self.offset[b]), int(self.rank[b]))
        # ``part`` stays behind its pieces: when it comes up again they are laid out, and its
        # own choice points are dropped with theirs
        goals: _Goals = (_Part(u, part.s0, part.s1, *last, part.height), rest)
        lo, hi = int(self.sa[b]), int(self.sb[b]) - 1
        cut_at = np.flatnonzero(self.cuts[lo:hi] == 0) + lo + 1
        if u.size == 0 or cut_at.size == 0:
            return goals
        return self._pieces(u, part.s0, part.s1, cut_at, last, goals)

    def _pieces(
        self,
        u: IntArray,
        s0: int,
        s1: int,
        cut_at: IntArray,
        last: tuple[int, int],
        goals: _Goals,
    ) -> _Goals:
        """``goals`` with the parts of ``u`` between the cuts ``cut_at`` of ``[s0, s1)`` in
        front, the one with the least room first."""
        which = np.searchsorted(cut_at, self.sa[u], side="right")
        bounds = np.concatenate(([s0], cut_at, [s1]))
        parts: list[tuple[int, int, _Part]] = []
        for w in np.unique(which):
            a, z = int(bounds[w]), int(bounds[w + 1])
            rem = self.remaining[a:z]
            room = self.capacity - int((np.maximum(self.floor[a:z], last[0]) + rem).max())
            parts.append((room, a, _Part(u[which == w], a, z, *last)))
        for _, _, p in sorted(parts, key=lambda item: item[:2], reverse=True):
            goals = (p, goals)
        return goals

    def run(self, node_limit: int) -> Fit:
        """Search for at most ``node_limit`` nodes."""
        n = self.size.size
        if n == 0 or int(self.remaining.max()) > self.capacity:
            return Fit(self.offset.copy() if n == 0 else None, True, 0)
        everything = np.arange(n, dtype=np.int64)
        cut_at = np.flatnonzero(self.cuts == 0) + 1
        goals = self._pieces(everything, 0, self.floor.size, cut_at, (-1, -1), None)
        choices: list[_Choice] = []
        nodes = 0
        while True:
            while goals is not None:
                part, rest = goals
                if part.height is None:
                    part = _Part(part.bufs, part.s0, part.s1, *_last(part), len(choices))
                    goals = (part, rest)
                assert part.height is not None
                if not (self.offset[part.bufs] < 0).any():
                    del choices[part.height :]  # laid out: a later failure is not its doing
                    goals = rest
                    continue
                choices.append(_Choice(len(self.trail), goals, self._candidates(part)))
                break
            else:
                return Fit(self.offset.copy(), False, nodes)
            while True:
                if not choices:
                    return Fit(None, True, nodes)
                choice = choices[-1]
                self._undo(choice.mark)
                if choice.tried >= choice.candidates.size:
                    choices.pop()
                    continue
                if nodes >= node_limit:
                    return Fit(None, False, nodes)
                b = int(choice.candidates[choice.tried])
                choice.tried += 1
                nodes += 1
                part, rest = choice.goals
                if self._place(b, part):
                    goals = self._split(part, b, rest)
                    break


def _last(part: _Part) -> tuple[int, int]:
    return part.last_offset, part.last_rank


def preorder_ranks(size: IntArray, lo: IntArray, hi: IntArray, preorder: str) -> IntArray:
    """Rank of every buffer in the static ``preorder``: letters ``T`` (the most bytes live in
    a section the buffer spans), ``W`` (width in kernels), ``A`` (bytes times kernels), the
    first letter deciding first; largest first, ties by index. Raises ValueError for another
    letter."""
    if set(preorder) - set("TWA"):
        raise ValueError(f"unknown preorder letter in {preorder!r}; known: T, W, A")
    sa, sb, k = sections(lo, hi)
    width = hi - lo + 1
    columns = {"W": width, "A": size * width}
    if "T" in preorder:
        columns["T"] = span_max(span_sums(sa, sb, size, k), sa, sb)
    keys = [np.arange(size.size)] + [-columns[c] for c in reversed(preorder)]
    rank = np.empty(size.size, dtype=np.int64)
    rank[np.lexsort(keys)] = np.arange(size.size)
    return rank


def fit(
    sizes_bytes: npt.ArrayLike,
    first: npt.ArrayLike,
    last: npt.ArrayLike,
    capacity_bytes: int,
    node_limit: int,
) -> Fit:
    """A layout of the buffers in ``capacity_bytes``, searched within ``node_limit`` nodes.

    The preorders of :data:`PREORDERS` are searched in turn, each under a node limit that
    starts at twice the number of buffers and doubles every round, until one finds a layout
    or visits its whole tree (which proves that none fits), or the nodes of all turns reach
    ``node_limit``. Offsets are sums of sizes, so they are multiples of any alignment all
    sizes are multiples of. Arguments must be valid (1-D, one length, positive sizes,
    ``first <= last``), as :func:`tmsim.layout.addresses.plan_memory` checks.
    """
    size = np.asarray(sizes_bytes, dtype=np.int64)
    lo = np.asarray(first, dtype=np.int64)
    hi = np.asarray(last, dtype=np.int64)
    if size.size == 0:
        return Fit(np.zeros(0, dtype=np.int64), True, 0)
    ranks = [preorder_ranks(size, lo, hi, p) for p in PREORDERS]
    spent, turn_limit = 0, 2 * size.size
    while spent < node_limit:
        for rank in ranks:
            allowed = min(turn_limit, node_limit - spent)
            if allowed <= 0:
                break
            result = _Search(size, lo, hi, capacity_bytes, rank).run(allowed)
            spent += result.nodes
            if result.offsets_bytes is not None or result.exhausted:
                return Fit(result.offsets_bytes, result.exhausted, spent)
        turn_limit *= 2
    return Fit(None, False, spent)


@dataclass(frozen=True)
class Smallest:
    """The smallest layout a search found: its offsets and pool, whether the pool is proven
    the least possible, and the nodes spent."""

    offsets_bytes: IntArray
    pool_bytes: int
    optimal: bool
    nodes: int


def smallest(
    sizes_bytes: IntArray,
    first: IntArray,
    last: IntArray,
    start_offsets_bytes: IntArray,
    bound_bytes: int,
    node_limit: int,
) -> Smallest:
    """The smallest pool found from a valid layout ``start_offsets_bytes`` and a lower bound
    ``bound_bytes`` on the pool (the peak of live bytes), within ``node_limit`` nodes.

    :func:`fit` is asked for a layout in the bound first, then in the middle of what is left
    between what is known not to fit and the best pool found, each time with half the nodes
    left (at least one); it stops when the two meet (the pool is then proven optimal) or the
    nodes run out.
    """
    best = np.asarray(start_offsets_bytes, dtype=np.int64)
    size = np.asarray(sizes_bytes, dtype=np.int64)
    pool = int((best + size).max()) if size.size else 0
    low, proven, spent, tries = bound_bytes, True, 0, 0
    while low < pool and spent < node_limit:
        capacity = low if tries == 0 else (low + pool - 1) // 2
        tries += 1
        result = fit(size, first, last, capacity, max((node_limit - spent) // 2, 1))
        spent += result.nodes
        if result.offsets_bytes is not None:
            best = result.offsets_bytes
            pool = int((best + size).max())
        else:
            proven = proven and result.exhausted
            low = capacity + 1
    return Smallest(best, pool, proven and low >= pool, spent)
