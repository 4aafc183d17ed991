"""A formulation's solved plan and how it is labelled when another formulation takes it:
the gap against a bound, and a smaller formulation's plan handed on as a larger one's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.solver.outcome import LpBasis
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan, SolverStats, first_stop


@dataclass(frozen=True)
class Solved:
    """A formulation's plan, the solved model it came from, its per-kernel limits and the
    build and solve seconds spent on it (warm-up formulations included). ``lifts``: the
    model's solution is the plan (False for a heuristic's plan a formulation fell back to,
    which a larger formulation must not start from). ``layout``: offsets of a layout of the
    plan's fast buffers below the chain's limit, keyed as
    :func:`~tmsim.layout.fast_tier.known_layout` reads them (empty where none was made).
    ``lp_basis``: an optimal basis of the model's LP relaxation from the last layout round
    that solved one (a start for the same model under other limits)."""

    plan: Plan
    model: Model
    limits: np.ndarray
    build_s: float
    solve_s: float
    lifts: bool = True
    layout: dict[tuple[int, int, int], int] = field(default_factory=dict, repr=False)
    lp_basis: LpBasis | None = field(default=None, repr=False, compare=False)


def at_floor(base: Solved, gap: float) -> bool:
    """Whether ``base``'s plan is within relative ``gap`` of the kernel-time bound
    (:attr:`Model.lower_bound_s`), which holds for every formulation."""
    stats = base.plan.stats
    if stats is None or not stats.objective > 0:
        return False
    return (stats.objective - base.model.lower_bound_s) / stats.objective <= gap


def against(stats: SolverStats, bound: float) -> SolverStats:
    """``stats`` with ``bound`` as its bound and the gap measured against it."""
    objective = stats.objective
    finite = objective > 0 and math.isfinite(bound) and math.isfinite(objective)
    gap = max(0.0, objective - bound) / objective if finite else math.nan
    return replace(stats, bound=bound, gap=gap)


def relabel(
    base: Solved,
    opts: PlanSettings,
    formulation: Formulation,
    seconds: tuple[float, float],
    status: str,
    own_bound: float | None = None,
    own_stop: str = "",
) -> Solved:
    """``base``'s plan as a plan of ``formulation`` (which contains it), with the total
    (build, solve) ``seconds`` and ``status`` (saying why, and, for a fallback, how this
    formulation's own solve ended, so that a limit it hit is not hidden), its gap against
    ``own_bound`` (this formulation's first-round bound) or, without one, the kernel-time
    bound. ``own_stop``: the limit that stopped this formulation's own solve, if any (the
    plan's ``stopped_on`` is the first of it and ``base``'s, :func:`first_stop`)."""
    build_s, solve_s = seconds
    stats = base.plan.stats
    assert stats is not None
    # The smaller problem's bound says nothing about this one's optimum; the kernel-time
    # bound holds for every formulation.
    floor = base.model.lower_bound_s
    bound = floor if own_bound is None else max(own_bound, floor)
    relabelled = replace(
        against(stats, bound),
        status=status,
        build_s=build_s,
        solve_s=solve_s,
        stopped_on=first_stop(stats.stopped_on, own_stop),
    )
    plan = replace(
        base.plan,
        planner=f"milp-{formulation.value}",
        options=opts.to_dict(),
        stats=relabelled,
    )
    return replace(base, plan=plan, build_s=build_s, solve_s=solve_s)


__all__ = ["Solved", "against", "at_floor", "relabel"]
