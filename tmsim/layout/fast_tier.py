"""Laying a plan's fast-tier buffers out in addresses, and where the layout overflows.

The MILP counts bytes; buffers need addresses. :func:`fast_layout` gives every fast-tier
residency range of a plan an offset with :func:`tmsim.layout.addresses.plan_memory`;
:func:`overflow_bytes` says, per kernel, by how much the buffers live there reach past the
limit, which is what AutoTM's loop subtracts from the limit at those kernels before solving
again. It lays buffers out with :func:`tmsim.layout.addresses.fit_memory`: the heuristics first,
then an exact search for a layout in the limit, so that a plan whose bytes fit is not sent
back to the solver for the heuristics' fragmentation alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.intervals import occupancy
from tmsim.layout.addresses import DEFAULT_NODE_LIMIT, Layout, Strategy, fit_memory, plan_memory
from tmsim.plans.values import Plan, Residency
from tmsim.workload.graph import Graph

IntArray = npt.NDArray[np.int64]


#: A fast-tier buffer of a plan, as known layouts key it: (tensor index, first kernel, last
#: kernel).
Key = tuple[int, int, int]


def _fast_ranges(plan: Plan, platform: Platform) -> list[Residency]:
    fast = platform.tiers[0].name
    return [r for r in plan.residency if r.tier == fast]


def fast_keys(plan: Plan, graph: Graph, platform: Platform) -> list[Key]:
    """The :data:`Key` of every fast-tier buffer, in :func:`fast_buffers` order."""
    return [(graph.tensor_index(r.tensor), r.first, r.last) for r in _fast_ranges(plan, platform)]


def fast_buffers(
    plan: Plan, graph: Graph, platform: Platform
) -> tuple[IntArray, IntArray, IntArray]:
    """``(sizes, first, last)`` of every residency range on the fastest tier."""
    ranges = _fast_ranges(plan, platform)
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
    :func:`~tmsim.layout.addresses.fit_memory` in the plan's ``fast_limit_bytes`` (so a plan the
    MILP's loop accepted lays out within its limit); with one, that strategy of
    :func:`~tmsim.layout.addresses.plan_memory` with its default alignment.
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
    :func:`~tmsim.layout.addresses.fit_memory` in ``limit_bytes``: the first heuristic whose pool
    fits, else a layout the exact search finds in the limit within ``node_limit`` nodes (when
    the plan's live bytes fit at all; None: :func:`~tmsim.layout.addresses.default_node_limit`),
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
    known: Sequence[Mapping[Key, int]] = (),
) -> tuple[IntArray, dict[Key, int]]:
    """:func:`overflow_bytes` of the plan in ``limit_bytes``, laid out by the first of the
    ``known`` layouts that holds all its fast buffers (as :func:`known_layout` reads one; each
    must be a layout below ``limit_bytes``) or else searched for as there; and that layout's
    offsets by :data:`Key` where nothing overflows (empty otherwise), for later plans."""
    keys = fast_keys(plan, graph, platform)
    layout = _read_layout(plan, graph, platform, keys, known)
    if layout is None:
        sizes, first, last = fast_buffers(plan, graph, platform)
        layout = fit_memory(sizes, first, last, limit_bytes, 1)
    overflow = overflow_bytes(plan, graph, platform, limit_bytes, layout)
    laid = {} if overflow.any() else dict(zip(keys, layout.offsets_bytes.tolist(), strict=True))
    return overflow, laid


def known_layout(
    plan: Plan, graph: Graph, platform: Platform, known: Mapping[Key, int]
) -> Layout | None:
    """The layout of the plan's fast-tier buffers (in :func:`fast_buffers` order) that
    ``known`` gives, or None unless it holds an offset for every one of them. ``known`` maps
    each buffer's :data:`Key` to its offset in a valid layout, so that the layout of a plan
    whose buffers are among those (a plan made from them, or one that keeps fewer of them on
    the fast tier) is known without laying them out again."""
    return _read_layout(plan, graph, platform, fast_keys(plan, graph, platform), [known])


def _read_layout(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    keys: list[Key],
    known: Sequence[Mapping[Key, int]],
) -> Layout | None:
    """:func:`known_layout` from the first of ``known`` that holds all ``keys`` (the plan's)."""
    held = next((k for k in known if all(key in k for key in keys)), None)
    if held is None:
        return None
    sizes, first, last = fast_buffers(plan, graph, platform)
    offsets = np.array([held[key] for key in keys], dtype=np.int64)
    ends = offsets + sizes
    pool = int(ends.max()) if ends.size else 0
    peak = int(occupancy(first, last, sizes, len(graph.kernels)).max()) if sizes.size else 0
    return Layout(offsets, sizes, pool, peak, Strategy.FIRST_FIT)


def resident_bytes(plan: Plan, graph: Graph, platform: Platform) -> IntArray:
    """Per kernel, the bytes resident on the fastest tier."""
    sizes, first, last = fast_buffers(plan, graph, platform)
    return occupancy(first, last, sizes, len(graph.kernels))


def resident_overflow_bytes(
    plan: Plan, graph: Graph, platform: Platform, limit_bytes: int
) -> IntArray:
    """Per kernel, the bytes resident on the fastest tier beyond ``limit_bytes`` (or 0)."""
    return np.maximum(resident_bytes(plan, graph, platform) - limit_bytes, 0)
