"""Three-tier platforms built in code, for tests of K-tier planning on tiny graphs.

The numbers are round so that a test can work its answer out by hand: peak 1 TFLOP/s (fp32),
every efficiency 1, no launch overhead, no interference. With sizes in MB (10^6 bytes) and
rates in GB/s (10^9 bytes/s), 1 MB at 1 GB/s takes 1 ms. Capacities are arguments, so that a
tiny graph makes every tier's capacity matter (a tier is constrained for the planners when
its capacity is below the graph's total bytes).

``gpu3``: kernels access only the device.

=========  =============  ===============  ==================================
tier       read / write   copy paths       sync = async rate (both directions)
=========  =============  ===============  ==================================
device     1000 / 1000    device <-> host  10 GB/s
host       100 / 100      host <-> nvme    2 GB/s
nvme       10 / 5         device <-> nvme  4 GB/s (only with ``direct=True``)
=========  =============  ===============  ==================================

``cpu3``: kernels access all three tiers; a copy between every pair, synchronous (all cores)
faster than asynchronous (one helper thread).

=========  =============  ======================  ===============
tier       read / write   copy path               sync / async
=========  =============  ======================  ===============
dram       100 / 100      dram <-> cxl            25 / 5 GB/s
cxl        50 / 50        dram -> pmm, cxl -> pmm 10 / 2.5 GB/s
pmm        30 / 10        pmm -> dram, pmm -> cxl 20 / 2 GB/s
=========  =============  ======================  ===============
"""

from __future__ import annotations

from hwmodels.compute import ClassEfficiency, Compute
from hwmodels.opclass import OpClass
from hwmodels.paths import CopyPath
from hwmodels.platform import Platform
from hwmodels.tiers import MemoryTier

GB_S = 1e9


def round_compute(launch_s: float = 0.0) -> Compute:
    """1 TFLOP/s in fp32, every efficiency 1, ``launch_s`` per kernel."""
    return Compute(
        name="round",
        peak_flop_per_s=(("fp32", 1e12),),
        efficiencies=tuple(ClassEfficiency(c, 1.0, 1.0) for c in OpClass),
        launch_overhead_s=launch_s,
        cores=1,
    )


def _tier(name: str, capacity_bytes: int, read_gb_s: float, write_gb_s: float) -> MemoryTier:
    return MemoryTier(name, capacity_bytes, read_gb_s * GB_S, write_gb_s * GB_S)


def _both_ways(a: str, b: str, sync_gb_s: float, async_gb_s: float) -> tuple[CopyPath, ...]:
    return tuple(
        CopyPath(src, dst, sync_gb_s * GB_S, async_gb_s * GB_S) for src, dst in ((a, b), (b, a))
    )


def gpu3(
    device_bytes: int,
    host_bytes: int,
    nvme_bytes: int,
    *,
    direct: bool = True,
    nvme_paths: bool = True,
    launch_s: float = 0.0,
) -> Platform:
    """A GPU with host memory and an NVMe drive (see the module table).

    ``direct``: a copy path between device and nvme (else nvme data is staged through the
    host). ``nvme_paths=False`` leaves nvme with no copy path at all, so that nothing on it
    can reach a kernel: the platform then plans like its first two tiers.
    """
    paths = _both_ways("device", "host", 10, 10)
    if nvme_paths:
        paths += _both_ways("host", "nvme", 2, 2)
        if direct:
            paths += _both_ways("device", "nvme", 4, 4)
    return Platform(
        name="gpu3",
        tiers=(
            _tier("device", device_bytes, 1000, 1000),
            _tier("host", host_bytes, 100, 100),
            _tier("nvme", nvme_bytes, 10, 5),
        ),
        compute=round_compute(launch_s),
        copy_paths=paths,
        kernel_tiers=("device",),
    )


def cpu3(dram_bytes: int, cxl_bytes: int, pmm_bytes: int, *, launch_s: float = 0.0) -> Platform:
    """A CPU with DRAM, CXL-attached memory and Optane-like PMM, all kernel tiers."""
    paths = (
        *_both_ways("dram", "cxl", 25, 5),
        CopyPath("dram", "pmm", 10 * GB_S, 2.5 * GB_S),
        CopyPath("cxl", "pmm", 10 * GB_S, 2.5 * GB_S),
        CopyPath("pmm", "dram", 20 * GB_S, 2 * GB_S),
        CopyPath("pmm", "cxl", 20 * GB_S, 2 * GB_S),
    )
    return Platform(
        name="cpu3",
        tiers=(
            _tier("dram", dram_bytes, 100, 100),
            _tier("cxl", cxl_bytes, 50, 50),
            _tier("pmm", pmm_bytes, 30, 10),
        ),
        compute=round_compute(launch_s),
        copy_paths=paths,
        kernel_tiers=("dram", "cxl", "pmm"),
    )


def first_two(platform: Platform) -> Platform:
    """``platform`` without its third tier (and every copy path touching it)."""
    gone = platform.tiers[2].name
    return Platform(
        name=f"{platform.name}-2",
        tiers=platform.tiers[:2],
        compute=platform.compute,
        copy_paths=tuple(p for p in platform.copy_paths if gone not in (p.src, p.dst)),
        kernel_tiers=tuple(t for t in platform.kernel_tiers if t != gone),
    )
