"""Pure cost functions: roofline kernel time, per-placement profile, move time, 2LM traffic.

Everything is vectorized over kernels (numpy); tiers are indexed in platform order, fastest
first. Times are seconds, sizes bytes, rates bytes or FLOP per second.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from hwmodels._checks import member
from hwmodels.cachesim import CacheTraffic
from hwmodels.errors import HardwareModelError
from hwmodels.opclass import OpClass
from hwmodels.platform import Platform

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Most placements :func:`placement_profile` enumerates (tiers ** operands).
MAX_PLACEMENTS = 1 << 20


class Overlap(StrEnum):
    """How a kernel's compute time and memory time combine.

    ``MAX`` (the default everywhere): they overlap perfectly, the roofline. ``SUM``: they do
    not overlap at all, an upper bound.
    """

    MAX = "max"
    SUM = "sum"


class MoveMode(StrEnum):
    """``SYNC``: a blocking copy between kernels. ``ASYNC``: a copy beside a running kernel."""

    SYNC = "sync"
    ASYNC = "async"


@dataclass(frozen=True, slots=True)
class KernelTimes:
    """Roofline times of ``n`` kernels on a platform with ``t`` tiers (seconds).

    ``time_s`` [n] = combine(``compute_s``, ``memory_s``) + ``launch_s``, where ``memory_s``
    [n] is the row sum of ``memory_by_tier_s`` [n, t].
    """

    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    memory_by_tier_s: FloatArray
    launch_s: float


def _class_codes(op_classes: OpClass | str | Sequence[OpClass | str], n: int) -> IntArray:
    order = list(OpClass)
    lookup = {c.value: i for i, c in enumerate(order)}
    items = [op_classes] * n if isinstance(op_classes, str) else list(op_classes)
    if len(items) != n:
        raise HardwareModelError(f"op_classes has {len(items)} entries for {n} kernels")
    try:
        return np.array([lookup[str(c)] for c in items], dtype=np.int64)
    except KeyError as exc:
        raise HardwareModelError(
            f"unknown op class {exc.args[0]!r}; known: {', '.join(lookup)}"
        ) from None


def roofline(
    platform: Platform,
    flops: npt.ArrayLike,
    op_classes: OpClass | str | Sequence[OpClass | str],
    read_bytes: npt.ArrayLike,
    write_bytes: npt.ArrayLike,
    *,
    dtype: str | Sequence[str] = "fp32",
    overlap: Overlap | str = Overlap.MAX,
    mix_interference: bool = False,
    host: bool = False,
) -> KernelTimes:
    """Roofline time of ``n`` kernels (on the platform's host compute, with ``host``).

    - ``flops`` [n]: FLOPs of each kernel; ``op_classes``: one class for all or one per kernel;
      ``dtype``: one dtype for all or one per kernel.
    - ``read_bytes``, ``write_bytes`` [n, t]: bytes each kernel reads and writes on each tier
      (platform order). Only kernel tiers may carry bytes, and on a 2LM platform also the
      cache tier, for the cache's own traffic (see :func:`cache_traffic_by_tier`).

    compute = flops / (compute efficiency of the class * peak FLOP/s of the dtype);
    memory = sum over tiers of (read / read_bw + write / write_bw(cores)) / memory efficiency,
    where write_bw(cores) is the tier's write bandwidth with the compute device's ``cores``
    writing at once, and both are capped by the tier's kernel link, if it has one
    (:meth:`~hwmodels.platform.Platform.kernel_bw_bytes_per_s`); time = max(compute, memory) +
    launch overhead (or the sum, with ``overlap=Overlap.SUM``). The memory time is linear in
    the bytes, which the MILP relies on. With ``mix_interference=True`` each tier's time is
    also multiplied by the tier's read/write mix factor at the kernel's own read fraction there
    (no longer linear). With ``host=True`` the kernels run on the platform's host compute
    (:class:`~hwmodels.compute.HostCompute`): its peaks, efficiencies, launch overhead and
    cores, bytes only on its tiers, at the tiers' own rates (kernel links are the compute
    device's).

    Raises :class:`HardwareModelError` on shape mismatches, negative FLOPs or bytes, unknown
    classes, dtypes or overlap rule, bytes on a tier kernels may not access, or ``host`` on a
    platform without a host compute.
    """
    f = np.atleast_1d(np.asarray(flops, dtype=np.float64))
    n, t = f.size, len(platform.tiers)
    r = np.asarray(read_bytes, dtype=np.float64)
    w = np.asarray(write_bytes, dtype=np.float64)
    for label, arr in (("read_bytes", r), ("write_bytes", w)):
        if arr.shape != (n, t):
            raise HardwareModelError(
                f"{label} must have shape (kernels, tiers) = ({n}, {t}), got {arr.shape}"
            )
        if not np.all(arr >= 0):
            raise HardwareModelError(f"{label} must be >= 0 (and not NaN)")
    if f.ndim != 1 or not np.all(f >= 0):
        raise HardwareModelError("flops must be a 1-D array of numbers >= 0")
    host_compute = platform.host_compute
    if host and host_compute is None:
        raise HardwareModelError(f"platform {platform.name!r} has no host compute")
    mask = platform.host_kernel_tier_mask() if host else platform.kernel_tier_mask()
    forbidden = ~np.array(mask)
    if platform.cache is not None and not host:
        # Traffic on a 2LM cache tier is the hardware cache's own (cache_traffic_by_tier).
        forbidden[platform.tier_index(platform.cache.cache_tier)] = False
    bad = ((r > 0) | (w > 0)) & forbidden[None, :]
    if bad.any():
        k, j = (int(x) for x in np.argwhere(bad)[0])
        reach = [t.name for t, ok in zip(platform.tiers, mask, strict=True) if ok]
        raise HardwareModelError(
            f"kernel {k} accesses tier {platform.tiers[j].name!r}, which "
            f"{'the host compute' if host else 'kernels'} cannot access on platform "
            f"{platform.name!r} (kernel tiers: {', '.join(reach)})"
        )
    comp = host_compute.compute if host and host_compute is not None else platform.compute
    codes = _class_codes(op_classes, n)
    eff = [comp.efficiency(c) for c in OpClass]
    eff_compute = np.array([e.compute for e in eff])[codes]
    eff_memory = np.array([e.memory for e in eff])[codes]
    dtypes = [dtype] * n if isinstance(dtype, str) else list(dtype)
    if len(dtypes) != n:
        raise HardwareModelError(f"dtype has {len(dtypes)} entries for {n} kernels")
    peaks = {d: comp.peak(d) for d in set(dtypes)}
    peak = np.array([peaks[d] for d in dtypes], dtype=np.float64)
    compute_s = f / (eff_compute * peak)

    rates: list[tuple[float, float]]
    if host:
        rates = [
            (float(tt.read_bw_bytes_per_s), float(tt.write_bw_at(comp.cores)))
            for tt in platform.tiers
        ]
    else:
        rates = [platform.kernel_bw_bytes_per_s(tt.name, comp.cores) for tt in platform.tiers]
    read_bw = np.array([rd for rd, _ in rates])
    write_bw = np.array([wr for _, wr in rates])
    by_tier = (r / read_bw + w / write_bw) / eff_memory[:, None]
    if mix_interference:
        moved = r + w
        frac = np.divide(r, moved, out=np.ones_like(r), where=moved > 0)
        factors = np.stack(
            [tt.interference.mix_factor(frac[:, j]) for j, tt in enumerate(platform.tiers)],
            axis=1,
        )
        by_tier = by_tier * factors
    memory_s = by_tier.sum(axis=1)
    launch = comp.launch_overhead_s
    if member(Overlap, overlap, "overlap rule") is Overlap.MAX:
        body = np.maximum(compute_s, memory_s)
    else:
        body = compute_s + memory_s
    return KernelTimes(body + launch, compute_s, memory_s, by_tier, launch)


@dataclass(frozen=True, slots=True)
class PlacementProfile:
    """A kernel's time under every placement of its operands (AutoTM's profile).

    ``placements`` [P, k] holds, for each placement, the platform tier index of each operand;
    ``time_s`` [P] its roofline time. Placements enumerate the kernel tiers, operand 0 varying
    slowest, fastest tier first.
    """

    tier_names: tuple[str, ...]
    placements: IntArray
    time_s: FloatArray

    def time_of(self, placement: Sequence[str]) -> float:
        """Time of the placement giving each operand's tier by name.

        Raises :class:`HardwareModelError` if the placement is not in the profile.
        """
        try:
            idx = [self.tier_names.index(p) for p in placement]
        except ValueError:
            raise HardwareModelError(f"placement {list(placement)} names an unknown tier") from None
        hit = np.flatnonzero((self.placements == np.array(idx)).all(axis=1))
        if hit.size != 1:
            raise HardwareModelError(f"placement {list(placement)} is not in the profile")
        return float(self.time_s[hit[0]])


def placement_profile(
    platform: Platform,
    flops: float,
    op_class: OpClass | str,
    operand_read_bytes: Sequence[float],
    operand_write_bytes: Sequence[float],
    *,
    dtype: str = "fp32",
    overlap: Overlap | str = Overlap.MAX,
    mix_interference: bool = False,
) -> PlacementProfile:
    """Roofline time of one kernel under each placement of its ``k`` operands on kernel tiers.

    Operand ``j`` reads ``operand_read_bytes[j]`` and writes ``operand_write_bytes[j]`` on
    whichever tier it is placed (an input reads, an output writes, an in-place operand does
    both). There are ``len(kernel_tiers) ** k`` placements. Raises :class:`HardwareModelError`
    if the two sequences differ in length, or there would be more than
    :data:`MAX_PLACEMENTS` placements; otherwise as :func:`roofline`.
    """
    rd = np.asarray(operand_read_bytes, dtype=np.float64)
    wr = np.asarray(operand_write_bytes, dtype=np.float64)
    if rd.ndim != 1 or rd.shape != wr.shape:
        raise HardwareModelError(
            "operand_read_bytes and operand_write_bytes must be 1-D of one length per operand"
        )
    k = rd.size
    allowed = [platform.tier_index(name) for name in platform.kernel_tiers]
    allowed.sort()
    if len(allowed) ** k > MAX_PLACEMENTS:
        raise HardwareModelError(
            f"{len(allowed)} tiers ** {k} operands is more than {MAX_PLACEMENTS} placements"
        )
    placements = np.array(list(itertools.product(allowed, repeat=k)), dtype=np.int64).reshape(-1, k)
    p = placements.shape[0]
    reads = np.zeros((p, len(platform.tiers)))
    writes = np.zeros_like(reads)
    rows = np.arange(p)
    for j in range(k):
        reads[rows, placements[:, j]] += rd[j]
        writes[rows, placements[:, j]] += wr[j]
    times = roofline(
        platform,
        np.full(p, flops, dtype=np.float64),
        op_class,
        reads,
        writes,
        dtype=dtype,
        overlap=overlap,
        mix_interference=mix_interference,
    )
    return PlacementProfile(platform.tier_names, placements, times.time_s)


def move_time_s(
    platform: Platform,
    nbytes: npt.ArrayLike,
    src: str,
    dst: str,
    mode: MoveMode | str = MoveMode.SYNC,
) -> FloatArray:
    """Seconds to copy ``nbytes`` (scalar or array) from tier ``src`` to tier ``dst``.

    ``latency + nbytes / rate`` for a copy of at least one byte, zero for none: the rate is
    the copy path's synchronous or asynchronous one by ``mode`` (``"sync"`` or ``"async"``),
    the latency the platform's per-transfer latency of the pair
    (:meth:`~hwmodels.platform.Platform.copy_latency_s`); zero when ``src == dst``. Raises
    :class:`HardwareModelError` if the mode or a tier is unknown, no copy path joins them, or
    a byte count is negative.
    """
    n = np.asarray(nbytes, dtype=np.float64)
    if not np.all(n >= 0):
        raise HardwareModelError(f"nbytes must be >= 0, got {nbytes!r}")
    asynchronous = member(MoveMode, mode, "move mode") is MoveMode.ASYNC
    if src == dst:
        platform.tier(src)
        return np.zeros_like(n)
    path = platform.copy_path(src, dst)
    latency = platform.copy_latency_s(src, dst)
    return np.asarray(np.where(n > 0, latency + n / path.bw_bytes_per_s(asynchronous), 0.0))


def cache_traffic_by_tier(
    platform: Platform, traffic: CacheTraffic
) -> tuple[FloatArray, FloatArray]:
    """Bytes read and written on each tier [n_accesses, n_tiers] by 2LM cache ``traffic``.

    The cache's traffic goes on its cache tier, the backing traffic on its backing tier, ready
    for :func:`roofline`. Raises :class:`HardwareModelError` if ``platform`` has no cache.
    """
    cache = platform.cache
    if cache is None:
        raise HardwareModelError(f"platform {platform.name!r} has no hardware cache")
    n = traffic.hits.size
    reads = np.zeros((n, len(platform.tiers)))
    writes = np.zeros_like(reads)
    near, far = platform.tier_index(cache.cache_tier), platform.tier_index(cache.backing_tier)
    reads[:, near] = traffic.cache_read_bytes
    writes[:, near] = traffic.cache_write_bytes
    reads[:, far] = traffic.backing_read_bytes
    writes[:, far] = traffic.backing_write_bytes
    return reads, writes
