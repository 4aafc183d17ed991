"""vDNN-style offloading (Rhu et al., MICRO 2016): every operand in the fastest tier at its
users, idle tensors offloaded to the nearest tier that copies both ways and fetched back.
The choice of what to offload is :mod:`tmsim.planners.heuristics.offload`."""

from __future__ import annotations

import numpy as np

from hwmodels.platform import Platform
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import CostModel
from tmsim.errors import NoPlanError, TmsimError
from tmsim.intervals import occupancy
from tmsim.planners.assemble import assemble_plan, check_operands_fit
from tmsim.planners.heuristics.offload import HOME, choose_offloads, offload_moves
from tmsim.planners.heuristics.placement import require_fast_access
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.workload.graph import PREEXISTING_ROLES, Graph


def away_tier(cost: CostModel) -> int:
    """The tier ``vdnn`` offloads to: the fastest tier beyond the first with copy paths to
    and from it. Raises :class:`TmsimError` if there is none."""
    platform = cost.platform
    for i in range(1, len(platform.tiers)):
        if cost.has_path(HOME, i) and cost.has_path(i, HOME):
            return i
    raise TmsimError(
        f"vdnn: platform {platform.name!r} needs a tier with copy paths to and from its "
        f"fastest tier {platform.tiers[HOME].name!r}"
    )


def plan_vdnn(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """vDNN-style movement: every operand in the fastest tier at its users, tensors offloaded
    to the away tier (:func:`away_tier`).

    Everything starts in the fastest tier. A forward activation used again in the backward
    pass is copied asynchronously to the away tier beside its last forward use (beside the
    next kernel if that is its producer), its fast copy freed after that kernel, and fetched
    back asynchronously ``prefetch_ahead`` kernels before its first backward use (later if the
    stretch is short; synchronously just before the use when there is no room). Candidates in
    order of preference: those activations of at least ``offload_min_bytes``, then smaller
    ones, then other stretches between two uses of any tensor, then weights and optimizer
    state (which may also start the step in the away tier and be written back after their
    last update); largest first. With ``offload_all`` every activation of the first kind is
    offloaded (vDNN-all); otherwise only what it takes to fit, kernel by kernel (vDNN-dyn),
    fetching later where that is what fits.

    Raises :class:`TmsimError` unless kernels may access the fastest tier and some tier
    copies to and from it; :class:`InfeasibleError` (naming the kernel and the bytes missing)
    if a kernel's own operands exceed the limit on a platform whose kernels reach only the
    fastest tier, so that no plan exists (:class:`NoPlanError` on other platforms);
    :class:`NoPlanError` naming the kernel if offloading every candidate still does not fit,
    or naming the away tier if what is offloaded overflows it.
    """
    opts = settings or PlanSettings()
    require_fast_access(platform, "vdnn")
    cost = cost_model(graph, platform, opts.profile)
    away = away_tier(cost)
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    check_operands_fit(graph, platform, limit, "vdnn")
    chosen = choose_offloads(
        graph,
        platform,
        limit,
        min_bytes=opts.offload_min_bytes,
        offload_all=opts.offload_all,
        ahead=opts.prefetch_ahead,
    )
    moves, drops, away_start = offload_moves(chosen, away)
    initial = {
        t: (away,) if t in away_start else (HOME,)
        for t, tensor in enumerate(graph.tensors)
        if tensor.role in PREEXISTING_ROLES
    }
    op_tiers = np.full(cost.op_tensor.size, HOME, dtype=np.int64)
    plan = assemble_plan(
        cost, "vdnn", limit, op_tiers, initial, moves, drops=drops, options=opts.to_dict()
    )
    _check_away_fits(plan, graph, platform, away)
    return plan


def _check_away_fits(plan: Plan, graph: Graph, platform: Platform, away: int) -> None:
    """Raise :class:`NoPlanError` if the offloaded copies overflow the away tier."""
    tier = platform.tiers[away]
    ranges = [r for r in plan.residency if r.tier == tier.name]
    held = occupancy(
        [r.first for r in ranges],
        [r.last for r in ranges],
        [graph.tensor(r.tensor).size_bytes for r in ranges],
        len(graph.kernels),
    )
    k = int(np.argmax(held)) if held.size else 0
    if held.size and held[k] > tier.capacity_bytes:
        raise NoPlanError(
            f"vdnn: what is offloaded to tier {tier.name!r} needs {int(held[k])} bytes at "
            f"kernel {k} ({graph.kernels[k].name!r}), {int(held[k]) - tier.capacity_bytes} "
            f"more than its capacity of {tier.capacity_bytes} bytes"
        )
