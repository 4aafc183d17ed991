"""Figure: keep, move or recompute: step time against the fast-memory budget.

AutoTM (Hildebrand et al., ASPLOS 2020) moves tensors between a fast and a slow tier; the
CSE599G1 lecture on memory optimisation trades computation for memory instead (sqrt(N)
checkpointing: Chen, Xu, Zhang and Guestrin, arXiv:1604.06174, 2016, one more forward pass
for O(sqrt N) memory). Here each workload is planned at budgets of fast memory given as a
share of its all-fast peak (the peak live bytes of the step with every tensor in the fast
tier) by

- movement alone: AutoTM's synchronous MILP (``sync``; its asynchronous plans lose to it on
  Optane under the full interference model, and on the GPU its copies need a window);
- recomputation alone, every tensor in the fast tier: segment checkpointing
  (``checkpoint``), selective recomputation of the cheap kernels' outputs (``selective``) and
  the MILP that recomputes optimally within its chains (``remat``);
- both: the MILP that keeps, moves or recomputes (``sync-rc``, which contains ``sync`` and
  ``remat``, so it is never worse than either at the same budget).

Every plan is validated and replayed with the full interference model; the figure shows the
slowdown over the all-fast step (simulated step time over the all-fast plan's), one panel per
platform and workload, and :func:`headline_table` the joint plan's slowdown against the better
of the two alone (movement, or the better recomputation) at each budget. A point whose plan
does not fit (recomputation keeps weights and optimizer state whole) is missing from its line.
"""

from __future__ import annotations

import math
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
    DEFAULT_INTERFERENCE,
    AxesArg,
    Progress,
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
from tmsim import Capacity

NAME = "recompute"
TITLE = "Keep, move or recompute: slowdown over all-fast at each fast-memory budget"

#: Movement alone, recomputation alone (heuristic and optimal), and both, in legend order.
STRATEGIES: tuple[str, ...] = ("sync", "checkpoint", "selective", "remat", "sync-rc")
#: The strategies of each kind, for the headline.
MOVEMENT, RECOMPUTATION, JOINT = ("sync",), ("checkpoint", "selective", "remat"), "sync-rc"
#: The legend's name of each line.
LEGEND = {
    "sync": "move (AutoTM sync)",
    "checkpoint": "recompute: sqrt(N) checkpoints",
    "selective": "recompute: cheap kernels",
    "remat": "recompute: optimal (remat)",
    "sync-rc": "keep, move or recompute (sync-rc)",
}

MARKERS = {"sync": "o", "checkpoint": "^", "selective": "v", "remat": "s", "sync-rc": "D"}

#: The columns written before those of :func:`tmsim.comparison.rows_frame`.
LEADING = ("platform", "workload", "model", "batch", "kernels", "peak_bytes", "budget")


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``points``: (preset, zoo model, batch) triples, each planned at every share of ``budgets`` of
    its all-fast peak (on the GPU, the paper's batches whose largest budget fits the 11 GiB device);
    ``time_limit_s``: wall-clock cap of each MILP strategy's chain (``sync``: static, sync;
    ``remat``; ``sync-rc``: static-rc and sync-rc after those), which every solve ends well before
    at its gap but one: DenseNet-264 b512's ``sync-rc`` at 0.4 of its peak on Optane reaches 1%
    after some 160 s alone (remat 24 s, static-rc's root cuts 40 s, then sync-rc's LP and its own
    root cuts 80 s), so the cap is 300 s, not 60; ``gap``: the MILP's relative gap;
    ``recompute_depth``: the longest chain of producers run again before one kernel;
    ``interference``: the replays' interference level (default the full model; ``none``: none);
    ``workers``: processes running points in parallel when :func:`compute` is not told otherwise.
    """

    points: tuple[tuple[str, str, int], ...] = (
        ("cascadelake-optane", "inception_v4", 1024),
        ("cascadelake-optane", "vgg19", 2048),
        ("cascadelake-optane", "resnet200", 512),
        ("cascadelake-optane", "densenet264", 512),
        ("rtx2080ti-pcie3", "inception_v4", 128),
        ("rtx2080ti-pcie3", "vgg19", 128),
        ("rtx2080ti-pcie3", "resnet200", 32),
        ("rtx2080ti-pcie3", "densenet264", 32),
    )
    budgets: tuple[float, ...] = (0.8, 0.6, 0.4)
    time_limit_s: float | None = 300.0
    gap: float = 0.01
    recompute_depth: int = 2
    interference: str = DEFAULT_INTERFERENCE
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Small models at batch 16 on both presets, two budgets, a 5% gap and a 30 s cap.
QUICK = Config(
    points=(
        ("cascadelake-optane", "resnet50", 16),
        ("cascadelake-optane", "vgg19", 16),
        ("rtx2080ti-pcie3", "resnet50", 16),
    ),
    budgets=(0.7, 0.5),
    time_limit_s=30.0,
    gap=0.05,
    workers=1,
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per (preset, model, batch) of ``config`` and budget, with the settings that
    shape it."""
    return [
        {
            "platform": preset,
            "model": model,
            "batch": batch,
            "budget": budget,
            **planner_params(config),
            "interference": config.interference,
        }
        for preset, model, batch in config.points
        for budget in config.budgets
    ]


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """``all-fast`` and every strategy of :data:`STRATEGIES` for one point of :func:`points`,
    the fast tier at ``budget`` of the step's peak live bytes: the rows of
    :func:`tmsim.compare` after the :data:`LEADING` columns, with ``slowdown`` over the
    all-fast plan. Raises as :func:`tmsim.compare`."""
    preset, model, batch = params["platform"], params["model"], params["batch"]
    graph = tmsim.graph(model, batch=batch)
    platform = tmsim.platform(preset)
    peak = graph.peak_live_bytes
    plan = plan_settings(params, Capacity.of_bytes(int(peak * params["budget"])))
    frame = compare_frame(graph, platform, plan, ("all-fast", *STRATEGIES), params["interference"])
    leading = {
        "platform": preset,
        "workload": label(model, batch),
        "model": model,
        "batch": batch,
        "kernels": len(graph.kernels),
        "peak_bytes": peak,
        "budget": params["budget"],
    }
    return insert_labels(frame, leading)


def describe(params: Mapping[str, Any]) -> str:
    """A point's name in progress messages."""
    return f"{params['platform']} {label(params['model'], params['batch'])} at {params['budget']:g}"


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Run every point of ``config`` (in ``workers`` processes, default ``config.workers``, or
    on the Dask scheduler at ``dask_address``) and write the table (:data:`LEADING` and the
    :class:`tmsim.comparison.Row` fields, one row per point and strategy) with the
    configuration; return the data file's path. A strategy that cannot run gives a row with
    its error and no times; a point that raises fails the compute (raised as
    :class:`tmsim.TmsimError` once the others are stored)."""
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


def headline_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per platform, workload and budget of ``frame`` (:func:`compute`'s table):
    the slowdown of ``move`` (the best of :data:`MOVEMENT`), ``recompute`` (the best of
    :data:`RECOMPUTATION`), ``joint`` (:data:`JOINT`), ``best_alone`` (the better of the
    first two) and ``joint_over_best`` (joint over best alone: below 1 where keeping, moving
    and recomputing together beats both). ``nan`` where no plan of that kind fits."""
    rows = []
    keys = ["platform", "workload", "budget"]
    for key, group in frame.groupby(keys, sort=False):
        slow = group.set_index("strategy")["slowdown"].astype(float)

        def best(names: tuple[str, ...], slow: pd.Series = slow) -> float:
            values = [float(slow[n]) for n in names if n in slow and math.isfinite(slow[n])]
            return min(values, default=math.nan)

        move, recompute = best(MOVEMENT), best(RECOMPUTATION)
        joint = float(slow.get(JOINT, math.nan))
        alone = min((v for v in (move, recompute) if math.isfinite(v)), default=math.nan)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "move": move,
                "recompute": recompute,
                "joint": joint,
                "best_alone": alone,
                "joint_over_best": joint / alone if math.isfinite(alone) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """The figure of ``frame`` (:func:`compute`'s table, with its configuration in
    ``attrs``): one row of panels per platform and one panel per workload in the
    configuration's order (as many columns as the platform with the most; the others' spare
    panels left blank), budget on the x axis (share of the all-fast peak), slowdown over
    all-fast on the y axis, one line per strategy; on a figure of its own, or on the Axes
    ``on`` (one per panel, blank ones included)."""
    config = frame.attrs["config"]
    platforms = list(dict.fromkeys(p for p, _, _ in config["points"]))
    grid = [[label(m, b) for q, m, b in config["points"] if q == p] for p in platforms]
    cols = max(len(row) for row in grid)
    size = (2.7 * cols + 0.8, 2.7 * len(platforms) + 0.6)
    fig, axes = panels(on, len(platforms), cols, size, sharey=False)
    for r, (preset, workloads) in enumerate(zip(platforms, grid, strict=True)):
        for c in range(cols):
            ax = axes[r][c]
            if c >= len(workloads):
                ax.set_axis_off()
                continue
            mine = frame[(frame["platform"] == preset) & (frame["workload"] == workloads[c])]
            _lines(ax, mine)
            ax.set_title(f"{workloads[c]}, {preset}", fontsize=8)
        axes[r][0].set_ylabel("slowdown vs all-fast (x)", fontsize=8)
    handles, labels_ = axes[0][0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels_,
        loc="upper center",
        ncol=3,
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1.0 + 0.12 / len(platforms)),
    )
    if on is None:
        fig.tight_layout()
    return fig


def _lines(ax: Axes, rows: pd.DataFrame) -> None:
    """One workload's lines on ``ax``: each strategy's slowdown at each budget it fits."""
    for strategy in STRATEGIES:
        mine = rows[rows["strategy"] == strategy].sort_values("budget")
        x = mine["budget"].to_numpy(dtype=float)
        y = mine["slowdown"].to_numpy(dtype=float)
        ok = np.isfinite(y)
        hollow = strategy == "remat"  # drawn over by sync-rc where they agree
        ax.plot(
            x[ok],
            y[ok],
            marker=MARKERS[strategy],
            ms=6 if hollow else 3.5,
            mfc="none" if hollow else COLORS[strategy],
            lw=1.2,
            color=COLORS[strategy],
            label=LEGEND[strategy],
            ls="--" if strategy in RECOMPUTATION else "-",
            zorder=3 if hollow else 2,
        )
    ax.axhline(1.0, color=COLORS["all-fast"], lw=0.8, ls=":")
    ax.set_xlabel("fast memory / all-fast peak", fontsize=8)
    ax.invert_xaxis()
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


__all__ = [
    "JOINT",
    "LEADING",
    "LEGEND",
    "MOVEMENT",
    "NAME",
    "QUICK",
    "RECOMPUTATION",
    "STRATEGIES",
    "TITLE",
    "Config",
    "compute",
    "describe",
    "draw",
    "headline_table",
    "plot",
    "point_rows",
    "points",
]
