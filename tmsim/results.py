"""Result tables with their provenance: tidy DataFrames written atomically beside their origin.

Every data file tmsim writes for an experiment or a sweep carries the fully resolved
configuration that made it and :func:`provenance` (package version, git commit, solver and its
version, library versions, seed, time). :func:`write_table` writes a DataFrame as Parquet with
that metadata in the file, or as CSV with it in a ``.meta.json`` file beside it;
:func:`read_table` gives both back. Writes go through a temporary file and a rename, so an
interrupted write never leaves a half-written file under the final name.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform as pyplatform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tmsim.errors import TmsimError

_META_KEY = b"tmsim.meta"
_LIBRARIES = ("numpy", "pandas", "simpy", "cvxpy", "highspy", "matplotlib")


class ResultFileError(TmsimError, ValueError):
    """A result file cannot be read as one; the message names the file."""


def git_commit(where: str | os.PathLike[str] | None = None) -> str:
    """The git commit of the checkout holding ``where`` (default: this package), with
    ``-dirty`` when it has uncommitted changes, or ``"unknown"`` outside a checkout."""
    root = Path(where) if where is not None else Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def provenance(solver: str = "HIGHS", seed: int | None = None) -> dict[str, Any]:
    """Where a result comes from: tmsim's version and git commit, the MILP ``solver`` and the
    version of its package, the versions of the libraries that shape results, Python's, the
    ``seed`` (None when nothing random ran) and the time (UTC, ISO 8601)."""
    solver_package = {"HIGHS": "highspy", "GUROBI": "gurobipy", "CBC": "cylp", "SCIP": "pyscipopt"}
    package = solver_package.get(solver.upper(), solver.lower())
    return {
        "tmsim_version": _version("tmsim"),
        "git_commit": git_commit(),
        "solver": solver,
        "solver_version": _version(package),
        "libraries": {name: _version(name) for name in _LIBRARIES},
        "python": pyplatform.python_version(),
        "seed": seed,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str], meta: dict[str, Any]) -> Path:
    """Write ``frame`` to ``path`` (``.parquet`` or ``.csv``) with ``meta`` (JSON-ready: the
    resolved configuration and :func:`provenance`), atomically; return the path.

    Raises :class:`TmsimError` for another suffix and ``TypeError`` if ``meta`` is not JSON
    serializable.
    """
    target = Path(path)
    text = json.dumps(meta, sort_keys=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    if target.suffix == ".parquet":
        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), _META_KEY: text.encode()}
        )
        pq.write_table(table, tmp)
    elif target.suffix == ".csv":
        side = _sidecar(target)
        side_tmp = side.with_name(f".{side.name}.tmp")
        side_tmp.write_text(text + "\n", encoding="utf-8")
        side_tmp.replace(side)
        frame.to_csv(tmp, index=False)
    else:
        raise TmsimError(f"{target}: result tables are .parquet or .csv files")
    tmp.replace(target)
    return target


def read_table(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The frame and metadata :func:`write_table` wrote to ``path``.

    Raises :class:`ResultFileError` naming the file if it is not such a file (no metadata, not
    Parquet or CSV), ``OSError`` if it cannot be read.
    """
    source = Path(path)
    if source.suffix == ".parquet":
        try:
            table = pq.read_table(source)
        except pa.ArrowInvalid as exc:
            raise ResultFileError(f"{source}: not a Parquet file ({exc})") from None
        raw = (table.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise ResultFileError(f"{source}: no tmsim metadata; not a tmsim result table")
        return table.to_pandas(), json.loads(raw)
    if source.suffix == ".csv":
        side = _sidecar(source)
        if not side.is_file():
            raise ResultFileError(f"{source}: its metadata file {side.name} is missing")
        return pd.read_csv(source), json.loads(side.read_text(encoding="utf-8"))
    raise ResultFileError(f"{source}: result tables are .parquet or .csv files")


def _sidecar(path: Path) -> Path:
    return path.with_name(path.stem + ".meta.json")


__all__ = ["ResultFileError", "git_commit", "provenance", "read_table", "write_table"]
