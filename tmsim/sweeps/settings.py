"""The ``[settings]`` table of a sweep spec, and the typed reads every part of a spec shares.

Settings apply to every point (solver settings to the MILP points, the 2LM block size to the
``2lm`` points); each key has one type and range, checked with a one-line error naming the
key. ``fail(where, message)`` raises the spec's error with the file and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from tmsim.comparison import CompareSettings
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, parse_level
from tmsim.planners import PlanSettings
from tmsim.planners.settings import MAX_NODE_LIMIT
from tmsim.sweeps.overrides import Fail


@dataclass(frozen=True)
class SweepSettings:
    """Settings of every point, with their defaults (those of :class:`PlanSettings` and
    :class:`CompareSettings`); ``cache_block_bytes`` None: the 2LM simulator's default;
    ``interference``: the replay's level (:mod:`tmsim.levels`) when ``contention`` is on;
    ``profile``: a profile file of measured kernel times (:mod:`tmsim.profiles`), relative to
    the spec's folder, for every planned point (None: the roofline)."""

    time_limit_s: float | None = PlanSettings.time_limit_s
    node_limit: int | None = PlanSettings.node_limit
    gap: float = PlanSettings.gap
    window: int = PlanSettings.window
    solver: str = PlanSettings.solver
    contention: bool = CompareSettings.contention
    cache_block_bytes: int | None = CompareSettings.cache_block_bytes
    interference: str = DEFAULT_LEVEL.value
    profile: str | None = None


def check_solver(s: SweepSettings, fail: Fail) -> None:
    import cvxpy  # the MILP's solver registry; imported here because only checks need it

    if s.solver.upper() not in cvxpy.installed_solvers():
        fail(
            "settings.solver",
            f"solver {s.solver!r} is not installed "
            f"(installed: {', '.join(cvxpy.installed_solvers())})",
        )


def read_settings(raw: Mapping[str, Any], fail: Fail) -> SweepSettings:
    base = SweepSettings()
    only(raw, tuple(asdict(base)), "settings", fail)
    kinds: dict[str, type | tuple[type, ...]] = {
        "time_limit_s": (int, float),
        "node_limit": int,
        "gap": (int, float),
        "window": int,
        "solver": str,
        "contention": bool,
        "cache_block_bytes": int,
        "interference": str,
        "profile": str,
    }
    for key, value in raw.items():
        typed(value, kinds[key], f"settings.{key}", fail)
        positive = key in ("time_limit_s", "cache_block_bytes")
        if key == "node_limit" and not 0 <= value <= MAX_NODE_LIMIT:
            fail(f"settings.{key}", f"must be from 0 to {MAX_NODE_LIMIT}, got {value!r}")
        if key in ("time_limit_s", "gap", "window", "cache_block_bytes") and (
            value < 0 or (positive and value == 0) or not math.isfinite(value)
        ):
            fail(f"settings.{key}", f"must be {'> 0' if positive else '>= 0'}, got {value!r}")
    if "interference" in raw:
        try:
            raw = {**raw, "interference": parse_level(raw["interference"]).value}
        except TmsimError as exc:
            fail("settings.interference", str(exc))
    # Floats where floats are meant, so that ``60`` and ``60.0`` give one key.
    floats = {k: float(v) for k, v in raw.items() if k in ("time_limit_s", "gap")}
    return replace(base, **{**raw, **floats})


def only(table: Mapping[str, Any], allowed: Sequence[str], where: str, fail: Fail) -> None:
    for key in table:
        if key not in allowed:
            place = f"{where}.{key}" if where else key
            fail(place, f"unknown key (known here: {', '.join(allowed) or 'none'})")


def table(data: Mapping[str, Any], key: str, fail: Fail, where: str = "") -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        fail(f"{where}.{key}" if where else key, "must be a table")
    return value


def typed(value: Any, kind: type | tuple[type, ...], where: str, fail: Fail) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        fail(where, f"must be {getattr(kind, '__name__', 'a number')}, got {value!r}")
    return value


__all__ = ["SweepSettings", "check_solver", "only", "read_settings", "table", "typed"]
