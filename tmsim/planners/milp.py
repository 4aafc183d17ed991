"""AutoTM's placement MILP in cvxpy: static, synchronous and asynchronous formulations.

The flow networks, gadgets and fast-memory segments come from
:mod:`tmsim.planners.milp_model`. This module writes the problem once, with a few sparse
matrix constraints (no per-row cvxpy objects), hands it to a solver (HiGHS by default, any
installed cvxpy MILP solver by name), and reads the plan back:

- flow conservation: ``A_eq x = b_eq``;
- fast-tier capacity in difference form: ``u_k - u_{k-1} = (bytes arriving at k) - (bytes
  leaving after k - 1)`` with ``0 <= u_k <= limit``, in units of the limit itself so the
  coefficients stay near 1 (in bytes HiGHS stalls; GB fails tiny graphs); the solver's
  tolerance lets the rounded plan overshoot by a few millionths of the limit, which the
  layout loop below takes back;
- kernel cost ``c_k >= compute_k + launch``, ``c_k >= memory_k(x) + launch`` (the roofline;
  ``c_k >=`` their sum with the ``sum`` overlap rule), ``c_k >= `` the asynchronous copies
  beside kernel ``k``;
- objective: ``sum_k c_k +`` the synchronous copies.

The plan goes through :func:`~tmsim.planners.common.assemble_plan`, whose predicted time is
recomputed from the cost model in exact bytes.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from hwmodels.cost import MoveMode, Overlap
from hwmodels.platform import Platform
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError, NoPlanError, TmsimError
from tmsim.graph import Graph
from tmsim.plan import Plan, SolverStats
from tmsim.planners.common import (
    FAST,
    SLOW,
    IndexMove,
    assemble_plan,
    check_operands_fit,
    fast_limit_bytes,
)
from tmsim.planners.layout import overflow_bytes, resident_overflow_bytes
from tmsim.planners.milp_model import (
    GB,
    Edge,
    Formulation,
    Gadgets,
    Variables,
    build_flow,
    build_gadgets,
    build_segments,
    build_variables,
    move_costs,
)
from tmsim.planners.milp_solve import (
    best_heuristic_fast,
    lift,
    solve,
    solve_stats,
    solver_options,
    static_start,
)

#: AutoTM's asynchronous window: kernels either side of a user where a copy may run.
AUTOTM_WINDOW = 15


@dataclass(frozen=True)
class MilpOptions:
    """Options of the MILP planners, with their defaults.

    ``ratio``/``fast_bytes``: the capacity (see :func:`fast_limit_bytes`); ``solver``: a cvxpy
    solver name; ``time_limit_s``: wall-clock cap of the solve (the incumbent is returned with
    its gap); ``gap``: relative optimality gap at which the solver stops; ``window``: kernels
    either side of a user where asynchronous copies may run; ``lp_bound``: also solve the LP
    relaxation and report its bound; ``warm_start``: start HiGHS from the solution of the
    formulation this one contains, solved first (static: from the better of the greedy and
    first-touch heuristics); ``layout``: lay the fast-tier buffers out
    (:mod:`tmsim.memplan`) and, as AutoTM does, solve again with the limit lowered where the
    layout overflowed (without it, only the bytes are checked and the plan may not lay out);
    ``max_rounds``: most solves of that loop; ``verbose``: solver log on stdout.
    """

    formulation: Formulation = Formulation.SYNC
    ratio: str | None = None
    fast_bytes: int | None = None
    solver: str = "HIGHS"
    time_limit_s: float | None = 300.0
    gap: float = 0.01
    window: int = AUTOTM_WINDOW
    lp_bound: bool = False
    warm_start: bool = True
    layout: bool = True
    max_rounds: int = 10
    verbose: bool = False


@dataclass(frozen=True)
class _Model:
    """The problem, its variables, and what reading a solution back (or in) needs.

    ``c`` is bounded below by ``rows``: ``c >= const + (matrix @ x)`` for each pair.
    """

    problem: cp.Problem
    x: cp.Variable
    u: cp.Variable
    c: cp.Variable
    gadgets: Gadgets
    vars: Variables
    op_flag: sp.csr_matrix
    delta: sp.csr_matrix
    rows: tuple[tuple[np.ndarray, sp.csr_matrix | None], ...]
    move_kernel: np.ndarray
    move_async: np.ndarray
    variables: int
    constraints: int

    def complete(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The continuous variables ``(u, c)`` that go with binaries ``x`` at the optimum."""
        u = np.cumsum(self.delta @ x)
        c = np.full(u.size, -np.inf)
        for const, matrix in self.rows:
            c = np.maximum(c, const + (matrix @ x if matrix is not None else 0.0))
        return u, c


def plan_milp(graph: Graph, platform: Platform, options: MilpOptions | None = None) -> Plan:
    """Solve the MILP of ``options.formulation`` and return its plan.

    Raises :class:`InfeasibleError` when no plan fits (naming the kernel and missing bytes),
    :class:`TmsimError` when the solver stops without any plan (time limit, solver error) or
    the platform has fewer than two addressable tiers.
    """
    opts = options or MilpOptions()
    opts = replace(opts, formulation=Formulation(opts.formulation))
    if len(platform.addressable_tiers) < 2 or platform.cache is not None:
        raise TmsimError(f"platform {platform.name!r}: the MILP needs two addressable tiers")
    limit = fast_limit_bytes(graph, platform, opts.ratio, opts.fast_bytes)
    gpu = not platform.kernel_tier_mask()[SLOW]
    if gpu:
        check_operands_fit(graph, platform, limit, f"milp-{opts.formulation.value}")
        if opts.formulation is Formulation.STATIC:
            _check_static_fits(graph, limit)
    cost = CostModel(graph, platform)
    deadline = None if opts.time_limit_s is None else time.perf_counter() + opts.time_limit_s
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    build_total = solve_total = 0.0
    for rounds in range(1, opts.max_rounds + 1):
        model, build_s, solve_s = _solve(cost, opts, opts.formulation, limits, gpu, deadline)
        build_total += build_s
        solve_total += solve_s
        stats = replace(
            solve_stats(model.problem, opts.solver, build_total, solve_total, model.variables,
                        model.constraints),
            rounds=rounds,
        )  # fmt: skip
        plan = _extract(cost, model, opts, limit, stats)
        if opts.layout:
            overflow = overflow_bytes(plan, graph, platform, limit)
        else:
            overflow = resident_overflow_bytes(plan, graph, platform, limit)
        if not overflow.any():
            break
        # AutoTM's loop: take what the layout lost at each kernel off that kernel's limit
        # (or, without a layout, what the solver's tolerance let through), plus a millionth of
        # the limit, ten times the solver's feasibility tolerance
        margin = np.where(overflow > 0, overflow + int(np.ceil(limit * 1e-6)), 0)
        limits = limits - margin
    else:
        what = "the fast-tier layout" if opts.layout else "the plan"
        raise NoPlanError(
            f"{what} still overflows {limit} bytes of fast memory after {opts.max_rounds} "
            "rounds of lowering the limit where it overflowed"
        )
    if opts.lp_bound:
        relaxed = _build(cost, opts, opts.formulation, limits, gpu, relax=True).problem
        relaxed.solve(solver=opts.solver)
        lp = float(relaxed.value) if relaxed.value is not None else math.nan
        plan = replace(plan, stats=replace(stats, lp_bound=lp))
    return plan


def _solve(
    cost: CostModel,
    opts: MilpOptions,
    formulation: Formulation,
    limits: np.ndarray,
    gpu: bool,
    deadline: float | None,
) -> tuple[_Model, float, float]:
    """Build and solve one formulation, warm-started from the one it contains.

    Returns the solved model, build seconds and solve seconds (both including the smaller
    formulations solved for the warm start). Raises as :func:`plan_milp`.
    """
    start = None
    build_s = solve_s = 0.0
    smaller = {Formulation.SYNC: Formulation.STATIC, Formulation.ASYNC: Formulation.SYNC}
    prev = None
    if opts.warm_start and formulation in smaller:
        try:
            prev, build_s, solve_s = _solve(cost, opts, smaller[formulation], limits, gpu, deadline)
        except TmsimError:
            prev = None  # e.g. nothing fits statically on a GPU: start cold
    started = time.perf_counter()
    model = _build(cost, opts, formulation, limits, gpu, relax=False)
    build_s += time.perf_counter() - started
    if prev is not None:
        start = lift(prev, np.asarray(prev.x.value) > 0.5, model)
    elif opts.warm_start and formulation is Formulation.STATIC and not gpu:
        start = static_start(model, best_heuristic_fast(cost, int(limits.min())))
    remaining = None if deadline is None else max(1.0, deadline - time.perf_counter())
    options = solver_options(opts.solver, opts.gap, remaining)
    started = time.perf_counter()
    try:
        solve(model, opts.solver, options, opts.verbose, start)
    except cp.error.SolverError as exc:
        raise TmsimError(f"solver {opts.solver} failed: {exc}") from None
    solve_s += time.perf_counter() - started
    if model.x.value is None:
        status = str(model.problem.status)
        if status in (cp.INFEASIBLE, "infeasible_or_unbounded"):
            raise InfeasibleError(
                f"no {formulation} plan fits in {limits.min() / GB:.3f} GB of fast memory"
            )
        raise TmsimError(
            f"solver {opts.solver} found no {formulation} plan (status {status}) within "
            f"{opts.time_limit_s} s; raise the time limit or the gap"
        )
    return model, build_s, solve_s


def _check_static_fits(graph: Graph, limit: int) -> None:
    """With nothing moving on a GPU, everything live at a kernel must fit at once."""
    k = int(np.argmax(graph.live_bytes))
    need = int(graph.live_bytes[k])
    if need > limit:
        raise InfeasibleError(
            f"milp-static: infeasible: kernel {k} ({graph.kernels[k].name!r}) has {need} bytes "
            f"live, {need - limit} bytes more than the limit of {limit} bytes, and nothing moves"
        )


def _build(
    cost: CostModel,
    opts: MilpOptions,
    formulation: Formulation,
    limits: np.ndarray,
    gpu: bool,
    relax: bool,
) -> _Model:
    """The MILP (or, with ``relax``, its LP relaxation) and what reading it back needs."""
    graph = cost.graph
    n_k = len(graph.kernels)
    gad = build_gadgets(cost, formulation, opts.window)
    var = build_variables(cost, gad, formulation, gpu)
    flow = build_flow(cost, gad, var)
    seg = build_segments(cost, gad, var)
    seconds, move_kernel, is_async = move_costs(cost, gad, var)
    n = var.count
    x = cp.Variable(n) if relax else cp.Variable(n, boolean=True)
    u = cp.Variable(n_k)
    c = cp.Variable(n_k)

    # capacity, difference form: rows k get +size*flag at a segment's start, - after its end
    unit = float(max(int(limits.max()), 1))
    scaled = sp.diags(graph.sizes_bytes[seg.tensor] / unit) @ seg.expr
    n_seg = seg.tensor.size
    arrive = sp.csr_matrix((np.ones(n_seg), (seg.start, np.arange(n_seg))), shape=(n_k + 1, n_seg))
    leave = sp.csr_matrix((np.ones(n_seg), (seg.end + 1, np.arange(n_seg))), shape=(n_k + 1, n_seg))
    delta = ((arrive - leave) @ scaled)[:n_k]
    diff = sp.eye(n_k) - sp.eye(n_k, k=-1)

    # kernel memory time as a function of each operand's fast flag
    op_seg = seg.covering(cost.op_tensor, cost.op_kernel, n_k)
    op_flag = seg.expr[op_seg]
    k = cost.op_kernel
    fast_s = cost.op_read_bytes * cost.read_s_per_byte[k, FAST] + (
        cost.op_write_bytes * cost.write_s_per_byte[k, FAST]
    )
    base_s = cost.compute_s + cost.launch_s
    constraints = [flow.a_eq @ x == flow.b_eq, diff @ u == delta @ x, u >= 0, u <= limits / unit]
    rows: list[tuple[np.ndarray, sp.csr_matrix | None]] = []
    if gpu:
        rows.append((cost.kernel_times_s(np.full(k.size, FAST, dtype=np.int64)), None))
    else:
        slow_s = cost.op_read_bytes * cost.read_s_per_byte[k, SLOW] + (
            cost.op_write_bytes * cost.write_s_per_byte[k, SLOW]
        )
        to_kernel = sp.csr_matrix((np.ones(k.size), (k, np.arange(k.size))), shape=(n_k, k.size))
        mem0 = to_kernel @ slow_s
        gain = to_kernel @ sp.diags(fast_s - slow_s) @ op_flag
        if cost.overlap is Overlap.MAX:
            rows += [(base_s, None), (mem0 + cost.launch_s, sp.csr_matrix(gain))]
        else:
            rows.append((base_s + mem0, sp.csr_matrix(gain)))
    sync_cost = np.where(is_async, 0.0, seconds)
    if is_async.any():
        beside = (seconds[is_async], (move_kernel[is_async], np.flatnonzero(is_async)))
        rows.append((np.zeros(n_k), sp.csr_matrix(beside, shape=(n_k, n))))
    for const, matrix in rows:
        constraints.append(c >= const + matrix @ x if matrix is not None else c >= const)
    objective = cp.Minimize(cp.sum(c) + sync_cost @ x)
    problem = cp.Problem(objective, constraints)
    if relax:
        constraints += [x >= 0, x <= 1]
    n_rows = flow.a_eq.shape[0] + 3 * n_k + n_k * len(rows)
    return _Model(
        problem,
        x,
        u,
        c,
        gad,
        var,
        op_flag,
        sp.csr_matrix(delta),
        tuple(rows),
        move_kernel,
        is_async,
        n + 2 * n_k,
        n_rows,
    )


def _extract(
    cost: CostModel, model: _Model, opts: MilpOptions, limit: int, stats: SolverStats
) -> Plan:
    x = np.asarray(model.x.value) > 0.5
    gad, var = model.gadgets, model.vars
    n_edges = var.edge_gadget.size
    on = np.flatnonzero(x[:n_edges])
    flags = np.asarray(model.op_flag @ x.astype(np.float64)).ravel()
    op_tiers = np.where(flags > 0.5, FAST, SLOW).astype(np.int64)
    moves: list[IndexMove] = []
    drops: dict[tuple[int, int], list[int]] = {}
    for i in on:
        e = Edge(int(var.edge_type[i]))
        g = int(var.edge_gadget[i])
        t = int(gad.tensor[g])
        if e in (Edge.FETCH, Edge.FETCH_INVAL, Edge.WRITE, Edge.WRITE_DROP):
            src, dst = (SLOW, FAST) if e in (Edge.FETCH, Edge.FETCH_INVAL) else (FAST, SLOW)
            mode = MoveMode.ASYNC if model.move_async[i] else MoveMode.SYNC
            moves.append(IndexMove(t, src, dst, int(model.move_kernel[i]), mode))
        if e in (Edge.WRITE_DROP, Edge.DROP):
            drops.setdefault((t, FAST), []).append(int(gad.kernel[g]))
    states = x[n_edges:]
    tiers_of = {0: (FAST,), 1: (FAST, SLOW), 2: (SLOW,)}
    initial = {
        int(t): tiers_of[int(s)]
        for t, s in zip(var.init_tensor[states], var.init_state[states], strict=True)
    }
    options = {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(opts).items()}
    return assemble_plan(
        cost,
        f"milp-{opts.formulation.value}",
        limit,
        op_tiers,
        initial,
        moves,
        drops,
        options,
        stats,
    )


def plan_static(graph: Graph, platform: Platform, options: MilpOptions | None = None) -> Plan:
    """The static MILP: every tensor stays where it is created."""
    return plan_milp(
        graph, platform, replace(options or MilpOptions(), formulation=Formulation.STATIC)
    )


def plan_sync(graph: Graph, platform: Platform, options: MilpOptions | None = None) -> Plan:
    """The synchronous MILP: blocking copies at a tensor's users."""
    return plan_milp(
        graph, platform, replace(options or MilpOptions(), formulation=Formulation.SYNC)
    )


def plan_async(graph: Graph, platform: Platform, options: MilpOptions | None = None) -> Plan:
    """The asynchronous MILP: also copies beside kernels near a tensor's users."""
    return plan_milp(
        graph, platform, replace(options or MilpOptions(), formulation=Formulation.ASYNC)
    )
