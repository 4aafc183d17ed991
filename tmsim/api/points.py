"""For the authors of figures: a figure's points run through the sweep engine, kept and
resumed, and its table written with its configuration and provenance.

A figure package (this repository's ``experiments``, or one of your own declared in the
``tmsim.figures`` entry-point group, see :mod:`tmsim.figures`) splits its compute stage into
*points*, each a JSON-ready mapping of everything that shapes its rows, and a function that
turns one point into rows. :func:`run_points` evaluates the points not finished before (in
this process, a local pool or on Dask) and keeps each finished one under
``out_dir/NAME.points/``, keyed by a hash of the figure's name and the point, so an
interrupted compute resumes and a changed configuration recomputes only the points it
changes. :func:`write_figure_table` writes the figure's table; :func:`tmsim.read_table` reads
it back with its metadata in ``attrs``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from tmsim.figures import Progress, points_dir
from tmsim.results import provenance, write_table
from tmsim.sweeps.jobs import Job, JsonRow, nan_to_none, run_jobs
from tmsim.sweeps.store import Counts, PointStore

#: ``point_frame(params) -> frame``: the rows of one point; a module-level function, so that
#: pool and Dask workers can run it.
PointFrame = Callable[[Mapping[str, Any]], pd.DataFrame]
#: ``describe(params) -> text``: a point in a few words, for progress messages.
Describe = Callable[[Mapping[str, Any]], str]


def run_points(
    name: str,
    points: Sequence[Mapping[str, Any]],
    point_frame: PointFrame,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    default_workers: int = 1,
    describe: Describe = str,
) -> pd.DataFrame:
    """The rows of ``point_frame(p)`` for every point ``p`` of figure ``name``, concatenated in
    the order of ``points``; finished points are read back from ``out_dir/NAME.points/``.

    ``points`` must be JSON-ready (str, int, float, bool, None, lists, string-keyed dicts)
    and hold everything ``point_frame`` reads; ``point_frame``'s frames must hold values JSON
    can write (NaN is written as null and read back as NaN). ``workers``: local processes
    (``default_workers`` when neither it nor ``dask_address`` is given); ``dask_address``: a
    Dask scheduler to run the points on. ``progress(message)`` hears how many points were
    finished before and each point as it ends, named by ``describe``. Raises
    :class:`~tmsim.errors.TmsimError` for bad options or when points failed (after the
    others are stored; a second call evaluates only the failed ones).
    """
    if workers is None and dask_address is None:
        workers = default_workers
    rows = run_jobs(
        [Job(name, p) for p in points],
        partial(_json_rows, point_frame),
        PointStore(points_dir(out_dir, name)),
        workers=workers,
        dask_address=dask_address,
        meta=provenance(),
        progress=None if progress is None else partial(_report, progress, describe),
    )
    return pd.DataFrame(
        [{k: math.nan if v is None else v for k, v in row.items()} for rs in rows for row in rs]
    )


def write_figure_table(
    frame: pd.DataFrame,
    path: str | os.PathLike[str],
    name: str,
    config: Any,
    solver: str = "HIGHS",
    seed: int | None = None,
) -> Path:
    """Write figure ``name``'s ``frame`` to ``path`` (``.parquet`` or ``.csv``) with its
    resolved ``config`` (a dataclass or a JSON-ready mapping) and its provenance (version,
    git commit, ``solver`` and its version, ``seed``, time) as metadata; return the path."""
    resolved = asdict(config) if is_dataclass(config) and not isinstance(config, type) else config
    meta = {"figure": name, "config": resolved, "provenance": provenance(solver, seed)}
    return write_table(frame, path, meta)


def _json_rows(point_frame: PointFrame, params: Mapping[str, Any]) -> list[JsonRow]:
    """``point_frame(params)`` as JSON-ready rows (NaN as None)."""
    return [nan_to_none(row) for row in point_frame(params).to_dict("records")]


def _report(progress: Progress, describe: Describe, counts: Counts, job: Job | None) -> None:
    if job is None:
        progress(
            f"{counts.total} points: {counts.reused} finished earlier, {counts.pending} to compute"
        )
        return
    ended = counts.total - counts.pending
    failed = f" ({counts.failed} failed so far)" if counts.failed else ""
    progress(f"[{ended}/{counts.total}] {describe(job.params)}{failed}")


__all__ = ["Describe", "PointFrame", "run_points", "write_figure_table"]
