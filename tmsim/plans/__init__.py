"""Plans and their rules: the :class:`Plan` value and its files, and the independent validator
(laying a plan's buffers out in addresses is :mod:`tmsim.layout`'s business).

Nothing here imports a planner: a plan is checked by re-deriving everything from the plan
itself and the cost model.
"""

from tmsim.plans.files import load_plan, plan_from_dict, plan_to_dict, save_plan
from tmsim.plans.values import Move, Plan, PlanFileError, Recompute, Residency, SolverStats

__all__ = [
    "Move",
    "Plan",
    "PlanFileError",
    "Recompute",
    "Residency",
    "SolverStats",
    "load_plan",
    "plan_from_dict",
    "plan_to_dict",
    "save_plan",
]
