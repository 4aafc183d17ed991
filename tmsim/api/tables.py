"""Result tables: :func:`compare` (every strategy on one workload) and :func:`sweep` (a grid).

Both return a pandas DataFrame with the columns of the Parquet file the command line writes
(``tmsim compare --out``, ``tmsim sweep``), units in the column names (``simulated_s``,
``moved_bytes`` ...), and that file's metadata, the resolved settings and the provenance
(version, git commit, solver, seed), in ``DataFrame.attrs``.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from tmsim.api.inputs import FastCapacity, expect, one_line_errors
from tmsim.api.runs import SETTING_NAMES, check_inputs, plan_settings
from tmsim.comparison import CompareSettings, Row, plan_row, rows_frame
from tmsim.comparison import compare as compare_rows
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel, parse_level
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.results import provenance, read_table
from tmsim.sweeps.engine import run_sweep
from tmsim.sweeps.spec import Sweep, load_sweep, sweep_from_dict
from tmsim.workload.graph import Graph

#: Settings of :func:`compare` itself (beside the planner settings of :func:`tmsim.plan`).
COMPARE_KEYWORDS = ("fast", "interference", "cache_block_bytes")


def compare(
    graph: Graph,
    platform: Platform,
    strategies: Sequence[str] | None = None,
    *,
    fast: FastCapacity = None,
    interference: InterferenceLevel | str = DEFAULT_LEVEL,
    cache_block_bytes: int | None = None,
    settings: PlanSettings | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Every strategy of ``strategies`` (default: all that apply to ``platform``) planned,
    validated and replayed for ``graph`` with the fast tier at ``fast``, one row each in the
    registry's order: ``strategy``, ``planner``, ``status``, ``error``, ``predicted_s``,
    ``simulated_s``, ``slowdown`` (over ``all-fast``), ``moved_bytes``, ``fast_peak_bytes``,
    ``fast_limit_bytes``, ``solve_s``, ``gap``, ``valid``, ``hit_rate``. The MILP strategies
    are solved as one chain; ``settings`` gives every planner setting at once (its capacity
    included), or ``fast`` and the other keywords do (see :func:`tmsim.plan`).
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
    level = parse_level(interference)
    planner = plan_settings(settings, fast, options)
    try:
        chosen = CompareSettings(
            plan=planner,
            contention=level is not InterferenceLevel.NONE,
            level=level,
            strategies=None if strategies is None else tuple(strategies),
            cache_block_bytes=cache_block_bytes,
        )
    except TypeError as exc:
        raise TmsimError(f"bad compare setting: {exc}") from None
    try:
        rows = compare_rows(graph, platform, chosen)
    except HardwareModelError as exc:
        raise TmsimError(str(exc)) from None
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
    an error in its place, a row with status ``error``, its message and ``fast_limit_bytes``.
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
    contention = level is not InterferenceLevel.NONE
    cost = CostModel(graph, platform)
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
        rows.append(plan_row(name, got, graph, platform, contention, cost, level))
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


def sweep(
    spec: str | os.PathLike[str] | Mapping[str, Any] | Sweep,
    *,
    out: str | os.PathLike[str] | None = None,
    workers: int | None = 1,
    client: Any = None,
) -> pd.DataFrame:
    """Run the sweep ``spec`` (a TOML file as ``tmsim sweep`` takes, the same document as a
    dict, or an expanded :class:`Sweep`) and return its table, one row per point.

    ``out``: the folder that keeps finished points (a rerun resumes there) and the table;
    default a temporary one, removed after. ``workers``: local processes (1: this process).
    ``client``: a ``dask.distributed.Client`` to run the points on instead (the ``dask``
    extra). The table's ``attrs`` hold the sweep, its settings, counts and provenance, and
    ``failures``, one line per point that raised (those rows have status ``failed``). Raises
    :class:`TmsimError` for a bad spec or option.

    >>> import tmsim
    >>> grid = {"model": ["vgg19"], "batch": [16], "platform": ["cascadelake-optane"],
    ...         "strategy": ["all-slow"], "ratio": ["1:1", "4:1"]}
    >>> t = tmsim.sweep({"grid": grid})
    >>> sorted(t.strategy), t.attrs["counts"]["failed"]  # one all-fast baseline serves both
    (['all-fast', 'all-slow', 'all-slow'], 0)
    """
    expect(spec, (str, os.PathLike, Mapping, Sweep), "a sweep's spec", "a TOML file or a dict")
    if isinstance(spec, Sweep):
        expanded = spec
    elif isinstance(spec, Mapping):
        with one_line_errors():
            expanded = sweep_from_dict(spec, "sweep spec", Path.cwd())
    else:
        try:
            with one_line_errors():
                expanded = load_sweep(Path(os.fspath(spec)))
        except OSError as exc:
            raise TmsimError(
                f"{os.fspath(spec)}: cannot read the sweep: {exc.strerror or exc}"
            ) from None
    address = None
    if client is not None:
        address = getattr(getattr(client, "scheduler", None), "address", None)
        if not isinstance(address, str):
            raise TmsimError("client must be a dask.distributed.Client connected to a scheduler")
        workers = None
    if out is not None:
        return _run(expanded, Path(out), workers, address)
    with tempfile.TemporaryDirectory(prefix="tmsim-sweep-") as tmp:
        return _run(expanded, Path(tmp), workers, address)


def _run(expanded: Sweep, out: Path, workers: int | None, address: str | None) -> pd.DataFrame:
    if out.exists() and not out.is_dir():
        raise TmsimError(f"out {out}: not a folder")
    report = run_sweep(expanded, out, workers=workers, dask_address=address)
    if report.table is None:  # only with a limit on points, which this call never sets
        raise TmsimError(f"sweep {expanded.name}: {report.counts.pending} points still pending")
    frame, meta = read_table(report.table)
    frame.attrs.update(meta)
    frame.attrs["failures"] = list(report.failures)
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
    "sweep",
]
