"""Keyed jobs: the engine's generic path, for work whose result is a list of rows.

A :class:`Job` is a ``group`` (e.g. a figure's name) and ``params``, a JSON-ready mapping of
everything that shapes its result; its key is a hash of both. :func:`run_jobs` evaluates the
jobs not finished in a :class:`~tmsim.sweeps.store.PointStore` with a function
``evaluate(params) -> rows`` (a list of JSON-ready dicts) where :func:`~tmsim.sweeps.pool.run_tasks`
runs it (this process, a local pool, Dask), records each one as it finishes, and returns every
job's rows. The figures of ``experiments/`` run their points this way; a sweep's points
(:mod:`tmsim.sweeps.engine`) carry a platform and a strategy and have their own records.

A finished job's record: ``key``, ``group``, ``params``, ``rows``, ``columns`` (the rows' keys
in the order evaluate gave them; records are written with sorted keys), ``elapsed_s`` (wall
seconds of the evaluation), ``error`` and ``detail`` (empty), ``stopped_on`` and
``provenance``; a failed job's has ``rows`` and ``columns`` null, the error in one line and
the traceback. Keys depend on ``group`` and ``params`` only, not on the code: delete the store
to recompute after changing the code.

A row that a limit stopped short says so in a ``stopped_on`` column (``"time_limit"``,
``"node_limit"``; null or absent where none did). The job's ``stopped_on`` is then its rows'
(a wall-clock limit's first), and a job stopped on a wall-clock limit is kept but evaluated
again by the next run (the rule of :mod:`tmsim.sweeps.store`).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

from tmsim.sweeps.pool import run_tasks
from tmsim.sweeps.store import RERUN_STOPS, Counts, PointStore, SweepError

#: One row of a job's result: column name to a JSON-ready value (NaN written as None).
JsonRow = dict[str, Any]
#: ``evaluate(params) -> rows``; must be picklable (a module-level function) for a pool or Dask.
RowsEvaluator = Callable[[Mapping[str, Any]], list[JsonRow]]
#: ``progress(counts, job)``: called once at the start (``job`` None), then as each job ends.
JobProgress = Callable[[Counts, "Job | None"], None]

#: Failures named in the message of :func:`run_jobs`'s error; the rest are in ``failed/``.
SHOWN_FAILURES = 3


@dataclass(frozen=True)
class Job:
    """One unit of work: ``group`` and ``params`` (JSON-ready: str, int, float, bool, None,
    lists and string-keyed mappings of them; tuples count as lists)."""

    group: str
    params: Mapping[str, Any] = field(hash=False)

    @cached_property
    def key(self) -> str:
        """A stable 16-hex-digit hash of ``group`` and ``params`` (key order does not matter;
        ``4`` and ``4.0`` differ). Raises ``TypeError`` if ``params`` is not JSON-ready."""
        text = json.dumps(
            {"group": self.group, "params": self.params},
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_jobs(
    jobs: Sequence[Job],
    evaluate: RowsEvaluator,
    store: PointStore,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    meta: Mapping[str, Any] | None = None,
    progress: JobProgress | None = None,
) -> list[list[JsonRow]]:
    """The rows of every job of ``jobs``, in order: read from ``store`` for jobs finished
    before (a job stopped on a wall-clock limit is not finished), evaluated for the others
    (once per key) and recorded as each ends, with ``meta`` as the record's ``provenance``.

    ``workers``/``dask_address``: as :func:`tmsim.sweeps.pool.run_tasks`, except that
    ``workers`` defaults to 1 here. ``evaluate`` must return a list of dicts that JSON can
    write without NaN or infinity (write NaN as None); anything else fails the job. Raises
    :class:`SweepError` for bad options, an unreadable record, or, once every job has ended,
    if any failed (naming up to :data:`SHOWN_FAILURES` of them; the others' rows are kept,
    so a second run evaluates only the failed ones).
    """
    unique = {j.key: j for j in jobs}
    done = store.finished()
    todo = [j for k, j in unique.items() if k not in done]
    counts = Counts(total=len(unique), reused=len(unique) - len(todo))
    if progress is not None:
        progress(counts, None)
    provenance = dict(meta or {})
    failures: list[str] = []
    if workers is None and dask_address is None:
        workers = 1
    tasks = run_tasks(
        todo, partial(_evaluate, evaluate), workers=workers, dask_address=dask_address
    )
    for job, result in tasks:
        record, failure = _record(job, result)
        store.write(job.key, {**record, "provenance": provenance}, finished=failure is None)
        if failure is not None:
            failures.append(f"{_describe(job)}: {failure}")
        counts = counts.after(int(failure is None), int(failure is not None))
        if progress is not None:
            progress(counts, job)
    if failures:
        more = len(failures) - SHOWN_FAILURES
        raise SweepError(
            f"{len(failures)} of {len(unique)} points failed: "
            f"{'; '.join(failures[:SHOWN_FAILURES])}{f' (and {more} more)' if more > 0 else ''}; "
            f"tracebacks in {store.failed_dir}; run again to retry them"
        )
    return [_rows_of(store, j) for j in jobs]


def _record(
    job: Job, result: tuple[list[JsonRow], float] | Exception
) -> tuple[dict[str, Any], str | None]:
    """The record of ``job``'s ``result`` (without key and provenance) and, if it failed, the
    failure in one line."""
    record: dict[str, Any] = {"group": job.group, "params": job.params}
    if isinstance(result, Exception):
        line = f"{type(result).__name__}: {result}"
        detail = "".join(traceback.format_exception(result))
        failed = {"rows": None, "columns": None, "elapsed_s": None, "error": line, "detail": detail}
        return {**record, **failed}, line
    rows, elapsed_s = result
    columns = list(dict.fromkeys(k for row in rows for k in row))
    stops = [row["stopped_on"] for row in rows if row.get("stopped_on")]
    stop = next((s for s in stops if s in RERUN_STOPS), stops[0] if stops else None)
    done = {"rows": rows, "columns": columns, "elapsed_s": elapsed_s, "error": "", "detail": ""}
    return {**record, **done, "stopped_on": stop}, None


def _evaluate(evaluate: RowsEvaluator, job: Job) -> tuple[list[JsonRow], float]:
    """``evaluate(job.params)`` and its wall seconds, refused unless JSON can write it."""
    start = time.perf_counter()
    rows = evaluate(job.params)
    elapsed_s = time.perf_counter() - start
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TypeError(f"evaluate must return a list of dicts, got {type(rows).__name__}")
    json.dumps(rows, allow_nan=False)  # raises here, in the worker, naming what JSON cannot write
    return rows, elapsed_s


def _rows_of(store: PointStore, job: Job) -> list[JsonRow]:
    """The rows recorded for ``job``, each with its keys in the order they were evaluated."""
    record = store.read(job.key) or {}
    rows, columns = record.get("rows"), record.get("columns")
    if not isinstance(rows, list) or not isinstance(columns, list):
        path = store.done_dir / f"{job.key}.json"
        raise SweepError(f"{path}: no rows recorded; delete it")
    return [{c: row[c] for c in columns if c in row} for row in rows]


def _describe(job: Job) -> str:
    return f"{job.group} {json.dumps(job.params, sort_keys=True)}"


def nan_to_none(value: Any) -> Any:
    """``value`` with float NaN written as None (in lists and dicts too): JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [nan_to_none(v) for v in value]
    return value


__all__ = ["Job", "JobProgress", "JsonRow", "RowsEvaluator", "nan_to_none", "run_jobs"]
