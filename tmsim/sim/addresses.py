"""The training step at addresses: where each tensor lives in the memory plan's pool, and the
step's accesses to those addresses in order.

What the simulations of address-managed memory share (the 2LM cache, :mod:`tmsim.sim.cache`;
first touch by pages, :mod:`tmsim.sim.firsttouch`):

- :func:`step_layout`: every tensor's offset in one pool, from the static memory planner;
- :func:`step_accesses`: the step's accesses in order, kernel by kernel, reads then writes;
- :func:`per_kernel`: values per access summed per kernel;
- :class:`RangeSet`: address ranges covered so far, telling what a new range adds.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel
from tmsim.layout.addresses import Layout, plan_memory
from tmsim.workload.graph import Graph
from tmsim.workload.tensors import PREEXISTING_ROLES

IntArray = npt.NDArray[np.int64]


class Accesses(NamedTuple):
    """A step's accesses in order [n]: address range, write or read, and the kernel making it."""

    starts_bytes: IntArray
    lengths_bytes: IntArray
    is_write: npt.NDArray[np.bool_]
    kernel: IntArray


def step_layout(graph: Graph) -> Layout:
    """Addresses of every tensor of ``graph`` (indexed like ``graph.tensors``): first fit over
    live ranges, with the pre-existing tensors (inputs, weights, optimizer state) live at
    every kernel, because the next step uses them again (its batch is loaded into the same
    input buffers)."""
    first, last = graph.live_first.copy(), graph.live_last.copy()
    whole = np.array([t.role in PREEXISTING_ROLES for t in graph.tensors], dtype=np.bool_)
    first[whole], last[whole] = 0, len(graph.kernels) - 1
    return plan_memory(graph.sizes_bytes, first, last)


def step_accesses(graph: Graph, cost: CostModel, layout: Layout) -> Accesses:
    """The step's accesses in order: kernel by kernel, each operand it reads, then each operand
    it writes, in operand order; an access covers the tensor's whole address range."""
    reads = np.flatnonzero(cost.op_read_bytes > 0)
    writes = np.flatnonzero(cost.op_write_bytes > 0)
    ops = np.concatenate([reads, writes])
    is_write = np.concatenate([np.zeros(reads.size, np.bool_), np.ones(writes.size, np.bool_)])
    order = np.lexsort((ops, is_write, cost.op_kernel[ops]))
    ops, is_write = ops[order], is_write[order]
    tensors = cost.op_tensor[ops]
    return Accesses(
        layout.offsets_bytes[tensors].astype(np.int64),
        graph.sizes_bytes[tensors].astype(np.int64),
        is_write,
        cost.op_kernel[ops].astype(np.int64),
    )


def per_kernel(kernel: IntArray, values: npt.ArrayLike, n_kernels: int) -> IntArray:
    """Sum of ``values`` [n] by ``kernel`` [n] into ``n_kernels`` integers."""
    out = np.zeros(n_kernels, dtype=np.int64)
    np.add.at(out, kernel, np.asarray(values, dtype=np.int64))
    return out


class RangeSet:
    """Half-open integer ranges covered so far, kept sorted and disjoint (touching ranges
    merged). :meth:`add` costs a binary search plus the ranges the new one overlaps."""

    def __init__(self) -> None:
        self._lo: list[int] = []
        self._hi: list[int] = []

    def add(self, start: int, end: int) -> list[tuple[int, int]]:
        """Cover ``[start, end)``; return the pieces of it not covered before, in increasing
        order (empty for an empty range or one covered already)."""
        if end <= start:
            return []
        lo, hi = self._lo, self._hi
        i = bisect.bisect_left(hi, start)  # the first range ending at or after start
        j = bisect.bisect_right(lo, end)  # past the last range starting at or before end
        new: list[tuple[int, int]] = []
        at = start
        for s, h in zip(lo[i:j], hi[i:j], strict=True):
            if s > at:
                new.append((at, min(s, end)))
            at = max(at, h)
        if at < end:
            new.append((at, end))
        if i < j:  # merge the ranges it overlaps or touches
            start, end = min(start, lo[i]), max(end, hi[j - 1])
        lo[i:j], hi[i:j] = [start], [end]
        return new

    @property
    def covered(self) -> int:
        """The length covered."""
        return sum(h - s for s, h in zip(self._lo, self._hi, strict=True))


__all__ = ["Accesses", "RangeSet", "per_kernel", "step_accesses", "step_layout"]
