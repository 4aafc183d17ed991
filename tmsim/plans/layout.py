"""Laying a plan's fast-tier buffers out in addresses, and where the layout overflows.

The MILP counts bytes; buffers need addresses. :func:`fast_layout` gives every fast-tier
residency range of a plan an offset with :func:`tmsim.plans.memory.plan_memory`;
:func:`overflow_bytes` says, per kernel, by how much the buffers live there reach past the
limit, which is what AutoTM's loop subtracts from the limit at those kernels before solving
again.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.intervals import occupancy
from tmsim.plans.memory import SMALLEST_OF, Layout, Strategy, plan_memory
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph

IntArray = npt.NDArray[np.int64]


def fast_buffers(
    plan: Plan, graph: Graph, platform: Platform
) -> tuple[IntArray, IntArray, IntArray]:
    """``(sizes, first, last)`` of every residency range on the fastest tier."""
    fast = platform.tiers[0].name
    ranges = [r for r in plan.residency if r.tier == fast]
    sizes = np.array([graph.tensor(r.tensor).size_bytes for r in ranges], dtype=np.int64)
    first = np.array([r.first for r in ranges], dtype=np.int64)
    last = np.array([r.last for r in ranges], dtype=np.int64)
    return sizes, first, last


def fast_layout(
    plan: Plan, graph: Graph, platform: Platform, strategy: Strategy = Strategy.FIRST_FIT
) -> Layout:
    """Addresses of the plan's fast-tier buffers (in :func:`fast_buffers` order)."""
    return plan_memory(*fast_buffers(plan, graph, platform), strategy=strategy)


def overflow_bytes(
    plan: Plan, graph: Graph, platform: Platform, limit_bytes: int, layout: Layout | None = None
) -> IntArray:
    """Per kernel, how far the highest buffer live there ends past ``limit_bytes`` (or 0).

    Without a ``layout``, buffers are laid out by the best of the strategies, with no
    alignment padding (as :attr:`Strategy.SMALLEST` lays them out; the first strategy whose
    pool fits ends the search, since then nothing overflows).
    """
    sizes, first, last = fast_buffers(plan, graph, platform)
    out = np.zeros(len(graph.kernels), dtype=np.int64)
    if layout is None:
        # Byte-exact: the MILP counts bytes, so only fragmentation, not alignment, is corrected.
        for strategy in SMALLEST_OF:
            tried = plan_memory(sizes, first, last, strategy, alignment_bytes=1)
            if tried.pool_bytes <= limit_bytes:
                return out
            if layout is None or tried.pool_bytes < layout.pool_bytes:
                layout = tried
    assert layout is not None  # SMALLEST_OF is not empty
    lay = layout
    top = lay.ends_bytes
    for i in np.flatnonzero(top > limit_bytes):
        span = slice(int(first[i]), int(last[i]) + 1)
        out[span] = np.maximum(out[span], top[i] - limit_bytes)
    return out


def resident_bytes(plan: Plan, graph: Graph, platform: Platform) -> IntArray:
    """Per kernel, the bytes resident on the fastest tier."""
    sizes, first, last = fast_buffers(plan, graph, platform)
    return occupancy(first, last, sizes, len(graph.kernels))


def resident_overflow_bytes(
    plan: Plan, graph: Graph, platform: Platform, limit_bytes: int
) -> IntArray:
    """Per kernel, the bytes resident on the fastest tier beyond ``limit_bytes`` (or 0)."""
    return np.maximum(resident_bytes(plan, graph, platform) - limit_bytes, 0)
