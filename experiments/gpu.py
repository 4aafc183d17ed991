"""Figure: AutoTM's plans on a GPU against CUDA unified memory.

AutoTM (Hildebrand et al., ASPLOS 2020) moved tensors between an RTX 2080 Ti's 11 GB of
device memory and host DRAM over PCIe 3.0 and compared its synchronous and asynchronous
plans, and an oracle with enough device memory for the whole step, against
``cudaMallocManaged`` (unified memory: pages fault in on demand and are evicted least
recently used). The project page: asynchronous movement "can improve performance" on the GPU,
where copy engines move data over PCIe beside the kernels.

Here each workload's training step is planned (``sync`` and ``async`` MILPs, the ``all-fast``
oracle), validated and replayed with contention, and unified memory is simulated as a
steady-state step (:func:`tmsim.sim.unified.replay.replay_unified`, ``warm=True``), all through
:func:`tmsim.comparison.compare`; the figure shows each strategy's speedup over unified memory
(unified-memory time over the strategy's time), one panel per platform.

Two platforms: the paper's ``rtx2080ti-pcie3`` at its real 11 GiB, with the paper's batches;
and ``a100-pcie4`` (40 GiB HBM2e, PCIe 4.0), where the paper's batches fit whole, so its
default batches are four times larger: each then oversubscribes the A100 about as much as the
paper's batch does the 2080 Ti (peak live bytes 0.44 to 3.3 times the device). Our
footprints are smaller than the paper's (no framework workspace), so the smallest batch of
each model, and VGG19 at both batches, fit the device; the figure marks every workload with
its footprint over the device size and labels those that fit (there every strategy but
unified memory is the all-fast plan).
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
    COLORS,
    DEFAULT_INTERFERENCE,
    GPU_WORKLOADS,
    AxesArg,
    Progress,
    async_not_better,
    capacity_of,
    compare_frame,
    insert_labels,
    label,
    load_frame,
    panels,
    plan_settings,
    planner_params,
    run_figure_points,
    save_figure,
    write_data,
)

NAME = "gpu"
TITLE = "GPU: speedup of AutoTM's plans over unified memory"

#: The strategies compared, in bar order; unified memory is the baseline.
STRATEGIES: tuple[str, ...] = ("sync", "async", "all-fast", "unified-memory")
BARS: tuple[str, ...] = ("sync", "async", "all-fast")
#: The legend's name of each bar.
LEGEND = {"sync": "sync", "async": "async", "all-fast": "all-fast (oracle: the step fits)"}

#: The paper's GPU workloads with batches four times larger, for a 40 GiB A100.
A100_WORKLOADS: tuple[tuple[str, int], ...] = tuple((m, 4 * b) for m, b in GPU_WORKLOADS)

#: The columns written before those of :func:`tmsim.comparison.rows_frame`.
LEADING = (
    *("platform", "workload", "model", "batch", "kernels", "footprint_bytes"),
    *("device_bytes", "oversubscription"),
)


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``points``: (preset, zoo model, batch) triples; ``device_fraction``: None plans for each
    preset's real device memory, a number shrinks the device to that share of each step's peak live
    bytes (:attr:`~tmsim.workload.graph.Graph.peak_live_bytes`) so small graphs oversubscribe it;
    ``time_limit_s``: wall-clock cap of one workload's MILP chain (static, sync, async; the async
    plan of ResNet-200 b64 was the same at 60 s and 150 s, 27% shorter than sync, with HiGHS still
    closing the last 2% of gap); ``gap``: the MILP's relative optimality gap; ``window``: kernels
    either side of a user where an asynchronous copy may run (AutoTM used 15; at 15 HiGHS did not
    improve on the sync plan of ResNet-200 b64 within 120 s, at 3 it reached a 2% gap);
    ``interference``: the replays' interference level (``none``: no contention); ``workers``:
    processes running workloads in parallel when :func:`compute` is not told otherwise (not part of
    any point's key).
    """

    points: tuple[tuple[str, str, int], ...] = (
        *(("rtx2080ti-pcie3", m, b) for m, b in GPU_WORKLOADS),
        *(("a100-pcie4", m, b) for m, b in A100_WORKLOADS),
    )
    device_fraction: float | None = None
    time_limit_s: float | None = 150.0
    gap: float = 0.01
    window: int = 3
    interference: str = DEFAULT_INTERFERENCE
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Small models on both GPUs with the device shrunk to 0.6 of each step's peak (there the async
#: MILP beats the sync plan in 5 to 20 s; at 0.5 VGG19 b16 took up to 40 s), a 5% gap, a 30 s
#: cap and one process (the limits are wall-clock: two processes on a loaded two-core machine
#: left every async MILP at its sync start); about 60 s.
QUICK = Config(
    points=(
        ("rtx2080ti-pcie3", "resnet50", 16),
        ("rtx2080ti-pcie3", "vgg19", 16),
        ("a100-pcie4", "resnet50", 16),
        ("a100-pcie4", "vgg19", 16),
    ),
    device_fraction=0.6,
    time_limit_s=30.0,
    gap=0.05,
    workers=1,
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per (preset, model, batch) of ``config``, with the settings that shape it."""
    return [
        {
            "platform": preset,
            "model": model,
            "batch": batch,
            "device_fraction": config.device_fraction,
            **planner_params(config),
            "interference": config.interference,
        }
        for preset, model, batch in config.points
    ]


def workload_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """Every strategy of :data:`STRATEGIES` for one point of :func:`points`: the rows of
    :func:`tmsim.comparison.compare` after the :data:`LEADING` columns, plus ``speedup`` (the
    unified-memory time over the row's simulated time), ``fallback`` (the MILP returned the
    plan of the formulation it contains) and ``unimproved`` (an async plan predicting no
    better than the sync plan on an oversubscribed device). Raises as
    :func:`~tmsim.comparison.compare`."""
    preset, model, batch = params["platform"], params["model"], params["batch"]
    fraction = params["device_fraction"]
    graph = tmsim.graph(model, batch=batch)
    platform = tmsim.platform(preset)
    fast_bytes = None if fraction is None else int(graph.peak_live_bytes * fraction)
    capacity = capacity_of(None, fast_bytes)
    device = tmsim.fast_limit(graph, platform, capacity)
    plan = plan_settings(params, capacity)
    frame = compare_frame(graph, platform, plan, STRATEGIES, params["interference"])
    leading = {
        "platform": preset,
        "workload": label(model, batch),
        "model": model,
        "batch": batch,
        "kernels": len(graph.kernels),
        "footprint_bytes": graph.peak_live_bytes,
        "device_bytes": device,
        "oversubscription": graph.peak_live_bytes / device,
    }
    insert_labels(frame, leading)
    um = frame.loc[frame["strategy"] == "unified-memory", "simulated_s"]
    um_s = float(um.iloc[0]) if len(um) else float("nan")
    frame["speedup"] = um_s / frame["simulated_s"]
    frame["fallback"] = frame["status"].str.startswith("fallback")
    frame["unimproved"] = async_not_better(frame) & (graph.peak_live_bytes > device)
    return frame


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Run every point of ``config`` (in ``workers`` processes, default ``config.workers``, or
    on the Dask scheduler at ``dask_address``) and write the table (:data:`LEADING`, the
    :class:`tmsim.comparison.Row` fields, ``speedup``, ``fallback`` and ``unimproved``: an async
    plan predicting no better than sync on an oversubscribed device) with the configuration;
    return the data file's path. A strategy that cannot run gives a row with its error and no
    times (see :func:`tmsim.comparison.compare`); a point that raises fails the compute (raised
    as :class:`tmsim.errors.TmsimError` once the others are stored)."""
    frame = run_figure_points(
        NAME,
        points(config),
        workload_rows,
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
    """Speedup over unified memory of each workload's sync, async and all-fast steps, one
    panel per platform; hatched async bars are the sync plan (the async MILP did not improve
    on it within its limits); workloads that fit the device are labelled ``fits``.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    platforms = list(dict.fromkeys(frame["platform"]))
    counts = [frame.loc[frame["platform"] == p, "workload"].nunique() for p in platforms]
    widths = [max(3.0, 0.75 * n) for n in counts]
    fig, axes = panels(
        on, 1, len(platforms), (sum(widths) + 1.2, 4.2), gridspec_kw={"width_ratios": widths}
    )
    top = float(np.nanmax(frame["speedup"].to_numpy(dtype=float), initial=1.0))
    for ax, name in zip(axes[0], platforms, strict=True):
        _panel(ax, frame[frame["platform"] == name], name, top)
    axes[0][0].set_ylabel("speedup over unified memory (x)")
    handles, labels_ = axes[0][0].get_legend_handles_labels()
    if frame["unimproved"].astype(bool).any():
        handles.append(Patch(facecolor=COLORS["async"], hatch="//", edgecolor="white"))
        labels_.append("async = sync plan (MILP did not improve it)")
    fig.legend(
        handles,
        labels_,
        loc="upper center",
        ncol=len(labels_),
        frameon=False,
        bbox_to_anchor=(0.5, 1.04),
    )
    if on is None:
        fig.tight_layout()
    return fig


def _panel(ax: Axes, rows: pd.DataFrame, platform: str, top: float) -> None:
    workloads = list(dict.fromkeys(rows["workload"]))
    x = np.arange(len(workloads))
    width = 0.8 / len(BARS)
    for j, strategy in enumerate(BARS):
        sub = rows[rows["strategy"] == strategy].set_index("workload").reindex(workloads)
        heights = sub["speedup"].to_numpy(dtype=float)
        hatch = ["//" if f else "" for f in sub["unimproved"].astype("boolean").fillna(False)]
        style: dict[str, Any] = {"color": COLORS[strategy], "edgecolor": "white", "linewidth": 0.5}
        xs = x + (j - 1) * width
        bars = ax.bar(xs, np.nan_to_num(heights), width, label=LEGEND[strategy], **style)
        for bar, h, mark in zip(bars, heights, hatch, strict=True):
            bar.set_hatch(mark)
            if not np.isfinite(h):
                at = (bar.get_x() + width / 2, 0.02 * top)
                ax.text(*at, "n/a", rotation=90, ha="center", va="bottom", fontsize=7)
    um_style: dict[str, Any] = {
        "color": COLORS["unified-memory"],
        "linewidth": 1,
        "linestyle": "--",
    }
    ax.axhline(1.0, label="unified memory", **um_style)
    first = rows.drop_duplicates("workload").set_index("workload").reindex(workloads)
    ticks = [
        f"{w}\nfootprint {o:.2g}x device" + ("\n(fits)" if o <= 1 else "")
        for w, o in zip(workloads, first["oversubscription"], strict=True)
    ]
    ax.set_xticks(x, ticks, rotation=45, ha="right", fontsize=7)
    share = (first["device_bytes"] / first["footprint_bytes"]).round(3)
    if share.nunique() == 1 and first["device_bytes"].nunique() > 1:
        device = f"device shrunk to {share.iloc[0]:g} of each footprint"
    else:
        device = f"{float(first['device_bytes'].max()) / 2**30:.3g} GiB device"
    ax.set_title(f"{platform}\n{device}", fontsize=9)
    ax.set_ylim(0, top * 1.12)
    ax.grid(axis="y", linewidth=0.3)


__all__ = [
    "A100_WORKLOADS",
    "BARS",
    "LEADING",
    "LEGEND",
    "NAME",
    "QUICK",
    "STRATEGIES",
    "TITLE",
    "Config",
    "compute",
    "draw",
    "plot",
    "points",
    "workload_rows",
]
