"""Value checks shared by the hardware values (a bool is not a number here), and the ranges a
platform's numbers must lie in.

The rule: every number of a platform lies in a range wide enough for any machine one might
model and narrow enough that every time the models give stays finite, for any graph tmsim
accepts (fewer than 2**62 bytes and 2**62 FLOPs in all, :mod:`tmsim.workload.tensors`):

- rates (bandwidths in bytes/s, peak FLOP/s) in [:data:`MIN_RATE_PER_S`,
  :data:`MAX_RATE_PER_S`] = [1, 1e21] per second (slower than any storage device, faster than
  any memory by five orders of magnitude);
- latencies and overheads in [0, :data:`MAX_LATENCY_S`] = [0, 1] second;
- fractions of a peak (efficiencies, the unified-memory migration share) in
  [:data:`MIN_FRACTION`, 1] = [1e-6, 1];
- dimensionless factors (interference penalties and falloffs, exponents) at most
  :data:`MAX_FACTOR` = 1e6;
- counts (cores, copy engines, writers, ways) at most :data:`MAX_COUNT` = 2**24;
- sizes in bytes (capacities, granules, lines, pages) at most :data:`MAX_BYTES` = 2**62.

So the longest kernel, 2 * 2**62 bytes at 1 B/s, at a millionth of peak, slowed by the
largest falloff over 2**24 writers and the largest mix penalty, takes under 1e46 s, and the
longest copy under 1e25 s: finite with some 260 orders of magnitude to spare, for sums over
any number of kernels too. Every predicate accepts Python integers of any size without
converting them to floats (which would overflow).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TypeGuard, TypeVar

from hwmodels.errors import HardwareModelError

_E = TypeVar("_E", bound=StrEnum)

MIN_RATE_PER_S = 1.0
MAX_RATE_PER_S = 1e21
MAX_LATENCY_S = 1.0
MIN_FRACTION = 1e-6
MAX_FACTOR = 1e6
MAX_COUNT = 2**24
MAX_BYTES = 2**62


def is_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: int | float) -> bool:
    return isinstance(value, int) or math.isfinite(value)


def finite_positive(value: object) -> bool:
    """A finite number > 0."""
    return is_number(value) and _finite(value) and value > 0


def finite_nonnegative(value: object) -> bool:
    """A finite number >= 0."""
    return is_number(value) and _finite(value) and value >= 0


def positive_int(value: object) -> bool:
    """An ``int`` (not a ``bool``) > 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def nonnegative_int(value: object) -> bool:
    """An ``int`` (not a ``bool``) >= 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def in_range(value: object, low: float, high: float) -> bool:
    """A number (not a bool, not NaN) in ``[low, high]``."""
    return is_number(value) and low <= value <= high


def rate(value: object) -> bool:
    """A rate per second in [:data:`MIN_RATE_PER_S`, :data:`MAX_RATE_PER_S`]."""
    return in_range(value, MIN_RATE_PER_S, MAX_RATE_PER_S)


def latency(value: object) -> bool:
    """A latency or overhead in seconds in [0, :data:`MAX_LATENCY_S`]."""
    return in_range(value, 0.0, MAX_LATENCY_S)


def fraction(value: object) -> bool:
    """A fraction of a peak in [:data:`MIN_FRACTION`, 1]."""
    return in_range(value, MIN_FRACTION, 1.0)


def factor(value: object) -> bool:
    """A dimensionless factor in [0, :data:`MAX_FACTOR`]."""
    return in_range(value, 0.0, MAX_FACTOR)


def count(value: object, minimum: int = 1) -> bool:
    """An ``int`` (not a ``bool``) in [``minimum``, :data:`MAX_COUNT`]."""
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= MAX_COUNT


def byte_size(value: object) -> bool:
    """A positive ``int`` number of bytes (not a ``bool``) at most :data:`MAX_BYTES`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BYTES


def power_of_two(value: object) -> bool:
    """A positive ``int`` (not a ``bool``) that is a power of two."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return value > 0 and value & (value - 1) == 0


#: How each range reads in a message.
RATE = "a number of 1 to 1e21 per second"
LATENCY = "a number of 0 to 1 s"
FRACTION = "a number of 1e-6 to 1"
FACTOR = "a number of 0 to 1e6"
COUNT = "an integer of 1 to 2**24"
BYTES = "a positive integer of at most 2**62"


def shown(value: object) -> str:
    """``repr(value)``, or the order of magnitude of an integer too long to print."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"{'-' if value < 0 else ''}about 2**{abs(value).bit_length() - 1}"
    return repr(value)


def member(kind: type[_E], value: _E | str, what: str) -> _E:
    """The member of ``kind`` that ``value`` names; raises :class:`HardwareModelError`
    ("unknown WHAT 'x'; known: ...") for a name it lacks."""
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise HardwareModelError(f"unknown {what} {value!r}; known: {known}") from None
