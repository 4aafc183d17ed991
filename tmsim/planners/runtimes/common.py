"""What the runtime baselines share: the host tier they offload to, the device's limit, and
the check that a plan's copies fit every tier."""

from __future__ import annotations

import numpy as np

from hwmodels.platform import Platform
from tmsim.cost import CostModel
from tmsim.errors import NoPlanError, TmsimError
from tmsim.intervals import occupancy
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph

#: The device: the fastest tier, where the compute device reads every operand.
DEVICE = 0


def host_tier(cost: CostModel, planner: str) -> int:
    """The host tier: the first tier (fastest first) the platform's host compute reaches with
    copy paths to and from the device. Raises :class:`TmsimError` (one line) for a platform
    without a host compute, or whose host compute reaches no such tier."""
    platform = cost.platform
    host = platform.host_compute
    if host is None:
        raise TmsimError(
            f"{planner}: platform {platform.name!r} describes no host CPU ([host_compute]) "
            "beside its compute device"
        )
    for i, reach in enumerate(platform.host_kernel_tier_mask()):
        if i != DEVICE and reach and cost.has_path(DEVICE, i) and cost.has_path(i, DEVICE):
            return i
    raise TmsimError(
        f"{planner}: platform {platform.name!r}: no tier its host CPU reaches "
        f"({', '.join(host.kernel_tiers)}) has copy paths to and from "
        f"{platform.tiers[DEVICE].name!r}"
    )


def away_tier(cost: CostModel, planner: str) -> int:
    """The first tier beyond the device with copy paths to and from it (a GPU's host
    memory). Raises :class:`TmsimError` (one line) if there is none."""
    platform = cost.platform
    for i in range(len(platform.tiers)):
        if i != DEVICE and cost.has_path(DEVICE, i) and cost.has_path(i, DEVICE):
            return i
    raise TmsimError(
        f"{planner}: platform {platform.name!r} has no tier with copy paths to and from "
        f"{platform.tiers[DEVICE].name!r}"
    )


def check_fits(plan: Plan, graph: Graph, platform: Platform, limit: int, planner: str) -> None:
    """Raise :class:`NoPlanError` naming the tier, the kernel and the bytes where the copies
    ``plan`` keeps overflow a tier: the device beyond ``limit`` (and its capacity), every
    other tier beyond its capacity."""
    n_k = len(graph.kernels)
    sizes = {t.name: t.size_bytes for t in graph.tensors}
    for i, tier in enumerate(platform.tiers):
        ranges = [r for r in plan.residency if r.tier == tier.name]
        if not ranges:
            continue
        held = occupancy(
            [r.first for r in ranges],
            [r.last for r in ranges],
            [sizes[r.tensor] for r in ranges],
            n_k,
        )
        cap = min(limit, tier.capacity_bytes) if i == DEVICE else tier.capacity_bytes
        k = int(np.argmax(held))
        if held[k] > cap:
            what = "limit" if cap < tier.capacity_bytes else "capacity"
            raise NoPlanError(
                f"{planner}: tier {tier.name!r} would hold {int(held[k])} bytes at kernel {k} "
                f"({graph.kernels[k].name!r}), {int(held[k]) - cap} more than its {what} of "
                f"{cap} bytes"
            )
