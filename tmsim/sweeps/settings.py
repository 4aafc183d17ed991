"""The ``[settings]`` table of a sweep spec, and the typed reads every part of a spec shares.

Settings apply to every point (solver settings to the MILP points, the 2LM block size to the
``2lm`` points); each key has one type and range, checked with a one-line error naming the
key. ``fail(where, message)`` raises the spec's error with the file and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tmsim.comparison import CompareSettings
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, parse_level
from tmsim.planners import PlanSettings
from tmsim.sweeps.overrides import Fail

#: The planner settings a sweep's ``[settings]`` may set: every field of :class:`PlanSettings`
#: but the capacity (the grid's ``ratio`` and ``fast_bytes``) and the profile (``profile``
#: below names its file), each with the TOML types it takes.
PLAN_KEYS: dict[str, type | tuple[type, ...]] = {
    f.name: ((int, float) if isinstance(f.default, float) else type(f.default))
    for f in fields(PlanSettings)
    if f.name not in ("capacity", "profile")
}
# None-defaulted fields: their kind is that of the values they take when set
PLAN_KEYS.update({"time_limit_s": (int, float), "node_limit": int, "lp_iterations": int})
#: Each kind of strategy's planner settings: the MILP formulations read the solver's, vDNN its
#: offloading; a point records only its strategy's (None elsewhere), so that changing a
#: setting evaluates again only the points that read it.
MILP_KEYS = (
    "solver",
    "time_limit_s",
    "gap",
    "node_limit",
    "lp_iterations",
    "window",
    "lp_bound",
    "warm_start",
    "layout",
    "max_rounds",
    "recompute_depth",
    "energy_weight_s_per_j",
    "host_kernels",
    "verbose",
)
VDNN_KEYS = ("offload_min_bytes", "offload_all", "prefetch_ahead")


@dataclass(frozen=True)
class SweepSettings:
    """Settings of every point, with their defaults: ``plan``, the planner settings
    (:class:`PlanSettings`, every field of which ``[settings]`` may set by its name but the
    capacity and profile); ``cache_block_bytes`` None: the 2LM simulator's default;
    ``interference``: the replays' level (:mod:`tmsim.levels`; ``none``: every kernel and copy
    at its own rate); ``profile``: a profile file of measured kernel times
    (:mod:`tmsim.profiles`), relative to the spec's folder, for every planned point (None: the
    roofline)."""

    plan: PlanSettings = field(default_factory=PlanSettings)
    cache_block_bytes: int | None = CompareSettings.cache_block_bytes
    interference: str = DEFAULT_LEVEL.value
    profile: str | None = None

    @property
    def solver(self) -> str:
        """The MILP solver every point is checked against and the provenance names."""
        return self.plan.solver


def check_solver(s: SweepSettings, fail: Fail) -> None:
    import cvxpy  # the MILP's solver registry; imported here because only checks need it

    if s.solver.upper() not in cvxpy.installed_solvers():
        fail(
            "settings.solver",
            f"solver {s.solver!r} is not installed "
            f"(installed: {', '.join(cvxpy.installed_solvers())})",
        )


def read_settings(raw: Mapping[str, Any], fail: Fail) -> SweepSettings:
    """The ``[settings]`` table ``raw`` as :class:`SweepSettings`; ``fail`` names the key of
    the first value of a wrong type or out of range (the ranges are :class:`PlanSettings`')."""
    own: dict[str, type | tuple[type, ...]] = {
        "cache_block_bytes": int,
        "interference": str,
        "profile": str,
    }
    if "contention" in raw:
        fail(
            "settings.contention",
            'the interference level says it: write interference = "none" for no contention',
        )
    only(raw, (*PLAN_KEYS, *own), "settings", fail)
    for key, value in raw.items():
        typed(value, {**PLAN_KEYS, **own}[key], f"settings.{key}", fail)
        if isinstance(value, float) and not math.isfinite(value):
            fail(f"settings.{key}", f"must be finite, got {value!r}")
    block = raw.get("cache_block_bytes")
    if block is not None and block <= 0:
        fail("settings.cache_block_bytes", f"must be > 0, got {block!r}")
    # Floats where floats are meant, so that ``60`` and ``60.0`` give one key.
    planned: dict[str, Any] = {
        k: float(v) if PLAN_KEYS[k] == (int, float) else v for k, v in raw.items() if k in PLAN_KEYS
    }
    try:
        plan = PlanSettings(**planned)
    except TmsimError as exc:  # the message names the field, which is the key
        bad = next((k for k in planned if str(exc).startswith(k)), "")
        fail(f"settings.{bad}" if bad else "settings", str(exc))
    level = DEFAULT_LEVEL.value
    if "interference" in raw:
        try:
            level = parse_level(raw["interference"]).value
        except TmsimError as exc:
            fail("settings.interference", str(exc))
    return SweepSettings(
        plan=plan,
        cache_block_bytes=raw.get("cache_block_bytes"),
        interference=level,
        profile=raw.get("profile"),
    )


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


__all__ = [
    "MILP_KEYS",
    "PLAN_KEYS",
    "VDNN_KEYS",
    "SweepSettings",
    "check_solver",
    "only",
    "read_settings",
    "table",
    "typed",
]
