"""A sweep's point: one fully resolved evaluation, its planner settings and its stable key.

A point records only the settings its strategy reads (:func:`strategy_settings`): the MILP's
on the MILP points, vDNN's offloading on ``vdnn``'s, the 2LM block on ``2lm``'s; its key
hashes its configuration with the resolved platform in SI units, in the layout points had
before they carried every planner setting, so that the points of specs written before keep
their keys (:func:`_legacy_settings`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any

from tmsim.capacity import Capacity
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners.settings import PlanSettings
from tmsim.strategies import Kind, names
from tmsim.sweeps.settings import MILP_KEYS, PLAN_KEYS, VDNN_KEYS, SweepSettings

#: Strategies whose points carry the solver settings (solved together as one MILP chain).
MILP_STRATEGIES = names(Kind.MILP)


@dataclass(frozen=True)
class Point:
    """One fully resolved evaluation: a workload, a platform (after overrides), a capacity and
    one strategy, with the settings that matter to that strategy (None where they do not).

    ``settings``: the planner settings (:class:`~tmsim.planners.PlanSettings` fields, by name)
    the point's strategy reads (:data:`~tmsim.sweeps.settings.MILP_KEYS`,
    :data:`~tmsim.sweeps.settings.VDNN_KEYS`; empty for the others); ``level``: the replays'
    interference level (``none``: no contention). ``platform_si`` is the resolved platform as
    :func:`platform_to_dict` writes it; ``role`` is ``grid`` (asked for) or ``baseline`` (added
    for the slowdowns) and is not part of the key.
    """

    model: str
    batch: int
    dtype: str
    platform: str
    overrides: tuple[tuple[str, Any], ...]
    ratio: str | None
    fast_bytes: int | None
    strategy: str
    settings: tuple[tuple[str, Any], ...]
    cache_block_bytes: int | None
    seed: int
    platform_si: Mapping[str, Any] = field(repr=False)
    role: str = field(default="grid", compare=False)
    level: str = DEFAULT_LEVEL.value
    profile: str | None = None
    profile_sha256: str | None = None
    graph_sha256: str | None = None

    def config(self) -> dict[str, Any]:
        """The point's configuration as flat columns: each override its own column, each
        planner setting a column ``settings.NAME`` (as the spec's ``[settings]`` names it;
        None where the strategy does not read it)."""
        skip = ("overrides", "platform_si", "settings")
        out = {k: v for k, v in asdict(self).items() if k not in skip}
        out["platform_name"] = self.platform_si["name"]
        read = dict(self.settings)
        out.update({f"settings.{k}": read.get(k) for k in PLAN_KEYS})
        out.update(dict(self.overrides))
        return out

    @cached_property
    def key(self) -> str:
        """A stable 16-hex-digit hash of the configuration with the resolved platform in SI
        units in place of the overrides: overrides that make the same platform (``30`` and
        ``30.0``, GBps and bytes_per_s) make the same point."""
        ident = {
            k: v for k, v in asdict(self).items() if k not in ("overrides", "role", "settings")
        }
        ident.update(_legacy_settings(self.settings))
        # the level says whether flows share bandwidth; keys of points from before it alone did
        ident["contention"] = self.level != InterferenceLevel.NONE.value
        del ident["profile"]  # the times it holds, not where it lies
        if self.graph_sha256 is not None:
            del ident["model"]  # a graph file: the graph it holds, not where it lies
        for key in ("node_limit", "profile_sha256", "graph_sha256"):
            if ident[key] is None:
                del ident[key]  # the keys of points from before node limits and profiles
        if not ident["contention"] or self.level == InterferenceLevel.BANDWIDTH.value:
            # Replays without contention or at the bandwidth level, which a platform's memory
            # controller and copy thread do not shape (the thread's idle rates are in its copy
            # paths), keep the keys they had before sweeps had levels and platforms those parts.
            del ident["level"]
            shaped = ("controller", "copy_thread")
            ident["platform_si"] = {k: v for k, v in self.platform_si.items() if k not in shaped}
        text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def capacity(self) -> Capacity | None:
        """The point's fast-tier capacity (None: the platform's own)."""
        if self.fast_bytes is not None:
            return Capacity.of_bytes(self.fast_bytes)
        return None if self.ratio is None else Capacity.parse(self.ratio)

    def baseline(self) -> Point:
        """The ``all-fast`` point this point's slowdown is measured against."""
        return replace(
            self,
            strategy="all-fast",
            ratio=None,
            fast_bytes=None,
            role="baseline",
            **strategy_settings("all-fast", None),
        )


def strategy_settings(strategy: str, s: SweepSettings | None) -> dict[str, Any]:
    """The settings a point of ``strategy`` records: the planner settings it reads and the 2LM
    block size (None: the defaults', for the baseline points)."""
    keys = MILP_KEYS if strategy in MILP_STRATEGIES else VDNN_KEYS if strategy == "vdnn" else ()
    plan = s.plan if s is not None else None
    return {
        "settings": tuple((k, getattr(plan, k)) for k in keys) if plan is not None else (),
        "cache_block_bytes": s.cache_block_bytes if s is not None and strategy == "2lm" else None,
    }


def _legacy_settings(settings: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """A point's planner settings as its key hashes them: the five a point held before it
    carried every setting, under their names of then (the target gap ``target_gap``; None for
    a point that does not read them), and each other one that differs from its default as
    ``settings.NAME``; so that the points of specs written before keep their keys."""
    read = dict(settings)
    milp = "solver" in read
    legacy = ("solver", "time_limit_s", "node_limit", "gap", "window")
    out: dict[str, Any] = {
        ("target_gap" if k == "gap" else k): read.get(k) if milp else None for k in legacy
    }
    defaults = PlanSettings()
    for k, v in read.items():
        if k not in legacy and v != getattr(defaults, k):
            out[f"settings.{k}"] = v
    return out


__all__ = ["MILP_STRATEGIES", "Point", "strategy_settings"]
