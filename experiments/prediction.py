"""Figure: the planner's predicted step time against the simulated one, with contention.

AutoTM (Hildebrand et al., ASPLOS 2020) checked its ILP's predicted runtimes against measured
ones. Here the measurement is the simulator under the full interference model (the default
level): kernels and copies share tier and link bandwidth, Optane's mixed reads and writes
interfere, the memory controller arbitrates its channels and the copy thread slows with load
and shares a core, none of which the cost model of the AutoTM formulations sees. (Without
contention the replay equals their prediction exactly, a test of :mod:`tmsim.sim.replay`.)
Many plans are made: heuristics and the static, sync, async and async-aware MILPs on the
Optane CPU at several PMM:DRAM ratios, and sync, async and async-aware on a GPU, each
validated and replayed through :func:`tmsim.comparison.compare`. The error of a plan is
``(simulated - predicted) / predicted``.

In this model overlap makes nearly all of the error: a plan whose copies all run between
kernels (heuristics, static, sync) is simulated as predicted to within a millionth (a kernel
alone is held by the controller's channel only where its DRAM and PMM traffic together fill
it), since then no two flows share a tier at once. Asynchronous plans err upwards on Optane
(the helper thread's copies slow the kernels beside them) and slightly downwards on a GPU
(the cost model charges a kernel's async copies one after another; the copy engines run them
side by side). The async-aware plans are predicted with the interference costs they were
planned with (:mod:`tmsim.sim.beside`).
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

import tmsim
from experiments.common import (
    COLORS,
    CONVENTIONAL,
    GPU_OVERSUBSCRIBED,
    AxesArg,
    Progress,
    async_not_better,
    capacity_of,
    compare_frame,
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

NAME = "prediction"
TITLE = "Planner prediction against simulation with contention"

#: The columns written before those of :func:`tmsim.comparison.rows_frame`.
LEADING = (
    *("platform", "kind", "capacity", "workload"),
    *("model", "batch", "kernels", "footprint_bytes"),
)

#: Marker of each platform kind in the scatter.
MARKERS = {"Optane PMM": "o", "GPU": "s"}


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``cpu_platform``, ``cpu_workloads`` ((zoo model, batch) pairs), ``cpu_ratios`` (PMM:DRAM
    of each step's peak live bytes) and ``cpu_strategies``: the Optane plans, one per
    workload, ratio and strategy; ``gpu_platform``, ``gpu_workloads``, ``gpu_strategies``:
    the GPU plans, at the device's real memory or, when ``gpu_device_fraction`` is given, at
    that share of each step's peak live bytes; ``time_limit_s``: wall-clock cap of one
    point's MILP chain (static, sync, async; the figure compares each plan's prediction with
    its simulation, whichever plan the cap leaves); ``gap``: relative optimality gap; ``window``:
    kernels either side of a user where an asynchronous copy may run; ``workers``: processes
    running points in parallel when :func:`compute` is not told otherwise (not part of any
    point's key).
    """

    cpu_platform: str = "cascadelake-optane"
    cpu_workloads: tuple[tuple[str, int], ...] = (
        *(("vgg19", 8), ("vgg19", 16), ("inception_v4", 16)),
        *CONVENTIONAL,
    )
    cpu_ratios: tuple[str, ...] = ("8:1", "4:1", "1:1")
    cpu_strategies: tuple[str, ...] = (
        *("all-slow", "first-touch", "static", "sync", "async", "async-aware"),
    )
    gpu_platform: str = "rtx2080ti-pcie3"
    gpu_device_fraction: float | None = None
    gpu_workloads: tuple[tuple[str, int], ...] = GPU_OVERSUBSCRIBED
    gpu_strategies: tuple[str, ...] = ("sync", "async", "async-aware")
    time_limit_s: float | None = 60.0
    gap: float = 0.01
    window: int = 3
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: VGG19 b8 and ResNet-50 b4 at 4:1 and 1:1 on Optane, VGG19 b16 on the GPU shrunk to 0.6
#: of its peak; a 5% gap, a 15 s cap, one process; about 60 s.
QUICK = Config(
    cpu_workloads=(("vgg19", 8), ("resnet50", 4)),
    cpu_ratios=("4:1", "1:1"),
    gpu_device_fraction=0.6,
    gpu_workloads=(("vgg19", 16),),
    time_limit_s=15.0,
    gap=0.05,
    workers=1,
)


def points(config: Config) -> list[dict[str, Any]]:
    """Every point of ``config``: the CPU workloads at each ratio, then the GPU workloads,
    each with its strategies and the solver settings."""
    solver = planner_params(config)
    cpu = [
        {
            "platform": config.cpu_platform,
            "kind": "Optane PMM",
            "ratio": r,
            "device_fraction": None,
            "model": m,
            "batch": b,
            "strategies": list(config.cpu_strategies),
            **solver,
        }
        for m, b in config.cpu_workloads
        for r in config.cpu_ratios
    ]
    gpu = [
        {
            "platform": config.gpu_platform,
            "kind": "GPU",
            "ratio": None,
            "device_fraction": config.gpu_device_fraction,
            "model": m,
            "batch": b,
            "strategies": list(config.gpu_strategies),
            **solver,
        }
        for m, b in config.gpu_workloads
    ]
    return cpu + gpu


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """The plans of one point of :func:`points`, replayed with contention: the :data:`LEADING`
    columns, the :class:`tmsim.comparison.Row` fields, ``rel_error`` (``(simulated_s -
    predicted_s) / predicted_s``), ``fallback`` and ``same_as_sync`` (an async row whose plan
    predicts no better than the sync plan: a fallback, or the solver stopped at its sync
    start; such a row repeats the sync point and the figure leaves it out)."""
    preset, ratio, fraction = params["platform"], params["ratio"], params["device_fraction"]
    model, batch = params["model"], params["batch"]
    graph = tmsim.graph(model, batch=batch)
    platform = tmsim.platform(preset)
    fast_bytes = None if fraction is None else int(graph.peak_live_bytes * fraction)
    plan = plan_settings(params, capacity_of(ratio, fast_bytes))
    strategies = tuple(params["strategies"])
    frame = compare_frame(graph, platform, plan, strategies)
    limit = tmsim.fast_limit(graph, platform, plan.capacity)
    insert_labels(frame, point_labels(params, graph, limit))
    frame["rel_error"] = (frame["simulated_s"] - frame["predicted_s"]) / frame["predicted_s"]
    frame["fallback"] = frame["status"].str.startswith("fallback")
    frame["same_as_sync"] = async_not_better(frame)
    return frame


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
    """Left: simulated against predicted step time of every plan (log-log, the y = x line:
    perfect prediction). Right: the relative error per strategy and platform, each plan a dot.
    Async rows that repeat the sync plan and rows without times are left out.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    timed = frame[np.isfinite(frame["predicted_s"]) & np.isfinite(frame["simulated_s"])]
    ok = timed[~timed["same_as_sync"].astype(bool)]
    widths = {"width_ratios": [1, 1.3]}
    fig, grid = panels(on, 1, 2, (10.5, 4.4), gridspec_kw=widths)
    left, right = grid[0]
    _scatter(left, ok)
    left_out = len(timed) - len(ok)
    note = f" ({left_out} async plans that repeat the sync plan left out)" if left_out else ""
    left.set_title(f"{len(ok)} plans{note}", fontsize=9)
    _errors(right, ok)
    if on is None:
        fig.tight_layout()
    return fig


def _scatter(ax: Axes, ok: pd.DataFrame) -> None:
    for (kind, strategy), sub in ok.groupby(["kind", "strategy"], sort=False):
        ax.scatter(
            sub["predicted_s"],
            sub["simulated_s"],
            s=18,
            alpha=0.8,
            marker=MARKERS.get(str(kind), "^"),
            color=COLORS.get(str(strategy), "k"),
            label=f"{strategy} ({kind})",
            edgecolor="white",
            linewidth=0.3,
        )
    values = np.concatenate([ok["predicted_s"].to_numpy(float), ok["simulated_s"].to_numpy(float)])
    lo, hi = (float(values.min()) / 1.3, float(values.max()) * 1.3) if len(values) else (0.1, 1)
    ax.plot([lo, hi], [lo, hi], color="0.4", linewidth=0.8, linestyle="--", label="y = x")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
    ax.set_xlabel("predicted step time (s)")
    ax.set_ylabel("simulated step time, with contention (s)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(linewidth=0.3, which="both")


def _errors(ax: Axes, ok: pd.DataFrame) -> None:
    groups = list(ok.groupby(["kind", "strategy"], sort=False))
    for i, ((kind, strategy), sub) in enumerate(groups):
        err = 100 * sub["rel_error"].to_numpy(dtype=float)
        jitter = np.linspace(-0.18, 0.18, len(err)) if len(err) > 1 else np.zeros(1)
        marker, color = MARKERS.get(str(kind), "^"), COLORS.get(str(strategy), "k")
        ax.scatter(i + jitter, err, s=14, alpha=0.8, marker=marker, color=color)
        ax.hlines([err.min(), err.max()], i - 0.3, i + 0.3, color="0.5", linewidth=0.6)
        # rounding noise (1e-13 %) reads as zero, and zero without a sign
        lo, hi = (float(f"{np.round(v, 6):.2g}") + 0.0 for v in (err.min(), err.max()))
        text = f"{lo:+.2g}%" if lo == hi else f"{lo:+.2g}..{hi:+.2g}%"
        ax.annotate(
            text,
            (i, err.max()),
            ha="center",
            va="bottom",
            fontsize=6,
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax.axhline(0.0, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(groups)), [f"{s}\n{k}" for (k, s), _ in groups], fontsize=7)
    ax.set_ylabel("(simulated - predicted) / predicted (%)")
    ax.set_title("prediction error per strategy and platform", fontsize=9)
    ax.margins(y=0.15)
    ax.grid(axis="y", linewidth=0.3)


__all__ = [
    "LEADING",
    "MARKERS",
    "NAME",
    "QUICK",
    "TITLE",
    "Config",
    "compute",
    "draw",
    "plot",
    "point_rows",
    "points",
]
