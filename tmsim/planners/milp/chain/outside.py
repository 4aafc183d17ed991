"""Plans made outside the MILP (the host runtimes', the recomputation heuristics') handed to a
formulation as its warm start, where they are points of it and beat the start it has.

Each plan is projected onto the formulation's binaries
(:func:`~tmsim.planners.milp.formulation.projection.project`: the plan itself where its
copies run at gadgets of the formulation, its nearest point where not). A point that fits the
model's limits and whose objective is below the start's replaces it: the solve then never ends
above that point. ZeRO-Offload's plan of LLaMA-7B b1 is a point of every formulation that moves
tensors on ``h100-host-nvme`` and ``gh200``, at its own step time; on GPT-2 small the point is
up to 1.8% slower than the plan (copies moved to gadgets, the model's host order). A
formulation without a start of its own takes the point only as the plan of a solve stopped
before its own (:mod:`~tmsim.planners.milp.chain.rounds`): a search from it may end on it within
the gap, and then on the outside plan itself (a fallback, which a larger formulation cannot
start from).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel
from tmsim.planners.milp.chain.solve import fits
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.projection import NotAPoint, project
from tmsim.plans.values import Plan

BoolArray = npt.NDArray[np.bool_]


def outside_start(
    cost: CostModel, model: Model, plans: Sequence[Plan], start: BoolArray | None
) -> tuple[BoolArray | None, str]:
    """The better of ``start`` and the points of ``plans`` (by ``model``'s objective), and
    the planner whose plan it is (``""``: ``start``). A plan is projected only where its step
    time is below the best objective so far (projecting a large model's plan takes a fraction
    of a second); one that is no point of ``model``, or does not fit its limits, is passed
    over."""
    if not plans:
        return start, ""
    best = math.inf if start is None else model.objective(start)
    chosen, origin = start, ""
    for plan in sorted(plans, key=lambda p: p.predicted_s):
        if not plan.predicted_s < best:
            continue
        try:
            x = project(cost, model, plan)
        except NotAPoint:
            continue
        if not fits(model, x):
            continue
        value = model.objective(x)
        if value < best:
            chosen, origin, best = x, plan.planner, value
    return chosen, origin


__all__ = ["outside_start"]
