"""Which MILP formulation contains which: the order a chain solves them in, what each falls
back to, and what each starts from.

Every formulation's plans include those of the formulations it contains (more gadgets, more
edges; with recomputation, the ``gone`` state and its edges too), so each is solved after them
and returns the best of their plans where its own solve does worse (a time limit, layout
rounds). It starts from the best plan of those it can take a solution from index for index
(:func:`~tmsim.planners.milp.chain.starts.lift`).

The formulations that recompute also fall back to the plans of the recomputation heuristics
(:data:`RECOMPUTE_HEURISTICS`), which lie outside their space where they recompute chains
longer than ``recompute_depth`` (sqrt(N) segments: chains of about sqrt(N) producers), so that
each is never worse than recomputation alone by any planner tmsim has; those in which the host
may run kernels fall back to ZeRO-Offload's and ZeRO-Infinity's plans (:data:`HOST_RUNTIMES`),
plans their gadgets may not hold, and no smaller formulation lifts to. Their solves stop once
their bound proves such a plan better than any of their own (:func:`cutoff_s`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hwmodels.platform import Platform
from tmsim.errors import TmsimError
from tmsim.layout.fast_tier import overflow_bytes
from tmsim.planners.heuristics import REGISTRY
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.runtimes import REGISTRY as RUNTIMES
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph

F = Formulation
#: The formulations each one contains, solved before it: its plan is never worse than theirs
#: (it falls back to the best of them).
CONTAINS: dict[Formulation, tuple[Formulation, ...]] = {
    F.SYNC: (F.STATIC,),
    F.ASYNC: (F.SYNC,),
    F.ASYNC_AWARE: (F.SYNC,),
    F.STATIC_RC: (F.STATIC, F.REMAT),
    F.SYNC_RC: (F.SYNC, F.STATIC_RC),
    F.ASYNC_RC: (F.SYNC_RC, F.ASYNC),
}
#: Those a solution lifts from, index for index (:func:`~tmsim.planners.milp.chain.starts.lift`):
#: the compact asynchronous form has no gadget where ``async-rc`` reads a tensor's state
#: beside a window kernel, so ``async-rc`` starts from ``sync-rc`` alone.
STARTS: dict[Formulation, tuple[Formulation, ...]] = {
    **CONTAINS,
    F.ASYNC_RC: (F.SYNC_RC,),
}


def chain_of(top: Formulation) -> list[Formulation]:
    """``top`` and every formulation it contains, each after those it contains."""
    out: list[Formulation] = []

    def visit(f: Formulation) -> None:
        for smaller in CONTAINS.get(f, ()):
            visit(smaller)
        if f not in out:
            out.append(f)

    visit(top)
    return out


def planners_of(formulations: Sequence[Formulation]) -> set[str]:
    """The planner names of the plans of ``formulations``."""
    return {f"milp-{f.value}" for f in formulations}


#: The heuristics whose plans the formulations that recompute fall back to.
RECOMPUTE_HEURISTICS = ("checkpoint", "selective")
#: The runtime baselines whose plans the formulations in which the host may run kernels fall
#: back to (:mod:`~tmsim.planners.milp.formulation.host`): their copies run beside kernels
#: that need not be gadgets of the formulation, and no smaller formulation's solution lifts
#: to them.
HOST_RUNTIMES = ("zero-offload", "zero-infinity")


def outside_names(
    formulation: Formulation, platform: Platform, settings: PlanSettings
) -> tuple[str, ...]:
    """The planners whose plans ``formulation`` falls back to: the recomputation heuristics
    where it recomputes, and the host runtimes where the host may run its kernels (a host
    compute, ``host_kernels``, a formulation that moves tensors and prices its copies idle,
    no energy weight)."""
    names: tuple[str, ...] = RECOMPUTE_HEURISTICS if formulation.recomputes else ()
    hosted = settings.host_kernels and platform.host_compute is not None
    hosted = hosted and not settings.energy_weight_s_per_j
    if hosted and formulation not in (Formulation.STATIC, Formulation.ASYNC_AWARE):
        names += HOST_RUNTIMES
    return names


def heuristic_plans(
    graph: Graph,
    platform: Platform,
    settings: PlanSettings,
    limit_bytes: int,
    names: Sequence[str] = RECOMPUTE_HEURISTICS,
) -> list[Plan]:
    """The plans of ``names`` (heuristics or runtime baselines) for ``graph`` on ``platform``
    that fit ``limit_bytes`` of the fastest tier (and lay out in it, where
    ``settings.layout``); those that cannot are left out."""
    out = []
    for name in names:
        planner = REGISTRY.get(name) or RUNTIMES[name]
        try:
            plan = planner(graph, platform, settings)
        except TmsimError:
            continue
        if settings.layout and overflow_bytes(plan, graph, platform, limit_bytes).any():
            continue
        out.append(plan)
    return out


def cutoff_s(
    formulation: Formulation, settings: PlanSettings, outside_s: Sequence[float]
) -> float | None:
    """The step time of the best of the plans ``outside_s`` (step times of plans the caller
    holds that ``formulation`` cannot represent, e.g. the heuristics' recomputing longer
    chains), at which a solve of ``formulation`` may stop once its bound proves that none of
    its plans is faster; None where there is none, or where its objective is not its plan's
    step time (the asynchronous formulations, whose plans are timed after the solve, and any
    energy weight)."""
    if not outside_s or formulation.asynchronous or settings.energy_weight_s_per_j:
        return None
    return min(outside_s)


__all__ = [
    "CONTAINS",
    "HOST_RUNTIMES",
    "RECOMPUTE_HEURISTICS",
    "STARTS",
    "chain_of",
    "cutoff_s",
    "heuristic_plans",
    "outside_names",
    "planners_of",
]
