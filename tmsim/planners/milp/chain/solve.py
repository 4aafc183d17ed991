"""Solving the placement MILP: solver options, and a solve from
a warm start (:mod:`tmsim.planners.milp.chain.starts`) handed to HiGHS as its first incumbent
(:mod:`tmsim.planners.milp.solver.driver`), so a larger formulation starts no worse than the smaller
one ended. Other solvers run through cvxpy's ``Problem.solve``, cold."""

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

from tmsim.errors import InfeasibleError, TmsimError
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.solver.driver import run_highs
from tmsim.planners.milp.solver.first_lp import Prepared
from tmsim.planners.milp.solver.outcome import (
    CUT_OFF,
    HELD,
    NODE_LIMIT,
    TIME_LIMIT,
    LpBasis,
    Outcome,
)
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import stop_of

GB = 1e9

BoolArray = npt.NDArray[np.bool_]


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


def solve(
    model: Model,
    solver: str,
    options: dict[str, Any],
    verbose: bool,
    start: BoolArray | None = None,
    deadline: float | None = None,
    lp_iterations: int | None = None,
    lp_basis: LpBasis | None = None,
    known_bound: float | None = None,
    lp_from_zero: bool = False,
    lp_presolve: bool = False,
    reached: float | None = None,
    cutoff: float | None = None,
    lp_interior: bool = False,
    prepared: Prepared | None = None,
    held: float | None = None,
) -> Outcome:
    """Solve ``model.problem`` in place (its variables hold the solution), from incumbent
    ``start`` when the solver is HiGHS, and say how it ended.

    ``options`` are :func:`solver_options`'. With a ``deadline`` (a ``time.perf_counter()``
    reading) HiGHS gets what is left of it once cvxpy has compiled the problem (seconds on a
    million variables) as its time limit; ``lp_iterations``, ``lp_basis`` and
    ``known_bound``, ``lp_from_zero``, ``lp_presolve``, ``reached``, ``cutoff``,
    ``lp_interior``, ``prepared`` and ``held`` are
    :func:`~tmsim.planners.milp.solver.driver.run_highs`' (HiGHS only). A
    warm-started solve HiGHS calls optimal whose solution is not within the gap of its
    bound is not trusted (HiGHS 1.16 can score a start wrongly in its presolved space and
    stop): it is solved again without the start. Raises :class:`TmsimError` if the solver fails.
    """
    if solver.upper() != "HIGHS":
        return _solve_cvxpy(model.problem, solver, options, verbose)
    values = None
    if start is not None and not fits(model, start):
        start = None  # HiGHS takes a start as a feasible point; this one is not
    if start is not None:
        x0 = start.astype(np.float64)
        u0, c0 = model.complete(x0)
        values = {model.x: x0, model.u: u0, model.c: c0, **model.host_values(x0)}
        if model.z is not None and model.measured is not None:
            values[model.z] = model.measured.values(x0)
    problem = model.problem
    outcome = run_highs(
        problem,
        until_deadline(options, deadline),
        verbose,
        values,
        lp_iterations,
        lp_basis,
        known_bound,
        lp_from_zero,
        lp_presolve,
        reached,
        cutoff,
        lp_interior,
        prepared,
        held,
    )
    gap = float(options.get("mip_rel_gap", 0.0))
    if start is not None and outcome.status == cp.OPTIMAL and not _gap_holds(outcome, gap):
        basis = outcome.lp_basis or lp_basis
        outcome = run_highs(
            problem,
            until_deadline(options, deadline),
            verbose,
            None,
            lp_iterations,
            basis,
            known_bound,
            lp_from_zero,
            lp_presolve,
            reached,
            cutoff,
            lp_interior,
            prepared,
            held,
        )
    return outcome


#: Slack of :func:`fits`' rows (their coefficients are near 1: limits are in units of each
#: tier's largest limit): ten times HiGHS's primal feasibility tolerance, which a solution
#: handed on from a smaller formulation may use.
FIT_TOLERANCE = 1e-6


def fits(model: Model, x: BoolArray) -> bool:
    """Whether binaries ``x`` satisfy every row of ``model``: the flow, the order and
    recompute rows, each modelled tier's limit at every kernel and the forbidden copies."""
    xf = np.asarray(x, dtype=np.float64)
    if not np.allclose(model.a_eq @ xf, model.b_eq, rtol=0.0, atol=FIT_TOLERANCE):
        return False
    if model.a_ub.shape[0] and np.any(model.a_ub @ xf > model.b_ub + FIT_TOLERANCE):
        return False
    u, _ = model.complete(xf)
    if np.any(u > model.capacity + FIT_TOLERANCE) or np.any(u < -FIT_TOLERANCE):
        return False
    return model.forbidden is None or not np.any(np.asarray(x, dtype=bool) & model.forbidden)


def _solve_cvxpy(
    problem: cp.Problem, solver: str, options: dict[str, Any], verbose: bool
) -> Outcome:
    """Solve ``problem`` through cvxpy with ``solver``: the outcome from cvxpy's status, its
    ``user_limit`` called :data:`TIME_LIMIT` (cvxpy does not say which limit it was, nor
    the node count; a node limit must not pass for finished)."""
    try:
        with _quiet_inaccuracy():
            problem.solve(solver=solver, verbose=verbose, **options)
    except cp.error.SolverError as exc:
        raise TmsimError(f"solver {solver} failed: {exc}") from None
    status = str(problem.status)
    if status == cp.USER_LIMIT:
        status = TIME_LIMIT
    value = problem.value
    finite = value is not None and math.isfinite(float(value))
    solved = status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or (status == TIME_LIMIT and finite)
    objective = float(value) if solved and value is not None else math.nan
    if status == cp.OPTIMAL_INACCURATE:
        status = cp.OPTIMAL
    bound = objective if status == cp.OPTIMAL else math.nan
    return Outcome(status, solved, objective, bound)


#: The least time limit handed to HiGHS once a deadline has passed: it then stops at once.
MIN_TIME_LIMIT_S = 1e-3


def until_deadline(options: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    """``options`` with HiGHS's time limit set to what is left until ``deadline``."""
    if deadline is None:
        return options
    left = max(deadline - time.perf_counter(), MIN_TIME_LIMIT_S)
    return {**options, "time_limit": left}


class ModelInfeasible(InfeasibleError):
    """The solver proved that a formulation's model has no plan: under its limits, and, for a
    formulation that recomputes, at its recompute depth (a deeper one may have one)."""


class SolveStopped(TmsimError):
    """A limit stopped a solve before it had a solution; ``outcome`` says which and how far
    it got (``status``: its status)."""

    def __init__(self, message: str, outcome: Outcome) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.status = outcome.status
        #: the limit that stopped it (:attr:`~tmsim.plans.values.SolverStats.stopped_on`)
        self.stopped_on = stop_of(outcome.status)


def solve_within(
    model: Model,
    opts: PlanSettings,
    formulation: str,
    limits: npt.NDArray[np.int64],
    deadline: float | None,
    start: BoolArray | None,
    lp_basis: LpBasis | None = None,
    known_bound: float | None = None,
    cutoff_s: float | None = None,
    prepared: Prepared | None = None,
    held_s: float | None = None,
) -> Outcome:
    """Solve ``model`` in place from ``start`` with ``opts``, within what is left until
    ``deadline`` (a ``time.perf_counter()`` reading, None for none), and say how it ended;
    ``lp_basis``: an earlier round's, ``known_bound``: a bound of its optimum proven before,
    ``cutoff_s``: the step time of a plan outside the model, where the solve may stop with
    status :data:`~tmsim.planners.milp.solver.outcome.CUT_OFF` (:func:`solve`'s ``cutoff``),
    ``prepared``: ``model`` compiled and its LP first solved ahead
    (:mod:`~tmsim.planners.milp.chain.ahead`), ``held_s``: the objective of a plan of a
    formulation the model contains, which the solve's LP may prove within the gap (status
    :data:`~tmsim.planners.milp.solver.outcome.HELD`: :func:`solve`'s ``held``).

    Returns the outcome where it has a solution or was cut off or stopped on ``held_s``
    (with or without one).
    Raises :class:`InfeasibleError` if the solver proves there is no plan (``limits``: the
    fastest tier's per-kernel limits, for the message), :class:`SolveStopped` if a limit
    stops it (or the deadline has passed) before it has a solution, and :class:`TmsimError`
    if the solver fails.
    """
    remaining = None if deadline is None else deadline - time.perf_counter()
    if remaining is not None and remaining <= 0:
        raise SolveStopped(
            f"the time limit of {opts.time_limit_s} s ran out before the {formulation} solve",
            Outcome(TIME_LIMIT, solved=False),
        )
    options = solver_options(opts.solver, opts.gap, remaining, opts.node_limit)
    outcome = solve(
        model,
        opts.solver,
        options,
        opts.verbose,
        start,
        deadline,
        opts.lp_iterations,
        lp_basis,
        known_bound,
        starts_lp_at_zero(formulation),
        presolves_lp(formulation),
        cutoff=cutoff_s,
        lp_interior=lp_by_interior_point(model),
        prepared=prepared,
        held=held_s,
    )
    if outcome.solved or outcome.status in (CUT_OFF, HELD):
        return outcome
    if outcome.status in (cp.INFEASIBLE, "infeasible_or_unbounded"):
        raise ModelInfeasible(infeasible_message(model, formulation, limits))
    if outcome.status not in (TIME_LIMIT, NODE_LIMIT):
        raise TmsimError(f"solver {opts.solver} failed on the {formulation} MILP: {outcome.status}")
    raise SolveStopped(
        f"solver {opts.solver} found no {formulation} plan (status {outcome.status}) within "
        f"{opts.time_limit_s} s and {opts.node_limit} nodes; raise the limits or the gap",
        outcome,
    )


def infeasible_message(model: Model, formulation: str, limits: npt.NDArray[np.int64]) -> str:
    """Why the solver found no plan of ``model``: the fast tier's least limit of ``limits``,
    and the slower tiers whose capacity the model holds too (those smaller than all the
    tensors together), which may bind as well."""
    message = f"no {formulation} plan fits in {limits.min() / GB:.3f} GB of fast memory"
    names = model.catalogue.tier_names
    slower = [repr(names[t]) for t in model.tiers if t != 0]
    if slower:
        message += (
            f" and the capacity of tier {', '.join(slower)} (smaller than all the tensors "
            "together, so it may bind too)"
        )
    return message


def starts_lp_at_zero(formulation: str) -> bool:
    """Whether the LP first of ``formulation``'s MILP (phase 1 of
    :func:`~tmsim.planners.milp.solver.driver.run_highs`) starts at the zero point rather than after
    presolve: the asynchronous formulations'. Both go by dual simplex.

    Measured with window 15, seconds by interior point with crossover / dual simplex after
    presolve / dual simplex from the zero point:

    - asynchronous LPs: Inception v4 b16 at 4:1 on Optane (89k columns) 9.8 / 10.3 / 2.8;
      ResNet-200 b512 at 4:1 (216k) 24 / - / 12.8; DenseNet-264 b512 at 4:1 (283k)
      87 / - / 9.2; on the RTX 2080 Ti, Inception v4 b128 (107k) 11.7 / 106 / 1.8 and
      ResNet-200 b64 (235k) 31 / over 300 / 5.3;
    - synchronous LPs: Inception v4 b16 at 4:1 (40k) 1.1 / 0.5 / 0.8; ResNet-200 b512 at
      4:1 (82k) 3.0 / 1.7 / 2.3; DenseNet-264 b512 at 4:1 (114k) 4.4 / 3.0 / 4.8; ResNet-200
      b64 on the RTX 2080 Ti (67k) 2.1 / 1.6 / 2.5. Dual simplex after presolve instead of
      interior point above 100k columns took the synchronous chain of DenseNet-264 b512 from
      7.4 to 4.6 s at 4:1 and 8.5 to 4.9 s at 8:1, and that of ResNet-752 b64 (306k columns)
      from 101 to 70 s, with other work on the second core.
    """
    return Formulation(formulation).asynchronous


def lp_by_interior_point(model: Model) -> bool:
    """Whether the LP first of ``model``'s MILP goes by interior point without crossover
    (:mod:`~tmsim.planners.milp.solver.vertex`) rather than dual simplex: a model in which
    the host may run kernels, whose objective is the step time of two streams (the larger of
    the device's and the host's ends, :mod:`~tmsim.planners.milp.formulation.host_time`)
    rather than a sum over kernels, so that many points share the LP's optimum and dual
    simplex stalls on the degenerate face. Measured on two cores with window 15, the LP (after
    MIP presolve where :func:`presolves_lp`) written out and solved alone, seconds by dual
    simplex (from the zero point in parallel for the asynchronous models) / interior point
    without crossover: LLaMA-7B b1 on the GH200, async 271 / 22, sync 31.3 / 2.8; on
    h100-host-nvme, async 24-28 / 28.4; GPT-2 small b8 async on the GH200 at 2.5 GB (78k
    columns) 24.6 / 13.2. On models without host kernels interior point lost:
    ResNet-200 b128 async on the RTX 2080 Ti 8.2 / 35.2, ResNet-200 b512 async on Optane at
    1:1 and 4:1 4.8 / 18.1 and 5.2 / 20.5, DenseNet-264 b512 at 8:1 3.0-3.7 / 4.4.
    """
    return model.host is not None


def presolves_lp(formulation: str) -> bool:
    """Whether the LP first of ``formulation``'s MILP goes through HiGHS's MIP presolve
    (:mod:`~tmsim.planners.milp.solver.presolved`, above
    :data:`~tmsim.planners.milp.solver.phases.PRESOLVE_MIN_COLUMNS` columns): the synchronous
    formulations'. Measured on the bench's asynchronous chains (seconds, LP alone / after MIP
    presolve), it lost more often than it won: on the RTX 2080 Ti Inception v4 b128 4.0 /
    29.6 (the postsolved point led RENS to a plan 1.1% above the bound, where the LP's optimum
    led it to one within 0.7%, and HiGHS's branch and bound had to close the rest), DenseNet-264
    b64 14.4 / 45.4, ResNet-200 b512 on Optane at 4:1 54 / 62, against DenseNet-264 b512 at
    4:1 and 8:1 81 / 37 and at the cap / 28. A static model is small and its MIP presolve
    barely raises the bound (Inception v4 b1024 at 8:1: 60.919 -> 60.947).
    """
    return Formulation(formulation).moves == Formulation.SYNC


def _gap_holds(outcome: Outcome, gap: float) -> bool:
    """Whether ``outcome``'s objective is within relative ``gap`` of its bound (True where
    there is no bound to check against)."""
    bound, value = outcome.bound, outcome.objective
    if math.isnan(bound) or not math.isfinite(value) or value == 0:
        return True
    return (value - bound) / abs(value) <= gap + 1e-9


@contextmanager
def _quiet_inaccuracy() -> Iterator[None]:
    """Silence cvxpy's "Solution may be inaccurate" warning, which it gives whenever a time
    limit stops the solver: the plan's status and gap already say so."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        yield
