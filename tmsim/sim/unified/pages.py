"""Page residency under CUDA unified memory: which pages fault in, which are evicted, when.

The bookkeeping half of :func:`tmsim.sim.unified.replay_unified`, free of SimPy so that it can
be checked by hand. Every tensor is a managed allocation of ``ceil(size / page_bytes)`` pages:
whole pages and a last page of the remaining bytes. Kernels run in graph order; before kernel
``k`` (:func:`simulate_pages`):

1. tensors whose live range ended at ``k - 1`` are freed: their device pages (and host copy)
   are released without a copy. A framework frees dead buffers or reuses them for new tensors
   (nGraph's static memory planner, the PyTorch caching allocator); either way their contents
   are never read again, so nothing migrates. Weights and optimizer state are never freed.
2. kernel ``k``'s distinct operands are pinned; if the bytes of their missing pages exceed the
   free device bytes, the pages of other tensors are evicted in policy order until they fit:
   ``lru`` (least recently used: key = the last kernel that touched the tensor) or ``fifo``
   (key = the kernel that last brought pages of it onto the device: the NVIDIA UVM driver moves
   a 2 MB root chunk to the tail of its eviction list when the chunk is allocated, not when
   it is accessed; ``uvm_pmm_gpu.c``, ``pick_root_chunk_to_evict`` and its TODO, Bug 1765193).
   Ties go to the lower tensor index. A tensor's pages share one key, so eviction empties one
   tensor before it touches the next; the last victim may lose only some of its pages (its
   whole pages first, the short last page with the rest).
3. missing pages of operands that exist (pre-existing tensors, or produced earlier) fault in
   from the host; the pages of a tensor kernel ``k`` produces are allocated on the device with
   no copy (first touch on the GPU populates device memory).

Device capacity is counted in bytes (the sum of the resident pages' sizes); fragmentation of
2 MB chunks is not modelled. An evicted page is copied to the host (the driver "moves all
resident pages backed by it to the CPU", ``uvm_pmm_gpu.c``) unless ``writeback_clean`` is
false and the host already holds a valid copy of the whole tensor (it does for pre-existing
tensors until a kernel writes them, and for any tensor after it was evicted completely).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.unified_memory import UnifiedMemory
from tmsim.errors import InfeasibleError, TmsimError
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES, Graph

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Event kinds of :class:`PageRun`.
EVICT, FETCH, ALLOC = 0, 1, 2


@dataclass(frozen=True)
class PageState:
    """Device residency between steps: ``resident_pages`` [T], eviction ``key`` [T] (smaller
    goes first), ``host_valid`` [T] (the host holds a valid copy of the whole tensor)."""

    resident_pages: IntArray
    key: IntArray
    host_valid: BoolArray


@dataclass(frozen=True)
class PageRun:
    """What :func:`simulate_pages` decided.

    Events, in the order they happen (per kernel: evictions in policy order, then the
    operands' fetches and allocations in operand order), as parallel arrays [E]: ``kernel``
    (they happen before it runs), ``kind`` (:data:`EVICT`, :data:`FETCH`, :data:`ALLOC`),
    ``tensor``, ``pages``, ``nbytes`` (bytes that left or joined the device) and
    ``copied_bytes`` (bytes that crossed the link: ``nbytes`` for fetches, 0 for allocations,
    0 or ``nbytes`` for evictions). ``resident_bytes`` [K]: device bytes in use while each
    kernel runs. ``freed_bytes``: device bytes released by frees. ``initial``/``final``: the
    residency at the start and after the last kernel (before its dead tensors are freed).
    """

    kernel: IntArray
    kind: IntArray
    tensor: IntArray
    pages: IntArray
    nbytes: IntArray
    copied_bytes: IntArray
    resident_bytes: IntArray
    freed_bytes: int
    initial: PageState
    final: PageState

    def total(self, kind: int, field: str = "nbytes") -> int:
        """Sum of ``field`` (``pages``, ``nbytes`` or ``copied_bytes``) over events of ``kind``."""
        values: IntArray = getattr(self, field)
        return int(values[self.kind == kind].sum())


def page_counts(graph: Graph, page_bytes: int) -> tuple[IntArray, IntArray]:
    """``(pages, last_page_bytes)`` of every tensor: ``ceil(size / page_bytes)`` pages, the last
    holding ``size - (pages - 1) * page_bytes`` bytes (1 to ``page_bytes``)."""
    size = graph.sizes_bytes
    pages = -(-size // page_bytes)
    return pages, size - (pages - 1) * page_bytes


def simulate_pages(
    graph: Graph,
    device_bytes: int,
    params: UnifiedMemory,
    start: PageState | None = None,
) -> PageRun:
    """Page residency of one step of ``graph`` on a device of ``device_bytes`` (module doc),
    with ``params``' page size, policy and write-back rule (a :class:`hwmodels.UnifiedMemory`).

    ``start`` is the residency when the step begins (default: nothing on the device, every
    pre-existing tensor valid on the host); only persistent tensors may be resident in it.
    Raises :class:`InfeasibleError` naming the first kernel whose own operands exceed
    ``device_bytes`` (and by how many bytes), and :class:`TmsimError` for a non-positive
    capacity or a ``start`` that does not fit the graph or the device.
    """
    page_bytes, policy = params.page_bytes, params.policy
    writeback_clean = params.writeback_clean
    if device_bytes <= 0:
        raise TmsimError(f"unified-memory: device_bytes must be > 0, got {device_bytes}")
    _check_operands_fit(graph, device_bytes)
    n_t, n_k = len(graph.tensors), len(graph.kernels)
    size = graph.sizes_bytes
    npages, last = page_counts(graph, page_bytes)
    persistent = np.array([t.role in PERSISTENT_ROLES for t in graph.tensors], dtype=bool)
    if start is None:
        start = PageState(
            np.zeros(n_t, np.int64),
            np.zeros(n_t, np.int64),
            np.array([t.role in PREEXISTING_ROLES for t in graph.tensors], dtype=bool),
        )
    res, key = start.resident_pages.copy(), start.key.copy()
    host_valid = start.host_valid.copy()
    if (
        res.shape != (n_t,)
        or np.any(res < 0)
        or np.any(res > npages)
        or np.any((res > 0) & ~persistent)
    ):
        raise TmsimError("start residency: bad page counts, or a non-persistent tensor resident")

    def resident(t: IntArray | int, r: IntArray | int) -> IntArray:
        return _resident_bytes(last, page_bytes, t, r)

    used = int(resident(np.arange(n_t), res).sum())
    if used > device_bytes:
        raise TmsimError(f"start residency holds {used} bytes, more than {device_bytes}")
    initial = PageState(res.copy(), key.copy(), host_valid.copy())
    ptr, operands = graph.operand_csr
    producer = graph.producers
    dies = _dying(graph, persistent)
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    events: list[tuple[int, int, int, int, int, int]] = []
    resident_at = np.zeros(n_k, np.int64)
    freed = 0
    for k, kern in enumerate(graph.kernels):
        if k > 0 and dies[k - 1].size:
            d = dies[k - 1]
            gone = int(resident(d, res[d]).sum())
            used -= gone
            freed += gone
            res[d] = 0
        ops = operands[ptr[k] : ptr[k + 1]]
        missing = int(size[ops].sum() - resident(ops, res[ops]).sum())
        shortfall = missing - (device_bytes - used)
        if shortfall > 0:
            used -= _evict(
                k, shortfall, ops, res, key, host_valid, last, page_bytes, writeback_clean, events
            )
        for t in ops.tolist():
            lacking = int(npages[t] - res[t])
            if lacking == 0:
                continue
            nbytes = int(size[t] - resident(t, res[t]))
            fresh = producer[t] == k
            kind, copied = (ALLOC, 0) if fresh else (FETCH, nbytes)
            events.append((k, kind, t, lacking, nbytes, copied))
            res[t] = npages[t]
            if policy == "fifo":
                key[t] = k
        used += missing
        if policy == "lru":
            key[ops] = k
        resident_at[k] = used
        for name in dict.fromkeys(kern.outputs + kern.updates):
            host_valid[index[name]] = False
    table = np.array(events, dtype=np.int64).reshape(-1, 6).T
    return PageRun(
        kernel=table[0],
        kind=table[1],
        tensor=table[2],
        pages=table[3],
        nbytes=table[4],
        copied_bytes=table[5],
        resident_bytes=resident_at,
        freed_bytes=freed,
        initial=initial,
        final=PageState(res, key, host_valid),
    )


def carry_over(run: PageRun, graph: Graph) -> PageState:
    """The residency the next step starts with: persistent tensors keep their pages (older
    than anything the next step touches), everything else is gone, and the next step's inputs
    are valid on the host only."""
    n_k = len(graph.kernels)
    persistent = np.array([t.role in PERSISTENT_ROLES for t in graph.tensors], dtype=bool)
    inputs = np.array([t.role in PREEXISTING_ROLES for t in graph.tensors], dtype=bool)
    res = np.where(persistent, run.final.resident_pages, 0)
    host_valid = np.where(persistent, run.final.host_valid, inputs)
    return PageState(res, run.final.key - n_k, host_valid)


def _check_operands_fit(graph: Graph, device_bytes: int) -> None:
    ptr, operands = graph.operand_csr
    kernel = np.repeat(np.arange(len(graph.kernels)), np.diff(ptr))
    need = np.bincount(kernel, weights=graph.sizes_bytes[operands], minlength=len(graph.kernels))
    over = np.flatnonzero(need > device_bytes)
    if over.size:
        k = int(over[0])
        raise InfeasibleError(
            f"unified-memory: infeasible: kernel {k} ({graph.kernels[k].name!r}) needs "
            f"{int(need[k])} bytes of operands on the device, {int(need[k]) - device_bytes} "
            f"bytes more than the device's {device_bytes} bytes ({over.size} kernel(s) too "
            "large; thrashing within a kernel is not modelled)"
        )


def _resident_bytes(
    last: IntArray, page_bytes: int, t: IntArray | int, r: IntArray | int
) -> IntArray:
    """Device bytes of tensors ``t`` holding ``r`` resident pages: their last (short) page
    and ``r - 1`` whole ones, or nothing."""
    pages = np.asarray(r, dtype=np.int64)
    return np.where(pages > 0, (pages - 1) * page_bytes + last[t], 0)


def _dying(graph: Graph, persistent: BoolArray) -> list[IntArray]:
    """For every kernel, the non-persistent tensors whose live range ends there."""
    n_k = len(graph.kernels)
    t = np.flatnonzero(~persistent)
    order = t[np.argsort(graph.live_last[t], kind="stable")]
    bounds = np.searchsorted(graph.live_last[order], np.arange(n_k + 1))
    return [order[bounds[k] : bounds[k + 1]] for k in range(n_k)]


def _evict(
    k: int,
    shortfall: int,
    pinned: IntArray,
    res: IntArray,
    key: IntArray,
    host_valid: BoolArray,
    last: IntArray,
    page_bytes: int,
    writeback_clean: bool,
    events: list[tuple[int, int, int, int, int, int]],
) -> int:
    """Evict at least ``shortfall`` bytes in policy order, sparing ``pinned``; return the bytes
    freed. The operand check guarantees that the unpinned resident bytes suffice."""
    mask = res > 0
    mask[pinned] = False
    cand = np.flatnonzero(mask)
    order = cand[np.lexsort((cand, key[cand]))]
    held = _resident_bytes(last, page_bytes, order, res[order])
    cum = np.cumsum(held)
    i = int(np.searchsorted(cum, shortfall))  # first victim with which enough is freed
    freed = 0
    for j, t in enumerate(order[: i + 1].tolist()):
        pages, nbytes = int(res[t]), int(held[j])
        if j == i:
            before = int(cum[i - 1]) if i else 0
            want = -(-(shortfall - before) // page_bytes)
            if want < pages:  # a partial eviction: whole pages only
                pages, nbytes = want, want * page_bytes
        copied = 0 if (not writeback_clean and host_valid[t]) else nbytes
        events.append((k, EVICT, t, pages, nbytes, copied))
        res[t] -= pages
        if res[t] == 0:
            host_valid[t] = True  # every page of it is now on the host
        freed += nbytes
    return freed


__all__ = [
    "ALLOC",
    "EVICT",
    "FETCH",
    "PageRun",
    "PageState",
    "carry_over",
    "page_counts",
    "simulate_pages",
]
