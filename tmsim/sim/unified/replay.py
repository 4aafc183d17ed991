"""Replay a training step under CUDA unified memory (cudaMallocManaged), AutoTM's GPU baseline.

Every tensor is a managed allocation. Kernels run in graph order and touch device memory only.
:func:`tmsim.sim.unified.pages.simulate_pages` decides, page by page, what each kernel needs
first: pages evicted to make room, least recently used first (device to host), missing pages
of its operands faulted in (host to device), pages of the tensors it produces allocated on the
device without a copy, dead tensors freed. :func:`replay_unified` then times the step on
SimPy with the fluid model (:mod:`tmsim.sim.fluid`):

- before kernel ``k``, its evictions run one after another, then its faults: each faulting
  tensor stalls for ``fault_s`` per page (the driver's fault handling), then its bytes cross
  the host-to-device path. Both are synchronous: the kernel waits (the UVM driver services
  faults while the faulting warps stall, and evicts on that path to make room);
- each migration is a flow that reads one tier and writes the other at
  ``migration_bw_fraction`` of the copy path's synchronous rate (one record of kind ``"sync"``
  per tensor, direction and kernel; a fault-in record's span includes its fault handling);
- kernel ``k`` is exactly the flow and compute floor :mod:`tmsim.sim.schedule` builds for a
  plan placing every operand on the device, after the launch overhead.

At the interference level ``none`` every flow runs at its own rate, and the simulated time
equals the sum of the kernels' cost-model times and the migration and fault times (``predicted_s``).

Nothing here prefetches across kernels (the baseline never calls cudaMemPrefetchAsync); the
driver's density prefetcher is folded into the 2 MB page. The driver's constants are the
platform's (:attr:`hwmodels.Platform.unified_memory`, a :class:`hwmodels.UnifiedMemory`; its
module documents every default and its source), unless the caller passes others.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
import simpy

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.unified_memory import UnifiedMemory
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.plans.values import Plan
from tmsim.sim.body import kernel_body
from tmsim.sim.fluid import Flow, FluidModel
from tmsim.sim.schedule import COPY_WRITERS, Schedule, build_schedule
from tmsim.sim.trace import KERNEL, SYNC, Record, Trace
from tmsim.sim.unified.pages import (
    ALLOC,
    EVICT,
    FETCH,
    PageRun,
    carry_over,
    page_counts,
    simulate_pages,
)
from tmsim.workload.graph import Graph

Process = Generator[simpy.Event, Any, None]
PLANNER = "unified-memory"


@dataclass(frozen=True)
class UnifiedCounters:
    """Totals of one replayed step. Pages are ``page_bytes`` units (a tensor's last page may be
    shorter); ``*_bytes`` are bytes, ``*_s`` seconds.

    ``fault_pages``/``migrated_in_bytes``: pages faulted in from the host and their bytes;
    ``evicted_pages``/``evicted_bytes``: pages evicted and their bytes, of which
    ``migrated_out_bytes`` were copied to the host; ``alloc_pages``/``alloc_bytes``: pages
    allocated on the device at first touch; ``freed_bytes``: device bytes released by dead
    tensors; ``initial_resident_bytes``/``final_resident_bytes``: device bytes in use at the
    start and after the last kernel; ``device_peak_bytes``: most device bytes in use while a
    kernel ran; ``fault_s``: fault-handling stalls; ``migration_s``: uncontended copy time;
    ``kernel_s``: the kernels' cost-model time (all operands on the device);
    ``predicted_s``: the uncontended step time, ``kernel_s + migration_s + fault_s`` plus
    ``eviction_s`` per evicted page; ``simulated_s``: the simulated step time.
    """

    device_bytes: int
    fault_pages: int
    migrated_in_bytes: int
    evicted_pages: int
    evicted_bytes: int
    migrated_out_bytes: int
    alloc_pages: int
    alloc_bytes: int
    freed_bytes: int
    initial_resident_bytes: int
    final_resident_bytes: int
    device_peak_bytes: int
    fault_s: float
    migration_s: float
    kernel_s: float
    predicted_s: float
    simulated_s: float


@dataclass(frozen=True)
class UnifiedTrace:
    """A unified-memory replay: ``trace`` (planner ``"unified-memory"``; it saves and loads
    with :func:`tmsim.sim.save_trace` like any trace), its ``counters``, and the driver
    ``params`` it ran with."""

    trace: Trace
    counters: UnifiedCounters
    params: UnifiedMemory
    warm: bool

    @property
    def simulated_s(self) -> float:
        """The simulated step time (seconds)."""
        return self.trace.simulated_s

    def totals(self) -> dict[str, Any]:
        """The counters as a dict (:class:`UnifiedCounters` field names)."""
        return asdict(self.counters)

    def as_dict(self) -> dict[str, Any]:
        """Counters, parameters (prefixed ``param_``; not their ``source``, which is text about
        them) and the replay's identity, flat."""
        out: dict[str, Any] = {
            "graph": self.trace.graph,
            "platform": self.trace.platform,
            "interference": self.trace.level,
            "warm": self.warm,
        }
        out.update(asdict(self.counters))
        params = asdict(self.params)
        out.update({f"param_{k}": v for k, v in params.items() if k != "source"})
        return out

    def to_frame(self) -> pd.DataFrame:
        """:meth:`as_dict` as a one-row DataFrame."""
        return pd.DataFrame([self.as_dict()])


@dataclass(frozen=True, slots=True)
class _Migration:
    """One tensor's migration before a kernel: a stall, then a copy flow."""

    tensor: str
    src: str
    dst: str
    stall_s: float
    flow: Flow
    nbytes: int
    uncontended_s: float


def replay_unified(
    graph: Graph,
    platform: Platform,
    *,
    device_bytes: int | None = None,
    params: UnifiedMemory | None = None,
    level: InterferenceLevel = DEFAULT_LEVEL,
    warm: bool = False,
) -> UnifiedTrace:
    """Simulate one step of ``graph`` under unified memory on ``platform`` (module doc).

    Tier 0 is the device (kernels must be able to access it), tier 1 the host, joined by copy
    paths both ways (the GPU presets). ``device_bytes`` defaults to the device tier's capacity;
    pass less to emulate a smaller device. ``params`` are the driver's constants, by default
    ``platform.unified_memory`` (pass others to study them). ``warm=True`` replays a
    steady-state step: weights and optimizer state start where the previous identical step
    left them (the inputs start on the host); otherwise the step is the first, and everything
    starts on the host. ``level``: at any level but ``none`` flows share the tiers and links
    (the ``bandwidth`` level, recorded as such); at ``none`` each runs at its own rate.
    Deterministic. Raises :class:`~tmsim.errors.InfeasibleError` if a kernel's own operands
    exceed ``device_bytes`` (naming the kernel and the bytes missing), and
    :class:`TmsimError` for a platform without such tiers and paths, without
    ``unified_memory`` when no ``params`` are given, or a bad capacity.
    """
    if len(platform.tiers) < 2 or platform.tiers[0].name not in platform.kernel_tiers:
        raise TmsimError(
            f"{PLANNER}: platform {platform.name!r} needs a device tier kernels access (tier 0) "
            "and a host tier (tier 1)"
        )
    p = platform.unified_memory if params is None else params
    if p is None:
        raise TmsimError(
            f"{PLANNER}: platform {platform.name!r} has no [unified_memory] driver parameters; "
            "add the table to its file or pass params"
        )
    dev, host = platform.tiers[0].name, platform.tiers[1].name
    try:
        h2d, d2h = platform.copy_path(host, dev), platform.copy_path(dev, host)
    except HardwareModelError as exc:
        raise TmsimError(f"{PLANNER}: {exc}") from None
    cap = int(platform.tiers[0].capacity_bytes if device_bytes is None else device_bytes)
    if cap <= 0:
        raise TmsimError(f"{PLANNER}: device_bytes must be > 0, got {cap}")
    pages = _pages(graph, cap, p, warm)
    cost = CostModel(graph, platform)
    sched = build_schedule(_all_device_plan(graph, platform, cap), graph, platform, cost)
    rates = (
        h2d.sync_bw_bytes_per_s * p.migration_bw_fraction,
        d2h.sync_bw_bytes_per_s * p.migration_bw_fraction,
    )
    before, alloc_stall = _migrations(graph, platform, pages, p, rates)
    shared = InterferenceLevel(level) is not InterferenceLevel.NONE
    env = simpy.Environment()
    fluid = FluidModel(env, platform.tiers, shared=shared, controllers=platform.controller_groups())
    run = _Run(env, fluid, sched, pages, before, alloc_stall)
    proc = env.process(run.step())
    events = 0
    while not proc.processed:
        env.step()
        events += 1
    migration_s = sum(m.flow.nbytes / m.flow.cap_bytes_per_s for ms in before for m in ms)
    fault_s = p.fault_s * pages.total(FETCH, "pages") + sum(alloc_stall)
    eviction_s = p.eviction_s * pages.total(EVICT, "pages")
    predicted = float(sched.kernel_s.sum()) + migration_s + fault_s + eviction_s
    counters = UnifiedCounters(
        device_bytes=cap,
        fault_pages=pages.total(FETCH, "pages"),
        migrated_in_bytes=pages.total(FETCH),
        evicted_pages=pages.total(EVICT, "pages"),
        evicted_bytes=pages.total(EVICT),
        migrated_out_bytes=pages.total(EVICT, "copied_bytes"),
        alloc_pages=pages.total(ALLOC, "pages"),
        alloc_bytes=pages.total(ALLOC),
        freed_bytes=pages.freed_bytes,
        initial_resident_bytes=_held(graph, pages.initial.resident_pages, p.page_bytes),
        final_resident_bytes=_held(graph, pages.final.resident_pages, p.page_bytes),
        device_peak_bytes=int(pages.resident_bytes.max()),
        fault_s=fault_s,
        migration_s=migration_s,
        kernel_s=float(sched.kernel_s.sum()),
        predicted_s=predicted,
        simulated_s=run.end_s,
    )
    trace = Trace(
        graph=graph.name,
        platform=platform.name,
        planner=PLANNER,
        level="bandwidth" if shared else "none",
        tier_names=platform.tier_names,
        fast_limit_bytes=cap,
        predicted_s=predicted,
        simulated_s=run.end_s,
        events=events,
        records=tuple(run.out),
    )
    return UnifiedTrace(trace, counters, p, warm)


def _pages(graph: Graph, cap: int, p: UnifiedMemory, warm: bool) -> PageRun:
    first = simulate_pages(graph, cap, p)
    return simulate_pages(graph, cap, p, carry_over(first, graph)) if warm else first


def _held(graph: Graph, resident_pages: Any, page_bytes: int) -> int:
    """Device bytes of ``resident_pages`` [T] (a tensor's resident pages include its last)."""
    _, last = page_counts(graph, page_bytes)
    return int(((resident_pages - 1) * page_bytes + last)[resident_pages > 0].sum())


def _all_device_plan(graph: Graph, platform: Platform, cap: int) -> Plan:
    """A plan placing every operand on the device, only for :func:`build_schedule`'s kernel
    flows (no moves, no residency: the page model supplies those)."""
    ptr, _ = graph.operand_csr
    dev = platform.tiers[0].name
    rows = tuple((dev,) * int(ptr[k + 1] - ptr[k]) for k in range(len(graph.kernels)))
    return Plan(graph.name, platform.name, PLANNER, cap, rows, {}, (), (), math.nan)


def _migrations(
    graph: Graph,
    platform: Platform,
    pages: PageRun,
    p: UnifiedMemory,
    rates: tuple[float, float],
) -> tuple[list[list[_Migration]], list[float]]:
    """Per kernel: the migrations before it (evictions, then faults) and its allocation stall."""
    n_k, n_t = len(graph.kernels), len(platform.tiers)
    dev, host = platform.tiers[0].name, platform.tiers[1].name
    before: list[list[_Migration]] = [[] for _ in range(n_k)]
    alloc_stall = [0.0] * n_k
    rows = zip(
        pages.kernel.tolist(),
        pages.kind.tolist(),
        pages.tensor.tolist(),
        pages.pages.tolist(),
        pages.copied_bytes.tolist(),
        strict=True,
    )
    for k, kind, t, n_pages, copied in rows:
        if kind == ALLOC:
            alloc_stall[k] += p.fault_s * n_pages if p.alloc_fault else 0.0
            continue
        inbound = kind == FETCH
        src, dst = (1, 0) if inbound else (0, 1)
        stall = (p.fault_s if inbound else p.eviction_s) * n_pages
        if copied == 0 and stall == 0:
            continue  # a clean page dropped for free
        rate = rates[0] if inbound else rates[1]
        read, write = [0.0] * n_t, [0.0] * n_t
        read[src] = write[dst] = float(copied)
        flow = Flow(float(copied), tuple(read), tuple(write), rate, writers=COPY_WRITERS)
        names = (dev, host)  # tier indices 0 and 1
        uncontended = stall + copied / rate
        before[k].append(
            _Migration(
                graph.tensors[t].name, names[src], names[dst], stall, flow, copied, uncontended
            )
        )
    return before, alloc_stall


@dataclass
class _Run:
    """The step's one process and the records it emits, in start order."""

    env: simpy.Environment
    fluid: FluidModel
    sched: Schedule
    pages: PageRun
    before: list[list[_Migration]]
    alloc_stall: list[float]
    out: list[Record] = field(default_factory=list)
    end_s: float = 0.0

    def step(self) -> Process:
        s, env, out = self.sched, self.env, self.out
        for k in range(s.n_kernels):
            for m in self.before[k]:
                start = float(env.now)
                if m.stall_s > 0:
                    yield env.timeout(m.stall_s)
                yield self.fluid.transfer(m.flow)
                out.append(self._move(k, m, start))
            start = float(env.now)
            stall = self.alloc_stall[k] + s.launch_s
            if stall > 0:
                yield env.timeout(stall)
            yield from kernel_body(
                env, self.fluid, (s.kernel_flows[k],), float(s.floor_s[k]), bool(s.serial[k])
            )
            out.append(self._kernel(k, start))
        self.end_s = float(env.now)

    def _kernel(self, k: int, start_s: float) -> Record:
        s = self.sched
        return Record(
            kind=KERNEL,
            name=s.names[k],
            kernel=k,
            phase=s.phases[k],
            src="",
            dst="",
            start_s=start_s,
            end_s=float(self.env.now),
            read_bytes=tuple(int(x) for x in s.read_bytes[k]),
            write_bytes=tuple(int(x) for x in s.write_bytes[k]),
            uncontended_s=float(s.kernel_s[k]) + self.alloc_stall[k],
            fast_resident_bytes=int(self.pages.resident_bytes[k]),
        )

    def _move(self, k: int, m: _Migration, start_s: float) -> Record:
        return Record(
            kind=SYNC,
            name=m.tensor,
            kernel=k,
            phase=self.sched.phases[k],
            src=m.src,
            dst=m.dst,
            start_s=start_s,
            end_s=float(self.env.now),
            read_bytes=tuple(int(x) for x in m.flow.read_bytes),
            write_bytes=tuple(int(x) for x in m.flow.write_bytes),
            uncontended_s=m.uncontended_s,
            fast_resident_bytes=-1,
        )


__all__ = ["PLANNER", "UnifiedCounters", "UnifiedTrace", "replay_unified"]
