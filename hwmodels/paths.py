"""Copy paths: how fast bytes move from one tier to another, synchronously or asynchronously;
and kernel links: how fast kernels reach a tier that sits behind an interconnect."""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels._checks import COUNT, FACTOR, RATE, count, factor, rate, shown
from hwmodels.errors import HardwareModelError


@dataclass(frozen=True, slots=True)
class CopyPath:
    """One direction of data movement between two tiers, ``src`` to ``dst``.

    - ``sync_bw_bytes_per_s``: rate of a blocking copy that has the machine to itself (all
      cores copying between kernels on a CPU; a DMA the host waits for on a GPU). > 0.
    - ``async_bw_bytes_per_s``: rate of one copy running beside a kernel (a helper thread on a
      CPU, a copy engine on a GPU), bytes/s, 1 to 1e21.
    - ``copy_engines``: how many asynchronous copies in this direction may be in flight at once
      (copy engines or helper threads); they share the path's asynchronous rate. 1 to 2**24.
    - ``duplex``: whether a copy in this direction runs at full rate while a copy in the
      reverse direction runs (separate engines on a full-duplex link). When False, the two
      directions share the engines and one copy runs at a time.
    - ``both_bw_bytes_per_s``: on a duplex path, the asynchronous rate of this direction while
      the reverse direction copies too (PCIe 5 x16 on an H200: 55 GB/s alone, 46.6 GB/s each
      way at once), or None: the directions do not slow each other. The replay puts both
      directions' asynchronous copies on one more link of the two directions' rates summed.
    - ``dst_cost_factor``: the device time a copied byte costs its destination tier, in
      written bytes of a kernel (1: the same; from 1 to 1e6). Measured on an H200, a copy from
      host memory into device memory slows the kernels beside it seven times more than its
      bytes would (``tmsim.calibration.copy_fit``); the replay charges the destination tier that
      much more for it, where it competes with kernels.
    - ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` naming the path and the field if a value is bad or
    outside its range (the ranges keep every time finite, :mod:`hwmodels._checks`).
    """

    src: str
    dst: str
    sync_bw_bytes_per_s: float
    async_bw_bytes_per_s: float
    copy_engines: int = 1
    duplex: bool = True
    source: str = ""
    both_bw_bytes_per_s: float | None = None
    dst_cost_factor: float = 1.0

    def __post_init__(self) -> None:
        where = f"copy path {self.src!r} -> {self.dst!r}"
        for name in ("src", "dst"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value.strip()):
                raise HardwareModelError(f"{where}: {name} must be a non-empty tier name")
        if self.src == self.dst:
            raise HardwareModelError(f"{where}: source and destination are the same tier")
        for name in ("sync_bw_bytes_per_s", "async_bw_bytes_per_s"):
            value = getattr(self, name)
            if not rate(value):
                raise HardwareModelError(f"{where}: {name} must be {RATE}, got {shown(value)}")
        if not count(self.copy_engines):
            raise HardwareModelError(
                f"{where}: copy_engines must be {COUNT}, got {shown(self.copy_engines)}"
            )
        if not isinstance(self.duplex, bool):
            raise HardwareModelError(f"{where}: duplex must be true or false, got {self.duplex!r}")
        if not (factor(self.dst_cost_factor) and self.dst_cost_factor >= 1):
            raise HardwareModelError(
                f"{where}: dst_cost_factor must be {FACTOR} and at least 1, got "
                f"{shown(self.dst_cost_factor)}"
            )
        both = self.both_bw_bytes_per_s
        if both is not None:
            if not rate(both):
                raise HardwareModelError(
                    f"{where}: both_bw_bytes_per_s must be {RATE}, got {shown(both)}"
                )
            if not self.duplex:
                raise HardwareModelError(
                    f"{where}: both_bw_bytes_per_s is for a duplex path (one copy runs at a "
                    "time on this one)"
                )

    def bw_bytes_per_s(self, asynchronous: bool) -> float:
        """The asynchronous rate if ``asynchronous``, else the synchronous one (bytes/s)."""
        return float(self.async_bw_bytes_per_s if asynchronous else self.sync_bw_bytes_per_s)


@dataclass(frozen=True, slots=True)
class KernelLink:
    """The interconnect through which the compute device's kernels load from and store to
    ``tier`` directly (a GPU reading its host's memory over a coherent link, as a Hopper GPU
    reads Grace's LPDDR5X over NVLink-C2C).

    - ``tier``: the tier behind the link; the platform requires it to be a kernel tier.
    - ``read_bw_bytes_per_s``: most bytes per second kernels read from the tier through the
      link (the tier-to-device direction), 1 to 1e21.
    - ``write_bw_bytes_per_s``: most bytes per second kernels write into the tier (the
      device-to-tier direction), 1 to 1e21.
    - ``source``: where the numbers come from.

    Kernels then reach the tier at the lesser of the tier's rate and the link's in each
    direction (:meth:`hwmodels.platform.Platform.kernel_bw_bytes_per_s`); copies keep their own
    paths' rates. The replay holds each kernel to that rate through its roofline time, but
    does not share the link between kernels and copies crossing the same interconnect.

    Raises :class:`HardwareModelError` naming the link and the field if a value is bad or
    outside its range.
    """

    tier: str
    read_bw_bytes_per_s: float
    write_bw_bytes_per_s: float
    source: str = ""

    def __post_init__(self) -> None:
        if not (isinstance(self.tier, str) and self.tier.strip()):
            raise HardwareModelError("kernel link: tier must be a non-empty tier name")
        where = f"kernel link to {self.tier!r}"
        for name in ("read_bw_bytes_per_s", "write_bw_bytes_per_s"):
            value = getattr(self, name)
            if not rate(value):
                raise HardwareModelError(f"{where}: {name} must be {RATE}, got {shown(value)}")
        if not isinstance(self.source, str):
            raise HardwareModelError(f"{where}: source must be a string")
