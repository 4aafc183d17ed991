"""AutoTM's placement MILP: the flow networks (:mod:`.network`), the cvxpy problem
(:mod:`.build`), solving from warm starts (:mod:`.solve`, :mod:`.overlap`) and the chain of
formulations inside the layout loop (:mod:`.chain`)."""

from tmsim.planners.milp.chain import (
    plan_async,
    plan_async_aware,
    plan_milp,
    plan_milp_chain,
    plan_static,
    plan_sync,
)
from tmsim.planners.milp.gadgets import Formulation
from tmsim.planners.settings import AUTOTM_WINDOW, PlanSettings

__all__ = [
    "AUTOTM_WINDOW",
    "Formulation",
    "PlanSettings",
    "plan_async",
    "plan_async_aware",
    "plan_milp",
    "plan_milp_chain",
    "plan_static",
    "plan_sync",
]
