"""Result tables: :func:`compare` (every strategy on one workload) and :func:`plan_table`
(the same rows for plans made already); :func:`tmsim.api.sweeps.sweep` makes a grid's.

They return a pandas DataFrame with the columns of the Parquet file the command line writes
(``tmsim compare --out``, ``tmsim sweep``), units in the column names (``simulated_s``,
``moved_bytes`` ...), and that file's metadata, the resolved settings and the provenance
(version, git commit, solver, seed), in ``DataFrame.attrs``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from tmsim.api.inputs import FastCapacity, expect
from tmsim.api.measured import plan_costs
from tmsim.api.runs import SETTING_NAMES, check_inputs, plan_settings
from tmsim.comparison import CompareSettings, Replays, Row, plan_row, rows_frame
from tmsim.comparison import compare as compare_rows
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel, parse_level
from tmsim.planners.milp import CHAIN_WORKERS
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.results import provenance
from tmsim.workload.graph import Graph

#: Settings of :func:`compare` itself (beside the planner settings of :func:`tmsim.plan`).
COMPARE_KEYWORDS = ("fast", "interference", "cache_block_bytes", "perfetto", "workers")


def compare(
    graph: Graph,
    platform: Platform,
    strategies: Sequence[str] | None = None,
    *,
    fast: FastCapacity = None,
    interference: InterferenceLevel | str = DEFAULT_LEVEL,
    cache_block_bytes: int | None = None,
    settings: PlanSettings | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    perfetto: str | os.PathLike[str] | None = None,
    workers: int = CHAIN_WORKERS,
    **options: Any,
) -> pd.DataFrame:
    """Every strategy of ``strategies`` (default: all that apply to ``platform`` but those
    that recompute and save_on_cpu, :data:`tmsim.strategies.ON_REQUEST`) planned,
    validated and replayed for ``graph`` with the fast tier at ``fast``, one row each in the
    registry's order: ``strategy``, ``planner``, ``status``, ``error``, ``predicted_s``,
    ``simulated_s``, ``slowdown`` (over ``all-fast``), ``moved_bytes``, ``fast_peak_bytes``,
    ``fast_limit_bytes``, ``solve_s``, ``gap``, ``valid``, ``hit_rate``. The MILP strategies
    are solved as one chain; ``settings`` gives every planner setting at once (its capacity
    included), or ``fast`` and the other keywords do (see :func:`tmsim.plan`).
    ``progress(strategy, index, total)`` is called as each strategy's row starts (the MILP
    rows last: their chain runs beside the others). ``perfetto``: also
    write every replay that ran to that file as Chrome trace events, one group of tracks per
    strategy (:mod:`tmsim.sim.perfetto`). ``workers``: threads it runs on (1: one thing at a
    time; the table does not depend on it unless a time limit stops a solve,
    :attr:`tmsim.comparison.CompareSettings.workers`).
    A strategy that cannot run gives a row with its ``error``; bad input raises
    :class:`TmsimError`.

    >>> import tmsim
    >>> g, p = tmsim.graph("vgg19", batch=16), tmsim.platform()
    >>> t = tmsim.compare(g, p, ["all-fast", "all-slow", "greedy"], fast="4:1")
    >>> list(t.strategy), bool((t.slowdown >= 1).all()), t.attrs["graph"]
    (['all-fast', 'all-slow', 'greedy'], True, 'vgg19-b16')
    """
    unknown = [k for k in options if k not in SETTING_NAMES]
    if unknown:
        raise TmsimError(
            f"unknown compare setting {unknown[0]!r}; settings: "
            f"{', '.join((*COMPARE_KEYWORDS, *SETTING_NAMES))}"
        )
    check_inputs(graph, platform)
    if isinstance(strategies, str):
        strategies = [strategies]
    if strategies is not None:
        expect(strategies, (list, tuple), "strategies", "a list of strategy names")
        for name in strategies:
            expect(name, str, "a strategy", "a strategy's name")
    if cache_block_bytes is not None:
        expect(cache_block_bytes, int, "cache_block_bytes", "a whole number of bytes")
    if progress is not None and not callable(progress):
        raise TmsimError(
            f"progress must be a function of (strategy, index, total), got {progress!r}"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TmsimError(f"workers must be a whole number >= 1, got {workers!r}")
    level = parse_level(interference)
    planner = plan_settings(settings, fast, options)
    try:
        chosen = CompareSettings(
            plan=planner,
            level=level,
            strategies=None if strategies is None else tuple(strategies),
            cache_block_bytes=cache_block_bytes,
            workers=workers,
        )
    except TypeError as exc:
        raise TmsimError(f"bad compare setting: {exc}") from None
    if perfetto is not None:
        expect(perfetto, (str, os.PathLike), "perfetto", "a file path")
    replays: Replays | None = {} if perfetto is not None else None
    try:
        rows = compare_rows(graph, platform, chosen, progress, replays)
    except HardwareModelError as exc:
        raise TmsimError(str(exc)) from None
    if perfetto is not None and replays is not None:
        from tmsim.sim.perfetto import save_trace_events, trace_events

        events = [
            trace_events(trace, made, graph if made is not None else None, strategy)
            for strategy, (trace, made) in replays.items()
        ]
        save_trace_events(perfetto, events)
    return compare_table(rows, graph, platform, chosen)


def plan_table(
    plans: Mapping[str, Plan | TmsimError],
    graph: Graph,
    platform: Platform,
    *,
    interference: InterferenceLevel | str = DEFAULT_LEVEL,
    fast_limit_bytes: int | None = None,
) -> pd.DataFrame:
    """The rows :func:`compare` gives, for plans made already: each plan of ``plans`` (by the
    name its row carries) checked by the validator and replayed at ``interference``, or, for
    an error in its place, a row with status ``error``, its message and ``fast_limit_bytes``;
    a plan made with measured kernel times is checked and replayed with them
    (:func:`tmsim.api.measured.plan_costs`).
    ``slowdown`` is over the ``all-fast`` row where there is one. Raises
    :class:`TmsimError` for bad input, a plan for another graph or platform included.

    >>> import tmsim
    >>> g, p = tmsim.graph("vgg19", batch=4), tmsim.platform()
    >>> plans = {"greedy": tmsim.plan(g, p, "greedy", fast="4:1"), "sync": tmsim.TmsimError("no")}
    >>> t = tmsim.plan_table(plans, g, p, interference="none")
    >>> list(t.status), bool(t.valid[0]), t.error[1]
    (['heuristic', 'error'], True, 'no')
    """
    check_inputs(graph, platform)
    expect(plans, Mapping, "plans", "a mapping of names to plans or errors")
    level = parse_level(interference)
    rows: list[Row] = []
    for name, got in plans.items():
        expect(name, str, "a plan's name", "text")
        if isinstance(got, TmsimError):
            limit = math.nan if fast_limit_bytes is None else float(fast_limit_bytes)
            rows.append(Row(name, "", "error", error=str(got), fast_limit_bytes=limit))
            continue
        expect(got, Plan, f"plans[{name!r}]", "a Plan or a TmsimError")
        if got.platform != platform.name or got.graph != graph.name:
            raise TmsimError(
                f"plans[{name!r}] is for {got.graph} on {got.platform}, not {graph.name} on "
                f"{platform.name}"
            )
        cost = plan_costs(got, graph, platform).checked  # the plan's own kernel times
        rows.append(plan_row(name, got, graph, platform, cost, level))
    base = next((r.simulated_s for r in rows if r.strategy == "all-fast"), math.nan)
    return rows_frame([replace(r, slowdown=r.simulated_s / base) for r in rows])


def compare_table(
    rows: Sequence[Row], graph: Graph, platform: Platform, settings: CompareSettings
) -> pd.DataFrame:
    """``rows`` as a DataFrame whose ``attrs`` are the metadata ``tmsim compare --out``
    writes: the command, graph, platform, settings (``nan`` as None) and provenance."""
    frame = rows_frame(rows)
    frame.attrs.update(
        {
            "command": "compare",
            "graph": graph.name,
            "platform": platform.name,
            "settings": jsonable(settings.to_dict()),
            "provenance": provenance(settings.plan.solver),
        }
    )
    return frame


def jsonable(value: Any) -> Any:
    """``value`` with every ``nan`` float, in lists and dicts too, as None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


__all__ = [
    "COMPARE_KEYWORDS",
    "compare",
    "compare_table",
    "jsonable",
    "plan_table",
]
