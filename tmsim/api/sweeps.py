"""Sweeps: a grid of workloads, platforms, capacities and strategies, each point planned and
replayed, kept one file per finished point so that a run stopped halfway resumes.

:func:`sweep` runs one and returns its table. For a run driven step by step (a progress
display, a dry run, a limit on the points evaluated now) :func:`expand_sweep` reads the spec,
:func:`describe_sweep` says what is finished and what would run, and :func:`run_sweep_in`
evaluates the pending points and reports how the run ended (a :class:`SweepReport`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from tmsim.api.inputs import expect, one_line_errors
from tmsim.errors import TmsimError
from tmsim.results import read_table
from tmsim.sweeps.engine import FORMATS, SweepReport, finished_points, plan_tasks, run_sweep
from tmsim.sweeps.spec import Sweep, load_sweep, sweep_from_dict
from tmsim.sweeps.store import Counts, PointStore

#: Formats of a sweep's table.
TABLE_FORMATS: tuple[str, ...] = tuple(FORMATS)

#: What a sweep's spec may be: a TOML file, the same document as a dict, or an expanded sweep.
Spec = str | os.PathLike[str] | Mapping[str, Any] | Sweep


def expand_sweep(spec: Spec) -> Sweep:
    """The sweep of ``spec`` (a TOML file as ``tmsim sweep`` takes, the same document as a
    dict, or a :class:`Sweep` as it is) with its grid expanded: ``name``, ``points`` (the
    all-fast baselines included) and ``skipped`` (one line per grid point that does not
    apply, e.g. a strategy a platform cannot run). Raises :class:`TmsimError` for a bad spec.

    >>> s = expand_sweep({"grid": {"model": ["vgg19"], "batch": [2], "strategy": ["greedy"],
    ...                            "platform": ["cascadelake-optane"], "ratio": ["4:1"]}})
    >>> sorted(p.strategy for p in s.points)
    ['all-fast', 'greedy']
    """
    expect(spec, (str, os.PathLike, Mapping, Sweep), "a sweep's spec", "a TOML file or a dict")
    if isinstance(spec, Sweep):
        return spec
    if isinstance(spec, Mapping):
        with one_line_errors():
            return sweep_from_dict(spec, "sweep spec", Path.cwd())
    try:
        with one_line_errors():
            return load_sweep(Path(os.fspath(spec)))
    except OSError as exc:
        raise TmsimError(
            f"{os.fspath(spec)}: cannot read the sweep: {exc.strerror or exc}"
        ) from None


def describe_sweep(spec: Spec, out: str | os.PathLike[str]) -> str:
    """One line saying what running ``spec`` into the folder ``out`` would do: its points
    (asked for and baselines), how many are finished there, how many would be computed and in
    how many tasks, and how many grid points were skipped. Computes nothing."""
    sweep = expand_sweep(spec)
    done = finished_points(sweep, PointStore(Path(os.fspath(out))))
    todo = [p for p in sweep.points if p.key not in done]
    baselines = sum(p.role == "baseline" for p in sweep.points)
    return (
        f"{sweep.name}: {len(sweep.points)} points ({len(sweep.points) - baselines} asked for, "
        f"{baselines} all-fast baselines), {len(sweep.points) - len(todo)} finished, "
        f"{len(todo)} to compute in {len(plan_tasks(todo))} tasks; "
        f"{len(sweep.skipped)} grid points skipped"
    )


def run_sweep_in(
    spec: Spec,
    out: str | os.PathLike[str],
    *,
    workers: int | None = 1,
    client: Any = None,
    table_format: str = "parquet",
    limit: int | None = None,
    progress: Callable[[Counts], None] | None = None,
) -> SweepReport:
    """Evaluate the points of ``spec`` not yet finished in the folder ``out`` (created), then
    write its table there (``results.parquet`` or ``.csv``, ``table_format``), and report
    the run: its :class:`Counts` (total, reused, evaluated, failed, pending), the table's
    path (None while ``limit``, about that many points evaluated now, leaves some pending),
    one line per point that failed (its traceback kept in ``out/failed/``) and how many
    stopped on a time limit. ``workers``: local processes (1: this process; None: one per
    CPU); ``client``: a ``dask.distributed.Client`` or a scheduler's address to run the points
    on instead (the ``dask`` extra); ``progress(counts)`` is called as points finish. Raises
    :class:`TmsimError` for a bad spec or option.
    """
    sweep = expand_sweep(spec)
    expect(out, (str, os.PathLike), "out", "a folder path")
    folder = Path(os.fspath(out))
    if folder.exists() and not folder.is_dir():
        raise TmsimError(f"out {folder}: not a folder")
    if table_format not in TABLE_FORMATS:
        raise TmsimError(
            f"table_format must be one of {', '.join(TABLE_FORMATS)}, got {table_format!r}"
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise TmsimError(f"limit must be a whole number >= 1, got {limit!r}")
    address = None
    if client is not None:
        address = (
            client
            if isinstance(client, str)
            else getattr(getattr(client, "scheduler", None), "address", None)
        )
        if not isinstance(address, str):
            raise TmsimError("client must be a dask.distributed.Client connected to a scheduler")
        workers = None
    return run_sweep(
        sweep,
        folder,
        workers=workers,
        dask_address=address,
        table_format=table_format,
        limit=limit,
        progress=progress,
    )


def sweep(
    spec: Spec,
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
    expanded = expand_sweep(spec)
    if out is not None:
        return _run(expanded, out, workers, client)
    with tempfile.TemporaryDirectory(prefix="tmsim-sweep-") as tmp:
        return _run(expanded, tmp, workers, client)


def _run(
    expanded: Sweep, out: str | os.PathLike[str], workers: int | None, client: Any
) -> pd.DataFrame:
    report = run_sweep_in(expanded, out, workers=workers, client=client)
    if report.table is None:  # only with a limit on points, which this call never sets
        raise TmsimError(f"sweep {expanded.name}: {report.counts.pending} points still pending")
    frame, meta = read_table(report.table)
    frame.attrs.update(meta)
    frame.attrs["failures"] = list(report.failures)
    return frame


__all__ = [
    "TABLE_FORMATS",
    "Counts",
    "Spec",
    "Sweep",
    "SweepReport",
    "describe_sweep",
    "expand_sweep",
    "run_sweep_in",
    "sweep",
]
