"""Laying a plan's fast-tier buffers out in addresses, and where the layout overflows.

The MILP counts bytes; buffers need addresses. :func:`fast_layout` gives every fast-tier
residency range of a plan an offset with :func:`tmsim.plans.memory.plan_memory`;
:func:`overflow_bytes` says, per kernel, by how much the buffers live there reach past the
limit, which is what AutoTM's loop subtracts from the limit at those kernels before solving
again. It lays buffers out with :func:`tmsim.plans.memory.fit_memory`: the heuristics first,
then an exact search for a layout in the limit, so that a plan whose bytes fit is not sent
back to the solver for the heuristics' fragmentation alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.intervals import occupancy
from tmsim.plans.memory import DEFAULT_NODE_LIMIT, Layout, Strategy, fit_memory, plan_memory
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
    plan: Plan,
    graph: Graph,
    platform: Platform,
    strategy: Strategy | None = None,
    node_limit: int | None = None,
) -> Layout:
    """Addresses of the plan's fast-tier buffers (in :func:`fast_buffers` order).

    Without a ``strategy``, the layout :func:`overflow_bytes` checks: byte-exact, by
    :func:`~tmsim.plans.memory.fit_memory` in the plan's ``fast_limit_bytes`` (so a plan the
    MILP's loop accepted lays out within its limit); with one, that strategy of
    :func:`~tmsim.plans.memory.plan_memory` with its default alignment.
    """
    sizes, first, last = fast_buffers(plan, graph, platform)
    if strategy is None:
        return fit_memory(sizes, first, last, plan.fast_limit_bytes, 1, node_limit)
    limit = DEFAULT_NODE_LIMIT if node_limit is None else node_limit
    return plan_memory(sizes, first, last, strategy=strategy, node_limit=limit)


def overflow_bytes(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    limit_bytes: int,
    layout: Layout | None = None,
    node_limit: int | None = None,
) -> IntArray:
    """Per kernel, how far the highest buffer live there ends past ``limit_bytes`` (or 0).

    Without a ``layout``, buffers are laid out byte-exact (no alignment padding: the MILP
    counts bytes, so only fragmentation is corrected) by
    :func:`~tmsim.plans.memory.fit_memory` in ``limit_bytes``: the first heuristic whose pool
    fits, else a layout the exact search finds in the limit within ``node_limit`` nodes (when
    the plan's live bytes fit at all; None: :func:`~tmsim.plans.memory.default_node_limit`),
    else the smallest heuristic layout. ``node_limit=0`` lays out with the heuristics alone.
    Raises
    :class:`~tmsim.errors.TmsimError` for a negative ``node_limit``.
    """
    sizes, first, last = fast_buffers(plan, graph, platform)
    out = np.zeros(len(graph.kernels), dtype=np.int64)
    if layout is None:
        layout = fit_memory(sizes, first, last, limit_bytes, 1, node_limit)
    top = layout.ends_bytes
    for i in np.flatnonzero(top > limit_bytes):
        span = slice(int(first[i]), int(last[i]) + 1)
        out[span] = np.maximum(out[span], top[i] - limit_bytes)
    return out


def laid_out_overflow_bytes(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    limit_bytes: int,
    known: Sequence[Mapping[tuple[int, int, int], int]] = (),
) -> tuple[IntArray, dict[tuple[int, int, int], int]]:
    """:func:`overflow_bytes` of the plan in ``limit_bytes``, laid out by the first of the
    ``known`` layouts that holds all its fast buffers (:func:`known_layout`: each must be a
    layout below ``limit_bytes``, as :func:`layout_keys` gives them) or else searched for as
    there; and the layout's keys (:func:`layout_keys`) where nothing overflows (empty
    otherwise), for later plans to reuse."""
    layout = next(
        (found for k in known if k and (found := known_layout(plan, graph, platform, k))), None
    )
    if layout is None:
        sizes, first, last = fast_buffers(plan, graph, platform)
        layout = fit_memory(sizes, first, last, limit_bytes, 1)
    overflow = overflow_bytes(plan, graph, platform, limit_bytes, layout)
    keys = {} if overflow.any() else layout_keys(plan, graph, platform, layout)
    return overflow, keys


def known_layout(
    plan: Plan, graph: Graph, platform: Platform, known: Mapping[tuple[int, int, int], int]
) -> Layout | None:
    """The layout of the plan's fast-tier buffers (in :func:`fast_buffers` order) that
    ``known`` gives, or None unless it holds an offset for every one of them. ``known`` maps
    (tensor index, first kernel, last kernel) to the offset of a buffer of a valid layout, so
    that the layout of a plan whose buffers are among those (a plan made from them, or one
    that keeps fewer of them on the fast tier) is known without laying them out again."""
    fast = platform.tiers[0].name
    ranges = [r for r in plan.residency if r.tier == fast]
    keys = [(graph.tensor_index(r.tensor), r.first, r.last) for r in ranges]
    if not all(key in known for key in keys):
        return None
    sizes, first, last = fast_buffers(plan, graph, platform)
    offsets = np.array([known[key] for key in keys], dtype=np.int64)
    ends = offsets + sizes
    pool = int(ends.max()) if ends.size else 0
    peak = int(occupancy(first, last, sizes, len(graph.kernels)).max()) if sizes.size else 0
    return Layout(offsets, sizes, pool, peak, Strategy.FIRST_FIT)


def layout_keys(
    plan: Plan, graph: Graph, platform: Platform, layout: Layout
) -> dict[tuple[int, int, int], int]:
    """The offsets of ``layout`` (of the plan's fast-tier buffers, in :func:`fast_buffers`
    order) keyed as :func:`known_layout` reads them: the inverse of that function, so that a
    later plan whose fast buffers are among these lays out without a search. Raises
    ValueError when ``layout`` has another number of buffers than the plan."""
    fast = platform.tiers[0].name
    ranges = [r for r in plan.residency if r.tier == fast]
    if len(ranges) != layout.offsets_bytes.size:
        raise ValueError(
            f"a layout of {layout.offsets_bytes.size} buffers for a plan of {len(ranges)}"
        )
    return {
        (graph.tensor_index(r.tensor), r.first, r.last): int(o)
        for r, o in zip(ranges, layout.offsets_bytes, strict=True)
    }


def resident_bytes(plan: Plan, graph: Graph, platform: Platform) -> IntArray:
    """Per kernel, the bytes resident on the fastest tier."""
    sizes, first, last = fast_buffers(plan, graph, platform)
    return occupancy(first, last, sizes, len(graph.kernels))


def resident_overflow_bytes(
    plan: Plan, graph: Graph, platform: Platform, limit_bytes: int
) -> IntArray:
    """Per kernel, the bytes resident on the fastest tier beyond ``limit_bytes`` (or 0)."""
    return np.maximum(resident_bytes(plan, graph, platform) - limit_bytes, 0)
