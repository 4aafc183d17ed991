"""A replayed step as a Chrome trace-event file, the JSON that ui.perfetto.dev and
chrome://tracing open.

:func:`trace_events` turns a :class:`~tmsim.sim.trace.Trace` (and, when given, the plan it
replayed with its graph) into the trace-event format's ``traceEvents``, one process per
group of tracks:

- **compute**: every kernel and recompute as a complete event (``ph: "X"``) on one thread,
  with its bytes per tier and its time lost to interference in ``args``, and the kernels the
  host CPU runs on a thread of their own;
- **copies**: synchronous copies on one thread; asynchronous copies on one thread per
  direction and engine (a copy takes the lowest-numbered engine of its direction free when it
  starts, so no thread holds two overlapping copies);
- **links**: one thread per copy path (source -> destination), each copy on it again, so a
  link's busy time reads off one track;
- **memory** (with a plan): a counter per tier (``ph: "C"``), the bytes resident there from
  each kernel's start, from the plan's residency;
- **tensors** (with a plan): each residency range (a tensor held on a tier over a span of
  kernels) as a complete event from its first kernel's start to its last kernel's end, on one
  thread per tier and lane (lanes as for copies).

Times are in microseconds (the format's unit) from the step's start. Thread and process
names are metadata events (``ph: "M"``). Nothing here writes a file but
:func:`save_trace_events`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.jsonio import write_json_atomic
from tmsim.plans.values import Plan
from tmsim.sim.trace import ASYNC, HOST, KERNEL, RECOMPUTE, SYNC, Record, Trace
from tmsim.workload.graph import Graph

#: Microseconds per second: the trace-event format's time unit.
US_PER_S = 1e6
#: Process ids of the groups of tracks, in display order.
COMPUTE_PID, COPIES_PID, LINKS_PID, MEMORY_PID, TENSORS_PID = 1, 2, 3, 4, 5
_GROUPS = {
    COMPUTE_PID: "compute",
    COPIES_PID: "copies",
    LINKS_PID: "links",
    MEMORY_PID: "memory in use (bytes)",
    TENSORS_PID: "tensors resident",
}


def trace_events(
    trace: Trace, plan: Plan | None = None, graph: Graph | None = None, label: str = ""
) -> list[dict[str, Any]]:
    """The trace-event list of ``trace`` (see the module documentation); with ``plan`` and
    ``graph`` also the memory counters and tensor residency. ``label`` prefixes every
    process name (several replays in one file, :func:`save_trace_events`). Raises
    :class:`TmsimError` when ``plan`` is given without ``graph`` or names another graph or
    platform than the trace."""
    if plan is not None:
        if graph is None:
            raise TmsimError("memory and tensor tracks need the plan's graph")
        if (plan.graph, plan.platform) != (trace.graph, trace.platform):
            raise TmsimError(
                f"the plan is for {plan.graph} on {plan.platform}, the trace for "
                f"{trace.graph} on {trace.platform}"
            )
    events: list[dict[str, Any]] = []
    tracks = _Tracks(events, label)
    kernels = [r for r in trace.records if r.kind in (KERNEL, RECOMPUTE)]
    for r in kernels:
        events.append(_complete(r, COMPUTE_PID, tracks.thread(COMPUTE_PID, "kernels"), trace))
    copies = [r for r in trace.records if r.kind in (SYNC, ASYNC)]
    engines: dict[tuple[str, str], list[float]] = {}
    for r in sorted(copies, key=lambda r: (r.start_s, r.end_s)):
        if r.kind == SYNC:
            name = "synchronous"
        else:
            lane = _lane(engines.setdefault((r.src, r.dst), []), r.start_s, r.end_s)
            name = f"async {r.src}->{r.dst} #{lane}"
        events.append(_complete(r, COPIES_PID, tracks.thread(COPIES_PID, name), trace))
    links: dict[tuple[str, str], list[float]] = {}
    for r in sorted(copies, key=lambda r: (r.start_s, r.end_s)):
        lane = _lane(links.setdefault((r.src, r.dst), []), r.start_s, r.end_s)
        name = f"{r.src}->{r.dst}" + (f" #{lane}" if lane else "")
        events.append(_complete(r, LINKS_PID, tracks.thread(LINKS_PID, name), trace))
    for r in (r for r in trace.records if r.kind == HOST):  # the host CPU's own stream
        events.append(_complete(r, COMPUTE_PID, tracks.thread(COMPUTE_PID, "host CPU"), trace))
    others = [r for r in trace.records if r.kind not in (KERNEL, RECOMPUTE, SYNC, ASYNC, HOST)]
    for r in others:  # any other record kind keeps a track of its own
        events.append(_complete(r, COMPUTE_PID, tracks.thread(COMPUTE_PID, r.kind), trace))
    if plan is not None and graph is not None:
        starts, ends = _kernel_spans_s(kernels, len(graph.kernels), trace.simulated_s)
        _memory(events, tracks, plan, graph, trace.tier_names, starts)
        _tensors(events, tracks, plan, starts, ends)
    return tracks.metadata() + events


def save_trace_events(
    path: str | os.PathLike[str], replays: Sequence[list[dict[str, Any]]]
) -> Path:
    """Write the events of one or more replays (each from :func:`trace_events`, labelled
    there) to ``path`` as one trace-event JSON file; each replay's process ids are offset so
    they do not collide. Returns the path; raises :class:`TmsimError` when it cannot be
    written."""
    merged: list[dict[str, Any]] = []
    for i, events in enumerate(replays):
        for e in events:
            merged.append({**e, "pid": int(e["pid"]) + 10 * i})
    target = Path(path)
    try:
        write_json_atomic({"traceEvents": merged, "displayTimeUnit": "ms"}, target, TmsimError)
    except OSError as exc:
        raise TmsimError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


class _Tracks:
    """Thread ids by (process, name), and the metadata events that name them."""

    def __init__(self, events: list[dict[str, Any]], label: str) -> None:
        self.events, self.label = events, label
        self.ids: dict[tuple[int, str], int] = {}

    def thread(self, pid: int, name: str) -> int:
        key = (pid, name)
        if key not in self.ids:
            self.ids[key] = 1 + sum(1 for p, _ in self.ids if p == pid)
        return self.ids[key]

    def metadata(self) -> list[dict[str, Any]]:
        prefix = f"{self.label}: " if self.label else ""
        out: list[dict[str, Any]] = []
        for pid in sorted({p for p, _ in self.ids}):
            out.append(_meta("process_name", pid, 0, f"{prefix}{_GROUPS[pid]}"))
            out.append(_meta("process_sort_index", pid, 0, pid, key="sort_index"))
        for (pid, name), tid in self.ids.items():
            out.append(_meta("thread_name", pid, tid, name))
            out.append(_meta("thread_sort_index", pid, tid, tid, key="sort_index"))
        return out


def _meta(kind: str, pid: int, tid: int, value: object, key: str = "name") -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {key: value}}


def _complete(r: Record, pid: int, tid: int, trace: Trace) -> dict[str, Any]:
    """A record as a complete event, its bytes per tier and losses in ``args``."""
    args: dict[str, Any] = {
        "kernel": r.kernel,
        "phase": r.phase,
        "uncontended_us": r.uncontended_s * US_PER_S,
    }
    for j, tier in enumerate(trace.tier_names):
        if r.read_bytes[j]:
            args[f"read {tier} bytes"] = r.read_bytes[j]
        if r.write_bytes[j]:
            args[f"write {tier} bytes"] = r.write_bytes[j]
    if r.src:
        args["from"], args["to"] = r.src, r.dst
    for loss in ("lost_shared_s", "lost_blocked_s", "lost_core_s", "lost_latency_s"):
        value = float(getattr(r, loss))
        if value:
            args[loss.replace("_s", "_us")] = value * US_PER_S
    return {
        "ph": "X",
        "name": r.name,
        "cat": r.kind,
        "pid": pid,
        "tid": tid,
        "ts": r.start_s * US_PER_S,
        "dur": max(r.end_s - r.start_s, 0.0) * US_PER_S,
        "args": args,
    }


def _lane(busy_until: list[float], start: float, end: float) -> int:
    """The lowest lane free at ``start`` (one more where none is), marked busy to ``end``."""
    for i, until in enumerate(busy_until):
        if until <= start:
            busy_until[i] = end
            return i
    busy_until.append(end)
    return len(busy_until) - 1


def _kernel_spans_s(
    kernels: Iterable[Record], n_kernels: int, step_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each kernel's start and end in the replay (its own record; a recompute before it
    counts from the recompute's start)."""
    starts = np.full(n_kernels, np.nan)
    ends = np.full(n_kernels, np.nan)
    for r in kernels:
        if 0 <= r.kernel < n_kernels:
            starts[r.kernel] = np.fmin(starts[r.kernel], r.start_s)
            if r.kind == KERNEL:
                ends[r.kernel] = r.end_s
    # kernels the trace lacks (none in a full replay) take their neighbours' times
    starts = _filled(starts, 0.0)
    ends = _filled(ends, step_s)
    return starts, np.maximum(ends, starts)


def _filled(values: np.ndarray, default: float) -> np.ndarray:
    out = values.copy()
    known = np.flatnonzero(~np.isnan(out))
    if known.size == 0:
        return np.full_like(out, default)
    index = np.arange(out.size)
    return np.asarray(np.interp(index, known, out[known]), dtype=np.float64)


def _memory(
    events: list[dict[str, Any]],
    tracks: _Tracks,
    plan: Plan,
    graph: Graph,
    tier_names: Sequence[str],
    starts: np.ndarray,
) -> None:
    """A counter per tier: the plan's resident bytes from each kernel's start."""
    tracks.thread(MEMORY_PID, "tiers")
    n_k = len(graph.kernels)
    for tier in tier_names:
        ranges = [r for r in plan.residency if r.tier == tier]
        sizes = np.array([graph.tensor(r.tensor).size_bytes for r in ranges], dtype=np.int64)
        first = np.array([r.first for r in ranges], dtype=np.int64)
        last = np.array([r.last for r in ranges], dtype=np.int64)
        used = occupancy(first, last, sizes, n_k)
        for k in range(n_k):
            if k == 0 or used[k] != used[k - 1]:
                events.append(
                    {
                        "ph": "C",
                        "name": f"{tier} bytes",
                        "pid": MEMORY_PID,
                        "tid": 1,
                        "ts": float(starts[k]) * US_PER_S,
                        "args": {tier: int(used[k])},
                    }
                )


def _tensors(
    events: list[dict[str, Any]],
    tracks: _Tracks,
    plan: Plan,
    starts: np.ndarray,
    ends: np.ndarray,
) -> None:
    """Each residency range as a complete event on its tier's lanes."""
    lanes: dict[str, list[float]] = {}
    ordered = sorted(plan.residency, key=lambda r: (r.tier, starts[r.first], r.last, r.tensor))
    for r in ordered:
        begin, finish = float(starts[r.first]), float(ends[r.last])
        lane = _lane(lanes.setdefault(r.tier, []), begin, finish)
        tid = tracks.thread(TENSORS_PID, f"{r.tier} #{lane}")
        events.append(
            {
                "ph": "X",
                "name": r.tensor,
                "cat": "tensor",
                "pid": TENSORS_PID,
                "tid": tid,
                "ts": begin * US_PER_S,
                "dur": (finish - begin) * US_PER_S,
                "args": {"tier": r.tier, "first_kernel": r.first, "last_kernel": r.last},
            }
        )


__all__ = ["US_PER_S", "save_trace_events", "trace_events"]
