"""How a solve on HiGHS ended: its status (HiGHS's model status in the words the planner and a
plan's stats use), bounds, work and progress, and the LP basis a later solve of the same model
may start from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp

#: Status of a solve the wall-clock limit stopped: where it stops depends on the machine's load.
TIME_LIMIT = "time_limit"
#: Status of a solve the node limit stopped: a limit on work, the same on any load.
NODE_LIMIT = "node_limit"
#: Status of a solve stopped where its bound proved a point held outside it (``cutoff``) better.
CUT_OFF = "cut_off"
#: Status of a solve whose LP's bound proved a point the caller holds outside the start
#: within the gap (:func:`~tmsim.planners.milp.solver.driver.run_highs`' ``held``): no point
#: of its own, its bound the LP's.
HELD = "held"


#: A point of a solve's progress: (seconds since the run began, primal bound, dual bound);
#: a bound not known yet is ``inf`` (primal) or ``-inf`` (dual).
TracePoint = tuple[float, float, float]

_STATUS = {
    "kOptimal": cp.OPTIMAL,
    "kInfeasible": cp.INFEASIBLE,
    "kUnboundedOrInfeasible": "infeasible_or_unbounded",
    "kUnbounded": cp.UNBOUNDED,
    "kTimeLimit": TIME_LIMIT,
    "kInterrupt": "interrupted",
}


@dataclass(frozen=True)
class LpBasis:
    """An optimal basis of a problem's LP relaxation (``basis``: a ``highspy.HighsBasis``)
    and the key of the problem it belongs to
    (:attr:`~tmsim.planners.milp.solver.compiled.Compiled.key`: its matrix's pattern and its costs).
    It is offered only to a problem with the same key, such as the next layout round's (its capacity
    rows scaled anew and their bounds lowered), where the simplex goes on from it. A basis is only a
    start: the LP's optimum does not depend on it."""

    key: str
    basis: Any = field(repr=False, compare=False)


@dataclass(frozen=True)
class Outcome:
    """How a solve ended.

    ``status``: ``optimal`` (within the gap), ``infeasible``, ``infeasible_or_unbounded``,
    ``unbounded``, :data:`TIME_LIMIT`, :data:`NODE_LIMIT`, or ``solver_error (...)``;
    ``solved``: whether it ended with a feasible point, which the problem's variables then
    hold; ``objective``: that point's objective (nan without); ``bound``: the solver's dual
    bound in the problem's own sense (a bound from above for a maximisation; nan where it
    gave none); ``nodes``: branch-and-bound nodes; ``iterations``: simplex iterations (of
    every LP the solve ran); ``trace``: the progress points, in time order; ``lp_basis``:
    the optimal basis of its LP relaxation where the solve ran one to its optimum (none
    after HiGHS's MIP presolve, whose reduced problem's basis does not carry over, nor after
    an interior point run without crossover, which has none).
    """

    status: str
    solved: bool
    objective: float = math.nan
    bound: float = math.nan
    nodes: int = 0
    iterations: int = 0
    trace: tuple[TracePoint, ...] = field(default_factory=tuple)
    lp_basis: LpBasis | None = field(default=None, compare=False)


def status_of(name: str, nodes: int, node_limit: object) -> str:
    """The outcome status of HiGHS's model status ``name`` (a node limit ends as
    ``kSolutionLimit``, which HiGHS also uses for its other work limits)."""
    if name == "kSolutionLimit" and isinstance(node_limit, int) and nodes >= node_limit:
        return NODE_LIMIT
    return str(_STATUS.get(name, f"solver_error ({name})"))


__all__ = [
    "CUT_OFF",
    "HELD",
    "NODE_LIMIT",
    "TIME_LIMIT",
    "LpBasis",
    "Outcome",
    "TracePoint",
    "status_of",
]
