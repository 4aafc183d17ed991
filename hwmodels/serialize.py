"""Platform <-> plain dict, the file edge where units are converted.

A dict (from TOML or JSON) may give each quantity in any unit its key names, e.g.
``read_bw_GBps = 104.6`` or ``read_bw_bytes_per_s = 1.046e11``; exactly one spelling of each
quantity. :func:`platform_to_dict` writes SI keys only, so a platform survives a round trip
exactly. Every error names the origin (a file), the place in it and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

from hwmodels._checks import is_number
from hwmodels.cache import DramCache
from hwmodels.compute import ClassEfficiency, Compute, OpClass
from hwmodels.errors import HardwareModelError
from hwmodels.paths import CopyPath
from hwmodels.platform import Platform
from hwmodels.tiers import Interference, MemoryTier

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


def _type_name(value: object) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        type(value), "table" if isinstance(value, Mapping) else type(value).__name__
    )


class _Table:
    """Typed, unit-aware reads from one table, with errors naming ``origin: where: key``."""

    def __init__(self, data: object, origin: str, where: str) -> None:
        self.origin, self.where = origin, where
        if not isinstance(data, Mapping):
            self.fail(f"must be a table, got {_type_name(data)}")
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
            self.fail(f"{key} must be a string, got {_type_name(value)}")
        return str(value)

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self.data:
            return default
        value = self.get(key)
        if not isinstance(value, bool):
            self.fail(f"{key} must be true or false, got {_type_name(value)}")
        return bool(value)

    def integer(self, key: str, default: int | None = None, minimum: int = 1) -> int:
        if default is not None and key not in self.data:
            return default
        value = self.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(f"{key} must be an integer, got {_type_name(value)}")
        if value < minimum:
            self.fail(f"{key} must be >= {minimum}, got {value}")
        return int(value)

    def number(self, key: str, *, low: float = 0.0, strict: bool = False) -> float:
        value = self.get(key)
        if not is_number(value):
            self.fail(f"{key} must be a number, got {_type_name(value)}")
        ok = math.isfinite(value) and (value > low if strict else value >= low)
        if not ok:
            self.fail(
                f"{key} must be a finite number {'>' if strict else '>='} {low:g}, got {value}"
            )
        return float(value)

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
        """The value of ``base`` given as ``base_<unit>``, in SI (> 0, or >= 0 if not strict)."""
        key = self._unit_key(base, units, default is not None)
        if key is None:
            assert default is not None
            return default
        return self.number(key, strict=strict) * units[key[len(base) + 1 :]]

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

    def byte_count(self, base: str) -> int:
        """A positive whole number of bytes; exact for integers in any binary or decimal unit."""
        key = self._unit_key(base, BYTES, optional=False)
        assert key is not None
        self.number(key, strict=True)  # type and sign checks
        raw = self.data[key]
        factor = BYTES[key[len(base) + 1 :]]
        if isinstance(raw, int):
            return raw * factor
        value = raw * factor
        if value != int(value):
            self.fail(f"{base} is not a whole number of bytes ({value})")
        return int(value)

    def table(self, key: str) -> _Table:
        return _Table(self.get(key), self.origin, f"{self.where}.{key}" if self.where else key)

    def array(self, key: str) -> list[Any]:
        value = self.get(key)
        if not isinstance(value, list):
            self.fail(f"{key} must be an array, got {_type_name(value)}")
        return list(value)

    def done(self) -> None:
        """Fail on keys nobody read: a misspelt key must not be silently ignored."""
        extra = sorted(set(self.data) - self.used)
        if extra:
            self.fail(f"unknown field(s) {', '.join(extra)}")


def _tier(t: _Table) -> MemoryTier:
    inter = Interference()
    if t.has("interference"):
        i = t.table("interference")
        inter = Interference(
            mix_penalty=i.number("mix_penalty") if i.has("mix_penalty") else 0.0,
            mix_exponent=i.number("mix_exponent", strict=True) if i.has("mix_exponent") else 1.0,
            write_falloff_per_writer=(
                i.number("write_falloff_per_writer") if i.has("write_falloff_per_writer") else 0.0
            ),
            write_falloff_onset_writers=i.integer("write_falloff_onset_writers", 0, minimum=0),
        )
        i.done()
    tier = MemoryTier(
        name=t.string("name"),
        capacity_bytes=t.byte_count("capacity"),
        read_bw_bytes_per_s=t.quantity("read_bw", RATE),
        write_bw_bytes_per_s=t.quantity("write_bw", RATE),
        read_latency_s=t.quantity("read_latency", TIME, strict=False, default=0.0),
        write_latency_s=t.quantity("write_latency", TIME, strict=False, default=0.0),
        access_granularity_bytes=t.integer("access_granularity_bytes", 64),
        interference=inter,
        source=t.string("source", ""),
    )
    t.done()
    return tier


def _compute(c: _Table) -> Compute:
    peaks_key = [k for k in ("peak_flop_per_s", "peak_GFLOPs", "peak_TFLOPs") if c.has(k)]
    if len(peaks_key) != 1:
        c.fail("give exactly one of peak_flop_per_s, peak_GFLOPs, peak_TFLOPs (a dtype table)")
    p = c.table(peaks_key[0])
    factor = FLOPS[peaks_key[0].removeprefix("peak_")]
    peaks = tuple((d, p.number(d, strict=True) * factor) for d in p.data)
    e = c.table("efficiency")
    effs = []
    for cls in OpClass:
        ce = e.table(cls.value)
        effs.append(ClassEfficiency(cls, ce.fraction("compute"), ce.fraction("memory")))
        ce.done()
    e.done()
    compute = Compute(
        name=c.string("name"),
        peak_flop_per_s=peaks,
        efficiencies=tuple(effs),
        launch_overhead_s=c.quantity("launch_overhead", TIME, strict=False),
        cores=c.integer("cores"),
        source=c.string("source", ""),
    )
    c.done()
    return compute


def _copy_path(p: _Table) -> CopyPath:
    path = CopyPath(
        src=p.string("src"),
        dst=p.string("dst"),
        sync_bw_bytes_per_s=p.quantity("sync_bw", RATE),
        async_bw_bytes_per_s=p.quantity("async_bw", RATE),
        copy_engines=p.integer("copy_engines", 1),
        duplex=p.boolean("duplex", True),
        source=p.string("source", ""),
    )
    p.done()
    return path


def _cache(c: _Table) -> DramCache:
    cache = DramCache(
        cache_tier=c.string("cache_tier"),
        backing_tier=c.string("backing_tier"),
        capacity_bytes=c.byte_count("capacity"),
        line_bytes=c.integer("line_bytes", 64),
        associativity=c.integer("associativity", 1),
        write_back=c.boolean("write_back", True),
        write_allocate=c.boolean("write_allocate", True),
        miss_latency_s=c.quantity("miss_latency", TIME, strict=False, default=0.0),
        source=c.string("source", ""),
    )
    c.done()
    return cache


def platform_from_dict(data: Mapping[str, Any], origin: str) -> Platform:
    """Build a :class:`Platform` from a dict as read from TOML; ``origin`` names the file.

    Raises :class:`HardwareModelError` with a one-line message ``origin: place: problem`` for
    a missing or unknown field, a wrong type, a bad value, or a platform that fails validation.
    """
    try:
        return _platform(_Table(data, origin, "platform"))
    except HardwareModelError as exc:
        message = str(exc)
        if message.startswith(f"{origin}: "):
            raise
        raise HardwareModelError(f"{origin}: {message}") from None


def _platform(top: _Table) -> Platform:
    origin = top.origin
    tiers = []
    for i, raw in enumerate(top.array("tiers")):
        name = raw.get("name", "?") if isinstance(raw, Mapping) else "?"
        tiers.append(_tier(_Table(raw, origin, f"tiers[{i}] ({name})")))
    paths = tuple(
        _copy_path(_Table(raw, origin, f"copy_paths[{i}]"))
        for i, raw in enumerate(top.array("copy_paths") if top.has("copy_paths") else [])
    )
    kernel_tiers = top.array("kernel_tiers")
    for name in kernel_tiers:
        if not isinstance(name, str):
            top.fail(f"kernel_tiers must list tier names, got {_type_name(name)}")
    controllers = top.array("shared_controllers") if top.has("shared_controllers") else []
    for group in controllers:
        if not (isinstance(group, list) and all(isinstance(t, str) for t in group)):
            top.fail("shared_controllers must be a list of lists of tier names")
    compute = _compute(_Table(top.get("compute"), origin, "compute"))
    cache = _cache(_Table(top.get("cache"), origin, "cache")) if top.has("cache") else None
    platform = Platform(
        name=top.string("name"),
        tiers=tuple(tiers),
        compute=compute,
        copy_paths=paths,
        kernel_tiers=tuple(kernel_tiers),
        cache=cache,
        shared_controllers=tuple(tuple(g) for g in controllers),
        description=top.string("description", ""),
        source=top.string("source", ""),
    )
    top.done()
    return platform


def platform_to_dict(p: Platform) -> dict[str, Any]:
    """The platform as plain data in SI units (keys as :func:`platform_from_dict` reads them).

    ``cache`` is omitted when there is none (TOML has no null).
    """
    out: dict[str, Any] = {
        "name": p.name,
        "description": p.description,
        "source": p.source,
        "kernel_tiers": list(p.kernel_tiers),
        "shared_controllers": [list(g) for g in p.shared_controllers],
        "tiers": [
            {
                "name": t.name,
                "capacity_bytes": t.capacity_bytes,
                "read_bw_bytes_per_s": t.read_bw_bytes_per_s,
                "write_bw_bytes_per_s": t.write_bw_bytes_per_s,
                "read_latency_s": t.read_latency_s,
                "write_latency_s": t.write_latency_s,
                "access_granularity_bytes": t.access_granularity_bytes,
                "source": t.source,
                "interference": {
                    "mix_penalty": t.interference.mix_penalty,
                    "mix_exponent": t.interference.mix_exponent,
                    "write_falloff_per_writer": t.interference.write_falloff_per_writer,
                    "write_falloff_onset_writers": t.interference.write_falloff_onset_writers,
                },
            }
            for t in p.tiers
        ],
        "compute": {
            "name": p.compute.name,
            "cores": p.compute.cores,
            "launch_overhead_s": p.compute.launch_overhead_s,
            "source": p.compute.source,
            "peak_flop_per_s": dict(p.compute.peak_flop_per_s),
            "efficiency": {
                e.op_class.value: {"compute": e.compute, "memory": e.memory}
                for e in p.compute.efficiencies
            },
        },
        "copy_paths": [
            {
                "src": c.src,
                "dst": c.dst,
                "sync_bw_bytes_per_s": c.sync_bw_bytes_per_s,
                "async_bw_bytes_per_s": c.async_bw_bytes_per_s,
                "copy_engines": c.copy_engines,
                "duplex": c.duplex,
                "source": c.source,
            }
            for c in p.copy_paths
        ],
    }
    if p.cache is not None:
        c = p.cache
        out["cache"] = {
            "cache_tier": c.cache_tier,
            "backing_tier": c.backing_tier,
            "capacity_bytes": c.capacity_bytes,
            "line_bytes": c.line_bytes,
            "associativity": c.associativity,
            "write_back": c.write_back,
            "write_allocate": c.write_allocate,
            "miss_latency_s": c.miss_latency_s,
            "source": c.source,
        }
    return out
