"""Every planner by name, behind one call with one typed set of settings.

``plan(mode, graph, platform, settings)`` runs the heuristic or MILP formulation called
``mode`` (see :data:`MODES`). Each planner is also importable as ``plan_<name>(graph, platform,
options)`` from :mod:`tmsim.planners.heuristics` and :mod:`tmsim.planners.milp`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels.platform import Platform
from tmsim.errors import TmsimError
from tmsim.graph import Graph
from tmsim.plan import Plan
from tmsim.planners.heuristics import REGISTRY, HeuristicOptions
from tmsim.planners.milp import MilpOptions, plan_milp
from tmsim.planners.milp_model import Formulation

#: Every planner name: the heuristics, then the MILP formulations.
MODES: tuple[str, ...] = (*REGISTRY, *(f.value for f in Formulation))


@dataclass(frozen=True)
class PlanSettings:
    """Settings shared by all planners, with their defaults (see :class:`MilpOptions` and
    :class:`HeuristicOptions` for what each means); MILP-only fields are ignored by the
    heuristics."""

    ratio: str | None = None
    fast_bytes: int | None = None
    solver: str = MilpOptions.solver
    time_limit_s: float | None = MilpOptions.time_limit_s
    gap: float = MilpOptions.gap
    window: int = MilpOptions.window
    lp_bound: bool = MilpOptions.lp_bound


def plan(mode: str, graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Run planner ``mode`` on ``graph`` and ``platform``.

    Raises :class:`TmsimError` for an unknown mode, and whatever the planner raises.
    """
    s = settings or PlanSettings()
    if mode in REGISTRY:
        return REGISTRY[mode](
            graph, platform, HeuristicOptions(ratio=s.ratio, fast_bytes=s.fast_bytes)
        )
    if mode in {f.value for f in Formulation}:
        options = MilpOptions(
            formulation=Formulation(mode),
            ratio=s.ratio,
            fast_bytes=s.fast_bytes,
            solver=s.solver,
            time_limit_s=s.time_limit_s,
            gap=s.gap,
            window=s.window,
            lp_bound=s.lp_bound,
        )
        return plan_milp(graph, platform, options)
    raise TmsimError(f"unknown planner {mode!r}; known: {', '.join(MODES)}")


__all__ = ["MODES", "PlanSettings", "plan"]
