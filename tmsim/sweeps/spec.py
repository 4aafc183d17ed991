"""Sweep specifications: a TOML grid over workload, platform, capacity and strategy, expanded
into fully resolved :class:`~tmsim.sweeps.point.Point` values, each with a stable key.

A spec has four parts, every key explained in ``experiments/sweeps/example.toml``: ``[sweep]``
(name, seed, description), ``[grid]`` (lists of models, batches, dtypes, platforms, ratios or
fast-memory sizes, strategies, and ``[grid.overrides]``: platform fields by dotted path,
:mod:`tmsim.sweeps.overrides`, each a list of values), ``[settings]`` (one value each: any planner
setting of :class:`~tmsim.planners.PlanSettings` by its name, the replays' interference level, the
2LM block size, a profile of measured kernel times) and optional ``[[points]]`` with one value per
key. The grid is the cartesian product; unknown keys anywhere are errors.

Grid combinations whose strategy does not apply to their platform (:func:`applicable`) are
dropped and listed in :attr:`Sweep.skipped`; an explicit point that does not apply is an error.
Every workload and platform also gets an ``all-fast`` *baseline* point (role ``baseline``, at
the platform's own capacity) unless the grid already holds it: the sweep's slowdowns are over
it. Strategy-specific settings are recorded only where they matter (solver settings for the
MILP strategies, the offloading settings for ``vdnn``, the block size for ``2lm``) and are
absent elsewhere, so changing the time
limit recomputes no heuristic. A profile of measured kernel times is every point's, as it is
every row's in :func:`tmsim.comparison.compare` (a simulated strategy times its kernels by its
own traffic, but its slowdown is over the baseline with the profile): ``profile`` its path,
``profile_sha256`` the digest of its bytes, which alone enters the key. It is read as the
spec is: a file that cannot be read, or is not a profile, fails the spec.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from tmsim.capacity import Capacity, CapacityError, parse_bytes
from tmsim.errors import TmsimError
from tmsim.profiles import Profile, read_profile
from tmsim.strategies import STRATEGIES, applicable
from tmsim.sweeps.overrides import Fail, PlatformDocs, read_toml
from tmsim.sweeps.point import Point, strategy_settings
from tmsim.sweeps.settings import (
    SweepSettings,
    check_solver,
    only,
    read_settings,
    table,
    typed,
)
from tmsim.sweeps.workloads import is_graph_file, workloads
from tmsim.workload.tensors import DTYPE_BYTES, show_int
from tmsim.workload.zoo import NAMES

_AXES = ("model", "batch", "dtype", "platform", "ratio", "fast_bytes", "strategy")
_REQUIRED = ("model", "platform", "strategy")  # batch too, where a zoo model is named
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class SweepSpecError(TmsimError, ValueError):
    """A sweep spec is malformed; the one-line message names the file and the key."""


@dataclass(frozen=True)
class Sweep:
    """An expanded spec: its points (grid and explicit, then baselines; no two with one key),
    the grid combinations dropped as inapplicable, and the spec as read (for metadata)."""

    name: str
    seed: int
    description: str
    source: str
    settings: SweepSettings
    points: tuple[Point, ...]
    skipped: tuple[str, ...]
    spec: Mapping[str, Any]


def load_sweep(path: str | Path) -> Sweep:
    """Read and expand the spec file at ``path``.

    Raises :class:`SweepSpecError` naming the file and key for bad TOML (text that is not
    UTF-8, an integer of more digits than Python converts, nesting deeper than the parser
    follows), an unknown or missing key, a wrong type or value, a bad override path, or a
    platform that the overrides make invalid; ``OSError`` if the file cannot be read.
    """
    source = Path(path)
    return sweep_from_dict(
        read_toml(source, _failer(str(source))), str(source), source.parent, source.stem
    )


def sweep_from_dict(
    data: Mapping[str, Any], origin: str, base_dir: Path = Path("."), default_name: str = "sweep"
) -> Sweep:
    """Expand a spec given as a dict (see the module docstring); ``origin`` names it in
    errors and platform files are found relative to ``base_dir``. Every integer in it must fit
    64 bits (each ends up in a column of the results table). Raises
    :class:`SweepSpecError`."""
    fail = _failer(origin)
    _check_integers(data, "", fail)
    only(data, ("sweep", "grid", "settings", "points"), "", fail)
    head = table(data, "sweep", fail)
    only(head, ("name", "seed", "description"), "sweep", fail)
    name = typed(head.get("name", default_name), str, "sweep.name", fail)
    seed = typed(head.get("seed", 0), int, "sweep.seed", fail)
    description = typed(head.get("description", ""), str, "sweep.description", fail)
    settings = read_settings(table(data, "settings", fail), fail)
    check_solver(settings, fail)
    profile = _profile(settings.profile, base_dir, fail)
    if "grid" not in data and "points" not in data:
        fail("", "give a [grid] table, [[points]], or both")
    docs = PlatformDocs(base_dir, fail)
    points: list[Point] = []
    skipped: list[str] = []
    if "grid" in data:
        _grid(table(data, "grid", fail), settings, seed, docs, points, skipped, fail)
    raw_points = data.get("points", [])
    if not isinstance(raw_points, list):
        fail("points", "must be an array of tables ([[points]])")
    for i, raw in enumerate(raw_points):
        where = f"points[{i}]"
        if not isinstance(raw, Mapping):
            fail(where, "must be a table")
        only(raw, (*_AXES, "overrides"), where, fail)
        axes = {a: [raw[a]] for a in _AXES if a in raw}
        over = table(raw, "overrides", fail, where)
        got = _expand(axes, {k: [v] for k, v in over.items()}, settings, seed, docs, where, fail)
        for point, reason in got:
            if reason:
                fail(where, reason)
            points.append(point)
    if profile is not None:
        points = [replace(p, profile=profile.path, profile_sha256=profile.sha256) for p in points]
    baselines = [p.baseline() for p in points]
    unique: dict[str, Point] = {}
    for p in (*points, *baselines):
        unique.setdefault(p.key, p)
    return Sweep(
        name, seed, description, origin, settings, tuple(unique.values()), tuple(skipped), data
    )


def _grid(
    grid: Mapping[str, Any],
    settings: SweepSettings,
    seed: int,
    docs: PlatformDocs,
    points: list[Point],
    skipped: list[str],
    fail: Fail,
) -> None:
    only(grid, (*_AXES, "overrides"), "grid", fail)
    axes = {a: grid[a] if isinstance(grid[a], list) else [grid[a]] for a in _AXES if a in grid}
    over = table(grid, "overrides", fail, "grid")
    for path, values in over.items():
        if not isinstance(values, list) or not values:
            fail(f"grid.overrides.{path}", "must be a non-empty list of values")
    for point, reason in _expand(axes, over, settings, seed, docs, "grid", fail):
        if reason:
            skipped.append(reason)
        else:
            points.append(point)


def _expand(
    axes: Mapping[str, list[Any]],
    overrides: Mapping[str, list[Any]],
    settings: SweepSettings,
    seed: int,
    docs: PlatformDocs,
    where: str,
    fail: Fail,
) -> list[tuple[Point, str]]:
    """The product of ``axes`` and ``overrides``: (point, "") or (point, why it is dropped)."""
    for a in _REQUIRED:
        if a not in axes:
            fail(where, f"missing key {a!r}")
    if "ratio" in axes and "fast_bytes" in axes:
        fail(where, "give ratio or fast_bytes, not both")
    for a, values in axes.items():
        if not values:
            fail(f"{where}.{a}", "must not be empty")
        for v in values:
            _check_axis(a, v, f"{where}.{a}", fail)
    over_values = [_normalize(f"{where}.overrides.{k}", v, fail) for k, v in overrides.items()]
    capacity = [("ratio", v) for v in axes.get("ratio", [])] + [
        ("fast_bytes", v if isinstance(v, int) else parse_bytes(v))
        for v in axes.get("fast_bytes", [])
    ] or [("ratio", None)]
    out = []
    loads = workloads(
        axes["model"], axes.get("batch"), axes.get("dtype", ["fp32"]), docs.base_dir, where, fail
    )
    for work, label, *combo, cap, strategy in itertools.product(
        loads, axes["platform"], *over_values, capacity, axes["strategy"]
    ):
        model, batch, dtype = work.model, work.batch, work.dtype
        chosen = tuple(sorted(zip(overrides, combo, strict=True), key=lambda o: o[0]))
        platform, si = docs.resolve(label, chosen, where)
        if dtype and dtype not in dict(platform.compute.peak_flop_per_s):
            fail(f"{where}.dtype", f"platform {label!r} has no peak rate for {dtype!r}")
        point = Point(
            graph_sha256=work.graph_sha256,
            model=model,
            batch=batch,
            dtype=dtype,
            platform=label,
            overrides=chosen,
            ratio=cap[1] if cap[0] == "ratio" else None,
            fast_bytes=cap[1] if cap[0] == "fast_bytes" else None,
            strategy=strategy,
            level=settings.interference,
            seed=seed,
            platform_si=si,
            **strategy_settings(strategy, settings),
        )
        try:
            ok = strategy in applicable(platform)
        except TmsimError as exc:
            fail(f"{where}.platform", str(exc))
        reason = "" if ok else f"{strategy} does not apply to {label} ({model} b{batch})"
        out.append((point, reason))
    return out


def _profile(path: str | None, base_dir: Path, fail: Fail) -> Profile | None:
    """The profile at ``path`` (relative to ``base_dir``), read now; None for none."""
    if path is None:
        return None
    try:
        return read_profile(base_dir / path)
    except TmsimError as exc:
        fail("settings.profile", str(exc))


def _check_axis(axis: str, value: Any, where: str, fail: Fail) -> None:
    if axis == "batch" or (axis == "fast_bytes" and not isinstance(value, str)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            fail(where, f"must be a positive integer, got {value!r}")
        return
    if not isinstance(value, str):
        fail(where, f"must be a string, got {value!r}")
    if axis == "model" and is_graph_file(value):
        return  # read with the other workloads (tmsim.sweeps.workloads)
    known: dict[str, Sequence[str]] = {
        "model": NAMES,
        "dtype": tuple(DTYPE_BYTES),
        "strategy": tuple(STRATEGIES),
    }
    if axis in known and value not in known[axis]:
        fail(where, f"unknown {axis} {value!r}; known: {', '.join(known[axis])}")
    try:
        if axis == "ratio" and Capacity.parse(value).ratio is None:
            fail(where, f"ratio must look like '4:1' (slow:fast, fast > 0), got {value!r}")
        if axis == "fast_bytes":
            parse_bytes(value)
    except CapacityError as exc:
        fail(where, str(exc))


def _normalize(where: str, values: list[Any], fail: Fail) -> list[Any]:
    """Override values checked to be TOML values without dates; mixed int/float -> floats."""
    for v in values:
        if not isinstance(v, bool | int | float | str | list):
            fail(where, f"{v} is not a number, string, boolean or array")
    if any(isinstance(v, float) for v in values):
        return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in values]
    return values


def _check_integers(node: Any, where: str, fail: Fail) -> None:
    """Fail at the first integer of ``node`` (a spec, walked depth first) outside the range of
    a 64-bit column; a bool is not an integer here."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            _check_integers(value, f"{where}.{key}" if where else str(key), fail)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_integers(value, f"{where}[{i}]", fail)
    elif (
        isinstance(node, int) and not isinstance(node, bool) and not INT64_MIN <= node <= INT64_MAX
    ):
        fail(where, f"integer {show_int(node)} does not fit 64 bits")


def _failer(origin: str) -> Fail:
    def fail(where: str, message: str) -> NoReturn:
        raise SweepSpecError(f"{origin}: {where}: {message}" if where else f"{origin}: {message}")

    return fail


__all__ = [
    "Sweep",
    "SweepSettings",
    "SweepSpecError",
    "load_sweep",
    "sweep_from_dict",
]
