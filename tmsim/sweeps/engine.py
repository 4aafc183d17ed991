"""Declarative sweeps: evaluate every point of a spec (:mod:`tmsim.sweeps.spec`) in a local
process pool or on a Dask cluster, one result file per point, then one tidy table.

Layout of the output folder ``DIR``:

- ``points/<key>.json``: one evaluated point (its configuration, the resolved platform, the
  :class:`~tmsim.comparison.Row`, ``stopped_on``, the evaluation's wall time and the run's
  provenance), written atomically by the coordinating process as soon as the point is done.
  A point whose file exists is not evaluated again (an interrupted sweep resumes where it
  stopped) unless its MILP stopped on the time limit (``stopped_on`` ``"time_limit"``, see
  below). Files are keyed by configuration, not by code version: delete ``points/`` to
  recompute after changing the code.
- ``failed/<key>.json``: a point whose evaluation raised (a bug, memory, a lost worker: a
  local one breaks the pool and fails every point still queued), with the traceback. It is
  retried by the next run and its file removed once it succeeds. A strategy that cannot run
  (no plan fits, the solver found none) is not a failure: ``compare`` gives a row with status
  ``error``, a final answer that is kept.
- ``results.parquet`` (or ``.csv``): every point of the spec, written once none is pending,
  with the spec, counts and provenance as metadata (:func:`tmsim.results.write_table`).
  Failed points appear with status ``failed`` and their error, points stopped on a limit
  with it in the ``stopped_on`` column (empty for the others).

Limits (the rule of :mod:`tmsim.sweeps.store`): a MILP point whose solve a wall-clock time
limit cut short holds whatever incumbent the machine's load let the solver reach, so it is
stored with ``stopped_on`` ``"time_limit"``, shown so in the table, and evaluated again by the
next run; one stopped by a node limit (a limit on work, which stops at the same place on any
machine) is stored with ``"node_limit"`` and is finished. :func:`milp_stop` tells them apart.

A task evaluates one point, or the MILP points of one workload, platform and capacity, which
:func:`tmsim.comparison.compare` solves as one chain (static, then sync from it, then async).
Slowdowns are computed as the table is built, over each point's ``all-fast`` baseline point.
The folder is a :class:`~tmsim.sweeps.store.PointStore`; :func:`~tmsim.sweeps.pool.run_tasks`
runs the tasks. Work whose result is not one :class:`~tmsim.comparison.Row` per point goes through
:mod:`tmsim.sweeps.jobs` instead.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from hwmodels.serialize import platform_from_dict
from tmsim.comparison import CompareSettings, Row, compare, rows_frame
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners import PlanSettings
from tmsim.profiles import Profile, read_profile
from tmsim.results import provenance, write_table
from tmsim.sweeps.jobs import nan_to_none
from tmsim.sweeps.point import MILP_STRATEGIES, Point
from tmsim.sweeps.pool import check_options, run_tasks
from tmsim.sweeps.spec import Sweep
from tmsim.sweeps.store import RERUN_STOPS, Counts, PointStore, SweepError
from tmsim.sweeps.workloads import workload_graph

#: Table formats :func:`run_sweep` writes.
FORMATS = ("parquet", "csv")


@dataclass(frozen=True)
class Task:
    """Points evaluated together: one, or the MILP points of one workload and capacity."""

    points: tuple[Point, ...]


@dataclass(frozen=True)
class Outcome:
    """What evaluating one point gave: the row as JSON-ready data (NaN as None), or ``error``
    (one line) and ``detail`` (the traceback) if the evaluation raised; ``elapsed_s``: wall
    seconds of the task that computed it; ``stopped_on``: the limit that stopped the row's
    solve short (:func:`milp_stop`), None if none did."""

    key: str
    row: dict[str, Any] | None
    elapsed_s: float
    error: str = ""
    detail: str = ""
    stopped_on: str | None = None


#: ``evaluate(task) -> outcomes``, one per point of the task; must be picklable.
Evaluator = Callable[[Task], list[Outcome]]


@dataclass(frozen=True)
class SweepReport:
    """How a run ended: its counts, the table written (None while points are pending), one
    line per point that failed in it, and how many of the points it evaluated stopped on a
    wall-clock limit (kept and marked in the table; the next run evaluates them again)."""

    counts: Counts
    table: Path | None
    failures: tuple[str, ...] = ()
    stopped: int = 0


def evaluate_task(task: Task) -> list[Outcome]:
    """Evaluate every point of ``task`` with :func:`tmsim.comparison.compare`, each MILP row with
    the limit that stopped it (its typed ``stopped_on``); never raises: an exception becomes a
    failed :class:`Outcome` for each point of the task."""
    first = task.points[0]
    start = time.perf_counter()
    try:
        graph = workload_graph(first.model, first.batch, first.dtype, first.graph_sha256)
        platform = platform_from_dict(first.platform_si, f"platform {first.platform}")
        settings = CompareSettings(
            plan=_plan_settings(first),
            level=InterferenceLevel(first.level),
            strategies=tuple(p.strategy for p in task.points),
            cache_block_bytes=first.cache_block_bytes,
            workers=1,  # the sweep's processes already use the cores, a task each
        )
        rows = {r.strategy: r for r in compare(graph, platform, settings)}
    except Exception as exc:  # any failure is recorded and retried, never fatal to the sweep
        elapsed = time.perf_counter() - start
        line, detail = f"{type(exc).__name__}: {exc}", traceback.format_exc()
        return [Outcome(p.key, None, elapsed, line, detail) for p in task.points]
    end = time.perf_counter()
    outcomes = []
    for p in task.points:
        row = _json_row(rows[p.strategy])
        # the row says which limit stopped its solve short (the chain knows; nothing is read
        # from its text)
        stop = str(row.get("stopped_on") or "") or None
        outcomes.append(Outcome(p.key, row, end - start, stopped_on=stop))
    return outcomes


def milp_stop(
    row: Mapping[str, Any], time_limit_s: float | None, node_limit: int | None, chain_s: float
) -> str | None:
    """The limit that stopped the solve behind MILP ``row`` short: ``"time_limit"``,
    ``"node_limit"``, or None where it ran to the end (to the gap, or to a proof), for a
    point file written before rows said it (a row's ``stopped_on``, which the chain sets):
    read from its status and error text.

    ``row`` is a :class:`~tmsim.comparison.Row` as data; ``time_limit_s`` and ``node_limit`` the
    chain's limits; ``chain_s`` at least the wall seconds the chain ran (NaN: unknown). The
    chain's deadline is ``time_limit_s`` after its start, so a chain that ran for less never
    reached it and no solve of it stopped on time. The row's status (also inside a
    ``fallback to ...`` status) and its error decide, in this order:

    - an error saying the time limit ran out before a solve, or a status (or an error's
      ``(status ...)``) ``time_limit``: the time limit;
    - ``node_limit``: the node limit (unless it is a fallback's, below);
    - ``user_limit`` (cvxpy's word for any limit): the node limit if there is one and the
      chain never reached its deadline, else the time limit;
    - a ``fallback to ...`` status without ``own solve: ...`` (records written before
      fallbacks named how the formulation's own solve ended) of a chain that reached its
      deadline: the time limit. Such a status is that of the smaller formulation, and the
      formulation's own solve may have been the one the deadline cut. This may call a
      point stopped that had in fact finished (the deadline passed after its solve), which
      costs an evaluation; it never calls finished one that had not.

    Anything else (``optimal``, an infeasible capacity, a layout that still overflows, a
    solver failure) did not stop on a limit.
    """
    status, error = str(row.get("status") or ""), str(row.get("error") or "")
    said = status if status != "error" else (error if "(status " in error else "")
    reached = time_limit_s is not None and not chain_s < time_limit_s
    # a fallback's status names its own solve's end since "own solve:"; before, it did not
    fallback = status.startswith("fallback to") and "own solve:" not in status
    if ("time limit of" in error and "ran out before" in error) or "time_limit" in said:
        return "time_limit"
    if "node_limit" in said:
        return "time_limit" if fallback and reached else "node_limit"
    if "user_limit" in said:
        return "node_limit" if node_limit is not None and not reached else "time_limit"
    return "time_limit" if fallback and reached else None


def _plan_settings(p: Point) -> PlanSettings:
    """The planner settings of ``p``: its capacity and profile, and the settings its strategy
    reads (the defaults for the rest, which it does not read)."""
    return PlanSettings(capacity=p.capacity, profile=_profile(p), **dict(p.settings))


def _profile(p: Point) -> Profile | None:
    """The profile of ``p``, read again; raises :class:`TmsimError` if it has changed since
    the spec was read (its sha256 is in the point's key)."""
    if p.profile is None:
        return None
    profile = read_profile(p.profile)
    if profile.sha256 != p.profile_sha256:
        raise TmsimError(
            f"profile {p.profile}: changed since the sweep spec was read (sha256 "
            f"{profile.sha256[:12]}, not {str(p.profile_sha256)[:12]}); expand the spec again"
        )
    return profile


def _json_row(row: Row) -> dict[str, Any]:
    out: dict[str, Any] = nan_to_none(asdict(row))
    return out


def plan_tasks(points: Sequence[Point]) -> list[Task]:
    """Group ``points`` into tasks (see :class:`Task`), in the order of their first point."""
    groups: dict[str, list[Point]] = {}
    for p in points:
        group = p.key if p.strategy not in MILP_STRATEGIES else _milp_group(p)
        groups.setdefault(group, []).append(p)
    return [Task(tuple(g)) for g in groups.values()]


def _milp_group(p: Point) -> str:
    config = {k: v for k, v in p.config().items() if k not in ("strategy", "role")}
    return json.dumps([config, p.platform_si], sort_keys=True, default=str)


def run_sweep(
    sweep: Sweep,
    out_dir: str | os.PathLike[str],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    table_format: str = "parquet",
    limit: int | None = None,
    progress: Callable[[Counts], None] | None = None,
    evaluate: Evaluator = evaluate_task,
) -> SweepReport:
    """Evaluate the points of ``sweep`` not yet finished in ``out_dir``, then write the table.

    ``workers``: local processes (default ``os.cpu_count()``; 1 evaluates in this process);
    ``dask_address``: submit to the Dask scheduler there instead (needs ``distributed``);
    ``limit``: start at most about this many points (whole tasks) and leave the rest pending;
    ``progress(counts)``: called at the start and after each task. The table is written only
    when no point is pending. Raises :class:`SweepError` for a bad option or an unreachable
    scheduler; failures of points are recorded, not raised."""
    if table_format not in FORMATS:
        raise SweepError(f"table format must be one of {', '.join(FORMATS)}, got {table_format!r}")
    if limit is not None and limit < 1:
        raise SweepError(f"limit must be >= 1, got {limit}")
    check_options(workers, dask_address)
    store = PointStore(out_dir)
    done = finished_points(sweep, store)
    todo = [p for p in sweep.points if p.key not in done]
    tasks = plan_tasks(todo)
    if limit is not None:  # whole tasks, while fewer than ``limit`` points are started
        started = itertools.accumulate((len(t.points) for t in tasks), initial=0)
        tasks = [t for t, before in zip(tasks, started, strict=False) if before < limit]
    counts = Counts(total=len(sweep.points), reused=len(sweep.points) - len(todo))
    meta = provenance(sweep.settings.solver, sweep.seed)
    runner = run_tasks(tasks, evaluate, workers=workers, dask_address=dask_address)
    if progress is not None:
        progress(counts)
    by_key = {p.key: p for p in todo}
    failures: list[str] = []
    stopped = 0
    for task, result in runner:
        outcomes = _failed(task, result) if isinstance(result, Exception) else result
        for o in outcomes:
            store.write(o.key, _record(by_key[o.key], o, meta), finished=o.row is not None)
            if o.row is None:
                failures.append(f"{o.key}: {o.error}")
            stopped += o.row is not None and o.stopped_on in RERUN_STOPS
        bad = sum(o.row is None for o in outcomes)
        counts = counts.after(len(outcomes) - bad, bad)
        if progress is not None:
            progress(counts)
    table = None
    if counts.pending == 0:
        frame = sweep_table(sweep, store)
        path = Path(out_dir) / f"results.{table_format}"
        table = write_table(frame, path, _table_meta(sweep, frame, meta))
    return SweepReport(counts, table, tuple(failures), stopped)


def finished_points(sweep: Sweep, store: PointStore) -> set[str]:
    """Keys of the points of ``sweep`` that ``store`` holds a finished result of: one that no
    wall-clock limit stopped (:data:`~tmsim.sweeps.store.RERUN_STOPS`). Raises
    :class:`SweepError` for an unreadable point file."""
    out = set()
    for p in sweep.points:
        record = store.read(p.key)
        done = record is not None and record["row"] is not None
        if done and _stop_of(p, record or {}) not in RERUN_STOPS:
            out.add(p.key)
    return out


def _stop_of(point: Point, record: dict[str, Any]) -> str | None:
    """The ``stopped_on`` of ``point``'s record. A record written before records held it is
    judged by :func:`milp_stop` with the seconds of the task that computed it, which bound
    its chain's from above."""
    if "stopped_on" in record:
        stop: str | None = record["stopped_on"]
        return stop
    row_stop = (record.get("row") or {}).get("stopped_on")
    if row_stop is not None:
        return str(row_stop) or None
    if point.strategy not in MILP_STRATEGIES or record.get("row") is None:
        return None
    read = dict(point.settings)
    return milp_stop(
        record["row"],
        read.get("time_limit_s"),
        read.get("node_limit"),
        _nan(record.get("elapsed_s")),
    )


def _record(point: Point, outcome: Outcome, meta: dict[str, Any]) -> dict[str, Any]:
    """The point file of ``point``'s ``outcome`` (without its key, which the store adds)."""
    return {
        "config": point.config(),
        "platform": point.platform_si,
        "row": outcome.row,
        "stopped_on": outcome.stopped_on,
        "elapsed_s": None if math.isnan(outcome.elapsed_s) else outcome.elapsed_s,
        "error": outcome.error,
        "detail": outcome.detail,
        "provenance": meta,
    }


def _failed(task: Task, exc: BaseException) -> list[Outcome]:
    line = f"{type(exc).__name__}: {exc}"
    detail = "".join(traceback.format_exception(exc))
    return [Outcome(p.key, None, math.nan, line, detail) for p in task.points]


def sweep_table(sweep: Sweep, store: PointStore) -> pd.DataFrame:
    """One row per point of ``sweep`` with a record in ``store`` (finished or failed): the
    point's configuration columns, the :class:`Row` fields (``slowdown`` over the point's
    baseline), ``stopped_on`` (the limit that stopped the point's solve short, empty if none
    did), ``elapsed_s`` and the ``git_commit`` it was computed at. Raises
    :class:`SweepError` for an unreadable point file."""
    found = [(p, rec) for p in sweep.points if (rec := store.read(p.key)) is not None]
    rows = [_row_of(p, rec) for p, rec in found]
    simulated = {p.key: r.simulated_s for (p, _), r in zip(found, rows, strict=True)}
    results = rows_frame(rows).drop(columns=["strategy"])
    results["slowdown"] = [
        r.simulated_s / simulated.get(p.baseline().key, math.nan)
        for (p, _), r in zip(found, rows, strict=True)
    ]
    results["stopped_on"] = [_stop_of(p, rec) or "" for p, rec in found]
    results["elapsed_s"] = [_nan(rec["elapsed_s"]) for _, rec in found]
    results["git_commit"] = [rec["provenance"].get("git_commit", "") for _, rec in found]
    configs = pd.DataFrame([{"key": p.key, **p.config()} for p, _ in found])
    return pd.concat([configs, results], axis=1)


def _row_of(point: Point, record: dict[str, Any]) -> Row:
    if record["row"] is None:
        return Row(point.strategy, "", "failed", error=record["error"])
    known = {f.name for f in fields(Row)}
    return Row(**{k: _nan(v) for k, v in record["row"].items() if k in known})


def _nan(value: Any) -> Any:
    return math.nan if value is None else value


def _table_meta(sweep: Sweep, frame: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "sweep": {k: getattr(sweep, k) for k in ("name", "seed", "description", "source", "spec")},
        "settings": asdict(sweep.settings),
        "skipped": list(sweep.skipped),
        "counts": {
            "points": len(frame),
            "failed": int((frame["status"] == "failed").sum()),
            "error": int((frame["status"] == "error").sum()),
            "time_limit": int((frame["stopped_on"] == "time_limit").sum()),
        },
        "provenance": meta,
    }


__all__ = [
    "FORMATS",
    "Counts",
    "Evaluator",
    "Outcome",
    "PointStore",
    "SweepError",
    "SweepReport",
    "Task",
    "evaluate_task",
    "finished_points",
    "milp_stop",
    "plan_tasks",
    "run_sweep",
    "sweep_table",
]
