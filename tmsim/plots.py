"""Figures (the only module of tmsim that imports matplotlib; it draws with Agg, no display).

:func:`timeline` draws a replayed step (:class:`tmsim.sim.Trace`) as a Gantt chart over
simulated time, one lane for the compute engine, one for synchronous copies and one per
direction of asynchronous copies, with the fast tier's resident bytes and its limit beneath.
Steps have 10^3 to 10^4 kernels, far more than a figure has pixels: bars of one lane and
colour closer than about a pixel are merged before drawing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from tmsim.sim.trace import ASYNC, KERNEL, RECOMPUTE, SYNC, Record, Trace

FloatArray = npt.NDArray[np.float64]

PHASE_COLORS = {"forward": "#4C72B0", "backward": "#DD8452", "update": "#55A868"}
SYNC_COLOR = "#C44E52"
#: Recomputes: kernels run again to make a dropped tensor anew.
RECOMPUTE_COLOR = "#8172B2"
ASYNC_COLORS = ("#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def merge_intervals(
    start_s: npt.ArrayLike, end_s: npt.ArrayLike, min_gap_s: float
) -> list[tuple[float, float]]:
    """Intervals as ``(start, width)`` pairs after merging those closer than ``min_gap_s``.

    Intervals are sorted by start first; an interval starting less than ``min_gap_s`` after
    the furthest end so far joins the current group. Empty input gives an empty list.
    """
    s = np.asarray(start_s, dtype=np.float64)
    e = np.asarray(end_s, dtype=np.float64)
    if s.size == 0:
        return []
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] - reach[:-1] >= min_gap_s
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return [(float(s[a]), float(reach[b] - s[a])) for a, b in zip(first, last, strict=True)]


def timeline(
    trace: Trace,
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    width_in: float = 12.0,
    dpi: int = 150,
) -> None:
    """Draw ``trace`` with :func:`timeline_figure` and save it to ``path``.

    The format follows the file's suffix (``.png``, ``.pdf``, ``.svg``). Raises ``OSError``
    if the file cannot be written, ``ValueError`` for an unsupported suffix.
    """
    fig = timeline_figure(trace, title=title, width_in=width_in, dpi=dpi)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(os.fspath(path), dpi=dpi)


def timeline_figure(
    trace: Trace, *, title: str | None = None, width_in: float = 12.0, dpi: int = 150
) -> Figure:
    """``trace`` as a Gantt chart (a lane per tier pair and kernel stream) with the fast tier's
    occupancy beneath, on a new figure ``width_in`` inches wide; bars closer than a pixel at
    ``dpi`` are merged. The figure is not attached to pyplot (nothing is shown or kept open)."""
    span_s = max(trace.simulated_s, max((r.end_s for r in trace.records), default=0.0))
    scale, unit = (1.0, "s") if span_s >= 1.0 else (1e3, "ms")
    lanes = _lanes(trace.records)
    fig = Figure(figsize=(width_in, 2.2 + 0.45 * len(lanes)), layout="constrained")
    FigureCanvasAgg(fig)
    gantt, occ = fig.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [max(1.2, 0.5 * len(lanes)), 1.5]}
    )
    # About one pixel of the drawing: bars closer than that cannot be told apart anyway.
    min_gap = span_s * scale / (width_in * dpi)
    handles = _draw_lanes(gantt, lanes, scale, min_gap)
    gantt.set_yticks(range(len(lanes)), [name for name, _ in lanes])
    gantt.set_ylim(len(lanes) - 0.5, -0.5)
    gantt.grid(axis="x", alpha=0.3)
    # Legends sit above their axes, never over the bars.
    gantt.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        fontsize="small",
        ncols=len(handles),
        frameon=False,
    )
    _draw_occupancy(occ, trace, scale)
    occ.set_xlabel(f"simulated time ({unit})")
    occ.set_xlim(0, span_s * scale * 1.01 if span_s > 0 else 1)
    ratio = trace.simulated_s / trace.predicted_s if trace.predicted_s > 0 else float("nan")
    fig.suptitle(
        title
        or (
            f"{trace.planner} plan, {trace.graph} on {trace.platform}: simulated "
            f"{trace.simulated_s * scale:.4g} {unit}, predicted {trace.predicted_s * scale:.4g} "
            f"{unit} ({ratio:.3f}x), interference {trace.level}"
        ),
        fontsize="medium",
    )
    return fig


def _lanes(records: Sequence[Record]) -> list[tuple[str, list[Record]]]:
    # recomputes run on the compute engine between kernels
    kernels = [r for r in records if r.kind in (KERNEL, RECOMPUTE)]
    lanes: list[tuple[str, list[Record]]] = [("compute", kernels)]
    sync = [r for r in records if r.kind == SYNC]
    if sync:
        lanes.append(("sync copies", sync))
    directions = sorted({(r.src, r.dst) for r in records if r.kind == ASYNC})
    for src, dst in directions:
        lanes.append(
            (
                f"async {src}\u2192{dst}",
                [r for r in records if r.kind == ASYNC and (r.src, r.dst) == (src, dst)],
            )
        )
    return lanes


def _draw_lanes(
    ax: Axes, lanes: list[tuple[str, list[Record]]], scale: float, min_gap: float
) -> list[Patch]:
    handles: dict[str, Patch] = {}
    n_async = 0
    for row, (name, recs) in enumerate(lanes):
        groups: dict[str, list[Record]] = {}
        for r in recs:
            groups.setdefault(_legend(r), []).append(r)
        for label, members in groups.items():
            color = _color(members[0], n_async)
            bars = merge_intervals(
                [r.start_s * scale for r in members], [r.end_s * scale for r in members], min_gap
            )
            ax.broken_barh(bars, (row - 0.35, 0.7), facecolors=color, linewidth=0)
            handles.setdefault(label, Patch(color=color, label=label))
        if name.startswith("async"):
            n_async += 1
    return list(handles.values())


def _legend(r: Record) -> str:
    if r.kind == RECOMPUTE:
        return "recomputes"
    if r.kind == KERNEL:
        return f"{r.phase or 'kernel'} kernels"
    if r.kind == SYNC:
        return "sync copies"
    return f"async {r.src}\u2192{r.dst}"


def _color(r: Record, n_async: int) -> str:
    if r.kind == RECOMPUTE:
        return RECOMPUTE_COLOR
    if r.kind == KERNEL:
        return PHASE_COLORS.get(r.phase, "#4C72B0")
    if r.kind == SYNC:
        return SYNC_COLOR
    return ASYNC_COLORS[n_async % len(ASYNC_COLORS)]


def _draw_occupancy(ax: Axes, trace: Trace, scale: float) -> None:
    times, occ = trace.occupancy()
    gb = 1e9
    if times.size:
        ax.fill_between(
            times * scale, occ / gb, step="post", alpha=0.35, color="#4C72B0", linewidth=0
        )
        ax.step(
            times * scale,
            occ / gb,
            where="post",
            color="#4C72B0",
            linewidth=0.8,
            label=f"resident in {trace.tier_names[0]}",
        )
    ax.axhline(
        trace.fast_limit_bytes / gb,
        color=SYNC_COLOR,
        linestyle="--",
        linewidth=1.0,
        label=f"limit {trace.fast_limit_bytes / gb:.3g} GB",
    )
    ax.set_ylabel(f"{trace.tier_names[0]} resident (GB)")
    ax.set_ylim(0, max(trace.fast_limit_bytes, int(occ.max()) if occ.size else 0) / gb * 1.15)
    ax.grid(alpha=0.3)
    ax.legend(
        loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize="small", ncols=2, frameon=False
    )


__all__ = ["merge_intervals", "timeline", "timeline_figure"]
