"""Memory tiers and their read/write interference model.

A :class:`MemoryTier` is one kind of memory (DRAM, Optane PMM, HBM, host DRAM behind a link)
with its capacity, its peak read and write bandwidth, idle latencies, internal access
granularity, and an :class:`Interference` model saying how the device slows down when reads
and writes are mixed and when many writers are active.

The device-time model (all times in seconds, bytes in bytes)::

    t(R, W, n) = (R / read_bw + W / write_bw(n)) * mix_factor(R / (R + W))

    write_bw(n)    = write_bw_bytes_per_s / (1 + write_falloff_per_writer * max(0, n - onset))
    mix_factor(f)  = 1 + mix_penalty * (4 f (1 - f)) ** mix_exponent

``R / read_bw + W / write_bw`` is the time the reads and the writes would take one after the
other; the mix factor is 1 for pure reads or pure writes and largest for a 1:1 mix, so a mix
always costs more than the sum of its parts. The simulator uses :meth:`MemoryTier.service_time_s`
for the flows active on a tier, and :meth:`MemoryTier.effective_bw_bytes_per_s` for the
aggregate rate at a given read fraction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from hwmodels._checks import (
    BYTES,
    FACTOR,
    LATENCY,
    MAX_FACTOR,
    RATE,
    byte_size,
    count,
    factor,
    in_range,
    latency,
    rate,
    shown,
)
from hwmodels.errors import HardwareModelError

FloatArray = npt.NDArray[np.float64]
ArrayLike = float | int | npt.ArrayLike


def _require(ok: bool, where: str, message: str) -> None:
    if not ok:
        raise HardwareModelError(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class Interference:
    """How a memory device slows down under mixed and many-writer traffic.

    Fields (dimensionless unless named otherwise):

    - ``mix_penalty`` (>= 0): extra device time of a 1:1 read/write mix, as a fraction of the
      time the same reads and writes would take separately (1.0: a 1:1 mix takes twice as long).
    - ``mix_exponent`` (> 0): how sharply the penalty concentrates near a 1:1 mix; the penalty
      at read fraction ``f`` is ``mix_penalty * (4 f (1 - f)) ** mix_exponent``.
    - ``write_falloff_per_writer`` (>= 0): with ``n`` concurrent writers the write bandwidth is
      the peak divided by ``1 + write_falloff_per_writer * max(0, n - onset)``; a hyperbolic
      form fitted to measurements, not a model of the mechanism.
    - ``write_falloff_onset_writers`` (>= 0): number of writers up to which the peak write
      bandwidth holds.
    - ``write_overlap`` (in [0, 1]): the share of a write's device time that other flows'
      reads may use meanwhile, because the write drains from the device's write buffer while
      its media serve reads (Optane's XPBuffer in front of its 3D XPoint banks). The writes
      keep a write path of their own (``write_bw(n)`` bounds them); only a flow that writes the
      tier without reading it overlaps, so a flow alone costs what it did. The replay applies
      it where a controller arbitrating by queue replaces the mix factor between flows
      (:class:`tmsim.sim.fluid.FluidModel`); elsewhere the mix factor prices reads beside
      writes. 0: reads and writes take the device in turn.

    The default is no interference. Raises :class:`HardwareModelError` if a field lies outside
    its range (:mod:`hwmodels._checks`): the penalty and the falloff in [0, 1e6], the exponent
    in (0, 1e6], the onset an integer in [0, 2**24].
    """

    mix_penalty: float = 0.0
    mix_exponent: float = 1.0
    write_falloff_per_writer: float = 0.0
    write_falloff_onset_writers: int = 0
    write_overlap: float = 0.0

    def __post_init__(self) -> None:
        self.validate("interference")

    def validate(self, where: str) -> None:
        """Raise :class:`HardwareModelError` naming ``where`` and the field if a value is bad."""
        for name in ("mix_penalty", "write_falloff_per_writer"):
            value = getattr(self, name)
            _require(factor(value), where, f"{name} must be {FACTOR}, got {shown(value)}")
        _require(
            in_range(self.mix_exponent, 0.0, MAX_FACTOR) and self.mix_exponent > 0,
            where,
            f"mix_exponent must be a number > 0 and at most 1e6, got {shown(self.mix_exponent)}",
        )
        _require(
            count(self.write_falloff_onset_writers, minimum=0),
            where,
            "write_falloff_onset_writers must be an integer of 0 to 2**24, "
            f"got {shown(self.write_falloff_onset_writers)}",
        )
        _require(
            in_range(self.write_overlap, 0.0, 1.0),
            where,
            f"write_overlap must be a number in [0, 1], got {shown(self.write_overlap)}",
        )

    def mix_factor(self, read_fraction: ArrayLike) -> FloatArray:
        """Device-time multiplier at ``read_fraction`` (bytes read / bytes moved, in [0, 1]).

        1 at 0 and 1, ``1 + mix_penalty`` at 0.5. Raises :class:`HardwareModelError` if a
        fraction lies outside [0, 1] or is NaN.
        """
        f = np.asarray(read_fraction, dtype=np.float64)
        if not np.all((f >= 0.0) & (f <= 1.0)):
            raise HardwareModelError(f"read_fraction must lie in [0, 1], got {read_fraction!r}")
        if self.mix_penalty == 0.0:
            return np.ones_like(f)
        return np.asarray(1.0 + self.mix_penalty * (4.0 * f * (1.0 - f)) ** self.mix_exponent)

    def write_slowdown(self, n_writers: ArrayLike) -> FloatArray:
        """Factor (>= 1) by which ``n_writers`` concurrent writers divide the peak write bandwidth.

        Raises :class:`HardwareModelError` if a writer count is negative.
        """
        n = np.asarray(n_writers, dtype=np.float64)
        if not np.all(n >= 0):
            raise HardwareModelError(f"n_writers must be >= 0, got {n_writers!r}")
        excess = np.maximum(0.0, n - self.write_falloff_onset_writers)
        return np.asarray(1.0 + self.write_falloff_per_writer * excess)


@dataclass(frozen=True, slots=True)
class MemoryTier:
    """One memory tier. SI units: bytes, bytes per second, seconds.

    - ``capacity_bytes``: usable capacity (an integer of 1 to 2**62).
    - ``read_bw_bytes_per_s``, ``write_bw_bytes_per_s``: peak sequential bandwidth the device
      sustains with enough threads (1 to 1e21); for writes, the peak before the many-writer
      falloff.
    - ``read_latency_s``, ``write_latency_s``: idle latency of one access (0 to 1 s); a copy out
      of the tier waits its read latency, a copy into it its write latency, before its bytes
      flow (:meth:`hwmodels.platform.Platform.copy_latency_s`). Kernels stream: the roofline
      ignores latency.
    - ``access_granularity_bytes``: the device's internal access size (64 B for DRAM, 256 B
      for Optane's XPLine); a smaller access still costs a whole granule (1 to 2**62).
    - ``interference``: the read/write mix and many-writer model.
    - ``source``: where the numbers come from (free text, kept with the value).

    Raises :class:`HardwareModelError` naming the tier and the field if a value is bad or
    outside its range (the ranges keep every time finite, :mod:`hwmodels._checks`).
    """

    name: str
    capacity_bytes: int
    read_bw_bytes_per_s: float
    write_bw_bytes_per_s: float
    read_latency_s: float = 0.0
    write_latency_s: float = 0.0
    access_granularity_bytes: int = 64
    interference: Interference = field(default_factory=Interference)
    source: str = ""

    def __post_init__(self) -> None:
        _require(
            isinstance(self.name, str) and self.name.strip() != "",
            "tier",
            f"name must be a non-empty string, got {self.name!r}",
        )
        where = f"tier {self.name!r}"
        for name in ("capacity_bytes", "access_granularity_bytes"):
            value = getattr(self, name)
            _require(byte_size(value), where, f"{name} must be {BYTES}, got {shown(value)}")
        for name in ("read_bw_bytes_per_s", "write_bw_bytes_per_s"):
            value = getattr(self, name)
            _require(rate(value), where, f"{name} must be {RATE}, got {shown(value)}")
        for name in ("read_latency_s", "write_latency_s"):
            value = getattr(self, name)
            _require(latency(value), where, f"{name} must be {LATENCY}, got {shown(value)}")
        _require(
            isinstance(self.interference, Interference),
            where,
            f"interference must be an Interference, got {type(self.interference).__name__}",
        )
        _require(isinstance(self.source, str), where, "source must be a string")

    def write_bw_at(self, n_writers: ArrayLike) -> FloatArray:
        """Write bandwidth in bytes/s with ``n_writers`` concurrent writers (peak / slowdown)."""
        return self.write_bw_bytes_per_s / self.interference.write_slowdown(n_writers)

    def service_time_s(
        self, read_bytes: ArrayLike, write_bytes: ArrayLike, n_writers: ArrayLike = 1
    ) -> FloatArray:
        """Seconds the device needs to serve ``read_bytes`` and ``write_bytes`` concurrently.

        ``(R / read_bw + W / write_bw(n_writers)) * mix_factor(R / (R + W))``; zero when both
        are zero. Broadcasts over arrays. This is device time only: a flow's own rate limit
        (a thread, a copy engine) is the caller's business. Raises :class:`HardwareModelError`
        if a byte count is negative or NaN, or a writer count is negative.
        """
        r = np.asarray(read_bytes, dtype=np.float64)
        w = np.asarray(write_bytes, dtype=np.float64)
        if not (np.all(r >= 0) and np.all(w >= 0)):
            raise HardwareModelError(
                f"tier {self.name!r}: byte counts must be >= 0, got read {read_bytes!r}, "
                f"write {write_bytes!r}"
            )
        total = r + w
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.where(total > 0, r / np.where(total > 0, total, 1.0), 1.0)
        separate = r / self.read_bw_bytes_per_s + w / self.write_bw_at(n_writers)
        return np.asarray(separate * self.interference.mix_factor(f))

    def effective_bw_bytes_per_s(
        self, read_fraction: ArrayLike, n_writers: ArrayLike = 1
    ) -> FloatArray:
        """Aggregate bandwidth (read plus written bytes per second) at ``read_fraction``.

        The inverse of the device time per byte of a mix with that fraction of reads, with
        ``n_writers`` concurrent writers. Raises :class:`HardwareModelError` if the fraction
        lies outside [0, 1].
        """
        f = np.asarray(read_fraction, dtype=np.float64)
        per_byte = (f / self.read_bw_bytes_per_s + (1.0 - f) / self.write_bw_at(n_writers)) * (
            self.interference.mix_factor(f)
        )
        return np.asarray(1.0 / per_byte)

    def device_bytes(self, nbytes: ArrayLike, access_bytes: ArrayLike) -> FloatArray:
        """Bytes the device moves to serve ``nbytes`` in independent accesses of ``access_bytes``.

        Each access is rounded up to whole granules, so 64 B random accesses to a 256 B-granule
        device move four times their size. Raises :class:`HardwareModelError` if an access size
        is not positive or a byte count is negative.
        """
        n = np.asarray(nbytes, dtype=np.float64)
        a = np.asarray(access_bytes, dtype=np.float64)
        if not (np.all(a > 0) and np.all(n >= 0)):
            raise HardwareModelError(
                f"tier {self.name!r}: need access_bytes > 0 and nbytes >= 0, "
                f"got {access_bytes!r} and {nbytes!r}"
            )
        g = self.access_granularity_bytes
        return np.asarray(n * (np.ceil(a / g) * g) / a)
