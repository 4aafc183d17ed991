"""The point store: one JSON record per evaluated point, kept across runs so that a run
resumes where an earlier one stopped.

A store is a folder ``DIR`` with ``points/<key>.json`` for points that finished and
``failed/<key>.json`` for points whose evaluation raised. What a record holds besides its
``key`` is up to the caller (a sweep point's record: :mod:`tmsim.sweep.engine`; a keyed job's:
:mod:`tmsim.sweep.jobs`). Records are written atomically, so an interrupted run never leaves a
half-written file under a record's name, and a point that finishes clears its old failure.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmsim.errors import TmsimError


class SweepError(TmsimError):
    """A sweep cannot run: a bad option, an unreadable point file, an unreachable cluster."""


@dataclass(frozen=True)
class Counts:
    """Progress of a run: ``total`` points; ``reused`` finished before it; ``evaluated`` and
    ``failed`` in it so far; ``pending`` neither finished nor failed yet."""

    total: int
    reused: int
    evaluated: int = 0
    failed: int = 0

    @property
    def pending(self) -> int:
        return self.total - self.reused - self.evaluated - self.failed

    def after(self, evaluated: int, failed: int) -> Counts:
        """These counts with ``evaluated`` more points finished and ``failed`` more failed."""
        return Counts(self.total, self.reused, self.evaluated + evaluated, self.failed + failed)


class PointStore:
    """The point records of one output folder (see the module docstring)."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.root = Path(out_dir)
        self.done_dir = self.root / "points"
        self.failed_dir = self.root / "failed"

    def finished(self) -> set[str]:
        """Keys of the finished points."""
        if not self.done_dir.is_dir():
            return set()
        return {p.stem for p in self.done_dir.glob("*.json")}

    def read(self, key: str) -> dict[str, Any] | None:
        """The record of point ``key``: finished, else failed, else None. Raises
        :class:`SweepError` naming a file that is not a point record or holds another key."""
        for folder in (self.done_dir, self.failed_dir):
            path = folder / f"{key}.json"
            if path.is_file():
                try:
                    record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise SweepError(f"{path}: not a point record ({exc}); delete it") from None
                if not isinstance(record, dict) or record.get("key") != key:
                    held = record.get("key") if isinstance(record, dict) else None
                    raise SweepError(f"{path}: holds point {held!r}; delete it")
                return record
        return None

    def write(self, key: str, record: dict[str, Any], finished: bool) -> None:
        """Write ``record`` (JSON-ready, NaN written as null by the caller) as point ``key``'s:
        under ``points/`` if ``finished`` (and remove an old failure), else under ``failed/``.
        The stored record is ``{"key": key, **record}``. Raises ``ValueError`` if ``record``
        holds NaN or infinity, ``TypeError`` if it holds something JSON cannot write."""
        folder = self.done_dir if finished else self.failed_dir
        _write_json(folder / f"{key}.json", {"key": key, **record})
        if finished:
            (self.failed_dir / f"{key}.json").unlink(missing_ok=True)


def _write_json(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
    # The pid keeps two coordinators writing into one folder from sharing a temporary file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


__all__ = ["Counts", "PointStore", "SweepError"]
