"""The point store: one JSON record per evaluated point, kept across runs so that a run
resumes where an earlier one stopped.

A store is a folder ``DIR`` with ``points/<key>.json`` for points that gave a result and
``failed/<key>.json`` for points whose evaluation raised. What a record holds besides its
``key`` is up to the caller (a sweep point's record: :mod:`tmsim.sweeps.engine`; a keyed job's:
:mod:`tmsim.sweeps.jobs`), except ``stopped_on``: the limit that stopped the evaluation before
it finished (``"time_limit"``, ``"node_limit"``), null or absent if none did.

The rule: a result is finished, and never evaluated again, unless a *wall-clock* limit
(:data:`RERUN_STOPS`) stopped it. Where a wall-clock limit stops a solver depends on how loaded
the machine was, so such a result is kept (a table shows it, marked) but its point counts as
not done and the next run evaluates it again. A limit on work (a node limit) stops at the
same place on any machine: evaluating again would give the same answer, so that result is
finished.

Records are written atomically, so an interrupted run never leaves a half-written file under a
record's name; a point that finishes clears its old failure, and a failure replaces a result
that stopped on a wall-clock limit.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmsim.errors import TmsimError

#: Limits whose stops depend on the machine's load: a point stopped on one is evaluated again.
RERUN_STOPS = frozenset({"time_limit"})


def is_final(record: dict[str, Any]) -> bool:
    """Whether ``record`` (as :meth:`PointStore.read` gives it, under ``points/``) is a finished
    result: one that no limit in :data:`RERUN_STOPS` stopped."""
    return record.get("stopped_on") not in RERUN_STOPS


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
        """Keys of the finished points: those under ``points/`` whose record is final
        (:func:`is_final`). Raises :class:`SweepError` as :meth:`read`."""
        if not self.done_dir.is_dir():
            return set()
        keys = {p.stem for p in self.done_dir.glob("*.json")}
        return {k for k in keys if is_final(self._load(self.done_dir / f"{k}.json", k))}

    def read(self, key: str) -> dict[str, Any] | None:
        """The record of point ``key``: finished, else failed, else None. Raises
        :class:`SweepError` naming a file that is not a point record or holds another key."""
        for folder in (self.done_dir, self.failed_dir):
            path = folder / f"{key}.json"
            if path.is_file():
                return self._load(path, key)
        return None

    @staticmethod
    def _load(path: Path, key: str) -> dict[str, Any]:
        try:
            record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SweepError(f"{path}: not a point record ({exc}); delete it") from None
        if not isinstance(record, dict) or record.get("key") != key:
            held = record.get("key") if isinstance(record, dict) else None
            raise SweepError(f"{path}: holds point {held!r}; delete it")
        return record

    def write(self, key: str, record: dict[str, Any], finished: bool) -> None:
        """Write ``record`` (JSON-ready, NaN written as null by the caller) as point ``key``'s:
        under ``points/`` if ``finished`` (a result, final or not: its ``stopped_on`` says; an
        old failure is removed), else under ``failed/`` (removing a result of ``key`` that
        stopped on a wall-clock limit, which the failure replaces). The stored record is
        ``{"key": key, **record}``. Raises ``ValueError`` if ``record`` holds NaN or infinity,
        ``TypeError`` if it holds something JSON cannot write."""
        folder = self.done_dir if finished else self.failed_dir
        _write_json(folder / f"{key}.json", {"key": key, **record})
        if finished:
            (self.failed_dir / f"{key}.json").unlink(missing_ok=True)
            return
        done = self.done_dir / f"{key}.json"
        if done.is_file() and not is_final(self._load(done, key)):
            done.unlink()


def _write_json(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
    # The pid keeps two coordinators writing into one folder from sharing a temporary file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


__all__ = ["RERUN_STOPS", "Counts", "PointStore", "SweepError", "is_final"]
