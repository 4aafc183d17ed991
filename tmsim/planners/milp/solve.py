"""Solving the placement MILP: solver options, the statistics of a solve, and a solve from
a warm start (:mod:`tmsim.planners.milp.starts`) handed to HiGHS as its first incumbent
through cvxpy's problem data (the column of each variable comes from cvxpy's own mapping), so
a larger formulation starts no worse than the smaller one ended."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cvxpy as cp
import numpy as np
import numpy.typing as npt
from cvxpy.settings import PARAM_PROB

from tmsim.errors import InfeasibleError, TmsimError
from tmsim.plan.values import SolverStats
from tmsim.planners.milp.build import Model
from tmsim.planners.settings import PlanSettings

GB = 1e9


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


#: Status of a solve the wall-clock limit stopped: where it stops depends on the machine's load.
TIME_LIMIT = "time_limit"
#: Status of a solve the node limit stopped: a limit on work, the same on any load.
NODE_LIMIT = "node_limit"
#: Suffix of the status of a plan that is the solve's warm start: the solver found nothing
#: better (or nothing at all) before a limit stopped it.
FROM_START = " (its warm start)"


def stop_status(problem: cp.Problem, node_limit: int | None) -> str:
    """cvxpy's status of a solved problem, with its ``user_limit`` told apart: ``node_limit``
    where the node count reached ``node_limit``, else ``time_limit`` (the only other limit
    the planner sets)."""
    status = str(problem.status)
    if status != cp.USER_LIMIT:
        return status
    info = problem.solver_stats.extra_stats if problem.solver_stats else None
    nodes = getattr(info, "mip_node_count", None)
    if node_limit is not None and nodes is not None and nodes >= node_limit:
        return NODE_LIMIT
    return TIME_LIMIT


def solve_stats(
    model: Model,
    solver: str,
    node_limit: int | None,
    seconds: tuple[float, float],
) -> SolverStats:
    """Statistics of a solved ``model`` (status as :func:`stop_status` gives it, the bound
    :func:`proven_bound`'s); ``seconds`` are (build, solve)."""
    problem = model.problem
    status = stop_status(problem, node_limit)
    return _stats(model, solver, status, float(problem.value), seconds)


def start_stats(
    model: Model,
    start: BoolArray,
    solver: str,
    status: str,
    seconds: tuple[float, float],
) -> SolverStats:
    """Set ``model``'s binaries to ``start`` and return its statistics: for a solve that a
    limit (``status``) stopped before it had a solution of its own, so that its warm start is
    the plan; the bound is :func:`proven_bound`'s."""
    model.x.value = start.astype(np.float64)
    return _stats(model, solver, status + FROM_START, model.objective(start), seconds)


def proven_bound(model: Model, status: str) -> float:
    """The best lower bound of ``model``'s optimum at hand after a solve that ended with
    ``status``: the solver's dual bound (:func:`dual_bound`, the objective itself where it
    calls the problem optimal without one) or the model's own kernel-time bound
    (:attr:`Model.lower_bound_s`), whichever is higher."""
    problem = model.problem
    solver_bound = dual_bound(problem) if problem.solver_stats is not None else math.nan
    if status == cp.OPTIMAL and math.isnan(solver_bound) and problem.value is not None:
        solver_bound = float(problem.value)
    own = model.lower_bound_s
    return own if math.isnan(solver_bound) else max(solver_bound, own)


def _stats(
    model: Model, solver: str, status: str, objective: float, seconds: tuple[float, float]
) -> SolverStats:
    bound = proven_bound(model, status)
    finite = objective != 0 and math.isfinite(bound) and math.isfinite(objective)
    gap = max(0.0, objective - bound) / abs(objective) if finite else math.nan
    return SolverStats(
        solver=solver,
        status=status,
        objective=objective,
        bound=bound,
        gap=gap,
        build_s=seconds[0],
        solve_s=seconds[1],
        variables=model.variables,
        constraints=model.constraints,
    )


BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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


#: The releases (major, minor) whose internals the warm start has been tested with: it hands
#: HiGHS its start through cvxpy's problem data (``var_id_to_col``) and the HiGHS interface's
#: solver cache, neither of which is public API.
WARM_START_TESTED = {"cvxpy": ((1, 9), (1, 9)), "highspy": ((1, 16), (1, 16))}


def check_warm_start_versions(found: dict[str, str] | None = None) -> None:
    """Raise :class:`TmsimError` unless the installed cvxpy and highspy (or ``found``, name to
    version) are releases in :data:`WARM_START_TESTED`; the message says how to go on."""
    from importlib.metadata import version

    for name, (low, high) in WARM_START_TESTED.items():
        text = (found or {}).get(name) or version(name)
        parts = [int(p) for p in text.split(".")[:2] if p.isdigit()]
        if len(parts) < 2 or not low <= (parts[0], parts[1]) <= high:
            tested = f"{low[0]}.{low[1]}" + ("" if low == high else f" to {high[0]}.{high[1]}")
            raise TmsimError(
                f"MILP warm starts use internals of cvxpy and highspy tested with {name} "
                f"{tested}.x, not {text}: install the tested versions (pip install -c "
                "constraints.txt) or plan with warm_start=False"
            )


def solve(
    model: Model,
    solver: str,
    options: dict[str, Any],
    verbose: bool,
    start: BoolArray | None = None,
    deadline: float | None = None,
) -> None:
    """Solve ``model.problem`` in place, from incumbent ``start`` when the solver is HiGHS.

    A warm-started solve HiGHS calls optimal whose solution is not within the gap of the
    bound (:func:`dual_bound`) is not trusted: the problem is solved again without the start.
    With a ``deadline`` (a ``time.perf_counter()`` reading) a warm-started HiGHS solve gets
    what is left of it once cvxpy has compiled the problem (seconds on a million variables)
    as its time limit, instead of ``options``' own. Raises ``cvxpy.error.SolverError`` as
    cvxpy does.
    """
    if start is None or solver.upper() != "HIGHS":
        with _quiet_inaccuracy():
            model.problem.solve(solver=solver, verbose=verbose, **options)
        return
    check_warm_start_versions()
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
    options = _until(options, deadline)
    raw = chain.solver.solve_via_data(data, True, verbose, dict(options), solver_cache=cache)
    with _quiet_inaccuracy():
        model.problem.unpack_results(raw, chain, inverse)
    gap = float(options.get("mip_rel_gap", 0.0))
    if str(model.problem.status) == cp.OPTIMAL and not _gap_holds(model.problem, gap):
        # HiGHS (seen with 1.16) can score a start wrongly in its presolved space, take it for
        # optimal and stop; its solution's own objective then lies beyond the gap it claims
        with _quiet_inaccuracy():
            model.problem.solve(solver=solver, verbose=verbose, **_until(options, deadline))


#: The least time limit handed to HiGHS once a deadline has passed: it then stops at once.
MIN_TIME_LIMIT_S = 1e-3


def _until(options: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    """``options`` with HiGHS's time limit set to what is left until ``deadline``."""
    if deadline is None:
        return options
    left = max(deadline - time.perf_counter(), MIN_TIME_LIMIT_S)
    return {**options, "time_limit": left}


class SolveStopped(TmsimError):
    """A limit stopped a solve before it had a solution; ``status`` names the limit."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


def solve_within(
    model: Model,
    opts: PlanSettings,
    formulation: str,
    limits: npt.NDArray[np.int64],
    deadline: float | None,
    start: BoolArray | None,
) -> None:
    """Solve ``model`` in place from ``start`` with ``opts``, within what is left until
    ``deadline`` (a ``time.perf_counter()`` reading, None for none).

    Raises :class:`InfeasibleError` if the solver proves there is no plan (``limits``: the
    fastest tier's per-kernel limits, for the message), :class:`SolveStopped` if a limit
    stops it (or the deadline has passed) before it has a solution, and :class:`TmsimError`
    if the solver fails.
    """
    remaining = None if deadline is None else deadline - time.perf_counter()
    if remaining is not None and remaining <= 0:
        raise SolveStopped(
            f"the time limit of {opts.time_limit_s} s ran out before the {formulation} solve",
            TIME_LIMIT,
        )
    options = solver_options(opts.solver, opts.gap, remaining, opts.node_limit)
    try:
        solve(model, opts.solver, options, opts.verbose, start, deadline)
    except cp.error.SolverError as exc:
        raise TmsimError(f"solver {opts.solver} failed: {exc}") from None
    if model.x.value is None or not has_solution(model.problem):
        status = str(model.problem.status)
        if status in (cp.INFEASIBLE, "infeasible_or_unbounded"):
            raise InfeasibleError(
                f"no {formulation} plan fits in {limits.min() / GB:.3f} GB of fast memory"
            )
        stop = stop_status(model.problem, opts.node_limit)
        raise SolveStopped(
            f"solver {opts.solver} found no {formulation} plan (status {stop}) within "
            f"{opts.time_limit_s} s and {opts.node_limit} nodes; raise the limits or the gap",
            stop,
        )


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
