"""Traces: what a simulation produced, as flat records, DataFrames and Parquet files.

A :class:`Trace` holds one :class:`Record` per kernel and per move of a replayed step, in the
order they started, with the step's totals. Fast-tier occupancy is carried by the kernel
records (the bytes resident on the fastest tier while each kernel runs, from the plan's
residency) and sampled at every kernel's start and end (:meth:`Trace.occupancy`).

:meth:`Trace.to_frame` gives pandas DataFrames; :func:`save_trace` writes Parquet with the
trace's header in the file's metadata, and :func:`load_trace` reads it back exactly. Nothing
here plots; writing happens only in :func:`save_trace`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tmsim.errors import TmsimError
from tmsim.sim.flows import LOSS_CAUSES

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FORMAT = "tmsim-trace"
VERSION = 1
_META_KEY = b"tmsim.trace"

#: Record kinds (``HOST``: a kernel the host compute ran).
KERNEL, SYNC, ASYNC, RECOMPUTE, HOST = "kernel", "sync", "async", "recompute", "host"
#: The kinds of moves.
MOVES = (SYNC, ASYNC)


class TraceFileError(TmsimError, ValueError):
    """A trace file cannot be read; the message names the file."""


@dataclass(frozen=True, slots=True)
class Record:
    """One kernel or move of a replay.

    - ``kind``: ``"kernel"``, ``"sync"`` or ``"async"`` (a move's mode), ``"recompute"``
      (a kernel run again to make a tensor anew), or ``"host"`` (a kernel the host compute
      ran, :attr:`~tmsim.plans.values.Plan.host_kernels`);
    - ``name``: the kernel's name, or the moved or recomputed tensor's;
    - ``kernel``: the kernel's index, or the kernel a move is issued at (``K`` for a
      synchronous move after the last kernel) or a recompute runs just before;
    - ``phase``: the phase of that kernel (``""`` after the last kernel);
    - ``src``/``dst``: a move's source and destination tier (``""`` for kernels);
    - ``start_s``/``end_s``: simulated seconds; a kernel's span includes its launch overhead,
      an asynchronous move's starts when a copy engine or thread takes it;
    - ``read_bytes``/``write_bytes``: bytes read and written on each tier (the trace's
      ``tier_names`` order);
    - ``uncontended_s``: how long it takes alone, as the cost model times it;
    - ``fast_resident_bytes``: for kernels, the bytes resident on the fastest tier while it
      runs; -1 for moves, recomputes and host kernels;
    - ``lost_shared_s``, ``lost_blocked_s``, ``lost_core_s``, ``lost_latency_s``: how much of
      its time past ``uncontended_s`` each kind of interference cost it
      (:class:`tmsim.sim.flows.Losses`: bandwidth shared with other flows, waiting behind
      writes that drain first, a core shared by a copy thread and a kernel, a copy thread's
      loaded latency); a move's time waiting for an engine is not among them.
    """

    kind: str
    name: str
    kernel: int
    phase: str
    src: str
    dst: str
    start_s: float
    end_s: float
    read_bytes: tuple[int, ...]
    write_bytes: tuple[int, ...]
    uncontended_s: float
    fast_resident_bytes: int
    lost_shared_s: float = 0.0
    lost_blocked_s: float = 0.0
    lost_core_s: float = 0.0
    lost_latency_s: float = 0.0

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s

    @property
    def rate_bytes_per_s(self) -> float:
        """Bytes read and written (a move: bytes copied) per second of its span; 0 if instant."""
        moved = sum(self.read_bytes) + sum(self.write_bytes)
        if self.kind in MOVES:
            moved //= 2  # a copy reads and writes each of its bytes once
        return moved / self.duration_s if self.duration_s > 0 else 0.0


class TraceFrames(NamedTuple):
    """:meth:`Trace.to_frame`'s result: the records and the occupancy samples."""

    records: pd.DataFrame
    occupancy: pd.DataFrame


@dataclass(frozen=True)
class Trace:
    """A replayed step (see the module documentation).

    ``graph``, ``platform``, ``planner``: what was replayed; ``level``: the interference
    level (:mod:`tmsim.levels`; ``none``: flows did not share bandwidth);
    ``tier_names``: the platform's tiers, fastest first;
    ``fast_limit_bytes``: the plan's fast-tier limit; ``predicted_s``: the plan's predicted
    step time; ``simulated_s``: the simulated one; ``events``: SimPy events processed;
    ``records``: in start order (ties: kernels before the moves issued with them, then plan
    order).
    """

    graph: str
    platform: str
    planner: str
    tier_names: tuple[str, ...]
    fast_limit_bytes: int
    predicted_s: float
    simulated_s: float
    events: int
    records: tuple[Record, ...]
    level: str = "bandwidth"

    def kernels(self) -> tuple[Record, ...]:
        """The kernel records, in execution order."""
        return tuple(r for r in self.records if r.kind == KERNEL)

    def moves(self) -> tuple[Record, ...]:
        """The move records, in start order."""
        return tuple(r for r in self.records if r.kind in MOVES)

    def recomputes(self) -> tuple[Record, ...]:
        """The recompute records, in execution order."""
        return tuple(r for r in self.records if r.kind == RECOMPUTE)

    def occupancy(self) -> tuple[FloatArray, IntArray]:
        """Fast-tier resident bytes sampled at every kernel's start and end.

        Returns ``(time_s, bytes)`` [2K]; the bytes hold from one sample to the next.
        """
        ks = self.kernels()
        times = np.array([t for r in ks for t in (r.start_s, r.end_s)], dtype=np.float64)
        occ = np.array([r.fast_resident_bytes for r in ks for _ in (0, 1)], dtype=np.int64)
        return times, occ

    @property
    def fast_peak_bytes(self) -> int:
        """The most bytes resident on the fastest tier while any kernel ran."""
        return max((r.fast_resident_bytes for r in self.records if r.kind == KERNEL), default=0)

    @property
    def moved_bytes(self) -> int:
        """Bytes copied by all moves."""
        return sum(sum(r.read_bytes) for r in self.records if r.kind in MOVES)

    def losses_s(self, kinds: tuple[str, ...] = (KERNEL,)) -> dict[str, float]:
        """Seconds each kind of interference cost the records of ``kinds``, summed:
        ``{"shared": .., "blocked": .., "core": .., "latency": ..}``."""
        out = dict.fromkeys(LOSS_CAUSES, 0.0)
        for r in self.records:
            if r.kind in kinds:
                for cause in LOSS_CAUSES:
                    out[cause] += getattr(r, f"lost_{cause}_s")
        return out

    def overrun_s(self) -> float:
        """Seconds asynchronous moves ran past the end of the kernel they were issued with,
        summed (the next kernel waits for them)."""
        ends = {r.kernel: r.end_s for r in self.records if r.kind == KERNEL}
        return sum(
            max(0.0, r.end_s - ends[r.kernel])
            for r in self.records
            if r.kind == ASYNC and r.kernel in ends
        )

    def to_frame(self) -> TraceFrames:
        """The records as a DataFrame (one row per record, a ``read_bytes_<tier>`` and
        ``write_bytes_<tier>`` column per tier, plus ``duration_s`` and ``rate_bytes_per_s``),
        and the occupancy samples (``time_s``, ``fast_bytes``)."""
        cols: dict[str, Any] = {
            f.name: [getattr(r, f.name) for r in self.records]
            for f in fields(Record)
            if f.name not in ("read_bytes", "write_bytes")
        }
        n_t = len(self.tier_names)
        for label in ("read_bytes", "write_bytes"):
            rows = np.array([getattr(r, label) for r in self.records], dtype=np.int64).reshape(
                -1, n_t
            )
            for j, tier in enumerate(self.tier_names):
                cols[f"{label}_{tier}"] = rows[:, j]
        records = pd.DataFrame(cols)
        records = records.astype({"kernel": "int64", "fast_resident_bytes": "int64"})
        records["start_s"] = records["start_s"].astype("float64")
        records["end_s"] = records["end_s"].astype("float64")
        records["duration_s"] = records["end_s"] - records["start_s"]
        records["rate_bytes_per_s"] = [r.rate_bytes_per_s for r in self.records]
        times, occ = self.occupancy()
        return TraceFrames(records, pd.DataFrame({"time_s": times, "fast_bytes": occ}))

    def header(self) -> dict[str, Any]:
        """Every field but the records, JSON-ready."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "graph": self.graph,
            "platform": self.platform,
            "planner": self.planner,
            "level": self.level,
            "tier_names": list(self.tier_names),
            "fast_limit_bytes": self.fast_limit_bytes,
            "predicted_s": self.predicted_s,
            "simulated_s": self.simulated_s,
            "events": self.events,
        }


def save_trace(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` to ``path`` as Parquet: the records table, the header in its metadata.

    Raises ``OSError`` if the file cannot be written.
    """
    records = trace.to_frame().records
    table = pa.Table.from_pandas(records, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[_META_KEY] = json.dumps(trace.header()).encode()
    pq.write_table(table.replace_schema_metadata(meta), os.fspath(path))


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read a trace written by :func:`save_trace`.

    Raises :class:`TraceFileError` naming ``path`` if it is not such a file.
    """
    try:
        table = pq.read_table(os.fspath(path))
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFileError(f"{path}: not a Parquet file ({exc})") from None
    raw = (table.schema.metadata or {}).get(_META_KEY)
    if raw is None:
        raise TraceFileError(f"{path}: not a tmsim trace (no {_META_KEY.decode()} metadata)")
    head = json.loads(raw)
    if head.get("format") != FORMAT or head.get("version") != VERSION:
        raise TraceFileError(f"{path}: unsupported trace format {head.get('format')!r}")
    tiers = tuple(str(t) for t in head["tier_names"])
    df = table.to_pandas()
    reads = df[[f"read_bytes_{t}" for t in tiers]].to_numpy(dtype=np.int64)
    writes = df[[f"write_bytes_{t}" for t in tiers]].to_numpy(dtype=np.int64)
    records = tuple(
        Record(
            kind=str(row.kind),
            name=str(row.name),
            kernel=int(row.kernel),
            phase=str(row.phase),
            src=str(row.src),
            dst=str(row.dst),
            start_s=float(row.start_s),
            end_s=float(row.end_s),
            read_bytes=tuple(int(x) for x in reads[i]),
            write_bytes=tuple(int(x) for x in writes[i]),
            uncontended_s=float(row.uncontended_s),
            fast_resident_bytes=int(row.fast_resident_bytes),
            **{f"lost_{c}_s": float(getattr(row, f"lost_{c}_s", 0.0)) for c in LOSS_CAUSES},
        )
        for i, row in enumerate(df.itertuples(index=False))
    )
    return Trace(
        graph=str(head["graph"]),
        platform=str(head["platform"]),
        planner=str(head["planner"]),
        # files from before levels say only whether flows shared bandwidth
        level=str(head.get("level", "bandwidth" if head.get("contention", True) else "none")),
        tier_names=tiers,
        fast_limit_bytes=int(head["fast_limit_bytes"]),
        predicted_s=float(head["predicted_s"]),
        simulated_s=float(head["simulated_s"]),
        events=int(head["events"]),
        records=records,
    )


__all__ = [
    "ASYNC",
    "HOST",
    "KERNEL",
    "LOSS_CAUSES",
    "MOVES",
    "RECOMPUTE",
    "SYNC",
    "Record",
    "Trace",
    "TraceFileError",
    "TraceFrames",
    "load_trace",
    "save_trace",
]
