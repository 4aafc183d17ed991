"""2LM (Optane Memory Mode) replay: the training step behind a hardware-managed DRAM cache.

In memory mode the fast tier is a direct-mapped, write-back cache of the slow tier
(:class:`hwmodels.DramCache`, ``platform.cache``) and the step runs unmodified at addresses in
the slow tier. :func:`replay_cache` simulates one step:

1. Addresses. The static memory planner (:func:`tmsim.layout.addresses.plan_memory`, first
   fit, 64-byte aligned) lays out every tensor of the graph over its live range; weights,
   optimizer state and the step's inputs live for the whole step, because the next step uses
   them again (its batch is loaded into the same input buffers). The offsets are taken as
   physical addresses from 0, as if the pool were one contiguous region (huge pages), so a
   pool no larger than the cache never conflicts with itself in a direct-mapped cache.
2. Accesses. Kernels run in graph order. A kernel first reads each operand it reads, in operand
   order, then writes each operand it writes (an in-place update is read, then written); each
   is one access of the tensor's whole address range. A real kernel interleaves its reads and
   writes; the order matters only where blocks of one kernel map to the same set.
3. The cache. The accesses walk :func:`hwmodels.simulate_accesses` in blocks of
   ``block_bytes``, the accuracy/speed knob (default: a 4 KiB page, see
   :func:`~tmsim.sim.cache.walk.default_block_bytes`); a way that is not a whole number of
   blocks is rounded down to one (:func:`~tmsim.sim.cache.walk.simulated_cache`). With
   ``warm=True`` (the default) the step is walked twice on one cache state and the second walk
   is reported: training repeats the step, and for a direct-mapped cache the state after one
   step equals the state after every later one (each set ends holding the last block the step
   touched there, dirty or not by that step's own accesses), so the second step *is* the
   steady state. ``warm=False`` reports the first step, from an empty cache.
4. Timing. The traffic becomes bytes on each tier (:func:`hwmodels.cache_traffic_by_tier`),
   timed on SimPy by the fluid model as :func:`tmsim.sim.replay.replay` times kernels: after its
   launch overhead a kernel runs its memory traffic beside its compute floor
   (:attr:`tmsim.cost.CostModel.compute_s`; one after the other under ``Overlap.SUM``). The traffic
   is two flows, all its reads and all its writes, each capped so that alone both last the roofline
   memory time of that traffic (:func:`hwmodels.roofline`, which adds the tiers' times: DRAM and PMM
   share the memory channels). At any interference level but ``none`` the two share the tiers in
   :class:`~tmsim.sim.fluid.FluidModel`, so where the PMM is the bottleneck its fills (reads) and
   write-backs (writes) pay Optane's read/write mix factor, as the hardware interleaves them line by
   line. At the level ``none`` each runs at its cap (the cost model's world): the step time is the
   sum of the kernels' roofline times. (A plan replay charges no kernel for its own read/write mix,
   because the planners' cost model does not.)
5. Miss latency. :attr:`hwmodels.DramCache.miss_latency_s` (70 ns on Cascade Lake) is charged
   once per kernel that misses, before its traffic. The kernels stream megabytes to gigabytes
   and the cores keep hundreds of line misses in flight (24 cores x 10 line-fill buffers x 64 B
   per 305 + 70 ns is about 41 GB/s, above the PMM's 37.6 GB/s of sequential reads, a figure
   measured with its latency), so past the first miss the latency hides behind bandwidth.

The addresses and accesses are :mod:`tmsim.sim.addresses`', the walk (counters, bytes on each
tier) :mod:`tmsim.sim.cache.walk`'s; this module times it with
:func:`tmsim.sim.traffic.time_traffic` (two flows per kernel, at the ``bandwidth`` level for any
level but ``none``, which it records).
A cost model's measured kernel tables are not used: the cache's traffic decides memory time.
"""

from __future__ import annotations

import numpy as np

from hwmodels.platform import Platform
from hwmodels.timing import Overlap
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.sim.addresses import step_accesses, step_layout
from tmsim.sim.cache.trace import CacheTrace
from tmsim.sim.cache.walk import CacheReplayError, cache_of, default_block_bytes, walk_step
from tmsim.sim.trace import KERNEL, Record, Trace
from tmsim.sim.traffic import body_s, memory_s, time_traffic
from tmsim.workload.graph import Graph

#: The planner name of a 2LM trace.
PLANNER = "2lm"


def replay_cache(
    graph: Graph,
    platform: Platform,
    *,
    block_bytes: int | None = None,
    level: InterferenceLevel = DEFAULT_LEVEL,
    warm: bool = True,
    cost: CostModel | None = None,
) -> CacheTrace:
    """Simulate one training step of ``graph`` on 2LM ``platform`` (see the module documentation).

    ``block_bytes``: the cache walk's block (default
    :func:`~tmsim.sim.cache.walk.default_block_bytes`); ``warm``: report the second of two steps
    (steady state) rather than the first, from an empty cache; ``level``: at any level but ``none``
    kernels' reads and writes share the tiers, paying the PMM's read/write mix (the ``bandwidth``
    level, recorded as such; at ``none`` each kernel runs at its roofline rate); ``cost``: the cost
    model giving operand bytes, compute floors and launch overhead (default ``CostModel(graph,
    platform)``). Deterministic.

    Raises :class:`CacheReplayError` naming the platform if it has no cache or its backing tier
    is not a kernel tier, or if ``block_bytes`` is not a positive multiple of the cache line,
    is larger than one way of the cache or gives it too many frames; :class:`TmsimError` if
    ``cost`` was built for another graph or platform.
    """
    cache = cache_of(platform)
    if cost is None:
        cost = CostModel(graph, platform)
    elif cost.graph is not graph or cost.platform != platform:
        raise TmsimError("replay_cache: the cost model was built for another graph or platform")
    n_k = len(graph.kernels)
    layout = step_layout(graph)
    walk = walk_step(platform, step_accesses(graph, cost, layout), n_k, block_bytes, warm)
    pre_s = cost.launch_s + np.where(walk.misses > 0, cache.miss_latency_s, 0.0)
    # Reads and writes as two flows, so that the PMM charges their mix (fluid model).
    none = InterferenceLevel(level) is InterferenceLevel.NONE
    used = InterferenceLevel.NONE if none else InterferenceLevel.BANDWIDTH
    times = time_traffic(cost, walk.read_bytes, walk.write_bytes, pre_s, split=True, level=used)
    records = tuple(
        Record(
            kind=KERNEL,
            name=kern.name,
            kernel=k,
            phase=kern.phase.value,
            src="",
            dst="",
            start_s=float(times.start_s[k]),
            end_s=float(times.end_s[k]),
            read_bytes=tuple(int(x) for x in walk.read_bytes[k]),
            write_bytes=tuple(int(x) for x in walk.write_bytes[k]),
            uncontended_s=float(times.uncontended_s[k]),
            fast_resident_bytes=int(walk.resident_bytes[k]),
        )
        for k, kern in enumerate(graph.kernels)
    )
    all_backing_s, all_cache_s = (
        _all_on_s(cost, platform.tier_index(tier))
        for tier in (cache.backing_tier, cache.cache_tier)
    )
    trace = Trace(
        graph=graph.name,
        platform=platform.name,
        planner=PLANNER,
        level=used.value,
        tier_names=platform.tier_names,
        fast_limit_bytes=walk.cache.capacity_bytes,
        predicted_s=all_backing_s,
        simulated_s=times.simulated_s,
        events=times.events,
        records=records,
    )
    return CacheTrace(
        trace=trace,
        cache=walk.cache,
        block_bytes=walk.block_bytes,
        warm=warm,
        layout=layout,
        hits=walk.hits,
        misses=walk.misses,
        fills=walk.fills,
        writebacks=walk.writebacks,
        accessed_bytes=walk.accessed_bytes,
        all_backing_s=all_backing_s,
        all_cache_s=all_cache_s,
    )


def _all_on_s(cost: CostModel, tier: int) -> float:
    """Step time (cost model, no cache) with every operand's bytes on tier ``tier``."""
    n_k, n_t = len(cost.graph.kernels), len(cost.platform.tiers)
    reads, writes = np.zeros((n_k, n_t)), np.zeros((n_k, n_t))
    reads[:, tier] = np.bincount(cost.op_kernel, weights=cost.op_read_bytes, minlength=n_k)
    writes[:, tier] = np.bincount(cost.op_kernel, weights=cost.op_write_bytes, minlength=n_k)
    mem_s = memory_s(cost, reads, writes)
    body = body_s(cost.compute_s, mem_s, cost.overlap is Overlap.SUM)
    return float(np.sum(body + cost.launch_s))


__all__ = ["PLANNER", "CacheReplayError", "CacheTrace", "default_block_bytes", "replay_cache"]
