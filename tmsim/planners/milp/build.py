"""The placement MILP as a cvxpy problem, and reading a plan back from its solution.

Constraints, as a few sparse-matrix blocks (no per-row cvxpy objects):

- flow conservation: ``A_eq x = b_eq``;
- capacity of every modelled tier in difference form: ``u_k - u_{k-1} = (bytes arriving at
  k) - (bytes leaving after k - 1)`` with ``0 <= u_k <= limit_k``, in units of the tier's
  limit so the coefficients stay near 1 (in bytes HiGHS stalls; in GB tiny graphs drown in its
  tolerance). The fastest tier is always modelled, at the per-kernel limits the layout loop
  sets; a slower tier only where its capacity is below the bytes of all tensors together;
- kernel cost ``c_k >= compute_k + launch``, ``c_k >= memory_k(x) + launch`` (the roofline;
  ``c_k >=`` their sum with the ``sum`` overlap rule), ``c_k >=`` the asynchronous copies
  beside kernel ``k``. The memory time is the time with every operand on the slowest tier
  kernels reach, plus, per faster kernel tier, the difference where an operand is accessed
  there;
- objective: ``sum_k c_k +`` the synchronous copies.

With :class:`~tmsim.cost.BesideCosts` (the ``async-aware`` formulation) an asynchronous copy
beside kernel ``k`` takes what interference leaves it (its latency plus its bytes at the
rate measured beside ``k``), every row bounding ``c_k`` from the kernel's own time gains the
delay the copy causes the kernel (its bytes times the measured delay per byte), and a copy
that cannot run beside ``k`` is not offered there (its binary is fixed at 0).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from hwmodels.timing import MoveMode, Overlap
from tmsim.cost import BesideCosts, CostModel, IndexMove
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.milp.copies import Copies, move_costs
from tmsim.planners.milp.gadgets import Formulation, Gadgets, build_gadgets
from tmsim.planners.milp.gaps import Gaps, gaps_of, is_compact
from tmsim.planners.milp.network import (
    Variables,
    build_flow,
    build_segments,
    build_variables,
)
from tmsim.planners.milp.prune import prune_windows
from tmsim.planners.milp.states import Catalogue, build_catalogue
from tmsim.plans.values import Plan, SolverStats


@dataclass(frozen=True)
class Model:
    """The problem, its variables, and what reading a solution back (or in) needs.

    ``c`` is bounded below by ``rows``: ``c >= const + (matrix @ x)`` for each pair; the
    objective is ``sum(c) + sync_s @ x``; ``a_eq @ x == b_eq`` and ``a_ub @ x <= b_ub`` are
    the flow (the second: the order of the compact form's events, ``gaps``) and
    ``0 <= u <= capacity`` the limit of each modelled tier (``tiers``) at each kernel, one
    block of ``n_kernels`` per tier (``u`` as :meth:`complete` gives it, in units of each
    tier's largest limit). ``op_state`` gives 1 + the state index of every operand.
    ``floor_s`` [n_kernels] is the least value of ``c`` whatever the binaries: each kernel
    with every operand on the tier it reads and writes fastest. ``beside`` and ``forbidden``:
    see the module documentation (None without them).
    """

    problem: cp.Problem
    x: cp.Variable
    u: cp.Variable
    c: cp.Variable
    catalogue: Catalogue
    gadgets: Gadgets
    vars: Variables
    op_state: sp.csr_matrix
    tiers: tuple[int, ...]
    delta: sp.csr_matrix
    rows: tuple[tuple[np.ndarray, sp.csr_matrix | None], ...]
    copies: Copies
    variables: int
    constraints: int
    sync_s: np.ndarray
    a_eq: sp.csr_matrix
    b_eq: np.ndarray
    a_ub: sp.csr_matrix
    b_ub: np.ndarray
    gaps: Gaps
    capacity: np.ndarray
    floor_s: np.ndarray
    beside: BesideCosts | None = None
    #: binaries fixed at 0: copies that cannot run where they are offered
    forbidden: np.ndarray | None = None

    @property
    def n_kernels(self) -> int:
        return int(self.delta.shape[0] // max(len(self.tiers), 1))

    def complete(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The continuous variables ``(u, c)`` that go with binaries ``x`` at the optimum."""
        n_k = self.n_kernels
        u = np.cumsum(np.reshape(self.delta @ x, (len(self.tiers), n_k)), axis=1).ravel()
        c = np.full(n_k, -np.inf)
        for const, matrix in self.rows:
            c = np.maximum(c, const + (matrix @ x if matrix is not None else 0.0))
        return u, c

    @property
    def lower_bound_s(self) -> float:
        """A lower bound of the objective at every solution: the sum of ``floor_s`` (copies
        only add to it)."""
        return float(self.floor_s.sum())

    def objective(self, x: np.ndarray) -> float:
        """The objective at binaries ``x``, with ``u`` and ``c`` at their optimum."""
        xf = np.asarray(x, dtype=np.float64)
        return float(self.complete(xf)[1].sum() + self.sync_s @ xf)


def catalogue_of(cost: CostModel) -> Catalogue:
    """The states and edges of ``cost``'s platform (tiers beyond the fastest modelled only
    where their capacity can bind, :func:`modelled_tiers`)."""
    platform = cost.platform
    modelled = set(modelled_tiers(cost))
    names = platform.tier_names
    return build_catalogue(
        names,
        platform.kernel_tier_mask(),
        [i in modelled for i in range(len(names))],
        cost.has_path,
    )


def modelled_tiers(cost: CostModel) -> tuple[int, ...]:
    """The tiers whose capacity the MILP models: the fastest, and every slower tier whose
    capacity is below the bytes of all tensors together (elsewhere nothing can overflow)."""
    total = int(cost.graph.sizes_bytes.sum())
    tiers = cost.platform.tiers
    return (0, *(i for i in range(1, len(tiers)) if tiers[i].capacity_bytes < total))


def build_model(
    cost: CostModel,
    window: int,
    formulation: Formulation,
    limits: np.ndarray,
    relax: bool,
    beside: BesideCosts | None = None,
    compact: bool = True,
) -> Model:
    """The MILP (or, with ``relax``, its LP relaxation) and what reading it back needs.

    ``limits`` [n_kernels]: the fastest tier's limit at each kernel (bytes); slower modelled
    tiers are limited by their capacity. ``beside``: what asynchronous copies cost beside
    each kernel (see the module documentation); None charges them their idle time.
    ``compact``: write asynchronous windows as events where the compact form applies
    (:mod:`~tmsim.planners.milp.gaps`); False: the general form everywhere (the same optimum
    with more variables).
    """
    graph = cost.graph
    n_k = len(graph.kernels)
    cat = catalogue_of(cost)
    tiers = modelled_tiers(cost)
    floor_s, ceiling_s = cost.kernel_time_range_s()
    gad = prune_windows(cost, build_gadgets(cost, formulation, window), tiers, ceiling_s)
    applies = is_compact(len(cost.platform.tiers), formulation, gad)
    gaps = gaps_of(gad, compact and applies)
    var = build_variables(cost, cat, gad, formulation, gaps)
    flow = build_flow(cost, cat, gad, var, gaps)
    seg = build_segments(cost, cat, gad, var, tiers, gaps)
    copies = move_costs(cost, cat, gad, var.edge_gadget, var.edge_type, var.count)
    n = var.count
    slow, forbidden = None, None
    if beside is not None:
        copies, slow, forbidden = _beside(cost, cat, gad, var, copies, beside)
    x = cp.Variable(n) if relax else cp.Variable(n, boolean=True)
    u = cp.Variable(n_k * len(tiers))
    c = cp.Variable(n_k)

    # capacity, difference form: rows k get +size*flag at a segment's start, - after its end
    steps = [_steps(seg.tensor, seg.start, seg.end, n_k)]
    steps.append(_steps(seg.changes.tensor, seg.changes.start, seg.changes.end, n_k))
    deltas, bounds = [], []
    for tier in tiers:
        tier_limits = (
            limits if tier == 0 else np.full(n_k, cost.platform.tiers[tier].capacity_bytes)
        )
        unit = float(max(int(tier_limits.max()), 1))
        parts = [seg.member[tier], seg.changes.member[tier]]
        sizes = [graph.sizes_bytes[seg.tensor], graph.sizes_bytes[seg.changes.tensor]]
        deltas.append(
            sum(
                (step @ sp.diags(size / unit) @ part)[:n_k]
                for step, size, part in zip(steps, sizes, parts, strict=True)
            )
        )
        bounds.append(tier_limits / unit)
    delta = sp.vstack(deltas) if len(deltas) > 1 else deltas[0]
    step = sp.eye(n_k) - sp.eye(n_k, k=-1)
    diff = sp.kron(sp.eye(len(tiers)), step) if len(tiers) > 1 else step
    capacity = np.concatenate(bounds)

    op_seg = seg.covering(cost.op_tensor, cost.op_kernel, n_k)
    constraints = [flow.a_eq @ x == flow.b_eq, diff @ u == delta @ x, u >= 0, u <= capacity]
    if flow.a_ub.shape[0]:
        constraints.append(flow.a_ub @ x <= flow.b_ub)
    rows, floor_s = _time_rows(cost, seg.access, op_seg, floor_s)
    if slow is not None:
        rows = [(const, slow if m is None else sp.csr_matrix(m + slow)) for const, m in rows]
    sync_cost = np.where(copies.asynchronous, 0.0, copies.seconds)
    if copies.asynchronous.any():
        rows += _copy_rows(copies, floor_s, n)
    for const, matrix in rows:
        constraints.append(c >= const + matrix @ x if matrix is not None else c >= const)
    if forbidden is not None and forbidden.any():
        constraints.append(x[np.flatnonzero(forbidden)] == 0)
    if relax:
        constraints += [x >= 0, x <= 1]
    objective = cp.Minimize(cp.sum(c) + sync_cost @ x)
    problem = cp.Problem(objective, constraints)
    n_rows = flow.a_eq.shape[0] + flow.a_ub.shape[0] + 3 * n_k * len(tiers) + n_k * len(rows)
    return Model(
        problem=problem,
        x=x,
        u=u,
        c=c,
        catalogue=cat,
        gadgets=gad,
        vars=var,
        op_state=seg.state_code[op_seg],
        tiers=tiers,
        delta=sp.csr_matrix(delta),
        rows=tuple(rows),
        copies=copies,
        variables=n + n_k * (1 + len(tiers)),
        constraints=n_rows,
        sync_s=sync_cost,
        a_eq=flow.a_eq,
        b_eq=flow.b_eq,
        a_ub=flow.a_ub,
        b_ub=flow.b_ub,
        gaps=gaps,
        capacity=capacity,
        floor_s=floor_s,
        beside=beside,
        forbidden=forbidden,
    )


Rows = list[tuple[np.ndarray, sp.csr_matrix | None]]


def _steps(tensor: np.ndarray, start: np.ndarray, end: np.ndarray, n_k: int) -> sp.csr_matrix:
    """[n_k + 1, rows]: +1 at each row's start kernel, -1 after its end kernel."""
    n = tensor.size
    cols = np.arange(n)
    arrive = sp.csr_matrix((np.ones(n), (start, cols)), shape=(n_k + 1, n))
    leave = sp.csr_matrix((np.ones(n), (end + 1, cols)), shape=(n_k + 1, n))
    return sp.csr_matrix(arrive - leave)


def _beside(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    copies: Copies,
    beside: BesideCosts,
) -> tuple[Copies, sp.csr_matrix, np.ndarray]:
    """The asynchronous copies at what ``beside`` says they cost: their seconds, the matrix
    of the delays they cause their kernels [n_kernels, n] and the copies that cannot run."""
    n, n_k = var.count, len(cost.graph.kernels)
    cols = np.flatnonzero(copies.asynchronous)
    seconds = copies.seconds.copy()
    forbidden = np.zeros(n, dtype=bool)
    if cols.size == 0:
        return copies, sp.csr_matrix((n_k, n)), forbidden
    src = copies.source[cols]
    dst = cat.edge_add[var.edge_type[cols]]
    k = copies.kernel[cols]
    nbytes = cost.graph.sizes_bytes[gad.tensor[var.edge_gadget[cols]]].astype(np.float64)
    names = cost.platform.tier_names
    pairs = list(zip(src.tolist(), dst.tolist(), strict=True))
    path = np.array([beside.path(s, d) for s, d in pairs], dtype=np.int64)
    latency = np.array([cost.platform.copy_latency_s(names[s], names[d]) for s, d in pairs])
    per_byte = beside.copy_s_per_byte[k, path]
    delay = beside.slow_s_per_byte[k, path]
    moving = nbytes > 0
    blocked = (~np.isfinite(per_byte) | ~np.isfinite(delay)) & moving
    usable = moving & ~blocked
    seconds[cols] = np.where(usable, latency + nbytes * np.where(usable, per_byte, 0.0), 0.0)
    forbidden[cols[blocked]] = True
    charge = np.where(usable, nbytes * np.where(usable, delay, 0.0), 0.0)
    keep = charge > 0
    slow = sp.csr_matrix((charge[keep], (k[keep], cols[keep])), shape=(n_k, n))
    return replace(copies, seconds=seconds), slow, forbidden


def _copy_rows(copies: Copies, floor_s: np.ndarray, n: int) -> Rows:
    """The rows bounding ``c`` by the asynchronous copies beside each kernel.

    ``c_k >= sum_e s_e x_e`` (the copies take turns on the copy path) and the tighter-in-LP
    ``c_k >= L_k + sum_e max(0, s_e - L_k) x_e`` with ``L_k`` = ``floor_s``, the least time
    kernel ``k`` can take. The second is valid at every binary point: with copies ``S``
    beside ``k``, of which ``P`` are longer than ``L_k``, its right side is ``L_k`` when ``P``
    is empty and else ``s(P) - (|P| - 1) L_k <= s(S)``, so it never exceeds ``max(L_k,
    s(S)) <= c_k``. The LP relaxation, which spreads a fraction of a copy over every kernel
    of its window and so hides it, must now pay for the part of each long copy a kernel
    cannot hide (on ResNet-50 b8 at 4:1 with a window of 1 HiGHS proves 1% in 1.9 s with it
    against 28.7 s without).
    """
    n_k = floor_s.size
    is_async = copies.asynchronous
    cols = np.flatnonzero(is_async)
    k = copies.kernel[cols]
    beside = (copies.seconds[cols], (k, cols))
    out: Rows = [(np.zeros(n_k), sp.csr_matrix(beside, shape=(n_k, n)))]
    excess = np.maximum(copies.seconds[cols] - floor_s[k], 0.0)
    long = excess > 0
    if long.any():
        cut = (excess[long], (k[long], cols[long]))
        out.append((floor_s.copy(), sp.csr_matrix(cut, shape=(n_k, n))))
    return out


def _time_rows(
    cost: CostModel, access: dict[int, sp.csr_matrix], op_seg: np.ndarray, floor_s: np.ndarray
) -> tuple[Rows, np.ndarray]:
    """The lower bounds of the kernel costs ``c`` from the roofline (see the module doc), and
    the least value they allow ``c`` whatever the binaries: ``floor_s`` (every operand on the
    kernel tier where it is accessed fastest), or, where kernels reach one tier only, the
    one row itself (measured times included)."""
    n_k = len(cost.graph.kernels)
    k = cost.op_kernel
    reach = [i for i, ok in enumerate(cost.platform.kernel_tier_mask()) if ok]

    def operand_s(tier: int) -> np.ndarray:
        return cost.operand_s(np.full(k.size, tier, dtype=np.int64))

    if len(reach) == 1:
        only = cost.kernel_times_s(np.full(k.size, reach[0], dtype=np.int64))
        return [(only, None)], only
    ref = reach[-1]
    ref_s = operand_s(ref)
    to_kernel = sp.csr_matrix((np.ones(k.size), (k, np.arange(k.size))), shape=(n_k, k.size))
    mem0 = to_kernel @ ref_s
    gains = [
        to_kernel @ sp.diags(operand_s(tier) - ref_s) @ access[tier][op_seg] for tier in reach[:-1]
    ]
    gain = sp.csr_matrix(gains[0] if len(gains) == 1 else sum(gains[1:], gains[0]))
    base_s = cost.compute_s + cost.launch_s
    if cost.overlap is Overlap.MAX:
        return [(base_s, None), (mem0 + cost.launch_s, gain)], floor_s
    return [(base_s + mem0, gain)], floor_s


def extract_plan(
    cost: CostModel,
    model: Model,
    formulation: Formulation,
    options: dict[str, Any],
    limit: int,
    stats: SolverStats,
) -> Plan:
    """The plan a solved ``model`` describes (binaries rounded), through ``assemble_plan``.

    Copies an edge frees (evictions, and the stale copies an in-place update leaves behind on
    modelled tiers) are freed after the gadget's kernel; other copies stay to the end of the
    tensor's life.
    """
    x = np.asarray(model.x.value) > 0.5
    cat, gad, var, copies = model.catalogue, model.gadgets, model.vars, model.copies
    n_edges = var.edge_gadget.size
    on = np.flatnonzero(x[:n_edges])
    codes = np.rint(np.asarray(model.op_state @ x.astype(np.float64)).ravel()).astype(np.int64)
    op_tiers = cat.access[codes - 1]
    moves: list[IndexMove] = []
    drops: dict[tuple[int, int], list[int]] = {}
    for i in on:
        edge = cat.edges[int(var.edge_type[i])]
        g = int(var.edge_gadget[i])
        t = int(gad.tensor[g])
        if edge.add >= 0:
            mode = MoveMode.ASYNC if copies.asynchronous[i] else MoveMode.SYNC
            src = int(copies.source[i])
            moves.append(IndexMove(t, src, edge.add, int(copies.kernel[i]), mode))
        for tier in sorted(edge.frees):
            drops.setdefault((t, tier), []).append(int(gad.kernel[g]))
    states = x[n_edges:]
    initial = {
        int(t): tuple(sorted(cat.states[int(s)]))
        for t, s in zip(var.init_tensor[states], var.init_state[states], strict=True)
    }
    return assemble_plan(
        cost,
        f"milp-{formulation.value}",
        limit,
        op_tiers,
        initial,
        moves,
        drops,
        options,
        stats,
        beside=model.beside,
    )
