"""Figure: asynchronous against synchronous plans, with and without contention.

AutoTM (Hildebrand et al., ASPLOS 2020) extended its ILP with asynchronous movement (copies
beside running kernels) and found, on Optane, that it "actually hurt performance due to
interference at the memory controller", while on a GPU over PCIe "asynchronous movement can
improve performance" (the project page). The planner's cost model charges an asynchronous
copy only where it outlasts the kernel beside it; it cannot see interference.

Here each workload is planned by the sync MILP and by the async MILP (warm-started from the
sync plan with its copies moved beside neighbouring kernels where the model gains,
:func:`tmsim.planners.milp.chain.plan_milp_chain`), and both plans are replayed under each of
:data:`CONDITIONS`: ``none`` (``contention=False``) gives exactly the planner's prediction
(every kernel and copy at its own rate); ``bandwidth`` lets kernels and copies share tier and
link bandwidth, with Optane's read/write interference; ``controller`` (Optane only) also puts
DRAM and PMM behind one memory controller, so concurrent traffic on the two adds its device
time (:attr:`hwmodels.platform.Platform.shared_controllers`, off in the presets because
strict addition overstates the measured copy rates by 8 to 15%: an upper bound on that
interference). The figure shows async time over sync time per workload and condition, one
panel per platform.

The async MILP is hard for HiGHS: where it does not beat the sync plan within the time limit
it returns the sync plan (status ``fallback to milp-sync``) or stops at that warm start; such
points are labelled ``(async = sync plan)`` under the workload, since their ratio of 1 says
nothing about asynchronous movement (``improved`` in the table).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from experiments.common import (
    CONVENTIONAL,
    GPU_OVERSUBSCRIBED,
    Progress,
    async_not_better,
    capacity_of,
    insert_labels,
    point_labels,
    read_data,
    run_figure_points,
    save_figure,
    write_data,
)
from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode
from tmsim.capacity import fast_limit_bytes
from tmsim.compare import Row, plan_row, rows_frame
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.plan.values import Plan
from tmsim.planners.milp.chain import plan_milp_chain
from tmsim.planners.milp.gadgets import Formulation
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

NAME = "async_sync"
TITLE = "Asynchronous against synchronous movement, with and without contention"

#: Small-batch CPU workloads, where a helper thread's copies can hide behind kernels.
CPU_SMALL: tuple[tuple[str, int], ...] = (("vgg19", 8), ("vgg19", 16), ("inception_v4", 16))

#: The columns written before those of :func:`tmsim.compare.rows_frame`.
LEADING = (
    *("platform", "kind", "capacity", "workload", "model", "batch", "kernels"),
    *("footprint_bytes", "condition", "contention"),
)

#: The replay conditions: the planner's world, shared bandwidth, and (Optane only) shared
#: bandwidth with DRAM and PMM behind one memory controller.
CONDITIONS = ("none", "bandwidth", "controller")


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``cpu_platform``/``cpu_ratio``/``cpu_workloads``: the Optane preset, its PMM:DRAM ratio
    (of each step's peak live bytes) and (zoo model, batch) pairs; ``gpu_platform``/
    ``gpu_workloads``: the GPU preset and its workloads, at the device's real memory, or at
    ``gpu_device_fraction`` of each step's peak live bytes when that is given;
    ``time_limit_s``: wall-clock cap of one workload's MILP chain (static, sync, async);
    ``gap``: relative optimality gap; ``window``: kernels either side of a user where an
    asynchronous copy may run (AutoTM: 15; 3 keeps HiGHS within minutes);
    ``workers``: processes running workloads in parallel when :func:`compute` is not told
    otherwise (not part of any point's key); ``cpu_shared_controllers``: tier
    groups of the Optane preset put behind one memory controller for the third replay
    (:attr:`hwmodels.platform.Platform.shared_controllers`; empty: no third replay).
    """

    cpu_platform: str = "cascadelake-optane"
    cpu_ratio: str = "4:1"
    cpu_workloads: tuple[tuple[str, int], ...] = (*CPU_SMALL, *CONVENTIONAL)
    gpu_platform: str = "rtx2080ti-pcie3"
    gpu_device_fraction: float | None = None
    gpu_workloads: tuple[tuple[str, int], ...] = GPU_OVERSUBSCRIBED
    time_limit_s: float = 150.0
    gap: float = 0.01
    window: int = 3
    workers: int = 2
    cpu_shared_controllers: tuple[tuple[str, ...], ...] = (("DRAM", "PMM"),)


#: Two small workloads per platform (VGG19 b4 and b8 are the CPU ones whose async MILP beats
#: the sync plan within 5 to 25 s at a 5% gap), the GPU shrunk to 0.6 of each step's peak, a
#: 30 s cap, one process; about 60 s.
QUICK = Config(
    cpu_workloads=(("vgg19", 4), ("vgg19", 8)),
    gpu_device_fraction=0.6,
    gpu_workloads=(("resnet50", 16), ("vgg19", 16)),
    time_limit_s=30.0,
    gap=0.05,
    workers=1,
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per workload of ``config``: the CPU workloads at ``cpu_ratio``, then the GPU
    workloads, each with the settings that shape its rows (the shared controllers on the
    CPU only)."""
    solver = {"time_limit_s": config.time_limit_s, "gap": config.gap, "window": config.window}
    groups = [list(g) for g in config.cpu_shared_controllers]
    cpu: list[dict[str, Any]] = [
        {
            "platform": config.cpu_platform,
            "kind": "Optane PMM",
            "ratio": config.cpu_ratio,
            "device_fraction": None,
            "model": m,
            "batch": b,
            "shared_controllers": groups,
            **solver,
        }
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
            "shared_controllers": [],
            **solver,
        }
        for m, b in config.gpu_workloads
    ]
    return cpu + gpu


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """The sync and async plans of one point of :func:`points`, each replayed under every
    condition of :data:`CONDITIONS` that applies (``controller`` only where the point names
    ``shared_controllers``): one row per plan and condition (:data:`LEADING`, the
    :class:`tmsim.compare.Row` fields, ``async_moved_bytes``, ``fallback``, ``improved``: the
    async plan predicts a shorter step than the sync one, and ``over_sync``: the row's
    simulated time over the sync plan's under the same condition). A formulation that fails
    gives rows with its error and no times."""
    preset, ratio, fraction = params["platform"], params["ratio"], params["device_fraction"]
    model, batch = params["model"], params["batch"]
    graph = training_graph_of(model, batch)
    platform = load_preset(preset)
    fast_bytes = None if fraction is None else int(graph.peak_live_bytes * fraction)
    settings = PlanSettings(
        capacity=capacity_of(ratio, fast_bytes),
        time_limit_s=params["time_limit_s"],
        gap=params["gap"],
        window=params["window"],
    )
    limit = fast_limit_bytes(graph, platform, settings.capacity)
    try:
        chain = plan_milp_chain(graph, platform, settings, Formulation.ASYNC)
    except TmsimError as exc:
        chain = {f: exc for f in Formulation}
    conditions = [("none", False, platform), ("bandwidth", True, platform)]
    if params["shared_controllers"]:
        groups = tuple(tuple(g) for g in params["shared_controllers"])
        conditions.append(("controller", True, replace(platform, shared_controllers=groups)))
    parts = [_replayed(graph, chain, limit, *condition) for condition in conditions]
    out = pd.concat(parts, ignore_index=True)
    insert_labels(out, point_labels(params, graph, limit))
    out["fallback"] = out["status"].str.startswith("fallback")
    has_async = bool((out["strategy"] == "async").any())
    out["improved"] = has_async and not bool(async_not_better(out).any())
    sync = out[out["strategy"] == "sync"].set_index("condition")["simulated_s"]
    out["over_sync"] = out["simulated_s"] / out["condition"].map(sync)
    return out


def _replayed(
    graph: Graph,
    chain: Mapping[Formulation, Plan | TmsimError],
    limit: int,
    condition: str,
    contention: bool,
    machine: Platform,
) -> pd.DataFrame:
    """The sync and async plans of ``chain`` replayed on ``machine`` under one condition:
    ``condition``, ``contention``, the :class:`tmsim.compare.Row` fields and
    ``async_moved_bytes``."""
    cost = CostModel(graph, machine)
    rows: list[Row] = []
    async_bytes: list[float] = []
    for formulation in (Formulation.SYNC, Formulation.ASYNC):
        name = formulation.value
        got = chain.get(formulation, TmsimError("the MILP chain did not reach it"))
        if isinstance(got, TmsimError):
            rows.append(Row(name, "", "error", error=str(got), fast_limit_bytes=limit))
            async_bytes.append(float("nan"))
            continue
        rows.append(plan_row(name, got, graph, machine, contention, cost))
        copies = [m for m in got.moves if m.mode is MoveMode.ASYNC]
        async_bytes.append(float(sum(graph.tensor(m.tensor).size_bytes for m in copies)))
    frame = rows_frame(rows)
    frame["async_moved_bytes"] = async_bytes
    frame.insert(0, "condition", condition)
    frame.insert(1, "contention", contention)
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
    """Async step time over sync step time per workload under each replay condition (without
    contention: the planner's prediction; with shared bandwidth; with a shared memory
    controller too), one panel per platform; bars grow from 1, so a bar below the line is async
    winning. Workloads whose async MILP did not improve on the sync plan are labelled so."""
    frame, _meta = read_data(data)
    asyn = frame[frame["strategy"] == "async"]
    platforms = list(dict.fromkeys(asyn["platform"]))
    counts = [asyn.loc[asyn["platform"] == p, "workload"].nunique() for p in platforms]
    widths = [max(2.5, 1.0 * n) for n in counts]
    fig, axes = plt.subplots(
        1,
        len(platforms),
        figsize=(sum(widths) + 1.5, 4.2),
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
        sharey=True,
    )
    ratios = asyn["over_sync"].to_numpy(dtype=float)
    finite = ratios[np.isfinite(ratios)]
    low, high = float(finite.min(initial=1.0)), float(finite.max(initial=1.0))
    pad = 0.12 * max(high - low, 0.05)  # room for the value labels beyond the bars
    low, high = min(low - pad, 0.98), max(high + pad, 1.02)
    for ax, name in zip(axes[0], platforms, strict=True):
        _panel(ax, asyn[asyn["platform"] == name], name, (low, high))
    axes[0][0].set_ylabel("async step time / sync step time\n(below 1: async faster)")
    present = [c for c in CONDITIONS if c in set(asyn["condition"])]
    handles = [Patch(facecolor=SHADES[c], label=LABELS[c]) for c in present]
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=len(handles),
        frameon=False,
        bbox_to_anchor=(0.5, 1.05),
        fontsize=8,
    )
    fig.tight_layout()
    return save_figure(fig, out_dir, NAME)


#: Bar colours and legend of each condition: the planner's world and the simulated machine.
SHADES = {"none": "#a6dba0", "bandwidth": "#1b7837", "controller": "#762a83"}
LABELS = {
    "none": "no contention (= planner's prediction)",
    "bandwidth": "shared bandwidth (simulated)",
    "controller": "and DRAM+PMM behind one controller (simulated)",
}


def _panel(ax: Axes, rows: pd.DataFrame, platform: str, ylim: tuple[float, float]) -> None:
    workloads = list(dict.fromkeys(rows["workload"]))
    x = np.arange(len(workloads))
    conditions = [c for c in CONDITIONS if c in set(rows["condition"])]
    width = 0.8 / len(conditions)
    for j, condition in enumerate(conditions):
        sub = rows[rows["condition"] == condition].set_index("workload").reindex(workloads)
        ratio = sub["over_sync"].to_numpy(dtype=float)
        xs = x + (j - (len(conditions) - 1) / 2) * width
        style: dict[str, Any] = {"color": SHADES[condition], "edgecolor": "white", "linewidth": 0.5}
        heights = np.nan_to_num(ratio - 1.0)
        bars = ax.bar(xs, heights, width, bottom=1.0, label=LABELS[condition], **style)
        for bar, r in zip(bars, ratio, strict=True):
            _value_label(ax, bar.get_x() + width / 2, float(r))
    first = rows.drop_duplicates("workload").set_index("workload").reindex(workloads)
    ticks = [
        w + ("" if bool(i) else "\n(async = sync plan)")
        for w, i in zip(workloads, first["improved"], strict=True)
    ]
    ax.set_xticks(x, ticks, rotation=30, ha="right", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    kind = str(first["kind"].iloc[0])
    ax.set_title(f"{kind}: {platform}\ncapacity {first['capacity'].iloc[0]}", fontsize=9)
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
    "TITLE",
    "Config",
    "compute",
    "plot",
    "point_rows",
    "points",
]
