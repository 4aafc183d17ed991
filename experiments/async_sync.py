"""Figure: asynchronous and interference-aware asynchronous plans against synchronous ones,
under the replay's three interference levels.

AutoTM (Hildebrand et al., ASPLOS 2020) extended its ILP with asynchronous movement (copies
beside running kernels) and found, on Optane, that it "actually hurt performance due to
interference at the memory controller", while on a GPU over PCIe "asynchronous movement can
improve performance" (the project page). Its cost model charges an asynchronous copy only where
it outlasts the kernel beside it; it cannot see interference.

Here each workload is planned by the sync MILP, by the async MILP (warm-started from the sync
plan with its copies moved beside neighbouring kernels where the model gains) and by the
``async-aware`` MILP (each copy charged the rate it gets beside its kernel and the delay it
causes the kernel, :mod:`tmsim.sim.beside`), one chain
(:func:`tmsim.plan_chain`), and every plan is replayed at each level
of :data:`CONDITIONS` (:mod:`tmsim.levels`): ``none`` gives exactly the planner's prediction
for sync and async; ``bandwidth`` lets kernels and copies share tier and link bandwidth, with
Optane's read/write interference; ``controller`` is the full model (the memory controller's
fitted channel mechanisms: channel time, device switches, queued requests, queueing delay;
the PMM write overlap; the copy thread's shared core; on a GPU, which has neither, it equals
``bandwidth``). The figure shows each plan's time
over the sync plan's at the same level, per workload, one panel per strategy and platform.

The MILPs are hard for HiGHS: where one does not beat the sync plan within the time limit it
returns the sync plan (status ``fallback to milp-sync``) or stops at that warm start; such
points are labelled ``(= sync plan)`` under the workload, since their ratio of 1 says nothing
about asynchronous movement (``improved`` in the table).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

import tmsim
from experiments.common import (
    CONVENTIONAL,
    GPU_OVERSUBSCRIBED,
    AxesArg,
    Progress,
    capacity_of,
    insert_labels,
    load_frame,
    panels,
    plan_settings,
    planner_params,
    point_labels,
    run_figure_points,
    save_figure,
    write_data,
)
from tmsim import Graph, InterferenceLevel, Plan, Platform, TmsimError

NAME = "async_sync"
TITLE = "Asynchronous against synchronous movement, with and without contention"

#: Small-batch CPU workloads, where a helper thread's copies can hide behind kernels.
CPU_SMALL: tuple[tuple[str, int], ...] = (("vgg19", 8), ("vgg19", 16), ("inception_v4", 16))

#: The columns written before those of :func:`tmsim.comparison.rows_frame`.
LEADING = (
    *("platform", "kind", "capacity", "workload", "model", "batch", "kernels"),
    *("footprint_bytes", "condition", "contention"),
)

#: The replay conditions: the interference levels, the planner's world to the full model.
CONDITIONS = tuple(level.value for level in InterferenceLevel)

#: The plans of every workload; each is compared with the first.
SHOWN = ("sync", "async", "async-aware")


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``cpu_platform``/``cpu_ratios``/``cpu_workloads``: the Optane preset, its PMM:DRAM ratios
    (of each step's peak live bytes; every workload at each) and (zoo model, batch) pairs;
    ``gpu_platform``/``gpu_workloads``: the GPU preset and its workloads, at the device's real
    memory, or at ``gpu_device_fraction`` of each step's peak live bytes when that is given;
    ``time_limit_s``: wall-clock cap of each of the async and async-aware MILP chains (static,
    sync, then the one asked for); ``gap``: relative optimality gap; ``window``: kernels either
    side of a user where an asynchronous copy may run (AutoTM: 15; 3 keeps HiGHS within
    minutes); ``workers``: processes running workloads in parallel when :func:`compute` is not
    told otherwise (not part of any point's key).
    """

    cpu_platform: str = "cascadelake-optane"
    cpu_ratios: tuple[str, ...] = ("1:1", "4:1", "8:1")
    cpu_workloads: tuple[tuple[str, int], ...] = (*CPU_SMALL, *CONVENTIONAL)
    gpu_platform: str = "rtx2080ti-pcie3"
    gpu_device_fraction: float | None = None
    gpu_workloads: tuple[tuple[str, int], ...] = GPU_OVERSUBSCRIBED
    time_limit_s: float | None = 150.0
    gap: float = 0.01
    window: int = 3
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Two small workloads per platform (VGG19 b4 and b8 are the CPU ones whose async MILP beats
#: the sync plan within 5 to 25 s at a 5% gap), the GPU shrunk to 0.6 of each step's peak, a
#: 30 s cap, one process; about 60 s.
QUICK = Config(
    cpu_ratios=("4:1",),
    cpu_workloads=(("vgg19", 4), ("vgg19", 8)),
    gpu_device_fraction=0.6,
    gpu_workloads=(("resnet50", 16), ("vgg19", 16)),
    time_limit_s=30.0,
    gap=0.05,
    workers=1,
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per workload of ``config``: the CPU workloads at each of ``cpu_ratios``,
    then the GPU workloads, each with the settings that shape its rows."""
    solver = planner_params(config)
    cpu: list[dict[str, Any]] = [
        {
            "platform": config.cpu_platform,
            "kind": "Optane PMM",
            "ratio": ratio,
            "device_fraction": None,
            "model": m,
            "batch": b,
            **solver,
        }
        for ratio in config.cpu_ratios
        for m, b in config.cpu_workloads
    ]
    gpu: list[dict[str, Any]] = [
        {
            "platform": config.gpu_platform,
            "kind": "GPU",
            "ratio": None,
            "device_fraction": config.gpu_device_fraction,
            "model": m,
            "batch": b,
            **solver,
        }
        for m, b in config.gpu_workloads
    ]
    return cpu + gpu


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """The plans of :data:`SHOWN` for one point of :func:`points`, each replayed at every
    level of :data:`CONDITIONS`: one row per plan and condition (:data:`LEADING`, the
    :class:`tmsim.comparison.Row` fields, ``async_moved_bytes``, ``fallback``, ``improved``: the
    plan predicts a shorter step than the sync one, and ``over_sync``: the row's simulated
    time over the sync plan's under the same condition). A formulation that fails gives rows
    with its error and no times."""
    preset, ratio, fraction = params["platform"], params["ratio"], params["device_fraction"]
    model, batch = params["model"], params["batch"]
    graph = tmsim.graph(model, batch=batch)
    platform = tmsim.platform(preset)
    fast_bytes = None if fraction is None else int(graph.peak_live_bytes * fraction)
    settings = plan_settings(params, capacity_of(ratio, fast_bytes))
    limit = tmsim.fast_limit(graph, platform, settings.capacity)
    try:
        chain = tmsim.plan_chain(graph, platform, SHOWN[1:], settings=settings)
    except TmsimError as exc:
        chain = dict.fromkeys(SHOWN, exc)
    parts = [_replayed(graph, platform, chain, limit, level) for level in CONDITIONS]
    out = pd.concat(parts, ignore_index=True)
    insert_labels(out, point_labels(params, graph, limit))
    out["fallback"] = out["status"].str.startswith("fallback")
    sync_predicted = out.loc[out["strategy"] == "sync", "predicted_s"].min()
    out["improved"] = (out["strategy"] != "sync") & (
        out["predicted_s"] < sync_predicted * (1 - 1e-9)
    )
    sync = out[out["strategy"] == "sync"].set_index("condition")["simulated_s"]
    out["over_sync"] = out["simulated_s"] / out["condition"].map(sync)
    return out


def _replayed(
    graph: Graph,
    machine: Platform,
    chain: Mapping[str, Plan | TmsimError],
    limit: int,
    condition: str,
) -> pd.DataFrame:
    """The plans of :data:`SHOWN` in ``chain`` replayed on ``machine`` at the level
    ``condition`` (:func:`tmsim.plan_table`): ``condition``, ``contention``, the row columns
    of :func:`tmsim.compare` and ``async_moved_bytes``."""
    missing = TmsimError("the MILP chain did not reach it")
    plans = {name: chain.get(name, missing) for name in SHOWN}
    frame = tmsim.plan_table(plans, graph, machine, interference=condition, fast_limit_bytes=limit)
    frame.attrs.clear()
    frame["async_moved_bytes"] = [_async_bytes(plans[name], graph) for name in SHOWN]
    frame.insert(0, "condition", condition)
    frame.insert(1, "contention", condition != "none")
    return frame


def _async_bytes(plan: Plan | TmsimError, graph: Graph) -> float:
    """Bytes ``plan`` copies beside kernels (nan for an error)."""
    if isinstance(plan, TmsimError):
        return float("nan")
    return float(sum(graph.tensor(m.tensor).size_bytes for m in plan.moves if m.mode == "async"))


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Run every point of ``config`` (:func:`point_rows`, in ``workers`` processes, default
    ``config.workers``, or on the Dask scheduler at ``dask_address``) and write the table
    with the configuration; return the data file's path. Raises
    :class:`tmsim.errors.TmsimError` when points failed (once the others are stored)."""
    frame = run_figure_points(
        NAME,
        points(config),
        point_rows,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
        default_workers=config.workers,
    )
    return write_data(frame, out_dir, NAME, config)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Each plan's step time over the sync plan's per workload at each interference level
    (``none``: the planner's prediction; ``bandwidth``; ``controller``: the full model), one
    row of panels per strategy (async, async-aware) and one column per platform; bars grow
    from 1, so a bar below the line is the plan winning. Workloads whose MILP did not improve
    on the sync plan are labelled so.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    frame = frame.assign(case=_cases(frame))
    shown = [s for s in SHOWN[1:] if s in set(frame["strategy"])]
    platforms = list(dict.fromkeys(frame["platform"]))
    counts = [frame.loc[frame["platform"] == p, "case"].nunique() for p in platforms]
    widths = [max(2.5, 1.0 * n) for n in counts]
    fig, axes = panels(
        on,
        len(shown),
        len(platforms),
        (sum(widths) + 1.5, 3.6 * len(shown) + 0.6),
        gridspec_kw={"width_ratios": widths},
        sharey=True,
    )
    plans = frame[frame["strategy"].isin(shown)]
    ratios = plans["over_sync"].to_numpy(dtype=float)
    finite = ratios[np.isfinite(ratios)]
    low, high = float(finite.min(initial=1.0)), float(finite.max(initial=1.0))
    pad = 0.12 * max(high - low, 0.05)  # room for the value labels beyond the bars
    low, high = min(low - pad, 0.98), max(high + pad, 1.02)
    for row, strategy in enumerate(shown):
        for ax, name in zip(axes[row], platforms, strict=True):
            mine = plans[(plans["platform"] == name) & (plans["strategy"] == strategy)]
            _panel(ax, mine, name, strategy, (low, high))
        axes[row][0].set_ylabel(f"{strategy} step time / sync step time\n(below 1: faster)")
    present = [c for c in CONDITIONS if c in set(plans["condition"])]
    handles = [Patch(facecolor=SHADES[c], label=LABELS[c]) for c in present]
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=len(handles),
        frameon=False,
        bbox_to_anchor=(0.5, 1.02),
        fontsize=8,
    )
    if on is None:
        fig.tight_layout()
    return fig


def _cases(frame: pd.DataFrame) -> pd.Series:
    """The label of each row's workload in its panel: with its capacity where its platform
    has workloads at several."""
    several = frame.groupby("platform")["capacity"].transform("nunique") > 1
    with_capacity = frame["workload"] + " @" + frame["capacity"].astype(str)
    return with_capacity.where(several, frame["workload"])


#: Bar colours and legend of each condition: the planner's world and the simulated machine.
SHADES = {"none": "#a6dba0", "bandwidth": "#1b7837", "controller": "#762a83"}
LABELS = {
    "none": "no interference (= planner's prediction for async)",
    "bandwidth": "shared bandwidth (simulated)",
    "controller": "full model: controller, copy thread (simulated)",
}


def _panel(
    ax: Axes, rows: pd.DataFrame, platform: str, strategy: str, ylim: tuple[float, float]
) -> None:
    cases = list(dict.fromkeys(rows["case"]))
    x = np.arange(len(cases))
    conditions = [c for c in CONDITIONS if c in set(rows["condition"])]
    width = 0.8 / max(len(conditions), 1)
    for j, condition in enumerate(conditions):
        sub = rows[rows["condition"] == condition].set_index("case").reindex(cases)
        ratio = sub["over_sync"].to_numpy(dtype=float)
        xs = x + (j - (len(conditions) - 1) / 2) * width
        style: dict[str, Any] = {"color": SHADES[condition], "edgecolor": "white", "linewidth": 0.5}
        heights = np.nan_to_num(ratio - 1.0)
        bars = ax.bar(xs, heights, width, bottom=1.0, label=LABELS[condition], **style)
        for bar, r in zip(bars, ratio, strict=True):
            _value_label(ax, bar.get_x() + width / 2, float(r))
    first = rows.drop_duplicates("case").set_index("case").reindex(cases)
    ticks = [
        c + ("" if bool(i) else "\n(= sync plan)")
        for c, i in zip(cases, first["improved"], strict=True)
    ]
    ax.set_xticks(x, ticks, rotation=30, ha="right", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    kind = str(first["kind"].iloc[0]) if len(first) else ""
    ax.set_title(f"{strategy}, {kind}: {platform}", fontsize=9)
    ax.set_ylim(*ylim)
    ax.grid(axis="y", linewidth=0.3)


def _value_label(ax: Axes, x: float, ratio: float) -> None:
    """Write ``ratio`` beyond the end of its bar, which grows from 1 (``n/a`` at 1 if it is
    not finite)."""
    y = ratio if np.isfinite(ratio) else 1.0
    up = y >= 1
    ax.annotate(
        f"{ratio:.3f}" if np.isfinite(ratio) else "n/a",
        (x, y),
        ha="center",
        va="bottom" if up else "top",
        fontsize=6,
        rotation=90,
        xytext=(0, 2 if up else -2),
        textcoords="offset points",
    )


__all__ = [
    "CONDITIONS",
    "CPU_SMALL",
    "LEADING",
    "NAME",
    "QUICK",
    "SHOWN",
    "TITLE",
    "Config",
    "compute",
    "draw",
    "plot",
    "point_rows",
    "points",
]
