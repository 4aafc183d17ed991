"""Asynchronous windows as copy events in the gaps between a tensor's uses (the compact form).

In the general form every kernel of an asynchronous window is a gadget with a full layer of
edges per phase, its stays and keeps included: a window of ``w`` kernels costs about ``7 w``
binaries and ``6 w`` flow rows per use, most of which only carry the tensor's state along. On
two tiers, what can happen between two consecutive *core* gadgets of a tensor (its producer and
users, at which the synchronous formulation has its gadgets) is short. After the earlier one the
tensor is in state F (fast only), FS (both) or S (slow only); beside a window kernel a copy may
then write it to the slow tier (F -> FS), write it and drop the fast copy (F -> S) or fetch it
(S -> FS), and the later core gadget takes whatever state these leave. So the compact form keeps
the layers of the core gadgets and gives a window kernel only its *events*, one binary per copy
it may run there, with, per gap and state ``s``::

    X_s = E_s + sum(events into s) - sum(events out of s)

(``E``: the state after the earlier core gadget, or the start; ``X``: before the later one,
or the end), and a fetch only after what made the slow copy it reads, in kernel order, a
write-drop's copy arriving after its kernel::

    sum(fetches up to kernel k) <= E_S + sum(write-drops before kernel k)

Capacity counts each event to the end of its gap: the tier it copies into from its kernel on
(a fetch's fast copy, a write's slow copy), the tier it frees after its kernel (a
write-drop's fast copy).

Left out, as no optimum needs them on two tiers: a drop beside a window kernel (the core gadget
before the gap drops the same copy, fast or slow, for free and sooner: a gap before a tensor's
first use has fetch windows only, no drop); a write followed by a drop in the same gap (a
write-drop at the write's kernel makes the same copy and frees the fast tier sooner); a fetch
followed by an eviction (they undo each other). Every plan of the general form that avoids these
is a plan of the compact form with the same costs and occupancy, and the general form's other
plans are no better: the exhaustive search of the tests checks both give the same optimum."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind, Gadgets
from tmsim.planners.milp.formulation.states import Catalogue, Kind, is_prefetch

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The edge kinds a window kernel may have in the compact form: the copies it may run.
EVENT_KINDS = (Kind.FETCH, Kind.WRITE, Kind.WRITE_DROP)


@dataclass(frozen=True)
class Gaps:
    """Which gadgets are core gadgets, and each gadget's nearest core gadgets of its tensor.

    ``core`` [n_gadgets]: the gadget has layers of edges (every gadget in the general form;
    producers and users in the compact form, whose window gadgets carry events only);
    ``prev_core`` / ``next_core`` [n_gadgets]: the nearest core gadget of the same tensor
    strictly before / after the gadget, or -1 (for a core gadget, its neighbours).
    """

    core: BoolArray
    prev_core: IntArray
    next_core: IntArray

    @property
    def compact(self) -> bool:
        """Whether some gadgets carry events only."""
        return not bool(self.core.all())


def is_compact(tier_count: int, formulation: Formulation, gadgets: Gadgets) -> bool:
    """Whether the compact form applies: an asynchronous formulation whose states hold two
    tiers (``tier_count``: a tier the catalogue leaves out does not count,
    :mod:`~tmsim.planners.milp.formulation.dominance`), with window gadgets to compact."""
    windows = bool(np.any(gadgets.kind == GadgetKind.WINDOW))
    return formulation.asynchronous and tier_count == 2 and windows


def gaps_of(g: Gadgets, compact: bool) -> Gaps:
    """The :class:`Gaps` of gadgets ``g``: with ``compact``, window gadgets are not core,
    except where a recompute may make or read the tensor (the model reads its state there)."""
    n = g.tensor.size
    if compact:
        core = (g.kind != GadgetKind.WINDOW) | g.may_recompute | g.read_by_recompute
    else:
        core = np.ones(n, dtype=bool)
    index = np.arange(n, dtype=np.int64)
    before = np.maximum.accumulate(np.where(core, index, -1))
    prev = np.full(n, -1, dtype=np.int64)
    prev[1:] = before[:-1]
    after = np.minimum.accumulate(np.where(core, index, n)[::-1])[::-1]
    nxt = np.full(n, n, dtype=np.int64)
    nxt[:-1] = after[1:]
    prev = np.where((prev >= 0) & (g.tensor[np.maximum(prev, 0)] == g.tensor), prev, -1)
    same = (nxt < n) & (g.tensor[np.minimum(nxt, n - 1)] == g.tensor)
    return Gaps(np.asarray(core, dtype=bool), prev, np.where(same, nxt, -1))


def event_mask(cat: Catalogue) -> BoolArray:
    """[n_edges]: the edge types a window kernel may have in the compact form."""
    return np.isin(cat.edge_kind, EVENT_KINDS)


def order_key(kernel: IntArray, prefetch: BoolArray) -> IntArray:
    """When an event happens: at its kernel, a prefetch-phase copy before an evict-phase one."""
    return 2 * kernel + np.where(prefetch, 0, 1)


@dataclass(frozen=True)
class Changes:
    """Membership changes over kernel ranges (rows: ``tensor``, ``start``, ``end``):
    ``member[i] @ x`` is how many copies of the tensor the row adds to tier ``i`` there (the
    events of the compact form; no rows in the general form)."""

    tensor: IntArray
    start: IntArray
    end: IntArray
    member: dict[int, sp.csr_matrix]


@dataclass(frozen=True)
class Events:
    """The event variables of the compact form (none in the general form): ``column``, the
    ``gadget`` and ``kernel`` it is at, its ``edge``, the core gadget before its gap
    (``prev``, -1 at the start) and whether its gap lies between two core gadgets, before
    the first or after the last (``between``, ``leading``, ``trailing``)."""

    column: IntArray
    gadget: IntArray
    kernel: IntArray
    edge: IntArray
    prev: IntArray
    between: BoolArray
    leading: BoolArray
    trailing: BoolArray
    cat: Catalogue

    @classmethod
    def of(
        cls, cat: Catalogue, g: Gadgets, edge_gadget: IntArray, edge_type: IntArray, gaps: Gaps
    ) -> Events:
        """The events among the edge variables (``edge_gadget``, ``edge_type``: the first
        columns of the model, one per edge)."""
        if gaps.compact:
            column = np.flatnonzero(~gaps.core[edge_gadget]).astype(np.int64)
        else:
            column = np.zeros(0, dtype=np.int64)
        gadget = edge_gadget[column]
        prev, nxt = gaps.prev_core[gadget], gaps.next_core[gadget]
        return cls(
            column,
            gadget,
            g.kernel[gadget],
            edge_type[column],
            prev,
            (prev >= 0) & (nxt >= 0),
            prev < 0,
            (prev >= 0) & (nxt < 0),
            cat,
        )

    def change(
        self, rows: IntArray, s: int, pick: BoolArray, sign: float
    ) -> tuple[IntArray, IntArray, FloatArray]:
        """COO triplets adding ``sign`` x (events into state ``s`` - events out of it) of the
        events ``pick`` to ``rows`` (one per event)."""
        into = (self.cat.edge_dst[self.edge] == s) & pick
        out = (self.cat.edge_src[self.edge] == s) & pick
        r = np.concatenate((rows[into], rows[out]))
        c = np.concatenate((self.column[into], self.column[out]))
        d = np.concatenate((np.full(int(into.sum()), sign), np.full(int(out.sum()), -sign)))
        return r, c, d

    def order_rows(self, edge_index: IntArray, count: int) -> sp.csr_matrix:
        """One row per event that takes the tensor out of a state an earlier event of its gap
        may put it in: the events taking it out of that state up to this one, less those
        putting it in before this one, less the flow into that state at the core gadget
        before the gap, at most 0. (A gap before the first use has fetch windows only: no
        event there puts the tensor in a state.) ``edge_index``: the model's variable of each
        edge at each gadget; ``count``: its columns. Rows in the order of the gaps' core
        gadgets, then of the events as listed."""
        cat = self.cat
        key = order_key(self.kernel, is_prefetch(cat.edge_kind[self.edge]))
        src, dst = cat.edge_src[self.edge], cat.edge_dst[self.edge]
        inside = np.flatnonzero(self.prev >= 0)
        # a state of a gap as one number: what events leave (src) and make (dst) it
        gap_state = self.prev * cat.n_states
        leaves, makes = gap_state + src, gap_state + dst
        # the events that make the state this one leaves, in its gap; ordered by gap, then
        # as listed: the rows, where there are such events
        i_make, j_make = _same(leaves[inside], makes[inside])
        i_make, j_make = inside[i_make], inside[j_make]
        has = np.zeros(self.prev.size, dtype=bool)
        has[i_make] = True
        rowed = inside[has[inside]]
        rowed = rowed[np.argsort(self.prev[rowed], kind="stable")]
        row = np.full(self.prev.size, -1, dtype=np.int64)
        row[rowed] = np.arange(rowed.size)
        # only what comes before this event may supply it (a write-drop's slow copy lands
        # after its kernel, after a fetch beside the same kernel)
        supply = key[j_make] < key[i_make]
        i_take, j_take = _same(leaves[rowed], leaves[rowed])
        i_take, j_take = rowed[i_take], rowed[j_take]
        take = key[j_take] <= key[i_take]
        r = [row[i_take[take]], row[i_make[supply]]]
        c = [self.column[j_take[take]], self.column[j_make[supply]]]
        d = [np.ones(int(take.sum())), -np.ones(int(supply.sum()))]
        for state in range(cat.n_states):
            at = rowed[src[rowed] == state]
            evict = np.flatnonzero((cat.edge_dst == state) & ~is_prefetch(cat.edge_kind))
            entry = edge_index[self.prev[at]][:, evict]
            hit = entry >= 0
            r.append(np.repeat(row[at], hit.sum(axis=1)))
            c.append(entry[hit])
            d.append(-np.ones(int(hit.sum())))
        return sp.csr_matrix(
            (np.concatenate(d), (np.concatenate(r), np.concatenate(c))),
            shape=(rowed.size, count),
        )


def _same(left: IntArray, right: IntArray) -> tuple[IntArray, IntArray]:
    """Every pair of positions ``(i, j)`` with ``left[i] == right[j]``, by ``i``, then ``j``."""
    order = np.argsort(right, kind="stable")
    ranked = right[order]
    lo = np.searchsorted(ranked, left, "left")
    n = np.searchsorted(ranked, left, "right") - lo
    i = np.repeat(np.arange(left.size, dtype=np.int64), n)
    within = np.arange(i.size, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    return i, order[np.repeat(lo, n) + within]


def event_changes(
    cat: Catalogue,
    g: Gadgets,
    edge_gadget: IntArray,
    edge_type: IntArray,
    count: int,
    gaps: Gaps,
    modelled: tuple[int, ...],
    next_k: IntArray,
    n_k: int,
) -> Changes:
    """How each event of the compact form changes its tensor's membership of the modelled
    tiers to the end of its gap: a tier it copies into from its kernel on (the copy lands
    beside it), a tier it frees after its kernel (the copy is read beside it). ``next_k``: the
    kernel of each gadget's next core gadget, or one past its tensor's end; ``count``
    columns. One row per event and tier it changes."""
    ev = Events.of(cat, g, edge_gadget, edge_type, gaps)
    end = np.minimum(next_k[ev.gadget] - 1, n_k - 1)
    tensor = g.tensor[ev.gadget]
    parts: list[tuple[IntArray, IntArray, IntArray, IntArray, FloatArray, int]] = []
    for tier in modelled:
        d = cat.member[cat.edge_dst[ev.edge], tier].astype(np.int64)
        d -= cat.member[cat.edge_src[ev.edge], tier]
        start = ev.kernel + (d < 0)
        keep = np.flatnonzero((d != 0) & (end >= start))
        parts.append((tensor[keep], start[keep], end[keep], ev.column[keep], d[keep] * 1.0, tier))
    n = sum(p[0].size for p in parts)
    member: dict[int, sp.csr_matrix] = {}
    offset = 0
    for _, _, _, column, change, tier in parts:
        rows = offset + np.arange(column.size)
        member[tier] = sp.csr_matrix((change, (rows, column)), shape=(n, count))
        offset += column.size

    def joined(i: int) -> IntArray:
        return np.concatenate(
            [np.asarray(p[i], dtype=np.int64) for p in parts] or [np.zeros(0, np.int64)]
        )

    return Changes(joined(0), joined(1), joined(2), member)


__all__ = [
    "EVENT_KINDS",
    "Changes",
    "Events",
    "Gaps",
    "event_changes",
    "event_mask",
    "gaps_of",
    "is_compact",
    "order_key",
]
