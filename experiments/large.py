"""Figure: the large workloads (about 650 GB) against the hardware DRAM cache (2LM).

AutoTM (Hildebrand et al., ASPLOS 2020) trains workloads of 650 to 690 GB on a socket with
192 GiB of DRAM and 1.5 TiB of Optane PMM, either managed by AutoTM (DRAM and PMM as two
tiers) or in Memory Mode (2LM: the DRAM a direct-mapped hardware cache of the PMM). Software
management came out up to 2x (abstract) or 3x (talk) faster than 2LM.

Here each workload is planned by ``static`` and ``sync`` with the fast tier at the platform's
real DRAM capacity (no ratio), validated and replayed, and the ``2lm`` strategy of
:func:`tmsim.comparison.compare` simulates the DRAM cache at that same capacity. ``all-fast`` (as
if all 650 GB were DRAM) and ``all-slow`` (all PMM) bound the picture. A point is one workload
with every strategy.
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
    DEFAULT_INTERFERENCE,
    LARGE,
    AxesArg,
    Progress,
    capacity_of,
    compare_frame,
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
from tmsim import TmsimError

NAME = "large"
TITLE = "Large workloads: software tensor management against the DRAM cache (2LM)"

#: Strategies whose speedup over 2LM the figure shows, in drawing order.
SHOWN = ("all-slow", "static", "sync")
_NAMES = {"all-fast": "all-DRAM (oracle)", "all-slow": "all-PMM", "2lm": "2LM (DRAM cache)"}


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the paper's full experiment.

    ``workloads``: (zoo model, batch) pairs; ``platform``: a :mod:`hwmodels.presets` name;
    ``fast_share``: the fast tier (DRAM, and the 2LM cache) as a share of each step's peak live
    bytes; ``None`` (the paper's setting): the platform's DRAM capacity; ``strategies``: strategies
    of :data:`tmsim.comparison.STRATEGIES` to run (``2lm`` is what the others are compared against);
    ``time_limit_s``: wall-clock cap of the MILP chain of one workload; ``gap``: the MILP's relative
    optimality gap; ``interference``: the replays' interference level (``none``: no contention);
    ``cache_block_bytes``: the 2LM simulation's block size (``None``: its default).
    """

    workloads: tuple[tuple[str, int], ...] = LARGE
    platform: str = "cascadelake-optane"
    fast_share: float | None = None
    strategies: tuple[str, ...] = ("all-fast", "all-slow", "static", "sync", "2lm")
    time_limit_s: float | None = 600.0
    gap: float = 0.01
    interference: str = DEFAULT_INTERFERENCE
    cache_block_bytes: int | None = None
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Small stand-ins at the paper's DRAM share (192 GiB of about 650 GB is 0.3), a looser gap;
#: about 20 s.
QUICK = Config(
    workloads=(("vgg19", 16), ("resnet50", 8)), fast_share=0.3, time_limit_s=20.0, gap=0.05
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per workload of ``config``, with every setting that shapes its rows (the
    MILP settings only if a strategy is a MILP). Raises :class:`tmsim.errors.TmsimError` for
    an unknown strategy or a ``fast_share`` outside (0, 1]."""
    if config.fast_share is not None and not 0 < config.fast_share <= 1:
        raise TmsimError(f"fast_share must be in (0, 1], got {config.fast_share}")
    milp = solver_params(config.strategies, **planner_params(config))
    cache = {"cache_block_bytes": config.cache_block_bytes} if "2lm" in config.strategies else {}
    return [
        {
            "model": model,
            "batch": batch,
            "platform": config.platform,
            "fast_share": config.fast_share,
            "strategies": list(config.strategies),
            "interference": config.interference,
            **milp,
            **cache,
        }
        for model, batch in config.workloads
    ]


def point_frame(params: Mapping[str, Any]) -> pd.DataFrame:
    """Every strategy of one workload, with the fast tier at the platform's DRAM capacity or
    at ``fast_share`` of the step's peak live bytes (see :func:`compute` for the columns)."""
    model, batch, share = params["model"], params["batch"], params["fast_share"]
    hw = tmsim.platform(params["platform"])
    graph = tmsim.graph(model, batch=batch)
    if share is None:
        fast_bytes = int(hw.tiers[0].capacity_bytes)
    else:
        fast_bytes = int(share * graph.peak_live_bytes)
    plan = plan_settings(params, capacity_of(None, fast_bytes))
    frame = compare_frame(
        graph,
        hw,
        plan,
        params["strategies"],
        params["interference"],
        params.get("cache_block_bytes"),
        labels=workload_labels(model, batch, graph),
    )
    twolm = frame.loc[frame["strategy"] == "2lm", "simulated_s"]
    base = float(twolm.iloc[0]) if len(twolm) else np.nan
    frame["speedup_vs_2lm"] = base / frame["simulated_s"]
    return frame


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Run every strategy of ``config`` on every workload (in ``workers`` processes, default 1,
    or on the Dask scheduler at ``dask_address``); write ``out_dir/NAME.parquet`` and return
    its path.

    One row per workload and strategy: ``workload``, ``model``, ``batch``, ``kernels``,
    ``footprint_bytes`` (peak live bytes), then the columns of
    :func:`tmsim.comparison.rows_frame` (``fast_limit_bytes`` is the DRAM capacity compared at),
    then ``speedup_vs_2lm`` (2LM's simulated step time over the row's; ``nan`` if either
    failed). Raises :class:`tmsim.errors.TmsimError` for an unknown strategy or a
    ``fast_share`` outside (0, 1] before any point runs, and when points failed (an unknown
    model or platform).
    """
    frame = run_figure_points(
        NAME,
        points(config),
        point_frame,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
    )
    return write_data(frame, out_dir, NAME, config)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Draw ``frame`` (the table :func:`compute` writes, its metadata in ``attrs``): left, the
    speedup of all-PMM, static and sync over 2LM per workload; right, every strategy's
    slowdown against all-DRAM (the oracle).

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    meta = frame.attrs
    workloads = list(dict.fromkeys(frame["workload"]))
    x = np.arange(len(workloads))
    fig, grid = panels(on, 1, 2, (4.5 + 2.2 * len(workloads), 3.8))
    left, right = grid[0]

    shown = [s for s in SHOWN if s in set(frame["strategy"])]
    width = 0.8 / max(1, len(shown))
    for j, strategy in enumerate(shown):
        values = [_get(frame, w, strategy, "speedup_vs_2lm") for w in workloads]
        at = x + (j - (len(shown) - 1) / 2) * width
        left.bar(at, values, width, color=COLORS[strategy], label=_NAMES.get(strategy, strategy))
        for xi, v in zip(at, values, strict=True):
            text = f"{v:.2f}x" if np.isfinite(v) else "n/a"
            left.text(xi, v if np.isfinite(v) else 0.02, text, ha="center", va="bottom", fontsize=7)
    left.axhline(1.0, color=COLORS["2lm"], lw=1.2, ls="--", label=_NAMES["2lm"])
    left.set_ylabel("speedup over 2LM (2LM step time / step time)")
    left.set_title("speedup over the DRAM cache (higher is better)", fontsize=9)

    order = [s for s in ("all-fast", "2lm", *SHOWN) if s in set(frame["strategy"])]
    width = 0.8 / max(1, len(order))
    for j, strategy in enumerate(order):
        values = [_get(frame, w, strategy, "slowdown") for w in workloads]
        at = x + (j - (len(order) - 1) / 2) * width
        right.bar(at, values, width, color=COLORS[strategy], label=_NAMES.get(strategy, strategy))
    right.set_ylabel("slowdown vs all-DRAM (step time / oracle's)")
    right.set_title("step time against all-DRAM (lower is better)", fontsize=9)

    ticks = []
    for w in workloads:
        rows = frame[(frame["workload"] == w) & (frame["strategy"] != "all-fast")]
        dram = float(rows["fast_limit_bytes"].max()) if len(rows) else float("nan")
        footprint = float(frame.loc[frame["workload"] == w, "footprint_bytes"].iloc[0])
        ticks.append(f"{w}\n{_gb(footprint)} GB, DRAM {_gb(dram)} GB")
    for ax in (left, right):
        ax.set_xticks(x, ticks, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    top = np.nanmax(
        frame.loc[frame["strategy"].isin(shown), "speedup_vs_2lm"].to_numpy(), initial=1
    )
    left.set_ylim(0, max(1.0, float(top)) * 1.35)
    slowest = np.nanmax(frame.loc[frame["strategy"].isin(order), "slowdown"].to_numpy(), initial=1)
    right.set_ylim(0, float(slowest) * 1.35)
    fig.suptitle(f"{TITLE} ({meta['config']['platform']})", fontsize=10)
    if on is None:
        fig.tight_layout()
    return fig


def _gb(n_bytes: float) -> str:
    """``n_bytes`` in GB (10^9 bytes), to two significant figures below 10."""
    return f"{n_bytes / 1e9:.0f}" if n_bytes >= 10e9 else f"{n_bytes / 1e9:.2g}"


def _get(frame: pd.DataFrame, workload: str, strategy: str, column: str) -> float:
    """One value of one workload's strategy row; ``nan`` if the row is missing."""
    hit = frame[(frame["workload"] == workload) & (frame["strategy"] == strategy)]
    return float(hit[column].iloc[0]) if len(hit) else float("nan")


__all__ = ["NAME", "QUICK", "SHOWN", "TITLE", "Config", "compute", "plot", "point_frame", "points"]
