"""Index structures of the placement MILP, built with numpy and scipy.sparse.

Per tensor, a small flow network carries one unit of flow through its *gadgets*, the kernels
at which it may change location (static: its producer; sync: also every user; async: also
the kernels within a window of a user). At a gadget the tensor is in one of three states:
fast only (F), fast with a valid slow copy (FS), slow only (S). A gadget has two phases of
edges, each a binary variable:

- *prefetch* (before the kernel): stay F, stay FS, stay S, fetch S->FS (a copy),
  and at a kernel that updates the tensor in place: FS->F (the slow copy goes stale) and
  S->F (fetch, then the slow copy goes stale);
- *evict* (after it): keep F, keep FS, keep S, write F->FS (a copy), write F->S (a copy, then
  free the fast copy), drop FS->S (free the fast copy).

Because tensors are immutable, a slow copy, once written, stays valid: a second eviction is a
free drop. The state *during* the kernel decides where the kernel reads and writes the tensor
and whether it counts against fast memory. Between gadgets, the state after the last gadget
holds. On a GPU, kernels reach only fast memory: the during-state of a kernel's own operands
must have a fast copy.

This module only builds arrays; :mod:`tmsim.planners.milp.chain` turns them into a cvxpy problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.planners.assemble import FAST, SLOW
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Formulation(StrEnum):
    """Where tensors may move: AutoTM's three formulations."""

    STATIC = "static"
    SYNC = "sync"
    ASYNC = "async"


class Kind(IntEnum):
    """What a gadget is: the producer, a user, or a kernel in a user's window."""

    CREATE = 0
    USER = 1
    WINDOW = 2


class Edge(IntEnum):
    """Edge types; the first six are the prefetch phase, the last six the evict phase."""

    STAY_F = 0
    STAY_FS = 1
    STAY_S = 2
    FETCH = 3
    INVAL = 4
    FETCH_INVAL = 5
    KEEP_F = 6
    KEEP_FS = 7
    KEEP_S = 8
    WRITE = 9
    WRITE_DROP = 10
    DROP = 11


# State vectors (F, FS, S) as sums of edges.
BEFORE = ((Edge.STAY_F,), (Edge.STAY_FS, Edge.INVAL), (Edge.STAY_S, Edge.FETCH, Edge.FETCH_INVAL))
DURING_IN = (
    (Edge.STAY_F, Edge.INVAL, Edge.FETCH_INVAL),
    (Edge.STAY_FS, Edge.FETCH),
    (Edge.STAY_S,),
)
DURING_OUT = ((Edge.KEEP_F, Edge.WRITE, Edge.WRITE_DROP), (Edge.KEEP_FS, Edge.DROP), (Edge.KEEP_S,))
AFTER = ((Edge.KEEP_F,), (Edge.KEEP_FS, Edge.WRITE), (Edge.KEEP_S, Edge.WRITE_DROP, Edge.DROP))
FAST_DURING = DURING_IN[0] + DURING_IN[1]
FAST_AFTER = AFTER[0] + AFTER[1]
FETCHES = (Edge.FETCH, Edge.FETCH_INVAL)
WRITES = (Edge.WRITE, Edge.WRITE_DROP)
PREFETCH_PHASE = tuple(Edge)[:6]


@dataclass(frozen=True)
class Gadgets:
    """Gadgets sorted by (tensor, kernel): ``tensor``, ``kernel``, ``kind``, ``updates``
    (the kernel updates the tensor in place), ``uses`` (the kernel reads or writes it),
    ``first``/``last`` (first/last gadget of its tensor), ``may_fetch``/``may_evict``
    (whether copies into / out of fast memory may happen there)."""

    tensor: IntArray
    kernel: IntArray
    kind: IntArray
    updates: BoolArray
    uses: BoolArray
    first: BoolArray
    last: BoolArray
    may_fetch: BoolArray
    may_evict: BoolArray


_UPDATE, _FETCH_WINDOW, _EVICT_WINDOW = 1, 2, 4


def build_gadgets(cost: CostModel, formulation: Formulation, window: int) -> Gadgets:
    """The gadgets of every tensor under ``formulation`` (``window`` kernels for async).

    An asynchronous window gadget before a use may fetch the tensor, one after a use (or its
    production) may evict it; a kernel within both windows may do both.
    """
    graph = cost.graph
    n_k = len(graph.kernels)
    op_t, op_k = cost.op_tensor, cost.op_kernel
    produced = graph.producers[op_t] == op_k
    # an operand both read and written is an in-place update (outputs are never inputs)
    upd = (cost.op_read_bytes > 0) & (cost.op_write_bytes > 0)
    static = formulation is Formulation.STATIC
    keep = produced if static else np.ones(op_t.size, dtype=bool)
    t_parts = [op_t[keep]]
    k_parts = [op_k[keep]]
    kind_parts = [np.where(produced[keep], Kind.CREATE, Kind.USER)]
    flag_parts = [np.where(upd[keep] & (not static), _UPDATE, 0)]
    if formulation is Formulation.ASYNC and window > 0:
        lo, hi = graph.live_first, graph.live_last
        offsets = np.concatenate((np.arange(-window, 0), np.arange(1, window + 1)))
        wt = np.repeat(op_t, offsets.size)
        wk = (op_k[:, None] + offsets[None, :]).ravel()
        wflag = np.tile(np.where(offsets < 0, _FETCH_WINDOW, _EVICT_WINDOW), op_t.size)
        inside = (wk >= lo[wt]) & (wk <= hi[wt]) & (wk >= 0) & (wk < n_k)
        t_parts.append(wt[inside])
        k_parts.append(wk[inside])
        kind_parts.append(np.full(int(inside.sum()), Kind.WINDOW))
        flag_parts.append(wflag[inside])
    t_all = np.concatenate(t_parts)
    k_all = np.concatenate(k_parts)
    kind_all = np.concatenate(kind_parts).astype(np.int64)
    flag_all = np.concatenate(flag_parts).astype(np.int64)
    # One gadget per (tensor, kernel): the smallest kind wins (CREATE < USER < WINDOW); the
    # flags of all entries for the same (tensor, kernel) are merged.
    order = np.lexsort((kind_all, k_all, t_all))
    t_all, k_all, kind_all, flag_all = t_all[order], k_all[order], kind_all[order], flag_all[order]
    key = t_all * (n_k + 1) + k_all
    new = np.ones(key.size, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    group = np.cumsum(new) - 1
    flags = np.zeros(int(new.sum()), dtype=np.int64)
    np.bitwise_or.at(flags, group, flag_all)
    t_g, k_g, kind_g = t_all[new], k_all[new], kind_all[new]
    first = np.ones(t_g.size, dtype=bool)
    first[1:] = t_g[1:] != t_g[:-1]
    last = np.ones(t_g.size, dtype=bool)
    last[:-1] = t_g[:-1] != t_g[1:]
    window_g = kind_g == Kind.WINDOW
    return Gadgets(
        t_g,
        k_g,
        kind_g,
        (flags & _UPDATE) > 0,
        ~window_g,
        first,
        last,
        ~window_g | ((flags & _FETCH_WINDOW) > 0),
        ~window_g | ((flags & _EVICT_WINDOW) > 0),
    )


@dataclass(frozen=True)
class Variables:
    """Binary variables: gadget edges (``edge_gadget``, ``edge_type``) then initial states
    (``init_tensor``, ``init_state`` in 0=F, 1=FS, 2=S). ``edge_index[g, e]`` is the variable
    of edge ``e`` at gadget ``g`` or -1; ``init_index[t, s]`` likewise."""

    edge_gadget: IntArray
    edge_type: IntArray
    edge_index: IntArray
    init_tensor: IntArray
    init_state: IntArray
    init_index: IntArray

    @property
    def count(self) -> int:
        return int(self.edge_gadget.size + self.init_tensor.size)


def build_variables(cost: CostModel, g: Gadgets, formulation: Formulation, gpu: bool) -> Variables:
    """Decide which edges and initial states exist and number them."""
    graph = cost.graph
    n_g = g.tensor.size
    allowed = np.ones((n_g, len(Edge)), dtype=bool)
    create = g.kind == Kind.CREATE
    static = formulation is Formulation.STATIC
    moves = [Edge.FETCH, Edge.FETCH_INVAL, Edge.WRITE, Edge.WRITE_DROP, Edge.DROP, Edge.INVAL]
    if static:
        allowed[:, moves] = False
        allowed[:, Edge.STAY_FS] = False
        allowed[:, Edge.KEEP_FS] = False
    for e in (Edge.STAY_FS, Edge.FETCH, Edge.INVAL, Edge.FETCH_INVAL):
        allowed[create, e] = False
    allowed[~g.may_fetch, Edge.FETCH] = False
    allowed[~g.may_fetch, Edge.FETCH_INVAL] = False
    for e in (Edge.WRITE, Edge.WRITE_DROP, Edge.DROP):
        allowed[~g.may_evict, e] = False
    if not cost.has_path(SLOW, FAST):
        allowed[:, [Edge.FETCH, Edge.FETCH_INVAL]] = False
    if not cost.has_path(FAST, SLOW):
        allowed[:, [Edge.WRITE, Edge.WRITE_DROP]] = False
    allowed[~g.updates, Edge.INVAL] = False
    allowed[~g.updates, Edge.FETCH_INVAL] = False
    allowed[g.updates, Edge.STAY_FS] = False
    allowed[g.updates, Edge.FETCH] = False
    if gpu:
        allowed[g.uses, Edge.STAY_S] = False
        allowed[g.uses, Edge.KEEP_S] = False
    gi, ei = np.nonzero(allowed)
    edge_index = np.full((n_g, len(Edge)), -1, dtype=np.int64)
    edge_index[gi, ei] = np.arange(gi.size)
    roles = [t.role for t in graph.tensors]
    pre = np.flatnonzero([r in PREEXISTING_ROLES for r in roles])
    states = np.ones((pre.size, 3), dtype=bool)
    has_gadget = np.zeros(len(graph.tensors), dtype=bool)
    has_gadget[g.tensor] = True
    used = np.zeros(len(graph.tensors), dtype=bool)
    used[cost.op_tensor] = True
    # only weights and optimizer state may start with a valid slow copy beside the fast one:
    # an input starting in both places would get its first eviction for free
    persistent = np.array([roles[t] in PERSISTENT_ROLES for t in pre], dtype=bool)
    states[~persistent, 1] = False
    if static:
        states[:, 1] = False
    if gpu:
        # without a gadget, a tensor a kernel uses can never be fetched: it starts fast
        states[used[pre] & ~has_gadget[pre], 2] = False
        states[used[pre] & ~has_gadget[pre], 1] = False
    ti, si = np.nonzero(states)
    init_index = np.full((len(graph.tensors), 3), -1, dtype=np.int64)
    init_index[pre[ti], si] = gi.size + np.arange(ti.size)
    return Variables(gi, ei, edge_index, pre[ti], si, init_index)


def _sum_rows(
    rows: IntArray, index: IntArray, edges: tuple[Edge, ...], sign: float
) -> tuple[IntArray, IntArray, FloatArray]:
    """COO triplets adding ``sign`` x each existing edge of ``edges`` to ``rows``."""
    cols = index[:, list(edges)]
    r = np.repeat(rows, len(edges))
    c = cols.ravel()
    ok = c >= 0
    return r[ok], c[ok], np.full(int(ok.sum()), sign)


@dataclass(frozen=True)
class Flow:
    """``A_eq @ x == b_eq``: flow conservation of every tensor's network."""

    a_eq: sp.csr_matrix
    b_eq: FloatArray


def build_flow(cost: CostModel, g: Gadgets, v: Variables) -> Flow:
    """Balance at each gadget, links between gadgets, sources and the end-of-step condition."""
    graph = cost.graph
    n_g = g.tensor.size
    trip: list[tuple[IntArray, IntArray, FloatArray]] = []
    b_parts: list[FloatArray] = []
    row = 0
    gid = np.arange(n_g)
    for s in range(3):  # during: prefetch side == evict side
        rows = row + gid
        trip.append(_sum_rows(rows, v.edge_index, DURING_IN[s], 1.0))
        trip.append(_sum_rows(rows, v.edge_index, DURING_OUT[s], -1.0))
        b_parts.append(np.zeros(n_g))
        row += n_g
    link = np.flatnonzero(~g.last)
    for s in range(3):  # after(g) == before(g + 1)
        rows = row + np.arange(link.size)
        trip.append(_sum_rows(rows, v.edge_index[link], AFTER[s], 1.0))
        trip.append(_sum_rows(rows, v.edge_index[link + 1], BEFORE[s], -1.0))
        b_parts.append(np.zeros(link.size))
        row += link.size
    roles = [t.role for t in graph.tensors]
    pre = np.array([r in PREEXISTING_ROLES for r in roles], dtype=bool)
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    firsts = np.flatnonzero(g.first)
    created = firsts[~pre[g.tensor[firsts]]]
    rows = row + np.arange(created.size)  # a produced tensor appears once: F or S
    trip.append(_sum_rows(rows, v.edge_index[created], (Edge.STAY_F, Edge.STAY_S), 1.0))
    b_parts.append(np.ones(created.size))
    row += created.size
    pre_t = np.flatnonzero(pre)
    rows = row + np.arange(pre_t.size)  # a pre-existing tensor starts in one state
    for s in range(3):
        c = v.init_index[pre_t, s]
        ok = c >= 0
        trip.append((rows[ok], c[ok], np.ones(int(ok.sum()))))
    b_parts.append(np.ones(pre_t.size))
    row += pre_t.size
    pre_first = firsts[pre[g.tensor[firsts]]]
    ends = np.flatnonzero(g.last & persistent[g.tensor])
    for gadgets, states in ((pre_first, BEFORE), (ends, AFTER)):
        for s in range(3):  # first gadget starts from, last gadget returns to, the initial state
            rows = row + np.arange(gadgets.size)
            trip.append(_sum_rows(rows, v.edge_index[gadgets], states[s], 1.0))
            c = v.init_index[g.tensor[gadgets], s]
            ok = c >= 0
            trip.append((rows[ok], c[ok], np.full(int(ok.sum()), -1.0)))
            b_parts.append(np.zeros(gadgets.size))
            row += gadgets.size
    r, c, d = (np.concatenate([t[i] for t in trip]) for i in range(3))
    a = sp.csr_matrix((d, (r, c)), shape=(row, v.count))
    return Flow(a, np.concatenate(b_parts))


@dataclass(frozen=True)
class Segments:
    """Kernel ranges over which a tensor's fast-memory flag is one linear expression.

    Sorted by (tensor, start). ``expr`` [n_seg, n_vars] is 0/1: the flag is ``expr @ x``.
    """

    tensor: IntArray
    start: IntArray
    end: IntArray
    expr: sp.csr_matrix

    def covering(self, tensors: IntArray, kernels: IntArray, n_k: int) -> IntArray:
        """Index of the segment of ``tensors[i]`` that covers ``kernels[i]``."""
        key = self.tensor * (n_k + 1) + self.start
        return np.searchsorted(key, tensors * (n_k + 1) + kernels, side="right") - 1


def build_segments(cost: CostModel, g: Gadgets, v: Variables) -> Segments:
    """Initial segments (pre-existing tensors), during and after segments of every gadget."""
    graph = cost.graph
    n_k = len(graph.kernels)
    roles = [t.role for t in graph.tensors]
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    eol = np.where(persistent, n_k - 1, graph.live_last)
    n_t = len(graph.tensors)
    first_gadget = np.full(n_t, n_k, dtype=np.int64)
    np.minimum.at(first_gadget, g.tensor, g.kernel)
    pre = np.flatnonzero(v.init_index.max(axis=1) >= 0)
    next_k = np.empty_like(g.kernel)
    next_k[:-1] = g.kernel[1:]
    next_k[g.last] = eol[g.tensor[g.last]] + 1
    parts = [
        (pre, np.zeros(pre.size, np.int64), np.minimum(first_gadget[pre], eol[pre] + 1) - 1),
        (g.tensor, g.kernel, g.kernel),
        (g.tensor, g.kernel + 1, next_k - 1),
    ]
    tensor = np.concatenate([p[0] for p in parts])
    start = np.concatenate([p[1] for p in parts])
    end = np.concatenate([p[2] for p in parts])
    n_pre, n_g = pre.size, g.tensor.size
    rows: list[IntArray] = []
    cols: list[IntArray] = []
    for s in (0, 1):
        c = v.init_index[pre, s]
        rows.append(np.flatnonzero(c >= 0))
        cols.append(c[c >= 0])
    for offset, edges in ((n_pre, FAST_DURING), (n_pre + n_g, FAST_AFTER)):
        for e in edges:
            c = v.edge_index[:, e]
            rows.append(offset + np.flatnonzero(c >= 0))
            cols.append(c[c >= 0])
    r, c = np.concatenate(rows), np.concatenate(cols)
    expr = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(tensor.size, v.count))
    keep = np.flatnonzero(end >= start)
    order = keep[np.lexsort((start[keep], tensor[keep]))]
    return Segments(tensor[order], start[order], end[order], expr[order])


def move_costs(cost: CostModel, g: Gadgets, v: Variables) -> tuple[FloatArray, IntArray, BoolArray]:
    """Per variable: copy seconds, the kernel a copy is attributed to, whether it is async."""
    seconds = np.zeros(v.count)
    kernel = np.zeros(v.count, dtype=np.int64)
    asynchronous = np.zeros(v.count, dtype=bool)
    et, eg = v.edge_type, v.edge_gadget
    window = g.kind[eg] == Kind.WINDOW
    for edges, src, dst in ((FETCHES, SLOW, FAST), (WRITES, FAST, SLOW)):
        sel = np.isin(et, edges)
        for is_async in (False, True):
            pick = sel & (window == is_async)
            if not pick.any():
                continue  # e.g. static: no copies, so no copy path is needed
            mode = MoveMode.ASYNC if is_async else MoveMode.SYNC
            seconds[: eg.size][pick] = cost.move_s(src, dst, mode)[g.tensor[eg[pick]]]
            asynchronous[: eg.size][pick] = is_async
    prefetch = et < len(PREFETCH_PHASE)
    # sync evictions run after their kernel, i.e. before the next one
    kernel[: eg.size] = g.kernel[eg] + np.where(prefetch | window, 0, 1)
    return seconds, kernel, asynchronous
