"""AutoTM's placement MILP in three rooms: :mod:`.formulation` (the model as a cvxpy problem),
:mod:`.solver` (a MIP driver on HiGHS that knows nothing of tensors) and :mod:`.chain` (the
formulations solved in order from warm starts, inside the layout loop).

The names below are imported from their modules on first use, so that a module of the solver
room loads without cvxpy and the chain (the process that solves an LP ahead,
:mod:`.solver.remote`, imports HiGHS and numpy alone)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_PLAN = "tmsim.planners.milp.chain.plan"
#: The module each public name comes from.
_SOURCES = {
    "AUTOTM_WINDOW": "tmsim.planners.settings",
    "CHAIN_WORKERS": "tmsim.planners.milp.chain.schedule",
    "Formulation": "tmsim.planners.milp.formulation.gadgets",
    "PlanSettings": "tmsim.planners.settings",
    "plan_async": _PLAN,
    "plan_async_aware": _PLAN,
    "plan_milp": _PLAN,
    "plan_milp_chain": _PLAN,
    "plan_static": _PLAN,
    "plan_sync": _PLAN,
}

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


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'tmsim.planners.milp' has no attribute {name!r}")
    return getattr(importlib.import_module(source), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
