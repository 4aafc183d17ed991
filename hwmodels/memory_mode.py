"""Memory mode: what a flat platform becomes when its fastest tier caches the next one.

Intel's Memory Mode (2LM) on Cascade Lake with Optane PMM hides the DRAM from software and
makes it a hardware-managed cache of the PMM (reference/hardware.md, "Memory Mode (2LM)").
A flat platform that can be switched so carries a :class:`MemoryMode` with the cache's line,
associativity, write policies and miss latency; :meth:`Platform.in_memory_mode
<hwmodels.platform.Platform.in_memory_mode>` turns it into the platform in memory mode at a
chosen cache capacity:

- the cache lives in the fastest addressable tier and caches the next addressable tier;
- its capacity is the one asked for, rounded down to whole sets of
  ``line_bytes * associativity`` bytes;
- kernels see only the backing tier, and there are no copy paths (the hardware moves data);
- the platform is renamed ``<name>-2lm``; everything else is kept, ``memory_mode`` included.

The preset ``cascadelake-optane`` carries the Memory Mode of ``cascadelake-2lm`` (the same
machine in Memory Mode at its full 192 GiB of DRAM).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hwmodels.cache import DramCache, check_line_fields
from hwmodels.errors import HardwareModelError

if TYPE_CHECKING:
    from hwmodels.platform import Platform


@dataclass(frozen=True, slots=True)
class MemoryMode:
    """How a platform's fastest addressable tier acts as a hardware cache of the next tier.

    The fields mean what they mean on :class:`DramCache`, which holds them once a capacity is
    chosen: ``line_bytes`` (a power of two), ``associativity`` (ways per set, 1 to 2**24; 1 is
    direct-mapped), ``write_back``, ``write_allocate``, ``miss_latency_s`` (latency a miss adds
    over a direct access to the backing tier, 0 to 1 s) and ``source`` (where the numbers come
    from).
    The defaults are :class:`DramCache`'s.

    Raises :class:`HardwareModelError` as ``memory_mode: <field> ...`` if a value is bad.
    """

    line_bytes: int = 64
    associativity: int = 1
    write_back: bool = True
    write_allocate: bool = True
    miss_latency_s: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        check_line_fields("memory_mode", self)
        if not isinstance(self.source, str):
            raise HardwareModelError("memory_mode: source must be a string")

    @property
    def set_bytes(self) -> int:
        """Bytes of one set (``line_bytes * associativity``): the cache's capacity unit."""
        return self.line_bytes * self.associativity


def memory_mode_platform(platform: Platform, cache_bytes: int) -> Platform:
    """``platform`` in memory mode with a cache of ``cache_bytes``: what
    :meth:`Platform.in_memory_mode <hwmodels.platform.Platform.in_memory_mode>` returns (see
    there for the rules and errors)."""
    mode = platform.memory_mode
    where = f"platform {platform.name!r}"
    if mode is None:
        raise HardwareModelError(f"{where}: no memory mode (the platform has no [memory_mode])")
    tiers = platform.addressable_tiers
    if len(tiers) < 2:
        raise HardwareModelError(
            f"{where}: memory mode needs two addressable tiers, a cache and its backing tier; "
            f"it has {len(tiers)}"
        )
    capacity = cache_bytes // mode.set_bytes * mode.set_bytes
    if capacity <= 0:
        raise HardwareModelError(
            f"{where}: a {cache_bytes}-byte cache is smaller than one set ({mode.set_bytes} B)"
        )
    fast, slow = tiers[0].name, tiers[1].name
    cache = DramCache(
        cache_tier=fast,
        backing_tier=slow,
        capacity_bytes=capacity,
        line_bytes=mode.line_bytes,
        associativity=mode.associativity,
        write_back=mode.write_back,
        write_allocate=mode.write_allocate,
        miss_latency_s=mode.miss_latency_s,
        source=f"memory mode of {platform.name} at {capacity} bytes: {mode.source}",
    )
    links = tuple(k for k in platform.kernel_links if k.tier == slow)
    energy = platform.energy
    if energy is not None:  # the prices of what is left: the kept link's, no host CPU's
        crossed = (
            {(slow, platform.tiers[0].name), (platform.tiers[0].name, slow)} if links else set()
        )
        kept = tuple(k for k in energy.links if (k.src, k.dst) in crossed)
        energy = replace(energy, links=kept, host_flop_j=())
    return replace(
        platform,
        name=f"{platform.name}-2lm",
        kernel_tiers=(slow,),
        copy_paths=(),
        cache=cache,
        kernel_links=links,
        energy=energy,
        host_compute=None,
    )
