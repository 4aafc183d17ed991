"""Every planner by name, behind one call with one typed set of settings.

``plan(name, graph, platform, settings)`` runs the planner strategy called ``name`` (the
heuristics, runtime baselines and MILP formulations of :mod:`tmsim.strategies`,
:data:`PLANNERS`). Each planner is also importable as ``plan_<name>(graph, platform,
settings)`` from :mod:`tmsim.planners.heuristics`, :mod:`tmsim.planners.runtimes` and
:mod:`tmsim.planners.milp`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tmsim.errors import TmsimError
from tmsim.planners.settings import PlanSettings
from tmsim.strategies import Kind, names, strategy

if TYPE_CHECKING:
    from hwmodels.platform import Platform
    from tmsim.plans.values import Plan
    from tmsim.workload.graph import Graph

#: Every planner strategy: the heuristics, then the MILP formulations.
PLANNERS: tuple[str, ...] = names(Kind.HEURISTIC) + names(Kind.MILP)


def plan(name: str, graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Run planner ``name`` on ``graph`` and ``platform``.

    Raises :class:`TmsimError` for an unknown name or a strategy that is not a planner, and
    whatever the planner raises.
    """
    # the planners are imported when one runs, so that the settings and names above are light
    # to import (the command line's parsers read their defaults)
    from tmsim.planners.heuristics import REGISTRY
    from tmsim.planners.milp import Formulation, plan_milp
    from tmsim.planners.runtimes import REGISTRY as RUNTIMES

    kind = strategy(name).kind
    if kind is Kind.HEURISTIC:
        planner = RUNTIMES[name] if name in RUNTIMES else REGISTRY[name]
        return planner(graph, platform, settings)
    if kind is Kind.MILP:
        return plan_milp(graph, platform, settings, Formulation(name))
    raise TmsimError(
        f"strategy {name!r} is simulated, not planned; planners: {', '.join(PLANNERS)}"
    )


__all__ = ["PLANNERS", "PlanSettings", "plan"]
