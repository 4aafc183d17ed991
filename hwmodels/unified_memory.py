"""Unified memory: how the CUDA managed-memory driver moves pages between host and device.

:class:`UnifiedMemory` holds the driver constants the unified-memory replay
(:mod:`tmsim.sim.unified`) needs: the page it migrates and evicts, what a fault costs, how fast
pages cross the link, what an eviction costs beside its copy, whether clean pages are written
back, the eviction order, and whether first-touch allocation faults. The GPU presets carry
them in a ``[unified_memory]`` table. Every default, and where it comes from:

- ``page_bytes`` = 2 MiB. The NVIDIA UVM driver (open-gpu-kernel-modules, ``kernel-open/
  nvidia-uvm``) keeps managed memory in 2 MB virtual-address blocks and evicts 2 MB root
  chunks (``uvm_pmm_gpu.c``). Its density prefetcher (``uvm_perf_prefetch.c``, threshold 51%)
  widens a fault to the whole 2 MB block once most of the block is resident, so a kernel that
  streams through a tensor migrates it in 2 MB blocks; Ganguly et al. (ISCA 2019) describe
  the same tree-based prefetcher, from 64 KB leaves up to 2 MB.
- ``fault_s`` = 45 us per page faulted in. The far-fault latency GPGPU-Sim's UVMSmart uses by
  default (Ganguly et al., ISCA 2019: ``-page_fault_latency`` 66645 core cycles at 1481 MHz),
  and within the 20 to 50 us range Zheng et al. (HPCA 2016) assume. Charging it once per
  migrated page is an assumption: the driver services faults in batches of up to 256
  (``uvm_perf_fault_batch_count``) and per 2 MB block.
- ``migration_bw_fraction`` = 1.0: pages move at the copy path's synchronous rate. The GPU
  presets give measured pinned-memory PCIe rates (12 GB/s on PCIe 3.0 x16), and UVMSmart's
  model of a 16 GB/s PCIe link also saturates at 12 GB/s (``gpu-sim.cc``, ``curve_a = 12.0``).
- ``eviction_s`` = 0, assumed: an eviction costs its device-to-host copy at the migration
  rate, serialized before the faults it makes room for; Kim et al. (ASPLOS 2020) find
  eviction on the critical path of fault-batch processing.
- ``writeback_clean`` = True: to evict a root chunk the driver moves every resident page it
  backs to the CPU (overview comment of ``uvm_pmm_gpu.c``); managed memory keeps one copy of a
  page, so a clean page is copied back too.
- ``policy`` = ``"lru"``: Ganguly et al. (ISCA 2019) model the driver's replacement as least
  recently used over 2 MB large pages. ``"fifo"`` follows the driver source instead, whose
  eviction list is ordered by when a chunk was allocated, not when it was last accessed
  (``uvm_pmm_gpu.c``, ``pick_root_chunk_to_evict``, the TODO citing Bug 1765193).
- ``alloc_fault`` = False, assumed: framework pool allocators (nGraph's, PyTorch's caching
  allocator) hand a new tensor a freed managed buffer whose pages are already resident, so its
  first write does not fault; True charges ``fault_s`` for every page allocated on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels._checks import BYTES, FRACTION, LATENCY, byte_size, fraction, latency, shown
from hwmodels.errors import HardwareModelError

#: Eviction orders :attr:`UnifiedMemory.policy` may name.
POLICIES = ("lru", "fifo")


@dataclass(frozen=True, slots=True)
class UnifiedMemory:
    """How the unified-memory driver behaves; defaults and their sources in the module doc.

    - ``page_bytes``: migration and eviction granularity (bytes, an integer of 1 to 2**62);
    - ``fault_s``: fault-handling stall per page faulted in (seconds, 0 to 1);
    - ``migration_bw_fraction``: migration rate as a fraction of the copy path's synchronous
      rate, in [1e-6, 1];
    - ``eviction_s``: handling time per evicted page, beside its copy (seconds, 0 to 1);
    - ``writeback_clean``: whether an evicted page is copied to the host even when the host
      holds a valid copy of its tensor;
    - ``policy``: eviction order, one of :data:`POLICIES` (``"lru"``: the tensor a kernel
      touched longest ago first; ``"fifo"``: the tensor whose pages last arrived on the device
      longest ago first);
    - ``alloc_fault``: whether a page allocated on the device at first touch costs ``fault_s``;
    - ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` as ``unified_memory: <field> ...`` if a value is bad or
    outside its range (the ranges keep every time finite, :mod:`hwmodels._checks`).
    """

    page_bytes: int = 2 * 2**20
    fault_s: float = 45e-6
    migration_bw_fraction: float = 1.0
    eviction_s: float = 0.0
    writeback_clean: bool = True
    policy: str = "lru"
    alloc_fault: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        where = "unified_memory"
        if not byte_size(self.page_bytes):
            raise HardwareModelError(
                f"{where}: page_bytes must be {BYTES}, got {shown(self.page_bytes)}"
            )
        for name in ("fault_s", "eviction_s"):
            value = getattr(self, name)
            if not latency(value):
                raise HardwareModelError(f"{where}: {name} must be {LATENCY}, got {shown(value)}")
        share = self.migration_bw_fraction
        if not fraction(share):
            raise HardwareModelError(
                f"{where}: migration_bw_fraction must be {FRACTION}, got {shown(share)}"
            )
        for name in ("writeback_clean", "alloc_fault"):
            if not isinstance(getattr(self, name), bool):
                raise HardwareModelError(f"{where}: {name} must be true or false")
        if self.policy not in POLICIES:
            raise HardwareModelError(
                f"{where}: policy must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )
        if not isinstance(self.source, str):
            raise HardwareModelError(f"{where}: source must be a string")
