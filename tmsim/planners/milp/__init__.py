"""AutoTM's placement MILP in three rooms: :mod:`.formulation` (the model as a cvxpy problem),
:mod:`.solver` (a MIP driver on HiGHS that knows nothing of tensors) and :mod:`.chain` (the
formulations solved in order from warm starts, inside the layout loop)."""

from tmsim.planners.milp.chain.plan import (
    plan_async,
    plan_async_aware,
    plan_milp,
    plan_milp_chain,
    plan_static,
    plan_sync,
)
from tmsim.planners.milp.chain.schedule import CHAIN_WORKERS
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.settings import AUTOTM_WINDOW, PlanSettings

__all__ = [
    "AUTOTM_WINDOW",
    "CHAIN_WORKERS",
    "Formulation",
    "PlanSettings",
    "plan_async",
    "plan_async_aware",
    "plan_milp",
    "plan_milp_chain",
    "plan_static",
    "plan_sync",
]
