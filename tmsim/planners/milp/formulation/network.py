"""Index structures of the placement MILP over K tiers, built with numpy and scipy.sparse.

Per tensor, a small flow network carries one unit of flow through its gadgets
(:mod:`~tmsim.planners.milp.formulation.gadgets`): one layer of edges per gadget phase, one node per
state (:mod:`~tmsim.planners.milp.formulation.states`). Which edges exist at a gadget depends on
what the gadget is: at the producer the tensor appears in one tier; at a kernel that updates it in
place its during state is a single tier; copies happen only where the formulation and the window
allow them; in static nothing moves. A kernel that uses the tensor needs a during state with a tier
kernels may access. Between gadgets the state after the last gadget holds.

This module only builds arrays; :mod:`tmsim.planners.milp.formulation.build` turns them into a cvxpy
problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.candidates import Recomputable
from tmsim.planners.milp.formulation.copies import behind_fetch, copy_sources
from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind, Gadgets
from tmsim.planners.milp.formulation.recompute import restrict_edges
from tmsim.planners.milp.formulation.states import Catalogue, Kind, is_prefetch
from tmsim.planners.milp.formulation.windows import Events, Gaps, event_mask
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Variables:
    """Binary variables: gadget edges (``edge_gadget``, ``edge_type``), then initial states
    (``init_tensor``, ``init_state``, states as in the catalogue), then one per kernel the
    host may run (``host_kernel``, ascending; none without a host,
    :mod:`~tmsim.planners.milp.formulation.host`). ``edge_index[g, e]`` is the variable of
    edge ``e`` at gadget ``g`` or -1; ``init_index[t, s]`` likewise."""

    edge_gadget: IntArray
    edge_type: IntArray
    edge_index: IntArray
    init_tensor: IntArray
    init_state: IntArray
    init_index: IntArray
    host_kernel: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def count(self) -> int:
        return int(self.edge_gadget.size + self.init_tensor.size + self.host_kernel.size)

    @property
    def host_first(self) -> int:
        """The first host variable (the number of edge and initial-state variables)."""
        return int(self.edge_gadget.size + self.init_tensor.size)


@dataclass(frozen=True)
class HostUse:
    """Where the host may run kernels, for the edges it allows: ``kernel`` [n_kernels]
    (True at a candidate, :func:`~tmsim.planners.milp.formulation.host.find_candidates`),
    ``access`` [n_states] (each state's fastest tier the host reaches, -1 for none) and the
    candidates in order (``kernels``)."""

    kernel: BoolArray
    access: IntArray
    kernels: IntArray


def _allowed_edges(
    cost: CostModel,
    cat: Catalogue,
    g: Gadgets,
    formulation: Formulation,
    gaps: Gaps,
    rec: Recomputable | None,
    host: HostUse | None = None,
) -> BoolArray:
    """[n_gadgets, n_edges]: which edge types exist at which gadget (at an events-only
    gadget of the compact form, its copies; none after the last use of a tensor that does
    not outlive the step, where nothing follows; recomputation's edges as
    :func:`~tmsim.planners.milp.formulation.recompute.restrict_edges` allows them; at a
    kernel the host may run, ``host``, also the during states the host reaches and, at an
    in-place update, during states of several tiers one of which the host reaches)."""
    kind = cat.edge_kind
    single = np.array([len(cat.states[s]) == 1 for s in range(cat.n_states)])
    prefetch = is_prefetch(kind)
    during = np.where(prefetch, cat.edge_dst, cat.edge_src)
    allowed = np.ones((g.tensor.size, cat.n_edges), dtype=bool)
    if formulation.moves is Formulation.STATIC:
        still = (
            np.isin(kind, (Kind.STAY, Kind.KEEP))
            & (single | (cat.gone == np.arange(cat.n_states)))[cat.edge_src]
        )
        remade = np.isin(kind, (Kind.RECOMPUTE, Kind.DISCARD))
        allowed[:, ~(still | remade)] = False
    create = g.kind == GadgetKind.CREATE
    allowed[np.ix_(create, prefetch & ~((kind == Kind.STAY) & single[cat.edge_src]))] = False
    fetch = np.isin(kind, (Kind.FETCH, Kind.FETCH_INVAL))
    allowed[np.ix_(~g.may_fetch, fetch)] = False
    allowed[np.ix_(~g.may_evict, np.isin(kind, (Kind.WRITE, Kind.WRITE_DROP, Kind.DROP)))] = False
    invalidating = np.isin(kind, (Kind.INVAL, Kind.FETCH_INVAL))
    allowed[np.ix_(~g.updates, invalidating)] = False
    several = (kind == Kind.STAY) & ~single[cat.edge_src]
    at_host = host.kernel[g.kernel] if host is not None else np.zeros(g.tensor.size, bool)
    reached = host.access[during] >= 0 if host is not None else np.zeros(kind.size, bool)
    allowed[np.ix_(g.updates & ~at_host, several | (kind == Kind.FETCH))] = False
    allowed[np.ix_(g.updates & at_host, (several & ~reached) | (kind == Kind.FETCH))] = False
    # after the host updates its copy the others are stale until refreshed: none is copied
    copying = np.isin(kind, (Kind.WRITE, Kind.WRITE_DROP)) & ~single[cat.edge_src]
    allowed[np.ix_(g.updates & at_host, copying)] = False
    # a use needs a kernel tier (or, where the host may run the kernel, a tier it reaches)
    allowed[np.ix_(g.uses & ~at_host, cat.access[during] < 0)] = False
    allowed[np.ix_(g.uses & at_host, (cat.access[during] < 0) & ~reached)] = False
    writes = np.flatnonzero(np.isin(kind, (Kind.WRITE, Kind.WRITE_DROP)))
    stuck = [
        int(e)
        for e in writes
        if not any(cost.has_path(s, int(cat.edge_add[e])) for s in copy_sources(cat, int(e), True))
    ]
    allowed[np.ix_(behind_fetch(g), np.asarray(stuck, dtype=np.int64))] = False
    if gaps.compact:
        allowed[np.ix_(~gaps.core, ~event_mask(cat))] = False
        persistent = np.array([t.role in PERSISTENT_ROLES for t in cost.graph.tensors])
        allowed[~gaps.core & (gaps.next_core < 0) & ~persistent[g.tensor]] = False
    restrict_edges(allowed, cat, g, formulation, rec)
    return allowed


def build_variables(
    cost: CostModel,
    cat: Catalogue,
    g: Gadgets,
    formulation: Formulation,
    gaps: Gaps,
    rec: Recomputable | None = None,
    host: HostUse | None = None,
) -> Variables:
    """Decide which edges and initial states exist and number them (``rec``: where tensors
    may be recomputed, None for a formulation without recomputation; ``host``: where the
    host may run kernels, None for nowhere)."""
    graph = cost.graph
    n_g = g.tensor.size
    allowed = _allowed_edges(cost, cat, g, formulation, gaps, rec, host)
    gi, ei = np.nonzero(allowed)
    edge_index = np.full((n_g, cat.n_edges), -1, dtype=np.int64)
    edge_index[gi, ei] = np.arange(gi.size)
    roles = [t.role for t in graph.tensors]
    pre = np.flatnonzero([r in PREEXISTING_ROLES for r in roles])
    single = np.array([len(s) == 1 for s in cat.states])
    states = np.ones((pre.size, cat.n_states), dtype=bool)
    has_gadget = np.zeros(len(graph.tensors), dtype=bool)
    has_gadget[g.tensor] = True
    used = np.zeros(len(graph.tensors), dtype=bool)
    used[cost.op_tensor] = True
    # only weights and optimizer state may start with copies in several tiers: an input
    # starting in two would get its first eviction for free
    persistent = np.array([roles[t] in PERSISTENT_ROLES for t in pre], dtype=bool)
    states[np.ix_(~persistent, ~single)] = False
    if formulation.moves is Formulation.STATIC:
        states[:, ~single] = False
    if cat.gone >= 0:
        states[:, cat.gone] = False  # what exists before the step has a copy somewhere
    if formulation.fast_only:
        states[:, cat.member[:, 1:].any(axis=1)] = False
    # without a gadget a tensor never moves, nor in a static formulation (whose gadgets of a
    # tensor made before the step are the supports of recomputes, which are not its uses):
    # one a kernel uses starts where kernels reach it. Static-rc on the RTX 2080 Ti held
    # DenseNet-264 b32's weights and input on the host, read at no cost, without it.
    stays = ~has_gadget[pre] | (formulation.moves is Formulation.STATIC)
    states[np.ix_(used[pre] & stays, cat.access < 0)] = False
    ti, si = np.nonzero(states)
    init_index = np.full((len(graph.tensors), cat.n_states), -1, dtype=np.int64)
    init_index[pre[ti], si] = gi.size + np.arange(ti.size)
    hosted = host.kernels if host is not None else np.zeros(0, dtype=np.int64)
    return Variables(gi, ei, edge_index, pre[ti], si, init_index, hosted)


def _sum_rows(
    rows: IntArray, index: IntArray, edges: IntArray, sign: float
) -> tuple[IntArray, IntArray, FloatArray]:
    """COO triplets adding ``sign`` x each existing edge of ``edges`` to ``rows``."""
    cols = index[:, edges]
    r = np.repeat(rows, edges.size)
    c = cols.ravel()
    ok = c >= 0
    return r[ok], c[ok], np.full(int(ok.sum()), sign)


@dataclass(frozen=True)
class Flow:
    """``A_eq @ x == b_eq``: flow conservation of every tensor's network; ``A_ub @ x <=
    b_ub``: in the compact form, the order of the events in a gap
    (:mod:`~tmsim.planners.milp.formulation.windows`; no rows otherwise)."""

    a_eq: sp.csr_matrix
    b_eq: FloatArray
    a_ub: sp.csr_matrix
    b_ub: FloatArray


def build_flow(cost: CostModel, cat: Catalogue, g: Gadgets, v: Variables, gaps: Gaps) -> Flow:
    """Balance at each core gadget, links between consecutive core gadgets of a tensor (with
    the events between them), sources and the end-of-step condition."""
    graph = cost.graph
    cg = np.flatnonzero(gaps.core)
    pre_edges, evict_edges = cat.of_phase(True), cat.of_phase(False)

    def into(s: int, edges: IntArray) -> IntArray:
        return np.asarray(edges[cat.edge_dst[edges] == s], dtype=np.int64)

    def out_of(s: int, edges: IntArray) -> IntArray:
        return np.asarray(edges[cat.edge_src[edges] == s], dtype=np.int64)

    ev = Events.of(cat, g, v.edge_gadget, v.edge_type, gaps)
    trip: list[tuple[IntArray, IntArray, FloatArray]] = []
    b_parts: list[FloatArray] = []
    row = 0
    for s in range(cat.n_states):  # during: prefetch side == evict side
        rows = row + np.arange(cg.size)
        trip.append(_sum_rows(rows, v.edge_index[cg], into(s, pre_edges), 1.0))
        trip.append(_sum_rows(rows, v.edge_index[cg], out_of(s, evict_edges), -1.0))
        b_parts.append(np.zeros(cg.size))
        row += cg.size
    link = np.flatnonzero(gaps.core & (gaps.next_core >= 0))
    nxt = gaps.next_core[link]
    inner = np.searchsorted(link, ev.prev, side="left")  # events between two core gadgets
    for s in range(cat.n_states):  # after(a) + events == before(b)
        rows = row + np.arange(link.size)
        trip.append(_sum_rows(rows, v.edge_index[link], into(s, evict_edges), 1.0))
        trip.append(_sum_rows(rows, v.edge_index[nxt], out_of(s, pre_edges), -1.0))
        trip.append(ev.change(row + inner, s, ev.between, 1.0))
        b_parts.append(np.zeros(link.size))
        row += link.size
    roles = [t.role for t in graph.tensors]
    pre = np.array([r in PREEXISTING_ROLES for r in roles], dtype=bool)
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    firsts = np.flatnonzero(g.first)
    created = firsts[~pre[g.tensor[firsts]]]
    rows = row + np.arange(created.size)  # a produced tensor appears once, in one tier
    appear = np.flatnonzero(
        (cat.edge_kind == Kind.STAY) & np.array([len(cat.states[s]) == 1 for s in cat.edge_src])
    )
    trip.append(_sum_rows(rows, v.edge_index[created], appear, 1.0))
    b_parts.append(np.ones(created.size))
    row += created.size
    pre_t = np.flatnonzero(pre)
    rows = row + np.arange(pre_t.size)  # a pre-existing tensor starts in one state
    for s in range(cat.n_states):
        c = v.init_index[pre_t, s]
        ok = c >= 0
        trip.append((rows[ok], c[ok], np.ones(int(ok.sum()))))
    b_parts.append(np.ones(pre_t.size))
    row += pre_t.size
    core_first = np.flatnonzero(gaps.core & (gaps.prev_core < 0))
    pre_first = core_first[pre[g.tensor[core_first]]]
    ends = np.flatnonzero(gaps.core & (gaps.next_core < 0) & persistent[g.tensor])
    sides = (
        (pre_first, pre_edges, out_of, ev.leading, -1.0),
        (ends, evict_edges, into, ev.trailing, 1.0),
    )
    for gadgets, edges, pick, events, sign in sides:
        at = np.searchsorted(g.tensor[gadgets], g.tensor[ev.gadget])
        for s in range(cat.n_states):  # first core gadget starts from, last returns to, the start
            rows = row + np.arange(gadgets.size)
            trip.append(_sum_rows(rows, v.edge_index[gadgets], pick(s, edges), 1.0))
            c = v.init_index[g.tensor[gadgets], s]
            ok = c >= 0
            trip.append((rows[ok], c[ok], np.full(int(ok.sum()), -1.0)))
            trip.append(ev.change(row + at, s, events, sign))
            b_parts.append(np.zeros(gadgets.size))
            row += gadgets.size
    r, c, d = (np.concatenate([t[i] for t in trip]) for i in range(3))
    a = sp.csr_matrix((d, (r, c)), shape=(row, v.count))
    a_ub = ev.order_rows(v.edge_index, v.count)
    return Flow(a, np.concatenate(b_parts), a_ub, np.zeros(a_ub.shape[0]))
