"""What a comparison is asked to run (:class:`CompareSettings`) and what each strategy gives
(:class:`Row`), as :func:`tmsim.comparison.compare` and the tables read them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pandas as pd

from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import PlanSettings
from tmsim.planners.milp import CHAIN_WORKERS
from tmsim.plans.values import Plan
from tmsim.sim.firsttouch.pages import DEFAULT_PAGE_BYTES
from tmsim.sim.trace import Trace

#: ``progress(strategy, index, total)`` is called as each strategy's row starts.
Progress = Callable[[str, int, int], None]
#: Each strategy's replayed trace and its plan (None for a simulation without one).
Replays = dict[str, tuple[Trace, Plan | None]]


@dataclass(frozen=True)
class CompareSettings:
    """What :func:`compare` runs, with its defaults.

    ``plan``: the capacity and settings of every planner (:class:`PlanSettings`; its profile's
    measured kernel times also time the plans' checks and replays); ``level``: the interference
    level of the replays (:mod:`tmsim.levels`; ``none``: every kernel and copy at its own rate; at
    any other level the 2LM and unified-memory simulations share bandwidth as at ``bandwidth``);
    ``strategies``: which to run (default: all that apply to the platform but the formulations that
    recompute, :func:`tmsim.strategies.compared_by_default`); ``cache_block_bytes``: the 2LM
    simulation's block size (default: :func:`tmsim.sim.cache.replay_cache`'s); ``page_bytes``: the
    page of ``first-touch-pages`` (default 4 KiB, :data:`tmsim.sim.firsttouch.DEFAULT_PAGE_BYTES`);
    ``workers``: threads the comparison runs on (1: one after the other): the MILP chain runs beside
    the other strategies, and its formulations that do not contain each other at once
    (:mod:`tmsim.planners.milp.chain.schedule`); the rows do not depend on it unless a wall-clock
    time limit stops a solve.
    """

    plan: PlanSettings = field(default_factory=PlanSettings)
    level: InterferenceLevel = DEFAULT_LEVEL
    strategies: tuple[str, ...] | None = None
    cache_block_bytes: int | None = None
    page_bytes: int = DEFAULT_PAGE_BYTES
    workers: int = CHAIN_WORKERS

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready data (the plan settings as :meth:`PlanSettings.to_dict`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["plan"] = self.plan.to_dict()
        out["strategies"] = None if self.strategies is None else list(self.strategies)
        out["level"] = InterferenceLevel(self.level).value
        return out


@dataclass(frozen=True)
class Row:
    """One strategy's result; ``nan`` where a figure does not apply or the strategy failed.

    ``planner``: the plan's planner label (e.g. ``milp-sync``) or the simulation's name;
    ``status``: the solver's status, ``heuristic``, ``simulated`` or ``error``; ``error``:
    why the strategy could not run (empty if it ran); ``predicted_s``: the plan's predicted
    step time; ``simulated_s``: the simulated step time; ``slowdown``: ``simulated_s`` over
    that of ``all-fast``; ``moved_bytes``: bytes copied between tiers (plans: the sizes of
    the moves; 2LM: fills and write-backs; unified memory: migrations); ``fast_peak_bytes``
    and ``fast_limit_bytes``: most fast-tier bytes in use and the capacity compared at;
    ``solve_s``/``gap``: MILP solve seconds and relative gap; ``valid``: the plan passed the
    validator (simulations: True); ``hit_rate``: the 2LM cache's hit rate; on a platform with
    an energy model (:mod:`tmsim.energy`), ``energy_j``: the step's energy,
    ``wear_tier``: the rated device that wears out first and ``wear_written_bytes`` /
    ``wear_years``: what the step writes on it and the years until steps back to back wear
    it out (``nan`` where the step writes nothing there: it does not wear). ``first-touch-pages``
    has a ``predicted_s`` (the cost model's time of its pages' placement), moves nothing, and
    its ``fast_peak_bytes`` are the pages the fast tier took. ``stopped_on``: for a MILP
    row, the limit that stopped its solve short (``time_limit``: wall clock, a result that
    depends on the machine's load; ``node_limit``: work), or ``""``
    (:attr:`tmsim.plans.values.SolverStats.stopped_on`; an error row: the limit that stopped
    the solve before it had a plan, if one did).
    """

    strategy: str
    planner: str
    status: str
    error: str = ""
    predicted_s: float = math.nan
    simulated_s: float = math.nan
    slowdown: float = math.nan
    moved_bytes: float = math.nan
    fast_peak_bytes: float = math.nan
    fast_limit_bytes: float = math.nan
    solve_s: float = math.nan
    gap: float = math.nan
    valid: bool = False
    hit_rate: float = math.nan
    energy_j: float = math.nan
    wear_tier: str = ""
    wear_written_bytes: float = math.nan
    wear_years: float = math.nan
    stopped_on: str = ""


def rows_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The rows as a DataFrame, one column per :class:`Row` field."""
    return pd.DataFrame([asdict(r) for r in rows], columns=[f.name for f in fields(Row)])


__all__ = ["CompareSettings", "Progress", "Replays", "Row", "rows_frame"]
