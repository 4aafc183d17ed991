"""What each copy edge of the placement MILP costs, and where a copy may come from.

A copy into a tier comes from the tier of its source state whose copy of the tensor is
fastest; beside a window kernel that may also fetch the tensor, not from the state's fastest
tier when it has others (that copy may still be arriving). Copies at users and producers are
synchronous, copies beside window kernels asynchronous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.gadgets import GadgetKind, Gadgets
from tmsim.planners.milp.formulation.states import Catalogue, is_prefetch

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def copy_sources(cat: Catalogue, edge: int, behind_fetch: bool) -> list[int]:
    """The tiers a copy by ``edge`` may come from: its source state's tiers, but where a
    fetch may run beside the same kernel (``behind_fetch``, an asynchronous gadget that may
    fetch) not the state's fastest tier when it has others, as that copy may still be arriving
    (a fetch always adds the fastest tier)."""
    tiers = sorted(cat.states[int(cat.edge_src[edge])])
    return tiers[1:] if behind_fetch and len(tiers) > 1 else tiers


def behind_fetch(g: Gadgets) -> BoolArray:
    """[n_gadgets]: asynchronous gadgets that may fetch (see :func:`copy_sources`)."""
    return np.asarray((g.kind == GadgetKind.WINDOW) & g.may_fetch, dtype=bool)


@dataclass(frozen=True)
class Copies:
    """Per variable: the copy's seconds (0 for edges that copy nothing), the kernel it is
    attributed to, whether it is asynchronous, and its source tier (-1 for none)."""

    seconds: FloatArray
    kernel: IntArray
    asynchronous: BoolArray
    source: IntArray


def move_costs(
    cost: CostModel,
    cat: Catalogue,
    g: Gadgets,
    edge_gadget: IntArray,
    edge_type: IntArray,
    count: int,
) -> Copies:
    """Each copy edge's time: from the tier of its sources (:func:`copy_sources`) whose copy
    of the tensor is fastest (ties: the faster tier), synchronous at users and producers,
    asynchronous beside window kernels. A synchronous eviction runs after its kernel, so
    before the next one. ``edge_gadget``/``edge_type`` are the edge variables (the first of
    ``count`` variables; the others copy nothing)."""
    seconds = np.zeros(count)
    kernel = np.zeros(count, dtype=np.int64)
    asynchronous = np.zeros(count, dtype=bool)
    source = np.full(count, -1, dtype=np.int64)
    et, eg = edge_type, edge_gadget
    window = g.kind[eg] == GadgetKind.WINDOW
    n_e = eg.size
    behind = behind_fetch(g)[eg]
    for e, edge in enumerate(cat.edges):
        if edge.add < 0:
            continue
        for is_async, late in ((False, False), (True, False), (True, True)):
            pick = np.flatnonzero((et == e) & (window == is_async) & (behind == late))
            if pick.size == 0:
                continue  # e.g. static: no copies, so no copy path is needed
            fetch = edge.kind.prefetch
            sources = [
                s for s in copy_sources(cat, e, late and not fetch) if cost.has_path(s, edge.add)
            ]
            mode = MoveMode.ASYNC if is_async else MoveMode.SYNC
            tensors = g.tensor[eg[pick]]
            times = np.stack([cost.move_s(s, edge.add, mode)[tensors] for s in sources])
            best = np.argmin(times, axis=0)
            seconds[:n_e][pick] = times[best, np.arange(pick.size)]
            source[:n_e][pick] = np.asarray(sources)[best]
            asynchronous[:n_e][pick] = is_async
    prefetch = is_prefetch(cat.edge_kind[et])
    kernel[:n_e] = g.kernel[eg] + np.where(prefetch | window, 0, 1)
    return Copies(seconds, kernel, asynchronous, source)


__all__ = ["Copies", "behind_fetch", "copy_sources", "move_costs"]
