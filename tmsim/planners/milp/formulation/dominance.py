"""Tiers the placement MILP may leave out: a storage tier that a roomier, no slower tier
dominates.

A tier ``b`` (not the fastest) is *dominated* by a tier ``a`` (neither ``b`` nor the
fastest) when

- no kernel reaches ``b``: neither the compute device's nor the host compute's (``b`` only
  holds copies);
- ``a`` has room for every tensor of the step together (its capacity never binds, so the
  MILP does not model it, :func:`~tmsim.planners.milp.formulation.build.modelled_tiers`);
- for every other tier ``x``, a copy path ``b -> x`` has a path ``a -> x`` beside it and a
  path ``x -> b`` a path ``x -> a``, each taking no longer for any tensor in either mode.

Then any plan that keeps a copy on ``b`` has a twin that keeps it on ``a`` instead (a copy
between ``a`` and ``b`` becomes none, a copy to or from ``b`` the copy to or from ``a``):
no kernel reads ``b``, so no kernel's time changes; each copy is no longer and there are no
more of them; the tiers whose capacity the MILP models hold the same bytes. The twin is no
slower in the MILP's model, so states holding ``b`` cannot improve the optimum, and the MILP
builds its states over the other tiers (``h100-host-nvme``'s NVMe drive beside its 512 GiB of
host memory: LLaMA-7B b1's sync model from 117k variables to 54k, its async model from 1.69M
to 666k, the same plans; with two tiers left, the async model then takes the compact form of
:mod:`~tmsim.planners.milp.formulation.windows`: 171k).

The argument is about the MILP's costs alone: it does not hold where the copies are priced by
interference measured beside kernels (``async-aware``) or where energy counts (an NVMe write
costs other joules than a DRAM write), and no tier is left out there.
"""

from __future__ import annotations

import numpy as np

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel


def _no_slower(cost: CostModel, a: int, b: int, x: int) -> bool:
    """Whether tier ``a`` copies to and from ``x`` wherever ``b`` does, no slower."""
    for via_a, via_b in (((a, x), (b, x)), ((x, a), (x, b))):
        if not cost.has_path(*via_b):
            continue
        if not cost.has_path(*via_a):
            return False
        for mode in (MoveMode.SYNC, MoveMode.ASYNC):
            if np.any(cost.move_s(*via_a, mode) > cost.move_s(*via_b, mode)):
                return False
    return True


def dominator(cost: CostModel, b: int, excluded: frozenset[int] = frozenset()) -> int:
    """The first tier that dominates tier ``b`` (see the module documentation), -1 if none;
    ``excluded``: tiers that may not dominate (those left out already)."""
    platform = cost.platform
    n = len(platform.tiers)
    reached = [
        k or h
        for k, h in zip(platform.kernel_tier_mask(), platform.host_kernel_tier_mask(), strict=True)
    ]
    if b <= 0 or reached[b]:
        return -1
    total = int(cost.graph.sizes_bytes.sum())
    for a in range(1, n):
        if a == b or a in excluded or platform.tiers[a].capacity_bytes < total:
            continue
        if all(_no_slower(cost, a, b, x) for x in range(n) if x not in (a, b)):
            return a
    return -1


def twin_tiers(cost: CostModel) -> tuple[int, ...]:
    """Per tier (fastest first), the tier the MILP's states hold its copies on: the tier
    itself, or for a tier left out, the tier that dominates it (slowest first, each by a
    tier not itself left out): the twin of the module documentation."""
    n = len(cost.platform.tiers)
    twin = list(range(n))
    gone: set[int] = set()
    needed: set[int] = set()
    for b in range(n - 1, 0, -1):
        if b in needed:
            continue
        a = dominator(cost, b, frozenset(gone))
        if a >= 0:
            twin[b] = a
            gone.add(b)
            needed.add(a)
    return tuple(twin)


def usable_tiers(cost: CostModel) -> tuple[bool, ...]:
    """Per tier (fastest first), whether the MILP's states may hold it: every tier but those
    dominated (:func:`twin_tiers`)."""
    return tuple(a == b for b, a in enumerate(twin_tiers(cost)))


__all__ = ["dominator", "twin_tiers", "usable_tiers"]
