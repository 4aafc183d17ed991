"""The platform: memory tiers, a compute device, copy paths, the links through which kernels
reach tiers behind an interconnect, an optional 2LM cache, the optional descriptions of its
memory mode and unified-memory driver, and the optional host CPU beside its compute device."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

from hwmodels.cache import DramCache
from hwmodels.compute import Compute, HostCompute
from hwmodels.controller import MemoryController
from hwmodels.copythread import CopyThread
from hwmodels.display import SummaryRow, html_table, platform_rows, text_table
from hwmodels.energy import Energy
from hwmodels.errors import HardwareModelError
from hwmodels.memory_mode import MemoryMode, memory_mode_platform
from hwmodels.paths import CopyPath, KernelLink
from hwmodels.tiers import MemoryTier
from hwmodels.unified_memory import UnifiedMemory


@dataclass(frozen=True, slots=True)
class Platform:
    """A machine as the planner and simulator see it.

    - ``tiers``: memory tiers ordered fastest first (non-increasing read bandwidth).
    - ``compute``: the compute device.
    - ``copy_paths``: directed copy paths between tiers (at most one per ordered pair).
    - ``kernel_tiers``: names of the tiers kernels may read and write directly (every tier on
      a CPU with PMM; only device memory on a GPU; only the backing tier in 2LM mode). They
      must include the fastest addressable tier: that is the tier a capacity ratio limits and
      every planner fills first, and only a hardware cache (memory mode) may hide the fastest
      tier from kernels, which then reach the tier it caches.
    - ``cache``: with a :class:`DramCache`, the cache tier is hidden from software (memory
      mode): it is neither a kernel tier nor a copy endpoint, and all data lives in the
      backing tier.
    - ``shared_controllers``: groups of tiers behind one memory controller that serves their
      transactions one at a time, so the device time of concurrent traffic on the tiers of a
      group adds up (as the cost model adds a kernel's memory time over the tiers it uses).
      Each group names two or more tiers; a tier belongs to at most one group; tiers in no
      group have controllers of their own (the default). On Cascade Lake the DRAM and Optane
      DIMMs of a channel share its bus and the controller arbitrates between them (Intel,
      "Intel Optane Persistent Memory BIOS Optimization"), but strict addition is an upper
      bound: the measured copy rates (DRAM to PMM 12 GB/s, PMM to DRAM 29 GB/s, AutoTM) use
      1.08 and 1.15 of the device time addition allows, so the presets leave it off; it is
      the knob for studying controller interference.
    - ``controller``: with a :class:`MemoryController`, the channels some tiers share, their
      bus-time weights, arbitration and write drains, as the replay's ``controller``
      interference level uses them; its tiers must exist. It is a resource of its own beside
      any ``shared_controllers`` group.
    - ``copy_thread``: with a :class:`CopyThread`, the CPU thread that runs asynchronous
      copies between its tiers, as the ``controller`` interference level runs it (loaded
      latency, a shared or dedicated core); its tiers must exist.
    - ``name``, ``description``, ``source``: identification and provenance.
    - ``memory_mode``: with a :class:`MemoryMode`, how the flat platform's fastest tier can
      act as a hardware cache of its next one (:meth:`in_memory_mode`
      builds that platform). It describes what the flat platform can become; a platform in
      memory mode (``cache`` set) may carry it too, and nothing checks that it agrees with
      ``cache``.
    - ``unified_memory``: with a :class:`UnifiedMemory`, how a GPU driver migrates managed
      pages between tier 0 (the device) and tier 1 (the host).
    - ``kernel_links``: the :class:`~hwmodels.paths.KernelLink` of each kernel tier that the
      compute device reaches through an interconnect (a GPU loading from its host's memory
      over NVLink-C2C), at most one per tier and none to the fastest tier (the compute
      device's own memory, which kernels sit on); kernels reach such a tier at the lesser of
      its rate and the link's (:meth:`kernel_bw_bytes_per_s`), and those rates must keep the
      kernel tiers fastest first (a link may not make a tier read slower than a kernel tier
      after it). Empty (the default): kernels reach every kernel tier at the tier's own
      rate.
    - ``energy``: with an :class:`~hwmodels.energy.Energy`, what bytes and FLOPs cost and how
      long the devices last: its tiers, links and dtypes must be the platform's, and it must
      price every tier, dtype and kernel link, and every copy path or none
      (:mod:`hwmodels.energy`).
    - ``host_compute``: with a :class:`~hwmodels.compute.HostCompute`, the host CPU beside the
      compute device (a GPU's host), which may run kernels of its own on the tiers it
      reaches, at their own rates (:meth:`host_kernel_tier_mask`). None (the default): every
      kernel runs on ``compute``.

    Raises :class:`HardwareModelError` for: no tiers; duplicate tier names; tiers not ordered
    fastest first; a copy path, kernel tier or cache naming an unknown tier; two copy paths for
    the same ordered pair; the two directions of a pair disagreeing on ``duplex``; no kernel
    tier; kernels that cannot reach the fastest addressable tier; a cache larger than its
    tier, or whose tier is visible to kernels or copies; a ``memory_mode`` or
    ``unified_memory`` of the wrong type, or a memory mode on a platform of one tier; a
    ``controller`` or ``copy_thread`` naming an unknown tier; a kernel link that is not a
    :class:`~hwmodels.paths.KernelLink`, names a tier kernels do not reach or the fastest
    tier, is the second for its tier, or makes kernels read its tier slower than a kernel tier
    after it; a ``host_compute`` that is not a :class:`~hwmodels.compute.HostCompute`, or
    whose tiers are unknown or include a 2LM cache tier.

    A platform of one tier is valid: kernels reach it, nothing moves (a CPU and GPU sharing
    one memory, as on an APU).
    """

    name: str
    tiers: tuple[MemoryTier, ...]
    compute: Compute
    copy_paths: tuple[CopyPath, ...]
    kernel_tiers: tuple[str, ...]
    cache: DramCache | None = None
    shared_controllers: tuple[tuple[str, ...], ...] = ()
    description: str = ""
    source: str = ""
    memory_mode: MemoryMode | None = None
    unified_memory: UnifiedMemory | None = None
    controller: MemoryController | None = None
    copy_thread: CopyThread | None = None
    kernel_links: tuple[KernelLink, ...] = ()
    energy: Energy | None = None
    host_compute: HostCompute | None = None

    def __post_init__(self) -> None:
        where = f"platform {self.name!r}"
        if not (isinstance(self.name, str) and self.name.strip()):
            raise HardwareModelError("platform: name must be a non-empty string")
        if not self.tiers:
            raise HardwareModelError(f"{where}: no memory tiers")
        names = [t.name for t in self.tiers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise HardwareModelError(f"{where}: duplicate tier name(s) {', '.join(dupes)}")
        for prev, tier in zip(self.tiers, self.tiers[1:], strict=False):
            if tier.read_bw_bytes_per_s > prev.read_bw_bytes_per_s:
                raise HardwareModelError(
                    f"{where}: tiers must be ordered fastest first, but tier {tier.name!r} "
                    f"reads faster ({tier.read_bw_bytes_per_s:g} B/s) than tier {prev.name!r} "
                    f"before it ({prev.read_bw_bytes_per_s:g} B/s)"
                )
        known = set(names)
        seen: dict[tuple[str, str], CopyPath] = {}
        for path in self.copy_paths:
            for end in (path.src, path.dst):
                if end not in known:
                    raise HardwareModelError(
                        f"{where}: copy path {path.src!r} -> {path.dst!r} names unknown tier "
                        f"{end!r}; tiers are {', '.join(names)}"
                    )
            key = (path.src, path.dst)
            if key in seen:
                raise HardwareModelError(f"{where}: two copy paths {path.src!r} -> {path.dst!r}")
            seen[key] = path
            reverse = seen.get((path.dst, path.src))
            if reverse is not None and reverse.duplex != path.duplex:
                raise HardwareModelError(
                    f"{where}: copy paths {path.src!r} -> {path.dst!r} and back disagree on duplex"
                )
        if not self.kernel_tiers:
            raise HardwareModelError(f"{where}: kernel_tiers is empty")
        for t in self.kernel_tiers:
            if t not in known:
                raise HardwareModelError(
                    f"{where}: kernel_tiers names unknown tier {t!r}; tiers are {', '.join(names)}"
                )
        if len(set(self.kernel_tiers)) != len(self.kernel_tiers):
            raise HardwareModelError(f"{where}: kernel_tiers lists a tier twice")
        if self.cache is not None:
            self._check_cache(where, known)
        fastest = self.addressable_tiers[0].name
        if fastest not in self.kernel_tiers:
            raise HardwareModelError(
                f"{where}: kernels cannot reach the fastest tier {fastest!r} (kernel_tiers: "
                f"{', '.join(self.kernel_tiers)}); list it in kernel_tiers (only a hardware "
                "cache in memory mode may hide the fastest tier from kernels)"
            )
        grouped: set[str] = set()
        for group in self.shared_controllers:
            if len(set(group)) < 2:
                raise HardwareModelError(
                    f"{where}: a shared controller must name two or more tiers, got {list(group)}"
                )
            for t in group:
                if t not in known:
                    raise HardwareModelError(
                        f"{where}: shared_controllers names unknown tier {t!r}; tiers are "
                        f"{', '.join(names)}"
                    )
                if t in grouped:
                    raise HardwareModelError(
                        f"{where}: tier {t!r} is in more than one shared controller"
                    )
                grouped.add(t)
        self._check_driver_models(where)
        self._check_controller(where, known)
        self._check_kernel_links(where)
        if self.host_compute is not None:
            if not isinstance(self.host_compute, HostCompute):
                raise HardwareModelError(f"{where}: host_compute must be a HostCompute")
            hidden = self.cache.cache_tier if self.cache is not None else None
            self.host_compute.check_tiers(where, self.tier_names, hidden)
        if self.energy is not None:
            if not isinstance(self.energy, Energy):
                raise HardwareModelError(f"{where}: energy must be an Energy")
            pairs = [(c.src, c.dst) for c in self.copy_paths]
            fastest = self.tiers[0].name
            linked = [p for k in self.kernel_links for p in ((k.tier, fastest), (fastest, k.tier))]
            try:
                host = self.host_compute.compute.dtypes if self.host_compute is not None else ()
                self.energy.check_against(names, pairs, self.compute.dtypes, host, linked)
            except HardwareModelError as exc:
                raise HardwareModelError(f"{where}: {exc}") from None

    def _check_kernel_links(self, where: str) -> None:
        if not isinstance(self.kernel_links, tuple):
            raise HardwareModelError(f"{where}: kernel_links must be a tuple of KernelLink")
        linked: set[str] = set()
        for link in self.kernel_links:
            if not isinstance(link, KernelLink):
                raise HardwareModelError(f"{where}: kernel_links must hold KernelLink values")
            if link.tier not in self.kernel_tiers:
                raise HardwareModelError(
                    f"{where}: kernel link to {link.tier!r}: kernels do not reach that tier "
                    f"(kernel_tiers: {', '.join(self.kernel_tiers)})"
                )
            if link.tier == self.tiers[0].name:
                raise HardwareModelError(
                    f"{where}: kernel link to {link.tier!r}: kernels sit on it (the fastest "
                    "tier, the compute device's own memory) and reach it directly; a kernel "
                    "link is for a tier behind an interconnect"
                )
            if link.tier in linked:
                raise HardwareModelError(f"{where}: two kernel links to tier {link.tier!r}")
            linked.add(link.tier)
        reach = [(t, self.kernel_bw_bytes_per_s(t, 1)[0]) for t in self.kernel_tiers]
        reach.sort(key=lambda item: self.tier_index(item[0]))  # fastest tier first
        for (name, bw), (after, bw_after) in pairwise(reach):
            if bw_after > bw:  # only a link slows a tier below its raw, ordered rate
                raise HardwareModelError(
                    f"{where}: kernel link to {name!r}: kernels would read tier {name!r} at "
                    f"{bw:g} B/s through it, slower than tier {after!r} after it "
                    f"({bw_after:g} B/s); kernels must reach the tiers fastest first"
                )

    def _check_controller(self, where: str, known: set[str]) -> None:
        checks = (
            ("controller", self.controller, MemoryController, "weights"),
            ("copy_thread", self.copy_thread, CopyThread, "tiers"),
        )
        for field_name, value, kind, listing in checks:
            if value is None:
                continue
            if not isinstance(value, kind):
                raise HardwareModelError(f"{where}: {field_name} must be a {kind.__name__}")
            for t in value.tier_names if isinstance(value, CopyThread) else value.tiers:
                if t not in known:
                    raise HardwareModelError(
                        f"{where}: {field_name}: {listing} name unknown tier {t!r}; tiers are "
                        f"{', '.join(sorted(known))}"
                    )

    def _check_driver_models(self, where: str) -> None:
        if self.memory_mode is not None:
            if not isinstance(self.memory_mode, MemoryMode):
                raise HardwareModelError(f"{where}: memory_mode must be a MemoryMode")
            if len(self.tiers) < 2:
                raise HardwareModelError(
                    f"{where}: memory_mode needs two tiers, a cache and its backing tier"
                )
        if self.unified_memory is not None and not isinstance(self.unified_memory, UnifiedMemory):
            raise HardwareModelError(f"{where}: unified_memory must be a UnifiedMemory")

    def _check_cache(self, where: str, known: set[str]) -> None:
        cache = self.cache
        assert cache is not None
        for field_name in ("cache_tier", "backing_tier"):
            t = getattr(cache, field_name)
            if t not in known:
                raise HardwareModelError(f"{where}: cache {field_name} names unknown tier {t!r}")
        holder = self.tier(cache.cache_tier)
        if cache.capacity_bytes > holder.capacity_bytes:
            raise HardwareModelError(
                f"{where}: cache capacity_bytes {cache.capacity_bytes} exceeds tier "
                f"{holder.name!r} ({holder.capacity_bytes} bytes)"
            )
        if cache.cache_tier in self.kernel_tiers:
            raise HardwareModelError(
                f"{where}: the cache tier {cache.cache_tier!r} is hidden in memory mode and "
                "cannot be a kernel tier"
            )
        for path in self.copy_paths:
            if cache.cache_tier in (path.src, path.dst):
                raise HardwareModelError(
                    f"{where}: the cache tier {cache.cache_tier!r} is hidden in memory mode "
                    f"and cannot be a copy endpoint ({path.src!r} -> {path.dst!r})"
                )

    def summary_rows(self) -> list[SummaryRow]:
        """Headline numbers as ``(label, value)`` text (:func:`hwmodels.display.platform_rows`):
        each tier's capacity and bandwidths, each copy path's rates, the compute device and
        the optional models present."""
        return platform_rows(self)

    def __repr__(self) -> str:
        return text_table(f"Platform {self.name!r}", self.summary_rows())

    def _repr_html_(self) -> str:
        return html_table(f"Platform {self.name}", self.summary_rows())

    def controller_groups(self) -> tuple[tuple[int, ...], ...]:
        """:attr:`shared_controllers` as tier indices."""
        return tuple(tuple(self.tier_index(t) for t in g) for g in self.shared_controllers)

    @property
    def tier_names(self) -> tuple[str, ...]:
        """Names of all tiers, fastest first."""
        return tuple(t.name for t in self.tiers)

    @property
    def addressable_tiers(self) -> tuple[MemoryTier, ...]:
        """Tiers software can place data in: all but a 2LM cache tier, fastest first."""
        hidden = self.cache.cache_tier if self.cache is not None else None
        return tuple(t for t in self.tiers if t.name != hidden)

    def tier(self, name: str) -> MemoryTier:
        """The tier called ``name``. Raises :class:`HardwareModelError` if there is none."""
        for t in self.tiers:
            if t.name == name:
                return t
        raise HardwareModelError(
            f"platform {self.name!r}: no tier {name!r}; tiers are {', '.join(self.tier_names)}"
        )

    def tier_index(self, name: str) -> int:
        """Position of tier ``name`` in ``tiers`` (0 = fastest). Raises if unknown."""
        return self.tiers.index(self.tier(name))

    def copy_path(self, src: str, dst: str) -> CopyPath:
        """The copy path from ``src`` to ``dst``.

        Raises :class:`HardwareModelError` if either tier is unknown or no path joins them.
        """
        self.tier(src)
        self.tier(dst)
        for p in self.copy_paths:
            if p.src == src and p.dst == dst:
                return p
        raise HardwareModelError(f"platform {self.name!r}: no copy path from {src!r} to {dst!r}")

    def copy_latency_s(self, src: str, dst: str) -> float:
        """The per-transfer latency of a copy from tier ``src`` to ``dst`` (seconds): the time
        its first byte takes to be read from the source and written to the destination, the
        source's read latency plus the destination's write latency. A copy of ``n`` bytes
        then takes this plus ``n`` over the path's rate. Raises if a tier is unknown."""
        return float(self.tier(src).read_latency_s + self.tier(dst).write_latency_s)

    def kernel_link(self, name: str) -> KernelLink | None:
        """The link through which kernels reach tier ``name``, or None where they reach it
        directly (or not at all). Raises :class:`HardwareModelError` for an unknown tier."""
        self.tier(name)
        return next((k for k in self.kernel_links if k.tier == name), None)

    def kernel_bw_bytes_per_s(self, name: str, n_writers: int) -> tuple[float, float]:
        """``(read, write)`` bytes per second kernels reach on tier ``name`` with ``n_writers``
        writing at once: the tier's read bandwidth and its write bandwidth at ``n_writers``
        (:meth:`~hwmodels.tiers.MemoryTier.write_bw_at`), each capped by the rate of the
        tier's kernel link, if it has one. Raises :class:`HardwareModelError` for an unknown
        tier or a negative writer count."""
        tier = self.tier(name)
        read = float(tier.read_bw_bytes_per_s)
        write = float(tier.write_bw_at(n_writers))
        link = self.kernel_link(name)
        if link is None:
            return read, write
        return min(read, link.read_bw_bytes_per_s), min(write, link.write_bw_bytes_per_s)

    def kernel_tier_mask(self) -> tuple[bool, ...]:
        """For each tier (fastest first), whether kernels may access it directly."""
        return tuple(t.name in self.kernel_tiers for t in self.tiers)

    def host_kernel_tier_mask(self) -> tuple[bool, ...]:
        """For each tier (fastest first), whether the host compute may access it directly
        (all False without a host compute)."""
        reach = self.host_compute.kernel_tiers if self.host_compute is not None else ()
        return tuple(t.name in reach for t in self.tiers)

    def with_tier_capacity(self, name: str, capacity_bytes: int) -> Platform:
        """This platform with tier ``name`` holding ``capacity_bytes``, all else equal (the
        name too). Pure. Raises :class:`HardwareModelError` for an unknown tier or a capacity
        the tier may not have."""
        i = self.tier_index(name)
        tier = replace(self.tiers[i], capacity_bytes=capacity_bytes)
        return replace(self, tiers=(*self.tiers[:i], tier, *self.tiers[i + 1 :]))

    def in_memory_mode(self, cache_bytes: int) -> Platform:
        """This platform in memory mode with a cache of ``cache_bytes``
        (:mod:`hwmodels.memory_mode`).

        The cache's parameters are ``platform.memory_mode``'s, its capacity ``cache_bytes``
        rounded down to whole sets, and its ``source`` names the platform, the capacity and the
        memory mode's source; kernels reach only the backing tier, through its kernel link if it
        has one, and nothing copies. Pure. Raises :class:`HardwareModelError` (one line) if the
        platform has no memory mode, has fewer than two addressable tiers (it is in memory mode
        already, or has one tier), if ``cache_bytes`` is below one set, or if the cache is
        larger than its tier. The host compute is not carried over (nothing runs kernels on
        the host of a platform in memory mode).
        """
        return memory_mode_platform(self, cache_bytes)
