"""Fast-tier capacity: a share of the step's footprint or a size, parsed once at the edge.

AutoTM states capacity as a PMM:DRAM ratio of the workload's footprint ("4:1": one fifth of
the peak live bytes in DRAM); a user with a real machine states a size. :class:`Capacity`
holds either, :meth:`Capacity.parse` reads every textual form the command line, sweep specs
and figure configurations accept, and :func:`fast_limit_bytes` resolves it against a graph
and a platform (a ratio that asks for more than the fastest tier holds is capped at its
capacity, a size above it refused). Text forms:

- a ratio ``"S:F"`` (slow to fast, both >= 0, F > 0): fast = peak live bytes x F / (S + F);
- a size: an integer (``"1000000"``), a number in scientific notation (``"3e9"``), or a
  number with a unit, decimal (``kB``, ``MB``, ``GB``, ``TB``) or binary (``KiB``, ``MiB``,
  ``GiB``, ``TiB``), e.g. ``"96GB"``, ``"24 GiB"``, ``"1.5TiB"``; it must come to a whole
  number of bytes, at least 1 and at most 2**63 - 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from hwmodels.platform import Platform
from tmsim.errors import TmsimError
from tmsim.workload.graph import Graph

#: Bytes per unit of a size (case-sensitive, as written in data sheets).
UNITS: dict[str, int] = {
    "B": 1,
    "kB": 10**3,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
#: The largest size a capacity may have: what fits the int64 arrays it is compared with.
MAX_BYTES = 2**63 - 1

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_RATIO = re.compile(rf"\s*({_NUMBER})\s*:\s*({_NUMBER})\s*")
_SIZE = re.compile(rf"\s*({_NUMBER})\s*([A-Za-z]*)\s*")


class CapacityError(TmsimError, ValueError):
    """A capacity is malformed; the message quotes it and says what is accepted."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """A fast-tier capacity: ``ratio`` (slow, fast) parts of the step's peak live bytes, or
    ``size_bytes``; exactly one is set. Build it with :meth:`parse`, :meth:`of_ratio` or
    :meth:`of_bytes`, which check it; ``str()`` gives the text :meth:`parse` reads back."""

    ratio: tuple[float, float] | None = None
    size_bytes: int | None = None

    def __post_init__(self) -> None:
        if (self.ratio is None) == (self.size_bytes is None):
            raise CapacityError("a capacity is a ratio or a size, exactly one of them")
        if self.ratio is not None:
            slow, fast = self.ratio
            if not (0 <= slow < float("inf") and 0 < fast < float("inf")):
                raise CapacityError(
                    f"ratio {slow:g}:{fast:g}: slow must be >= 0 and fast > 0, both finite"
                )
        elif isinstance(self.size_bytes, bool) or not isinstance(self.size_bytes, int):
            raise CapacityError(f"size must be a whole number of bytes, got {self.size_bytes!r}")
        elif not 1 <= self.size_bytes <= MAX_BYTES:
            raise CapacityError(
                f"size must be between 1 and {MAX_BYTES} bytes, got {self.size_bytes}"
            )

    @classmethod
    def of_ratio(cls, slow: float, fast: float) -> Capacity:
        """The capacity ``slow:fast``; raises :class:`CapacityError` if fast <= 0 or slow < 0."""
        return cls(ratio=(float(slow), float(fast)))

    @classmethod
    def of_bytes(cls, size_bytes: int) -> Capacity:
        """The capacity of ``size_bytes`` bytes; raises :class:`CapacityError` unless it is a
        whole number from 1 to :data:`MAX_BYTES`."""
        return cls(size_bytes=size_bytes)

    @classmethod
    def parse(cls, text: str) -> Capacity:
        """Read a ratio or a size (see the module documentation).

        Raises :class:`CapacityError` quoting ``text`` for anything else.
        """
        if not isinstance(text, str):
            raise CapacityError(f"a capacity is text such as '4:1' or '24GiB', got {text!r}")
        m = _RATIO.fullmatch(text)
        if m:
            slow, fast = float(m.group(1)), float(m.group(2))
            try:
                return cls.of_ratio(slow, fast)
            except CapacityError as exc:
                raise CapacityError(f"capacity {text!r}: {exc}") from None
        return cls.of_bytes(parse_bytes(text))

    @staticmethod
    def parse_size(text: str) -> int:
        """A size in bytes read from ``text`` (:func:`parse_bytes`): a ratio is refused.

        >>> Capacity.parse_size("24GiB") == 24 * 2**30
        True
        """
        return parse_bytes(text)

    def fast_bytes(self, peak_live_bytes: int) -> int:
        """The capacity in bytes for a step whose peak live bytes are ``peak_live_bytes``."""
        if self.size_bytes is not None:
            return self.size_bytes
        assert self.ratio is not None
        slow, fast = self.ratio
        return int(peak_live_bytes * fast / (slow + fast))

    def __str__(self) -> str:
        if self.ratio is not None:
            return f"{self.ratio[0]:g}:{self.ratio[1]:g}"
        return str(self.size_bytes)


def parse_bytes(text: str) -> int:
    """A size in bytes from text such as ``"1000"``, ``"3e9"``, ``"96GB"`` or ``"1.5 TiB"``.

    Raises :class:`CapacityError` quoting ``text`` unless it is a number with an optional
    unit of :data:`UNITS` that comes to a whole number of bytes from 1 to :data:`MAX_BYTES`.
    """
    m = _SIZE.fullmatch(text) if isinstance(text, str) else None
    unit = m.group(2) if m else ""
    if m is None or (unit and unit not in UNITS):
        raise CapacityError(
            f"capacity {text!r} is neither a ratio such as '4:1' nor a size such as "
            f"'3e9', '96GB' or '24GiB' (units: {', '.join(UNITS)})"
        )
    try:
        value = Decimal(m.group(1)) * UNITS[unit or "B"]
    except (InvalidOperation, ArithmeticError):  # decimal.Overflow for 1e9999999
        raise CapacityError(f"capacity {text!r} must be between 1 and {MAX_BYTES} bytes") from None
    if value != value.to_integral_value():
        raise CapacityError(f"capacity {text!r} is not a whole number of bytes")
    if not 1 <= value <= MAX_BYTES:
        raise CapacityError(f"capacity {text!r} must be between 1 and {MAX_BYTES} bytes")
    return int(value)


def fast_limit_bytes(graph: Graph, platform: Platform, capacity: Capacity | None) -> int:
    """The fast-tier capacity to plan ``graph`` for on ``platform``: ``capacity`` resolved
    against the step's peak live bytes, or, with None, the capacity of the platform's fastest
    tier (see :func:`resolve_fast_limit` for what a capacity above the tier's becomes)."""
    return resolve_fast_limit(graph, platform, capacity)[0]


def resolve_fast_limit(
    graph: Graph, platform: Platform, capacity: Capacity | None
) -> tuple[int, str | None]:
    """:func:`fast_limit_bytes` and a note saying how it was capped (None if it was not).

    A ratio that asks for more than the fastest tier holds is capped at the tier's capacity;
    a size above it is refused with :class:`CapacityError` (a size is what the user says the
    machine has, so the platform contradicts it).
    """
    tier = platform.tiers[0]
    real = int(tier.capacity_bytes)
    if capacity is None:
        return real, None
    asked = capacity.fast_bytes(graph.peak_live_bytes)
    if asked <= real:
        return asked, None
    if capacity.ratio is None:
        raise CapacityError(
            f"fast memory of {asked} bytes asked, but tier {tier.name!r} of platform "
            f"{platform.name!r} holds {real} bytes"
        )
    note = (
        f"capacity {capacity} asks for {asked} bytes of fast memory; capped at the "
        f"{real} bytes tier {tier.name!r} holds"
    )
    return real, note


def tier_limits_bytes(graph: Graph, platform: Platform, capacity: Capacity | None) -> list[int]:
    """The bytes each tier of ``platform`` may hold when planning ``graph``: the fastest tier
    :func:`fast_limit_bytes`, every other tier its capacity."""
    rest = [int(t.capacity_bytes) for t in platform.tiers[1:]]
    return [fast_limit_bytes(graph, platform, capacity), *rest]


__all__ = [
    "MAX_BYTES",
    "UNITS",
    "Capacity",
    "CapacityError",
    "fast_limit_bytes",
    "parse_bytes",
    "resolve_fast_limit",
    "tier_limits_bytes",
]
