"""The 2LM hardware cache value: DRAM as a cache of a slower tier (Optane memory mode).

The state machine that replays accesses against it is in :mod:`hwmodels.cachesim`.

Traffic rule per cache line (reference/hardware.md, after the gem5 model of Cascade Lake in
darchr/dram-cache-model), for the default write-back, write-allocate cache:

- every access first reads the cache tier (tag and data, or the tag alone for a write);
- a read miss adds a read of the backing tier and a fill write into the cache tier;
- a write (hit or miss) writes the cache tier; the backing tier is not read, because a line
  is written whole;
- a miss whose victim is dirty adds a write-back to the backing tier.

``write_back=False`` (write-through) also writes every written line to the backing tier and
never leaves a line dirty; ``write_allocate=False`` sends a write miss to the backing tier
without installing the line.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels._checks import (
    BYTES,
    COUNT,
    LATENCY,
    MAX_BYTES,
    byte_size,
    count,
    latency,
    power_of_two,
    shown,
)
from hwmodels.errors import HardwareModelError

#: The fields a cache shares with :class:`hwmodels.memory_mode.MemoryMode`: line and policies.
LINE_FIELDS = ("line_bytes", "associativity", "write_back", "write_allocate", "miss_latency_s")


def check_line_fields(where: str, value: object) -> None:
    """Check the :data:`LINE_FIELDS` of ``value`` (a :class:`DramCache` or a ``MemoryMode``).

    ``line_bytes`` must be a power of two of at most 2**62 (every cache picks a line's set by
    address bits, and Cascade Lake's 2LM line is 64 B), ``associativity`` an integer of 1 to
    2**24, ``write_back`` and ``write_allocate`` booleans, ``miss_latency_s`` a number of 0 to
    1 s. Raises :class:`HardwareModelError` as ``where: field ...`` for the first bad one.
    """
    fields = {name: getattr(value, name) for name in LINE_FIELDS}
    line = fields["line_bytes"]
    if not (power_of_two(line) and line <= MAX_BYTES):
        raise HardwareModelError(
            f"{where}: line_bytes must be a power of two of at most 2**62, got {shown(line)}"
        )
    if not count(fields["associativity"]):
        raise HardwareModelError(
            f"{where}: associativity must be {COUNT}, got {shown(fields['associativity'])}"
        )
    for name in ("write_back", "write_allocate"):
        if not isinstance(fields[name], bool):
            raise HardwareModelError(f"{where}: {name} must be true or false")
    if not latency(fields["miss_latency_s"]):
        raise HardwareModelError(
            f"{where}: miss_latency_s must be {LATENCY}, got {shown(fields['miss_latency_s'])}"
        )


@dataclass(frozen=True, slots=True)
class DramCache:
    """A hardware-managed cache of ``backing_tier`` held in ``cache_tier``.

    - ``capacity_bytes``: bytes of ``cache_tier`` used as cache; a positive multiple of
      ``line_bytes * associativity``, at most 2**62.
    - ``line_bytes``: the cache line, a power of two (64 B on Cascade Lake).
    - ``associativity``: ways per set; 1 (direct-mapped, the default and Cascade Lake's) or
      more (up to 2**24), with least-recently-used replacement.
    - ``write_back``: dirty lines are written to the backing tier only when evicted (True), or
      every write also goes to the backing tier (False, write-through).
    - ``write_allocate``: a write miss installs the line (True) or bypasses the cache (False).
    - ``miss_latency_s``: latency a miss adds over a direct access to the backing tier (0 to
      1 s).
    - ``source``: where the numbers come from.

    Raises :class:`HardwareModelError` naming the field if a value is bad.
    """

    cache_tier: str
    backing_tier: str
    capacity_bytes: int
    line_bytes: int = 64
    associativity: int = 1
    write_back: bool = True
    write_allocate: bool = True
    miss_latency_s: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        where = "cache"
        for name in ("cache_tier", "backing_tier"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value.strip()):
                raise HardwareModelError(f"{where}: {name} must be a non-empty tier name")
        if self.cache_tier == self.backing_tier:
            raise HardwareModelError(f"{where}: cache_tier and backing_tier are the same tier")
        if not byte_size(self.capacity_bytes):
            raise HardwareModelError(
                f"{where}: capacity_bytes must be {BYTES}, got {shown(self.capacity_bytes)}"
            )
        check_line_fields(where, self)
        if self.capacity_bytes % (self.line_bytes * self.associativity):
            raise HardwareModelError(
                f"{where}: capacity_bytes {self.capacity_bytes} is not a multiple of "
                f"line_bytes * associativity = {self.line_bytes * self.associativity}"
            )

    @property
    def n_sets(self) -> int:
        """Number of sets at line granularity."""
        return self.capacity_bytes // (self.line_bytes * self.associativity)

    def check_block_bytes(self, block_bytes: int) -> int:
        """Sets of the cache simulated with blocks of ``block_bytes``; validates the block.

        A block must be a positive multiple of ``line_bytes`` and divide
        ``capacity_bytes / associativity``. Raises :class:`HardwareModelError` otherwise.
        """
        if not byte_size(block_bytes) or block_bytes % self.line_bytes:
            raise HardwareModelError(
                f"cache: block_bytes must be a positive multiple of line_bytes "
                f"{self.line_bytes}, got {block_bytes!r}"
            )
        way_bytes = self.capacity_bytes // self.associativity
        if way_bytes % block_bytes:
            raise HardwareModelError(
                f"cache: block_bytes {block_bytes} does not divide the capacity of one way "
                f"({way_bytes} bytes)"
            )
        return way_bytes // block_bytes
