"""First touch by pages: the NUMA baseline as the operating system runs it, replayed.

With DRAM and PMM as NUMA nodes and the default policy, a page gets DRAM when it is first
touched while DRAM has a free page, else PMM, and keeps it: nothing migrates. A framework
allocates its memory plan's pool once and reuses it every step, so a DRAM page serves every
tensor the plan later puts at its address. (The tensor-granular baseline,
:func:`tmsim.planners.heuristics.placement.plan_first_touch`, gives whole tensors DRAM in
order of creation instead; AutoTM modelled its NUMA baseline that way, with its DRAM pool's
best-fit allocator in 4096-byte units: ``AutoTM/src/optimizer/numa/numa.jl`` and
``AutoTM/src/utils/allocator.jl`` of github.com/darchr/AutoTM.) :func:`replay_first_touch_pages`
simulates one step:

1. Addresses. Every tensor at its offset in the memory plan's pool, as the 2LM replay lays
   them out (:func:`tmsim.sim.addresses.step_layout`: weights, optimizer state and inputs over
   the whole step), the pool cut into pages of ``page_bytes`` (default 4 KiB).
2. First touch. The pre-existing tensors (inputs, weights, optimizer state) are touched first,
   in graph order, whole: the framework writes them before the first step runs (it initializes
   the weights and optimizer state and loads the first batch into the input buffers), and
   the tensor-granular baseline places them first too. Then the step's accesses in order
   (:func:`tmsim.sim.addresses.step_accesses`: kernel by kernel, reads then writes). Each page
   goes, at its first touch, to the first kernel tier, fastest first, with room: the fastest
   holds ``fast_limit_bytes`` (whole pages of it), the others their capacity
   (:func:`tmsim.sim.firsttouch.pages.first_touch`).
3. Steady state. The pool outlives the step and no page moves, so every step after the first
   finds each page where the first step left it; with no cache whose state could differ, the
   step replayed is every step (a page's first touch during step one changes where it lives,
   not what that step costs).
4. Timing. Each operand's bytes split between tiers by its pages
   (:meth:`~tmsim.sim.firsttouch.pages.PageMap.bytes_by_tier`), summed per kernel, and timed
   as a plan's kernels are (:func:`tmsim.sim.traffic.time_traffic`, one flow per kernel: the
   roofline of its bytes on each tier, the cost model's rule, at the interference ``level``
   of the plans' replays). Without contention the step is the cost model's time of that mix.
   A cost model's measured kernel tables are not used: the pages decide the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.layout.addresses import Layout
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.sim.addresses import per_kernel, step_accesses, step_layout
from tmsim.sim.firsttouch.pages import DEFAULT_PAGE_BYTES, PageMap, first_touch
from tmsim.sim.trace import KERNEL, Record, Trace
from tmsim.sim.traffic import time_traffic
from tmsim.workload.graph import Graph
from tmsim.workload.tensors import PREEXISTING_ROLES

IntArray = npt.NDArray[np.int64]

#: The planner name of a first-touch-by-pages trace (the strategy's name).
PLANNER = "first-touch-pages"


@dataclass(frozen=True, eq=False)
class PageTrace:
    """A replayed step under first touch by pages (see the module documentation).

    - ``trace``: one kernel record per kernel, ``read_bytes``/``write_bytes`` its operands'
      bytes on each tier by their pages, ``uncontended_s`` its time by the cost model's rule,
      ``fast_resident_bytes`` the bytes of fastest-tier pages (all of them, at every kernel: the
      pool holds them the whole step); ``predicted_s`` the cost model's step time of that
      placement (the sum of ``uncontended_s``); ``fast_limit_bytes`` the fastest tier's limit.
    - ``layout``: every tensor's offset in the pool, indexed like the graph's tensors.
    - ``pages``: the tiers the pages took; ``tiers``: the platform index of each tier of
      ``pages``, in its order (the kernel tiers, fastest first).
    - ``accessed_bytes`` [K]: bytes each kernel's operands read and write.
    """

    trace: Trace
    layout: Layout
    pages: PageMap
    tiers: tuple[int, ...]
    accessed_bytes: IntArray

    @property
    def simulated_s(self) -> float:
        """The simulated step time (seconds)."""
        return self.trace.simulated_s

    @property
    def page_bytes(self) -> int:
        """The page size."""
        return self.pages.page_bytes

    @property
    def fast_bytes(self) -> int:
        """Bytes of the pages the fastest tier took."""
        return self.pages.pages[0] * self.pages.page_bytes if self.tiers[0] == 0 else 0

    @property
    def fast_share(self) -> float:
        """Share of the step's accessed bytes on the fastest tier (1.0 for no access)."""
        total = int(self.accessed_bytes.sum())
        recs = self.trace.records
        fast = sum(r.read_bytes[0] + r.write_bytes[0] for r in recs)
        return fast / total if total else 1.0


def replay_first_touch_pages(
    graph: Graph,
    platform: Platform,
    *,
    fast_limit_bytes: int | None = None,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    level: InterferenceLevel = DEFAULT_LEVEL,
    cost: CostModel | None = None,
) -> PageTrace:
    """Simulate one (steady-state) step of ``graph`` on ``platform`` with its pool's pages
    placed by first touch (see the module documentation).

    ``fast_limit_bytes``: what the fastest tier may hold (default: its capacity);
    ``page_bytes``: the page; ``level``: as :func:`tmsim.sim.replay`'s
    (``none``: the cost model's world); ``cost``: the cost model
    giving operand bytes, compute floors and launch overhead (default
    ``CostModel(graph, platform)``). Deterministic.

    Raises :class:`TmsimError` naming the platform unless kernels reach a tier beyond the
    fastest; for a ``fast_limit_bytes`` below 0 or above the tier's capacity, a ``page_bytes``
    that is not a positive whole number, a pool the kernel tiers cannot hold together, or a
    ``cost`` built for another graph or platform.
    """
    tiers = _kernel_tiers(platform)
    fast = platform.tiers[0]
    limit = int(fast.capacity_bytes) if fast_limit_bytes is None else fast_limit_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise TmsimError(f"{PLANNER}: fast_limit_bytes must be >= 0, got {fast_limit_bytes!r}")
    if limit > fast.capacity_bytes:
        raise TmsimError(
            f"{PLANNER}: fast_limit_bytes {limit} is above tier {fast.name!r}'s capacity "
            f"({fast.capacity_bytes} bytes)"
        )
    if cost is None:
        cost = CostModel(graph, platform)
    elif cost.graph is not graph or cost.platform != platform:
        raise TmsimError(f"{PLANNER}: the cost model was built for another graph or platform")
    if isinstance(page_bytes, bool) or not isinstance(page_bytes, int) or page_bytes <= 0:
        raise TmsimError(
            f"{PLANNER}: page_bytes must be a positive whole number, got {page_bytes!r}"
        )
    n_k, n_t = len(graph.kernels), len(platform.tiers)
    layout = step_layout(graph)
    acc = step_accesses(graph, cost, layout)
    pre = np.array([t.role in PREEXISTING_ROLES for t in graph.tensors], dtype=np.bool_)
    touch_starts = np.concatenate([layout.offsets_bytes[pre], acc.starts_bytes])
    touch_lengths = np.concatenate([graph.sizes_bytes[pre], acc.lengths_bytes])
    room = [
        (limit if t == 0 else int(platform.tiers[t].capacity_bytes)) // page_bytes for t in tiers
    ]
    try:
        pages = first_touch(touch_starts, touch_lengths, room, page_bytes)
    except TmsimError as exc:
        raise TmsimError(f"{PLANNER} on platform {platform.name!r}: {exc}") from None
    split = pages.bytes_by_tier(acc.starts_bytes, acc.lengths_bytes)  # [accesses, kernel tiers]
    by_tier = np.zeros((acc.kernel.size, n_t), dtype=np.int64)
    by_tier[:, list(tiers)] = split
    reads, writes = np.zeros((n_k, n_t), dtype=np.int64), np.zeros((n_k, n_t), dtype=np.int64)
    np.add.at(reads, acc.kernel[~acc.is_write], by_tier[~acc.is_write])
    np.add.at(writes, acc.kernel[acc.is_write], by_tier[acc.is_write])
    pre_s = np.full(n_k, cost.launch_s)
    level = InterferenceLevel(level)
    times = time_traffic(cost, reads, writes, pre_s, split=False, level=level)
    fast_held = pages.pages[0] * page_bytes if tiers[0] == 0 else 0
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
            read_bytes=tuple(int(x) for x in reads[k]),
            write_bytes=tuple(int(x) for x in writes[k]),
            uncontended_s=float(times.uncontended_s[k]),
            fast_resident_bytes=fast_held,
        )
        for k, kern in enumerate(graph.kernels)
    )
    trace = Trace(
        graph=graph.name,
        platform=platform.name,
        planner=PLANNER,
        level=level.value,
        tier_names=platform.tier_names,
        fast_limit_bytes=limit,
        predicted_s=float(times.uncontended_s.sum()),
        simulated_s=times.simulated_s,
        events=times.events,
        records=records,
    )
    accessed = per_kernel(acc.kernel, acc.lengths_bytes, n_k)
    return PageTrace(trace, layout, pages, tiers, accessed)


def _kernel_tiers(platform: Platform) -> tuple[int, ...]:
    """The tiers kernels reach, fastest first; raises unless one is beyond the fastest."""
    tiers = tuple(i for i, ok in enumerate(platform.kernel_tier_mask()) if ok)
    if not tiers or tiers[-1] == 0:
        raise TmsimError(
            f"{PLANNER}: kernels on platform {platform.name!r} reach only tier "
            f"{platform.tiers[0].name!r}; first touch places pages in a slower tier kernels "
            "reach (DRAM and PMM as NUMA nodes)"
        )
    return tiers


__all__ = ["PLANNER", "PageTrace", "replay_first_touch_pages"]
