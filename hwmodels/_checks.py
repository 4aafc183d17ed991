"""Value checks shared by the hardware values (a bool is not a number here)."""

from __future__ import annotations

import math
from typing import TypeGuard


def is_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_positive(value: object) -> bool:
    """A finite number > 0."""
    return is_number(value) and math.isfinite(value) and value > 0


def finite_nonnegative(value: object) -> bool:
    """A finite number >= 0."""
    return is_number(value) and math.isfinite(value) and value >= 0


def positive_int(value: object) -> bool:
    """An ``int`` (not a ``bool``) > 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def nonnegative_int(value: object) -> bool:
    """An ``int`` (not a ``bool``) >= 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
