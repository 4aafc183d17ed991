"""Typed, unit-aware reads from the tables of a platform file, the edge where units convert.

A table (from TOML or JSON) may give each quantity in any unit its key names, e.g.
``read_bw_GBps = 104.6`` or ``read_bw_bytes_per_s = 1.046e11``: :meth:`Table.quantity` finds
the one ``<base>_<unit>`` key present and converts it with the factors below. Every failure
raises :class:`HardwareModelError` as one line, ``origin: place: problem``, where ``origin``
names the file and ``place`` the table in it. Internal to :mod:`hwmodels.serialize`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

from hwmodels._checks import is_number, shown
from hwmodels.errors import HardwareModelError

#: Unit suffixes accepted in keys, with their factor to SI.
BYTES = {
    "bytes": 1,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    "GB": 10**9,
    "TB": 10**12,
}
RATE = {"bytes_per_s": 1.0, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12, "GiBps": float(2**30)}
TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
FLOPS = {"flop_per_s": 1.0, "GFLOPs": 1e9, "TFLOPs": 1e12}


def type_name(value: object) -> str:
    """How a TOML reader calls the type of ``value`` in an error (``integer``, ``table``...)."""
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "table" if isinstance(value, Mapping) else type(value).__name__
    )


class Table:
    """Typed, unit-aware reads from one table, with errors naming ``origin: where: key``."""

    def __init__(self, data: object, origin: str, where: str) -> None:
        self.origin, self.where = origin, where
        if not isinstance(data, Mapping):
            self.fail(f"must be a table, got {type_name(data)}")
        self.data: Mapping[str, Any] = data
        self.used: set[str] = set()

    def fail(self, message: str) -> NoReturn:
        raise HardwareModelError(f"{self.origin}: {self.where}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str) -> Any:
        if key not in self.data:
            self.fail(f"missing field {key!r}")
        self.used.add(key)
        return self.data[key]

    def string(self, key: str, default: str | None = None) -> str:
        if default is not None and key not in self.data:
            return default
        value = self.get(key)
        if not isinstance(value, str):
            self.fail(f"{key} must be a string, got {type_name(value)}")
        return str(value)

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self.data:
            return default
        value = self.get(key)
        if not isinstance(value, bool):
            self.fail(f"{key} must be true or false, got {type_name(value)}")
        return bool(value)

    def integer(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        if default is not None and key not in self.data:
            return default
        value = self.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(f"{key} must be an integer, got {type_name(value)}")
        if value < minimum:
            self.fail(f"{key} must be >= {minimum}, got {value}")
        return int(value)

    def number(self, key: str, *, low: float = 0.0, strict: bool = False) -> float:
        """A finite number > ``low`` (``strict``) or >= ``low``, as a float; an integer too
        large for a float fails like an infinity."""
        value = self.get(key)
        if not is_number(value):
            self.fail(f"{key} must be a number, got {type_name(value)}")
        try:
            result = float(value)
        except OverflowError:
            result = math.inf if value > 0 else -math.inf
        ok = math.isfinite(result) and (result > low if strict else result >= low)
        if not ok:
            self.fail(
                f"{key} must be a finite number {'>' if strict else '>='} {low:g}, "
                f"got {shown(value)}"
            )
        return result

    def fraction(self, key: str) -> float:
        """A number in (0, 1]."""
        value = self.number(key, strict=True)
        if value > 1:
            self.fail(f"{key} must lie in (0, 1], got {value}")
        return value

    def quantity(
        self,
        base: str,
        units: Mapping[str, float],
        *,
        strict: bool = True,
        default: float | None = None,
    ) -> float:
        """The value of ``base`` given as ``base_<unit>``, in SI (> 0, or >= 0 if not strict);
        fails if it is not finite in SI either."""
        key = self._unit_key(base, units, default is not None)
        if key is None:
            assert default is not None
            return default
        value = self.number(key, strict=strict) * units[key[len(base) + 1 :]]
        if not math.isfinite(value):
            self.fail(f"{key} = {self.data[key]!r} is out of range (not finite in SI units)")
        return value

    def _unit_key(self, base: str, units: Mapping[str, float], optional: bool) -> str | None:
        """The one ``base_<unit>`` key present (None if absent and ``optional``)."""
        keys = [f"{base}_{u}" for u in units if f"{base}_{u}" in self.data]
        if not keys:
            spelled = sorted(k for k in self.data if k.startswith(f"{base}_"))
            if spelled:
                self.fail(
                    f"{spelled[0]}: unknown unit (give one of "
                    f"{', '.join(f'{base}_{u}' for u in units)})"
                )
            if optional:
                return None
            self.fail(
                f"missing field {base} (give one of {', '.join(f'{base}_{u}' for u in units)})"
            )
        if len(keys) > 1:
            self.fail(f"{base} given twice ({', '.join(keys)}); give one")
        return keys[0]

    def byte_count(self, base: str, default: int | None = None) -> int:
        """A positive whole number of bytes given as ``base_<unit>`` (``default`` if absent and
        a default is given); exact for integers in any binary or decimal unit."""
        key = self._unit_key(base, BYTES, optional=default is not None)
        if key is None:
            assert default is not None
            return default
        self.number(key, strict=True)  # type, sign and range checks
        raw = self.data[key]
        factor = BYTES[key[len(base) + 1 :]]
        if isinstance(raw, int):
            return raw * factor
        value = raw * factor
        if not math.isfinite(value):
            self.fail(f"{key} = {raw!r} is out of range (not finite in bytes)")
        if value != int(value):
            self.fail(f"{base} is not a whole number of bytes ({value})")
        return int(value)

    def table(self, key: str) -> Table:
        return Table(self.get(key), self.origin, f"{self.where}.{key}" if self.where else key)

    def array(self, key: str) -> list[Any]:
        value = self.get(key)
        if not isinstance(value, list):
            self.fail(f"{key} must be an array, got {type_name(value)}")
        return list(value)

    def done(self) -> None:
        """Fail on keys nobody read: a misspelt key must not be silently ignored."""
        extra = sorted(set(self.data) - self.used)
        if extra:
            self.fail(f"unknown field(s) {', '.join(extra)}")
