"""The placement MILP as a cvxpy problem (:mod:`~tmsim.planners.milp.formulation.readback` reads a
plan back from its solution).

Constraints, as a few sparse-matrix blocks (no per-row cvxpy objects):

- flow conservation: ``A_eq x = b_eq``;
- capacity of every modelled tier in difference form: ``u_k - u_{k-1} = (bytes arriving at
  k) - (bytes leaving after k - 1)`` with ``0 <= u_k <= limit_k``, in units of the tier's
  limit so the coefficients stay near 1 (in bytes HiGHS stalls; in GB tiny graphs drown in its
  tolerance). The fastest tier is always modelled, at the per-kernel limits the layout loop
  sets; a slower tier only where its capacity is below the bytes of all tensors together;
- kernel cost ``c_k >= compute_k + launch``, ``c_k >= memory_k(x) + launch`` (the roofline;
  ``c_k >=`` their sum with the ``sum`` overlap rule), the roofline's cut (valid at every binary
  point, it makes the LP pay for slow operands an integer placement's compute would not hide:
  :func:`~tmsim.planners.milp.formulation.kernel_rows.memory_cut_rows`), ``c_k >=`` the asynchronous
  copies beside kernel ``k``. The memory time is the time with every operand on the slowest tier
  kernels reach, plus, per faster kernel tier, the difference where an operand is accessed there;
- objective: ``sum_k c_k +`` the synchronous copies.

Where a profile measured a kernel's time at some placements of its operands, the time rows of that
kernel gain AutoTM's one-hot terms for those placements
(:mod:`~tmsim.planners.milp.formulation.measured`): continuous ``z`` that the binaries fix, so that
the kernel costs its measured time there and its roofline elsewhere.

With :class:`~tmsim.cost.BesideCosts` (the ``async-aware`` formulation) an asynchronous copy
beside kernel ``k`` takes what interference leaves it (its latency plus its bytes at the
rate measured beside ``k``), every row bounding ``c_k`` from the kernel's own time gains the
delay the copy causes the kernel (its bytes times the measured delay per byte), and a copy
that cannot run beside ``k`` is not offered there (its binary is fixed at 0).
"""

from __future__ import annotations

from dataclasses import replace

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from tmsim.cost import BesideCosts, CostModel
from tmsim.planners.milp.formulation.candidates import DEFAULT_DEPTH, recomputable
from tmsim.planners.milp.formulation.conflicts import conflict_rows
from tmsim.planners.milp.formulation.copies import move_costs
from tmsim.planners.milp.formulation.dominance import usable_tiers
from tmsim.planners.milp.formulation.energy import access_energy, copy_energy
from tmsim.planners.milp.formulation.gadgets import Formulation, build_gadgets
from tmsim.planners.milp.formulation.host import (
    find_candidates,
    host_access,
    host_floor,
    host_free,
    host_reach,
    link_rows,
)
from tmsim.planners.milp.formulation.host_clash import clash_rows
from tmsim.planners.milp.formulation.host_memory import floor_matrices
from tmsim.planners.milp.formulation.host_refresh import refresh_matrix
from tmsim.planners.milp.formulation.host_time import HostTerms, sync_at_kernels
from tmsim.planners.milp.formulation.kernel_rows import (
    beside_costs,
    copy_rows,
    memory_cut_rows,
    time_rows,
)
from tmsim.planners.milp.formulation.measured import measured_terms
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.network import HostUse, build_flow, build_variables
from tmsim.planners.milp.formulation.prune import prune_windows
from tmsim.planners.milp.formulation.recompute import recompute_rows, recompute_seconds
from tmsim.planners.milp.formulation.segments import build_segments
from tmsim.planners.milp.formulation.states import Catalogue, Kind, build_catalogue
from tmsim.planners.milp.formulation.windows import gaps_of, is_compact


def catalogue_of(cost: CostModel, recompute: bool = False, prune: bool = True) -> Catalogue:
    """The states and edges of ``cost``'s platform (tiers beyond the fastest modelled only
    where their capacity can bind, :func:`modelled_tiers`), with those of recomputation after
    them when ``recompute``; with ``prune``, over the tiers no other tier dominates
    (:mod:`~tmsim.planners.milp.formulation.dominance`)."""
    platform = cost.platform
    modelled = set(modelled_tiers(cost))
    names = platform.tier_names
    return build_catalogue(
        names,
        platform.kernel_tier_mask(),
        [i in modelled for i in range(len(names))],
        cost.has_path,
        recompute,
        usable_tiers(cost) if prune else None,
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
    depth: int = DEFAULT_DEPTH,
    energy_weight_s_per_j: float = 0.0,
    roofline_cut: bool = True,
    host_kernels: bool = False,
) -> Model:
    """The MILP (or, with ``relax``, its LP relaxation) and what reading it back needs.

    ``limits`` [n_kernels]: the fastest tier's limit at each kernel (bytes); slower modelled tiers
    are limited by their capacity. ``beside``: what asynchronous copies cost beside each kernel (see
    the module documentation); None charges them their idle time. ``compact``: write asynchronous
    windows as events where the compact form applies
    (:mod:`~tmsim.planners.milp.formulation.windows`); False: the general form everywhere (the same
    optimum with more variables). ``depth``: the longest chain of producers run again before one
    kernel, in a formulation that recomputes (:mod:`~tmsim.planners.milp.formulation.recompute`).
    ``energy_weight_s_per_j`` > 0 adds that many seconds per joule of the energy the plan decides
    (:mod:`~tmsim.planners.milp.formulation.energy`) to the objective; raises :class:`TmsimError` if
    the platform has no energy model. ``roofline_cut``: add the roofline's cut
    (:func:`~tmsim.planners.milp.formulation.kernel_rows.memory_cut_rows`; the optimum is the same
    without it, the LP relaxation lower). ``host_kernels``: on a platform with a host compute,
    let the host run the kernels it may (:mod:`~tmsim.planners.milp.formulation.host`; not in
    a static formulation, with an energy weight nor with ``beside`` costs), with the copies
    it would wait for excluded while it runs one
    (:mod:`~tmsim.planners.milp.formulation.host_clash`)."""
    graph = cost.graph
    n_k = len(graph.kernels)
    # a dominated tier is left out where the MILP's own costs are all that count
    cat = catalogue_of(
        cost, formulation.recomputes, prune=beside is None and energy_weight_s_per_j <= 0
    )
    tiers = modelled_tiers(cost)
    floor_s, ceiling_s = cost.kernel_time_range_s()
    rec = recomputable(cost, depth) if formulation.recomputes else None
    gad = prune_windows(cost, build_gadgets(cost, formulation, window, rec), tiers, ceiling_s)
    cand = None
    # no host kernels in a static formulation, with an energy weight, nor where copies are
    # priced beside kernels (those prices come from replays of plans without host kernels)
    hosted = host_kernels and beside is None and energy_weight_s_per_j <= 0
    if hosted and formulation.moves is not Formulation.STATIC:
        cand = find_candidates(cost, window if formulation.asynchronous else 0)
    reach = host_reach(cost)
    use = None
    if cand is not None:
        mask = np.zeros(n_k, dtype=bool)
        mask[cand.kernel] = True
        use = HostUse(mask, host_access(cat.states, reach), cand.kernel)
    # the tiers the states hold: a dominated tier left out does not count
    applies = is_compact(int(cat.member.any(axis=0).sum()), formulation, gad)
    gaps = gaps_of(gad, compact and applies)
    var = build_variables(cost, cat, gad, formulation, gaps, rec, use)
    flow = build_flow(cost, cat, gad, var, gaps)
    if rec is not None:
        rows_rc = recompute_rows(
            cost, cat, gad, var.edge_gadget, var.edge_type, var.edge_index, var.count
        )
        flow = replace(
            flow,
            a_ub=sp.csr_matrix(sp.vstack([flow.a_ub, rows_rc])),
            b_ub=np.concatenate((flow.b_ub, np.zeros(rows_rc.shape[0]))),
        )
    extra = tuple(int(i) for i in np.flatnonzero(reach) if use is not None and i not in tiers)
    seg = build_segments(cost, cat, gad, var, tiers + extra, gaps)
    copies = move_costs(cost, cat, gad, var.edge_gadget, var.edge_type, var.count)
    n = var.count
    slow, forbidden = None, None
    if beside is not None:
        copies, slow, forbidden = beside_costs(cost, cat, gad, var, copies, beside)
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
    energy_s, energy_const_s = np.zeros(n), 0.0
    if energy_weight_s_per_j > 0:
        constant_j, access_j = access_energy(cost, seg.access, op_seg, n)
        moves_j = copy_energy(cost, cat, gad, var.edge_gadget, var.edge_type, copies, n)
        energy_s = energy_weight_s_per_j * (access_j + moves_j)
        energy_const_s = energy_weight_s_per_j * constant_j
    constraints = [flow.a_eq @ x == flow.b_eq, diff @ u == delta @ x, u >= 0, u <= capacity]
    # tensors too large to share the fastest tier at a kernel: valid at every binary point,
    # and what the LP relaxation misses where a few tensors fill most of it
    cliques = conflict_rows(seg, graph.sizes_bytes, np.asarray(limits, dtype=np.int64), n)
    if cliques.shape[0]:
        flow = replace(
            flow,
            a_ub=sp.csr_matrix(sp.vstack([flow.a_ub, cliques])),
            b_ub=np.concatenate((flow.b_ub, np.ones(cliques.shape[0]))),
        )
    host_terms = None
    host_floor_s: np.ndarray | None = None
    if cand is not None and use is not None:
        on_host = [int(i) for i in np.flatnonzero(reach)]
        member = sum(seg.member[i] for i in on_host)
        events = sum(seg.changes.member[i] for i in on_host)
        links, link_b = link_rows(
            cost,
            cat,
            gad,
            var,
            cand,
            use.access,
            sp.csr_matrix(member),
            seg,
            sp.csr_matrix(events),
        )
        clashes = clash_rows(cost, cat, gad, var, cand, copies, reach, gaps)
        flow = replace(
            flow,
            a_ub=sp.csr_matrix(sp.vstack([flow.a_ub, links, clashes])),
            b_ub=np.concatenate((flow.b_ub, link_b, np.ones(clashes.shape[0]))),
        )
        refresh, stuck = refresh_matrix(cost, cat, gad, var, cand, reach)
        forbidden = stuck if forbidden is None else forbidden | stuck
        host_columns = var.host_first + np.arange(cand.count)
        floor_at = floor_matrices(cost, cat, gad, var, cand, copies, host_columns)
        host_terms = HostTerms(
            cand,
            host_columns,
            sp.csr_matrix((n_k, n)),  # set below, once the synchronous seconds are known
            refresh,
            cp.Variable(n_k),
            cp.Variable(cand.count),
            cp.Variable(cand.count + 1),
            cp.Variable(),
            floor_at,
            tuple(cp.Variable(n_k + 2) for _ in floor_at),
        )
    if flow.a_ub.shape[0]:
        constraints.append(flow.a_ub @ x <= flow.b_ub)
    rows, floor_s = time_rows(cost, seg.access, op_seg, floor_s)
    measured = measured_terms(cost, seg.access, op_seg, n)
    z = cp.Variable(measured.count) if measured is not None else None
    if measured is not None and z is not None:
        constraints += measured.constraints(x, z)
    if slow is not None:
        rows = [(const, slow if m is None else sp.csr_matrix(m + slow)) for const, m in rows]
    sync_cost = np.where(copies.asynchronous, 0.0, copies.seconds)
    if rec is not None:  # a recompute runs alone, before its kernel
        is_rc = cat.edge_kind[var.edge_type] == Kind.RECOMPUTE
        sync_cost[: is_rc.size] += recompute_seconds(cost, gad, var.edge_gadget, is_rc)
    if roofline_cut:  # after the time rows: measured terms shift those alone
        rows += memory_cut_rows(cost, seg.access, op_seg, floor_s)
    if host_terms is not None:  # a host kernel costs the device stream none of its own time
        host_floor_s = floor_s[host_terms.candidates.kernel].copy()
        on, least, h_cols = host_floor(floor_s, host_terms.candidates, host_terms.columns)
        if on.size:
            constraints.append(c[on] + cp.multiply(least, x[h_cols]) >= least)
        rows, floor_s = host_free(
            rows, floor_s, host_terms.candidates, host_terms.columns, n, measured
        )
        host_terms = replace(host_terms, sync_at=sync_at_kernels(sync_cost, copies.kernel, n_k))
        constraints += host_terms.constraints(c, x)
    if copies.asynchronous.any():
        rows += copy_rows(copies, floor_s, n)
    for i, (const, matrix) in enumerate(rows):
        bound = const + matrix @ x if matrix is not None else const
        if measured is not None and z is not None and i < len(measured.shifts):
            bound = bound + measured.shifts[i] @ z
        constraints.append(c >= bound)
    if forbidden is not None and forbidden.any():
        constraints.append(x[np.flatnonzero(forbidden)] == 0)
    if relax:
        constraints += [x >= 0, x <= 1]
    step_s = cp.sum(c) + sync_cost @ x if host_terms is None else host_terms.t
    if energy_weight_s_per_j > 0:  # time alone otherwise, the problem exactly as before
        step_s = step_s + energy_s @ x + energy_const_s
    objective = cp.Minimize(step_s)
    problem = cp.Problem(objective, constraints)
    n_rows = flow.a_eq.shape[0] + flow.a_ub.shape[0] + 3 * n_k * len(tiers) + n_k * len(rows)
    n_z = measured.count if measured is not None else 0
    n_rows += measured.pairs + 3 * n_z if measured is not None else 0
    m_host = 0 if host_terms is None else host_terms.candidates.count
    n_floor = 0 if host_terms is None else len(host_terms.floor_at)
    n_host = 0 if host_terms is None else n_k + 2 * m_host + 2 + n_floor * (n_k + 2)
    n_rows += 0 if host_terms is None else n_k + 2 + 6 * m_host + n_floor * (2 * n_k + 3)
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
        variables=n + n_k * (1 + len(tiers)) + n_z + n_host,
        constraints=n_rows,
        sync_s=sync_cost,
        energy_s=energy_s,
        energy_const_s=energy_const_s,
        a_eq=flow.a_eq,
        b_eq=flow.b_eq,
        a_ub=flow.a_ub,
        b_ub=flow.b_ub,
        gaps=gaps,
        capacity=capacity,
        cliques=int(cliques.shape[0]),
        floor_s=floor_s,
        beside=beside,
        forbidden=forbidden,
        z=z,
        measured=measured,
        host=host_terms,
        host_floor_s=host_floor_s,
    )


def _steps(tensor: np.ndarray, start: np.ndarray, end: np.ndarray, n_k: int) -> sp.csr_matrix:
    """[n_k + 1, rows]: +1 at each row's start kernel, -1 after its end kernel."""
    n = tensor.size
    cols = np.arange(n)
    arrive = sp.csr_matrix((np.ones(n), (start, cols)), shape=(n_k + 1, n))
    leave = sp.csr_matrix((np.ones(n), (end + 1, cols)), shape=(n_k + 1, n))
    return sp.csr_matrix(arrive - leave)
