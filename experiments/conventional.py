"""Figure: slowdown against all-DRAM of the conventional workloads at PMM:DRAM ratios.

AutoTM (Hildebrand et al., ASPLOS 2020) trains four conventional workloads (footprints 111 to
143 GB) on a Cascade Lake socket with Optane PMM and DRAM as two tiers, with DRAM limited to
a share of the footprint: all PMM, 8:1, 4:1, 1:1 (PMM:DRAM), all DRAM. Its synchronous plans
stay close to all-DRAM at 1:1 and do far better than first-touch (the NUMA default) and all-PMM
at every ratio (the talk: "Replace 50-80% DRAM with NVDIMMs with geometric mean 27.1%
performance loss"; the paper's abstract says 27.7%), where "first-touch NUMA ... loses 71.9% of
performance" (the abstract, and the README of github.com/darchr/AutoTM): a slowdown of 1.719,
which we take as the geometric mean over the 1:1 and 4:1 points (50 to 80% of DRAM replaced).

Two first-touch baselines are drawn (:data:`FIRST_TOUCH`): ``first-touch``, whole tensors given
DRAM in the order they are created while they fit (the way AutoTM's own NUMA baseline placed
them), and ``first-touch-pages``, the operating system's policy on the memory plan's pool:
each 4 KiB page gets DRAM when first touched while DRAM has a free page, and a DRAM page
serves every tensor later laid out over it. :func:`first_touch_table` sets their geometric
means beside the paper's number (:data:`PAPER_FIRST_TOUCH`); nothing is fitted to it.

Here every workload's training step is planned by each strategy at each ratio, validated and
replayed by the simulator; the slowdown is the simulated step time over that of all-DRAM
(``all-fast``, the fast tier as large as the step needs). A point is one workload at one
ratio (every strategy of it, so the MILP chain is solved once), or the workload's all-DRAM and
all-PMM pair. :func:`slowdowns` computes the table and is shared with
:mod:`experiments.price_performance`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import tmsim
from experiments.common import (
    COLORS,
    CONVENTIONAL,
    DEFAULT_INTERFERENCE,
    AxesArg,
    Progress,
    capacity_of,
    compare_frame,
    geomean,
    load_frame,
    panels,
    plan_settings,
    planner_params,
    run_figure_points,
    save_figure,
    solver_params,
    workload_labels,
    write_data,
)

NAME = "conventional"
TITLE = "Conventional workloads: slowdown against all-DRAM by PMM:DRAM ratio"

#: The ``ratio`` label of the all-DRAM configuration (strategy ``all-fast``).
ALL_DRAM = "all-DRAM"
#: The ``ratio`` label of the all-PMM configuration (strategy ``all-slow``).
ALL_PMM = "all-PMM"
#: Label of the geometric-mean group in the figure.
GEOMEAN = "geo. mean"

#: The two first-touch baselines: whole tensors by creation order, the pool's pages by first
#: touch.
FIRST_TOUCH = ("first-touch", "first-touch-pages")
#: The AutoTM paper's first-touch NUMA slowdown against all-DRAM ("loses 71.9% of
#: performance", the abstract) and the ratios we take it to average (PMM:DRAM; 50 to 80% of
#: DRAM replaced).
PAPER_FIRST_TOUCH = 1.719
PAPER_RATIOS = ("1:1", "4:1")
#: Label of the geometric mean over :data:`PAPER_RATIOS` in :func:`first_touch_table`.
OVER_PAPER_RATIOS = "1:1 and 4:1"
#: Names the figure gives strategies (others go by their own).
LABELS = {
    "all-slow": "all-PMM",
    "first-touch": "first-touch (NUMA, tensors)",
    "first-touch-pages": "first-touch (NUMA, 4 KiB pages)",
}

#: The columns :func:`slowdowns` writes before those of :func:`tmsim.comparison.rows_frame`.
LEADING = ("workload", "model", "batch", "kernels", "footprint_bytes", "ratio")


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the paper's full experiment.

    ``workloads``: (zoo model, batch) pairs; ``platform``: a :mod:`hwmodels.presets` name;
    ``ratios``: PMM:DRAM capacity ratios (``"S:F"`` of each step's peak live bytes, see
    :class:`tmsim.capacity.Capacity`); all-DRAM and all-PMM are always added;
    ``strategies``: the strategies planned at every ratio (names of
    :data:`tmsim.comparison.STRATEGIES`); ``time_limit_s``: wall-clock cap of the MILP chain
    (static, then sync from it) of one workload at one ratio; ``gap``: the MILP's relative
    optimality gap; ``interference``: the replays' interference level (``none``: no contention).
    """

    workloads: tuple[tuple[str, int], ...] = CONVENTIONAL
    platform: str = "cascadelake-optane"
    ratios: tuple[str, ...] = ("8:1", "4:1", "1:1")
    strategies: tuple[str, ...] = ("first-touch", "first-touch-pages", "static", "sync")
    time_limit_s: float | None = 600.0
    gap: float = 0.01
    interference: str = DEFAULT_INTERFERENCE
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Three small workloads, same ratios and strategies, a looser gap (at 0.01 the sync MILP of
#: Inception v4 b4 at 4:1 takes about 17 s, at 0.05 about 3 s); about 40 s on two cores.
QUICK = Config(
    workloads=(("vgg19", 8), ("inception_v4", 4), ("resnet50", 4)), time_limit_s=20.0, gap=0.05
)


def points(config: Config) -> list[dict[str, Any]]:
    """The points of ``config``: per workload, its all-DRAM and all-PMM pair (``ratio``
    None), then one point per ratio with every strategy of ``config.strategies``; the MILP
    settings only where a strategy is a MILP. Raises :class:`tmsim.errors.TmsimError` for an
    unknown strategy."""
    milp = solver_params(config.strategies, **planner_params(config))
    out: list[dict[str, Any]] = []
    for model, batch in config.workloads:
        where = {
            "model": model,
            "batch": batch,
            "platform": config.platform,
            "interference": config.interference,
        }
        out.append({**where, "ratio": None, "strategies": ["all-fast", "all-slow"]})
        out += [
            {**where, "ratio": r, "strategies": list(config.strategies), **milp}
            for r in config.ratios
        ]
    return out


def point_frame(params: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of one point of :func:`points`: :data:`LEADING`, then the columns of
    :func:`tmsim.comparison.rows_frame` (``slowdown`` left to :func:`slowdowns`)."""
    model, batch, ratio = params["model"], params["batch"], params["ratio"]
    graph = tmsim.graph(model, batch=batch)
    plan = plan_settings(params, capacity_of(ratio, None))
    frame = compare_frame(
        graph,
        tmsim.platform(params["platform"]),
        plan,
        params["strategies"],
        params["interference"],
        labels={**workload_labels(model, batch, graph), "ratio": ratio or ""},
    )
    if ratio is None:
        frame["ratio"] = frame["strategy"].map({"all-fast": ALL_DRAM, "all-slow": ALL_PMM})
    return frame


def slowdowns(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    name: str = NAME,
    workers: int | None = None,
    dask_address: str | None = None,
) -> pd.DataFrame:
    """One row per workload of ``config`` and configuration: ``all-fast`` (``ratio``
    :data:`ALL_DRAM`), ``all-slow`` (:data:`ALL_PMM`) and every strategy of
    ``config.strategies`` at every one of ``config.ratios``; the points run as figure
    ``name``'s, kept in ``out_dir`` (:func:`experiments.common.run_figure_points`).

    Columns: :data:`LEADING` (``workload`` is the figure label, ``kernels`` the graph's kernel
    count, ``footprint_bytes`` its peak live bytes), then those of
    :func:`tmsim.comparison.rows_frame`; ``slowdown`` is the simulated step time over that of the
    workload's all-DRAM row. A strategy that cannot run keeps its row, with ``status`` error,
    the reason in ``error`` and ``nan`` times. Raises :class:`tmsim.errors.TmsimError` for an
    unknown strategy, and when points failed (an unknown model or platform, a malformed
    ratio).
    """
    frame = run_figure_points(
        name,
        points(config),
        point_frame,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
    )
    all_fast = frame[frame["strategy"] == "all-fast"].drop_duplicates("workload")
    all_dram_s = all_fast.set_index("workload")["simulated_s"]
    frame["slowdown"] = frame["simulated_s"] / frame["workload"].map(all_dram_s)
    return frame


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Plan, validate and simulate every point of ``config`` (in ``workers`` processes, default
    1, or on the Dask scheduler at ``dask_address``); write ``out_dir/NAME.parquet``
    (:func:`slowdowns`'s table, with the config and provenance) and return its path."""
    frame = slowdowns(config, out_dir, progress, workers=workers, dask_address=dask_address)
    return write_data(frame, out_dir, NAME, config)


def geomean_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Geometric mean of ``slowdown`` across workloads, indexed by ``ratio`` (rows) and
    ``strategy`` (columns); ``nan`` where any workload's point failed."""
    return frame.pivot_table(
        index="ratio", columns="strategy", values="slowdown", aggfunc=geomean, dropna=False
    )


def first_touch_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The first-touch baselines of ``frame`` (:func:`slowdowns`'s table) beside the paper:
    one row per strategy of :data:`FIRST_TOUCH` in ``frame`` and a row ``AutoTM paper``;
    columns: the geometric mean of ``slowdown`` across workloads at each ratio of
    :data:`PAPER_RATIOS` in ``frame``, and over those ratios' points together
    (:data:`OVER_PAPER_RATIOS`, only when ``frame`` has both). The paper's row holds
    :data:`PAPER_FIRST_TOUCH` there (``nan`` elsewhere: the paper gives no number per ratio).
    ``nan`` where a point failed."""
    ratios = [r for r in PAPER_RATIOS if (frame["ratio"] == r).any()]
    columns = [*ratios, *([OVER_PAPER_RATIOS] if len(ratios) == len(PAPER_RATIOS) else [])]
    out: dict[str, list[float]] = {}
    for strategy in FIRST_TOUCH:
        mine = frame[frame["strategy"] == strategy]
        if mine.empty:
            continue
        by_ratio = [geomean(mine.loc[mine["ratio"] == r, "slowdown"]) for r in ratios]
        both = mine.loc[mine["ratio"].isin(PAPER_RATIOS), "slowdown"]
        out[strategy] = by_ratio + ([geomean(both)] if len(columns) > len(ratios) else [])
    paper = [float("nan")] * len(ratios) + [PAPER_FIRST_TOUCH] * (len(columns) - len(ratios))
    out["AutoTM paper"] = paper
    return pd.DataFrame.from_dict(out, orient="index", columns=columns)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Draw ``frame`` (the table :func:`compute` writes, its metadata in ``attrs``): one panel per
    ratio, bars per workload and for the geometric mean, one bar per strategy beside all-
    PMM.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    meta = frame.attrs
    ratios = list(meta["config"]["ratios"])
    strategies = ["all-slow", *meta["config"]["strategies"]]
    workloads = list(dict.fromkeys(frame["workload"]))
    groups = [*workloads, GEOMEAN]
    width_in = 1.2 + 0.9 * len(groups) * len(ratios)
    fig, axes = panels(on, 1, len(ratios), (width_in, 3.6), sharey=True)
    width = 0.8 / len(strategies)
    top = 1.0
    for ax, ratio in zip(axes[0], ratios, strict=True):
        for j, strategy in enumerate(strategies):
            at = ALL_PMM if strategy == "all-slow" else ratio
            values = [_value(frame, w, at, strategy) for w in workloads]
            values.append(geomean(values))
            x = np.arange(len(groups)) + (j - (len(strategies) - 1) / 2) * width
            ax.bar(x, values, width, color=COLORS[strategy], label=LABELS.get(strategy, strategy))
            for xi, v in zip(x, values, strict=True):
                if not np.isfinite(v):
                    ax.text(xi, 1.02, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
                else:
                    top = max(top, v)
            if strategy == "sync" or strategy in FIRST_TOUCH:
                mean = values[-1]
                ax.text(
                    x[-1], mean, f" {mean:.2f}", ha="center", va="bottom", fontsize=6, rotation=90
                )
        if ratio in PAPER_RATIOS and any(s in FIRST_TOUCH for s in strategies):
            at = len(workloads)  # the paper's number over the geometric-mean group
            ax.hlines(
                PAPER_FIRST_TOUCH,
                at - 0.45,
                at + 0.45,
                colors="black",
                linestyles=":",
                label=f"AutoTM paper, first-touch NUMA ({', '.join(PAPER_RATIOS)}): "
                f"{PAPER_FIRST_TOUCH:.2f}",
            )
        ax.axhline(1.0, color=COLORS["all-fast"], lw=1, ls="--", label="all-DRAM")
        ax.axvline(len(workloads) - 0.5, color="0.7", lw=0.8)
        ax.set_xticks(np.arange(len(groups)), groups, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"PMM:DRAM = {ratio}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("slowdown vs all-DRAM (x, step time ratio)")
    axes[0][0].set_ylim(0, top * 1.12)
    legend: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    handles, labels_ = list(legend.values()), list(legend)
    fig.legend(
        handles,
        labels_,
        loc="upper center",
        ncol=min(len(labels_), 4),
        fontsize=8,
        bbox_to_anchor=(0.5, 1.06 + 0.04 * ((len(labels_) - 1) // 4)),
        frameon=False,
    )
    rows = (len(labels_) - 1) // 4
    fig.suptitle(f"{TITLE} ({meta['config']['platform']})", fontsize=10, y=1.12 + 0.04 * rows)
    if on is None:
        fig.tight_layout()
    return fig


def _value(frame: pd.DataFrame, workload: str, ratio: str, strategy: str) -> float:
    """The slowdown of one point; ``nan`` if missing or failed."""
    hit = frame[
        (frame["workload"] == workload)
        & (frame["ratio"] == ratio)
        & (frame["strategy"] == strategy)
    ]
    return float(hit["slowdown"].iloc[0]) if len(hit) else float("nan")


__all__ = [
    "ALL_DRAM",
    "ALL_PMM",
    "FIRST_TOUCH",
    "LABELS",
    "NAME",
    "OVER_PAPER_RATIOS",
    "PAPER_FIRST_TOUCH",
    "PAPER_RATIOS",
    "QUICK",
    "TITLE",
    "Config",
    "compute",
    "draw",
    "first_touch_table",
    "geomean_table",
    "plot",
    "point_frame",
    "points",
    "slowdowns",
]
