"""Solving the placement MILP: solver options, a warm start, and lifting solutions.

Each formulation contains the one before it (static < sync < async: more gadgets, more
edges), so a solution of the smaller problem *lifts* to the larger one: at every gadget the
larger problem has and the smaller lacks, the tensor stays in the state it was in. The lifted
solution is handed to HiGHS as its first incumbent, through cvxpy's problem data (the column
of each variable comes from cvxpy's own mapping), so the larger solve starts no worse than the
smaller one ended.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cvxpy as cp
import numpy as np
import numpy.typing as npt
from cvxpy.settings import PARAM_PROB

from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.plan.values import SolverStats
from tmsim.planners.heuristics import plan_first_touch, plan_greedy
from tmsim.planners.milp.build import Model
from tmsim.planners.milp.network import Variables
from tmsim.planners.milp.states import Catalogue, Kind
from tmsim.planners.settings import PlanSettings


def has_solution(problem: cp.Problem) -> bool:
    """Whether the solver ended with a feasible point (cvxpy fills the variables with zeros
    when a time limit stops HiGHS before it has one)."""
    status = str(problem.status)
    if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        return True
    info = problem.solver_stats.extra_stats if problem.solver_stats else None
    primal = getattr(info, "primal_solution_status", None)
    # HiGHS: 0 no solution, 1 infeasible point, 2 feasible point
    return bool(primal == 2) if primal is not None else status == cp.USER_LIMIT


def solve_stats(
    problem: cp.Problem,
    solver: str,
    build_s: float,
    solve_s: float,
    variables: int,
    constraints: int,
) -> SolverStats:
    """Statistics of a solved problem; the bound is :func:`dual_bound`'s."""
    status = str(problem.status)
    objective = float(problem.value)
    bound = dual_bound(problem)
    if status == cp.OPTIMAL and math.isnan(bound):
        bound = objective
    finite = objective != 0 and math.isfinite(bound)
    gap = max(0.0, objective - bound) / abs(objective) if finite else math.nan
    return SolverStats(
        solver=solver,
        status=status,
        objective=objective,
        bound=bound,
        gap=gap,
        build_s=build_s,
        solve_s=solve_s,
        variables=variables,
        constraints=constraints,
    )


BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _loops(cat: Catalogue, kind: Kind) -> IntArray:
    """Per state, the edge of ``kind`` (stay or keep) that leaves it unchanged."""
    return np.array([cat.edge(kind, s, s) for s in range(cat.n_states)], dtype=np.int64)


def solver_options(
    solver: str, gap: float, time_limit_s: float | None, node_limit: int | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``cvxpy.Problem.solve`` that set the gap, the wall-clock limit and
    the branch-and-bound node limit (a limit on work, so it stops at the same place however
    loaded the machine is).

    HiGHS, SCIP and Gurobi get all three; other solvers none (they run to optimality).
    """
    name = solver.upper()
    if name == "HIGHS":
        # HiGHS also stops at an absolute gap of 1e-6 by default: 5% of a 20 us step
        out: dict[str, Any] = {"mip_rel_gap": gap, "mip_abs_gap": 0.0}
        if time_limit_s is not None:
            out["time_limit"] = float(time_limit_s)
        if node_limit is not None:
            out["mip_max_nodes"] = int(node_limit)
        return out
    if name == "SCIP":
        params: dict[str, Any] = {"limits/gap": gap}
        if time_limit_s is not None:
            params["limits/time"] = float(time_limit_s)
        if node_limit is not None:
            params["limits/nodes"] = int(node_limit)
        return {"scip_params": params}
    if name == "GUROBI":
        out = {"MIPGap": gap}
        if time_limit_s is not None:
            out["TimeLimit"] = float(time_limit_s)
        if node_limit is not None:
            out["NodeLimit"] = int(node_limit)
        return out
    return {}


def lift(small: Model, x_small: BoolArray, large: Model) -> BoolArray | None:
    """Binaries of ``large`` equivalent to ``x_small``, or None if they cannot be expressed.

    Both models must come from one cost model (one catalogue of states and edges): at every
    gadget ``large`` has and ``small`` lacks, the tensor stays in the state it was in.
    """
    cat = large.catalogue
    gs, vs = small.gadgets, small.vars
    gl, vl = large.gadgets, large.vars
    n_k = int(max(gs.kernel.max(initial=0), gl.kernel.max(initial=0))) + 1
    key_s = gs.tensor * (n_k + 1) + gs.kernel
    key_l = gl.tensor * (n_k + 1) + gl.kernel
    if key_s.size:
        pos = np.minimum(np.searchsorted(key_s, key_l), key_s.size - 1)
        known = key_s[pos] == key_l
    else:
        pos = np.zeros(key_l.size, dtype=np.int64)
        known = np.zeros(key_l.size, dtype=bool)
    n_e = vs.edge_gadget.size
    chosen = np.zeros((gs.tensor.size, cat.n_edges), dtype=bool)
    chosen[vs.edge_gadget[x_small[:n_e]], vs.edge_type[x_small[:n_e]]] = True
    init_small = _init_states(vs, x_small)
    # state after each large gadget: copied where known, else carried forward
    after = np.full(gl.tensor.size, -1, dtype=np.int64)
    rows_known = np.flatnonzero(known)
    evict = cat.of_phase(False)
    g_on, e_on = np.nonzero(chosen[pos[rows_known]][:, evict])
    after[rows_known[g_on]] = cat.edge_dst[evict[e_on]]
    fill_first = gl.first & ~known
    after[fill_first] = init_small[gl.tensor[fill_first]]
    if np.any(after[gl.first] < 0):
        return None
    idx = np.where(after >= 0, np.arange(after.size), -1)
    idx = np.maximum.accumulate(idx)
    carried = after[idx]
    out = np.zeros(vl.count, dtype=bool)
    rows = np.flatnonzero(known)
    g_src, e_src = np.nonzero(chosen[pos[rows]])
    target = vl.edge_index[rows[g_src], e_src]
    unknown = np.flatnonzero(~known)
    stay = vl.edge_index[unknown, _loops(cat, Kind.STAY)[carried[unknown]]]
    keep = vl.edge_index[unknown, _loops(cat, Kind.KEEP)[carried[unknown]]]
    every = np.concatenate((target, stay, keep))
    if np.any(every < 0):
        return None
    out[every] = True
    pre = np.flatnonzero(vl.init_index.max(axis=1) >= 0)
    states = init_small[pre]
    if np.any(states < 0):
        return None
    cols = vl.init_index[pre, states]
    if np.any(cols < 0):
        return None
    out[cols] = True
    return out


def best_heuristic_tiers(cost: CostModel, limit: int) -> IntArray:
    """The tier of every tensor in the better of the greedy and first-touch plans at a
    fastest-tier ``limit`` (both place each tensor in one tier for its whole life)."""
    graph, platform = cost.graph, cost.platform
    options = PlanSettings(capacity=Capacity.of_bytes(max(limit, 1)))
    best = min(
        (plan_greedy(graph, platform, options), plan_first_touch(graph, platform, options)),
        key=lambda p: p.predicted_s,
    )
    tier = np.zeros(len(graph.tensors), dtype=np.int64)
    index = {name: i for i, name in enumerate(platform.tier_names)}
    for r in best.residency:
        tier[graph.tensor_index(r.tensor)] = index[r.tier]
    return tier


def static_start(model: Model, tier: IntArray) -> BoolArray | None:
    """Binaries of a static model that keep tensor ``t`` on tier ``tier[t]`` alone, or None if
    the model cannot express that (e.g. a GPU kernel's operand off the device)."""
    cat, g, v = model.catalogue, model.gadgets, model.vars
    single = np.full(len(cat.tier_names), -1, dtype=np.int64)
    for s, tiers in enumerate(cat.states):
        if len(tiers) == 1:
            single[min(tiers)] = s
    state = single[tier]
    rows = np.arange(g.tensor.size)
    st = state[g.tensor]
    every = np.concatenate(
        (
            v.edge_index[rows, _loops(cat, Kind.STAY)[st]],
            v.edge_index[rows, _loops(cat, Kind.KEEP)[st]],
        )
    )
    pre = np.flatnonzero(v.init_index.max(axis=1) >= 0)
    every = np.concatenate((every, v.init_index[pre, state[pre]]))
    if np.any(every < 0):
        return None
    out = np.zeros(v.count, dtype=bool)
    out[every] = True
    return out


def _init_states(v: Variables, x: BoolArray) -> npt.NDArray[np.int64]:
    """Initial state (a catalogue index) of every tensor, -1 where it has none."""
    n_t = v.init_index.shape[0]
    out = np.full(n_t, -1, dtype=np.int64)
    n_e = v.edge_gadget.size
    on = x[n_e:]
    out[v.init_tensor[on]] = v.init_state[on]
    return out


def solve(
    model: Model,
    solver: str,
    options: dict[str, Any],
    verbose: bool,
    start: BoolArray | None = None,
) -> None:
    """Solve ``model.problem`` in place, from incumbent ``start`` when the solver is HiGHS.

    A warm-started solve HiGHS calls optimal whose solution is not within the gap of the
    bound (:func:`dual_bound`) is not trusted: the problem is solved again without the start.
    Raises ``cvxpy.error.SolverError`` as cvxpy does.
    """
    if start is None or solver.upper() != "HIGHS":
        with _quiet_inaccuracy():
            model.problem.solve(solver=solver, verbose=verbose, **options)
        return
    import highspy

    data, chain, inverse = model.problem.get_problem_data(cp.HIGHS)
    columns = data[PARAM_PROB].var_id_to_col
    values = np.zeros(data["c"].shape[0])
    x0 = start.astype(np.float64)
    u0, c0 = model.complete(x0)
    for var, val in ((model.x, x0), (model.u, u0), (model.c, c0)):
        if var.id not in columns:
            continue  # cvxpy dropped it (empty, or unused by the problem)
        first = columns[var.id]
        values[first : first + var.size] = val
    incumbent = highspy.HighsSolution()
    incumbent.col_value = values.tolist()
    incumbent.value_valid = True
    cache = {cp.HIGHS: (None, None, {"model_status": "kOptimal", "solution": incumbent})}
    raw = chain.solver.solve_via_data(data, True, verbose, dict(options), solver_cache=cache)
    with _quiet_inaccuracy():
        model.problem.unpack_results(raw, chain, inverse)
    gap = float(options.get("mip_rel_gap", 0.0))
    if str(model.problem.status) == cp.OPTIMAL and not _gap_holds(model.problem, gap):
        # HiGHS (seen with 1.16) can score a start wrongly in its presolved space, take it for
        # optimal and stop; its solution's own objective then lies beyond the gap it claims
        with _quiet_inaccuracy():
            model.problem.solve(solver=solver, verbose=verbose, **options)


def dual_bound(problem: cp.Problem) -> float:
    """A lower bound of the optimum from HiGHS's dual bound (nan where it reports none).

    The problem has no constant term, so HiGHS's objective and that of the solution it
    returns should agree; where they do not (a start scored in HiGHS's presolved space),
    the bound is taken in whichever of the two frames makes it lower.
    """
    info = problem.solver_stats.extra_stats if problem.solver_stats else None
    dual = getattr(info, "mip_dual_bound", None)
    if dual is None or not math.isfinite(dual):
        return math.nan
    raw = getattr(info, "objective_function_value", None)
    value = problem.value
    shift = 0.0
    if raw is not None and value is not None and math.isfinite(raw) and math.isfinite(value):
        shift = float(value) - float(raw)
    return float(dual) + min(0.0, shift)


def _gap_holds(problem: cp.Problem, gap: float) -> bool:
    """Whether the solution's own objective is within relative ``gap`` of :func:`dual_bound`
    (True where there is no bound to check against)."""
    bound, value = dual_bound(problem), problem.value
    if math.isnan(bound) or value is None or not math.isfinite(value) or value == 0:
        return True
    return (float(value) - bound) / abs(float(value)) <= gap + 1e-9


@contextmanager
def _quiet_inaccuracy() -> Iterator[None]:
    """Silence cvxpy's "Solution may be inaccurate" warning, which it gives whenever a time
    limit stops the solver: the plan's status and gap already say so."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        yield
