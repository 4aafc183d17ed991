"""A plan with every tensor in the fastest tier in which some tensors are dropped and made
again: what the recomputation heuristics (:mod:`.checkpoint`, :mod:`.selective`) decide,
assembled into a plan and held to the capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hwmodels.platform import Platform
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import IndexRecompute
from tmsim.errors import NoPlanError
from tmsim.intervals import occupancy
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.heuristics.placement import require_fast_access
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.workload.graph import PREEXISTING_ROLES, Graph


def fast_with_recomputes(
    graph: Graph,
    platform: Platform,
    settings: PlanSettings | None,
    name: str,
    runs: list[tuple[int, int]],
    drop_after: Mapping[int, int],
    keep_until: Mapping[int, int],
    options: Mapping[str, Any] | None = None,
) -> Plan:
    """The plan of planner ``name`` with every tensor in the fastest tier, in which tensor
    ``t`` of each ``(t, k)`` of ``runs`` (in the order they run) is made again by its producer
    just before kernel ``k`` with every operand on that tier; ``drop_after[t]``: the kernel
    after which ``t``'s first copy is freed; ``keep_until[t]``: the kernel until which a
    tensor a recompute reads stays, past its own last use. ``options`` are recorded in the
    plan beside ``settings``.

    Raises :class:`~tmsim.errors.TmsimError` if kernels cannot access the fastest tier, and
    :class:`NoPlanError` naming the bytes when the step still needs more of the fastest tier
    than the capacity asked for (or than the tier holds).
    """
    opts = settings or PlanSettings()
    require_fast_access(platform, name)
    cost = cost_model(graph, platform, opts.profile)
    fast = 0
    ptr = cost.op_ptr
    recomputes = [
        IndexRecompute(t, k, p, (fast,) * int(ptr[p + 1] - ptr[p]))
        for t, k in runs
        for p in (int(graph.producers[t]),)
    ]
    drops = {(t, fast): [k] for t, k in drop_after.items()}
    for t, k in keep_until.items():
        drops.setdefault((t, fast), []).append(k)
    initial = {
        t: (fast,) for t, tensor in enumerate(graph.tensors) if tensor.role in PREEXISTING_ROLES
    }
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    plan = assemble_plan(
        cost,
        name,
        limit,
        np.zeros(cost.op_tensor.size, dtype=np.int64),
        initial,
        moves=(),
        drops=drops,
        options={**opts.to_dict(), **(options or {})},
        recomputes=recomputes,
    )
    peak = fast_peak_bytes(plan, graph)
    if peak > limit:
        raise NoPlanError(
            f"{name}: the step with {len(runs)} recomputes needs {peak} bytes of tier "
            f"{platform.tiers[0].name!r} at its peak, {peak - limit} bytes more than the "
            f"limit of {limit} bytes"
        )
    return plan


def fast_peak_bytes(plan: Plan, graph: Graph) -> int:
    """The most bytes resident on the fastest tier at any kernel (every range of the plan is
    on that tier)."""
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    ranges = plan.residency
    first = np.array([r.first for r in ranges], dtype=np.int64)
    last = np.array([r.last for r in ranges], dtype=np.int64)
    sizes = graph.sizes_bytes[np.array([index[r.tensor] for r in ranges], dtype=np.int64)]
    return int(occupancy(first, last, sizes, len(graph.kernels)).max(initial=0))


__all__ = ["fast_peak_bytes", "fast_with_recomputes"]
