"""The statistics of a solve of the placement MILP (:class:`~tmsim.plans.values.SolverStats`):
its status, objective, the best bound proven, the gap between them, its time, size and trace,
and the limit that stopped it short, if any; for a solve a limit stopped before it had a plan
of its own, those of its warm start."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.solver.outcome import Outcome
from tmsim.plans.values import SolverStats, stop_of

BoolArray = npt.NDArray[np.bool_]

#: Suffix of the status of a plan that is the solve's warm start: the solver found nothing
#: better (or nothing at all) before a limit stopped it.
FROM_START = " (its warm start)"


def solve_stats(
    model: Model, solver: str, outcome: Outcome, seconds: tuple[float, float]
) -> SolverStats:
    """Statistics of ``model`` solved with ``outcome`` (the bound :func:`proven_bound`'s);
    ``seconds`` are (build, solve)."""
    return _stats(model, solver, outcome.status, outcome.objective, outcome, seconds)


def start_stats(
    model: Model,
    start: BoolArray,
    solver: str,
    outcome: Outcome,
    seconds: tuple[float, float],
    origin: str = "",
) -> SolverStats:
    """Set ``model``'s binaries to ``start`` and return its statistics: for a solve that a
    limit (``outcome``'s status) stopped before it had a solution of its own, so that its warm
    start is the plan; the bound is :func:`proven_bound`'s. ``origin``: the planner whose
    plan the start is a point of, where it came from outside the MILP (the status names
    it)."""
    # as a solver's values are stored (the public setter rejects a value of an empty boolean
    # variable: a graph without tensors)
    model.x.save_value(start.astype(np.float64))
    status = outcome.status + (FROM_START if not origin else f" (its warm start: {origin}'s plan)")
    return _stats(model, solver, status, model.objective(start), outcome, seconds)


def proven_bound(model: Model, outcome: Outcome) -> float:
    """The best lower bound of ``model``'s optimum at hand after ``outcome``: the solver's
    dual bound or the model's own kernel-time bound (:attr:`Model.lower_bound_s`),
    whichever is higher."""
    own = model.lower_bound_s
    return own if math.isnan(outcome.bound) else max(outcome.bound, own)


def _stats(
    model: Model,
    solver: str,
    status: str,
    objective: float,
    outcome: Outcome,
    seconds: tuple[float, float],
) -> SolverStats:
    bound = proven_bound(model, outcome)
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
        nodes=outcome.nodes,
        # each point's bound proven as the final one is: the model's own bound holds throughout
        trace=tuple((t, p, max(d, model.lower_bound_s)) for t, p, d in outcome.trace),
        stopped_on=stop_of(outcome.status),
    )


__all__ = ["FROM_START", "proven_bound", "solve_stats", "start_stats"]
