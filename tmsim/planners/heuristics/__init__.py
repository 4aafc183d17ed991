"""Heuristic planners: the baselines the MILP is measured against.

Every planner has the signature ``plan_<name>(graph, platform, settings=None) -> Plan`` and
builds its plan with :class:`~tmsim.cost.CostModel` and
:func:`~tmsim.planners.assemble.assemble_plan`, so its predicted time follows the same
step-time rule as every other plan: static placements (:mod:`.placement`: ``all-fast``,
``all-slow``, ``first-touch``, ``greedy``), vDNN-style offloading (:mod:`.vdnn`), segment
checkpointing (:mod:`.checkpoint`) and selective recomputation of cheap kernels
(:mod:`.selective`), both with every tensor in the fastest tier.
:data:`REGISTRY` maps each name to its planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

from hwmodels.platform import Platform
from tmsim.planners.heuristics.checkpoint import plan_checkpoint
from tmsim.planners.heuristics.placement import (
    plan_all_fast,
    plan_all_slow,
    plan_first_touch,
    plan_greedy,
    tensor_benefit_s,
)
from tmsim.planners.heuristics.selective import plan_selective
from tmsim.planners.heuristics.vdnn import plan_vdnn
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph


class Planner(Protocol):
    """The signature every heuristic planner shares."""

    def __call__(
        self, graph: Graph, platform: Platform, settings: PlanSettings | None = None
    ) -> Plan: ...


#: Heuristic planners by name (read-only), in the order of :mod:`tmsim.strategies`.
REGISTRY: Mapping[str, Planner] = MappingProxyType(
    {
        "all-fast": plan_all_fast,
        "all-slow": plan_all_slow,
        "first-touch": plan_first_touch,
        "greedy": plan_greedy,
        "vdnn": plan_vdnn,
        "checkpoint": plan_checkpoint,
        "selective": plan_selective,
    }
)

__all__ = [
    "REGISTRY",
    "Planner",
    "plan_all_fast",
    "plan_all_slow",
    "plan_checkpoint",
    "plan_first_touch",
    "plan_greedy",
    "plan_selective",
    "plan_vdnn",
    "tensor_benefit_s",
]
