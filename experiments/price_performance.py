"""Figure: memory cost against performance (price-performance) of PMM:DRAM configurations.

AutoTM (Hildebrand et al., ASPLOS 2020) priced DRAM at 2.1 times PMM per GB (Lenovo's prices,
August 2019) and found that with 8 times as much PMM as DRAM about half the memory cost is
saved for a 30 to 60% slowdown under AutoTM, depending on the workload (the project page).

Here each conventional workload's configuration (all-DRAM, the PMM:DRAM ratios, all-PMM) has
a memory cost, the step's footprint (peak live bytes) split by the ratio and priced per GB,
normalized to all-DRAM, and a slowdown against all-DRAM under ``sync`` (AutoTM) and
``first-touch`` (the NUMA default) from :func:`experiments.conventional.slowdowns`. The figure
marks the cheapest configuration whose slowdown stays within a budget. Prices and the budget
are applied to the stored points, so changing them recomputes no point.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from experiments import conventional
from experiments.common import (
    COLORS,
    CONVENTIONAL,
    DEFAULT_INTERFERENCE,
    AxesArg,
    Progress,
    geomean,
    load_frame,
    panels,
    save_figure,
    write_data,
)
from experiments.conventional import ALL_DRAM, ALL_PMM, GEOMEAN, slowdowns
from tmsim import Capacity, TmsimError

NAME = "price_performance"
TITLE = "Memory cost against slowdown (DRAM 2.1x the price of PMM per GB)"

GB = 1e9


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the paper's full experiment.

    ``workloads``, ``platform``, ``ratios``, ``strategies``, ``time_limit_s``, ``gap``,
    ``interference``, ``settings``: as in :class:`experiments.conventional.Config` (all-DRAM and
    all-PMM are always added); ``dram_price_per_gb`` and ``pmm_price_per_gb``: memory prices per GB
    (10^9 bytes) in any one currency, only their ratio matters for the normalized cost;
    ``budget_slowdown``: the largest slowdown against all-DRAM accepted when picking the cheapest
    configuration.
    """

    workloads: tuple[tuple[str, int], ...] = CONVENTIONAL
    platform: str = "cascadelake-optane"
    ratios: tuple[str, ...] = ("8:1", "4:1", "2:1", "1:1")
    strategies: tuple[str, ...] = ("first-touch", "sync")
    time_limit_s: float | None = 600.0
    gap: float = 0.01
    interference: str = DEFAULT_INTERFERENCE
    # AutoTM (ASPLOS 2020), cost analysis: Lenovo's list prices of August 2019 put DRAM at
    # 2.1x the price of Optane PMM per GB; prices here are in units of PMM's price per GB.
    dram_price_per_gb: float = 2.1
    pmm_price_per_gb: float = 1.0
    budget_slowdown: float = 1.2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: The conventional figure's QUICK workloads at three ratios, with its looser gap; about 35 s
#: on two cores.
QUICK = Config(
    workloads=(("vgg19", 8), ("inception_v4", 4), ("resnet50", 4)),
    ratios=("8:1", "2:1", "1:1"),
    time_limit_s=20.0,
    gap=0.05,
)


def memory_split(footprint_bytes: float, ratio: str) -> tuple[float, float]:
    """``(dram_bytes, pmm_bytes)`` of a configuration: all of ``footprint_bytes`` in DRAM for
    :data:`~experiments.conventional.ALL_DRAM`, in PMM for
    :data:`~experiments.conventional.ALL_PMM`, else split ``"S:F"`` (PMM:DRAM) as
    :class:`tmsim.capacity.Capacity` splits it. Raises :class:`TmsimError` for
    a malformed ratio."""
    if ratio == ALL_DRAM:
        return float(footprint_bytes), 0.0
    if ratio == ALL_PMM:
        return 0.0, float(footprint_bytes)
    split = Capacity.parse(ratio).ratio
    if split is None:
        raise TmsimError(f"ratio must look like '4:1' (PMM:DRAM), got {ratio!r}")
    slow, fast = split
    dram = footprint_bytes * fast / (slow + fast)
    return dram, footprint_bytes - dram


def add_costs(
    frame: pd.DataFrame, dram_price_per_gb: float, pmm_price_per_gb: float, budget: float
) -> pd.DataFrame:
    """``frame`` (rows of :func:`experiments.conventional.slowdowns`) with ``dram_bytes``,
    ``pmm_bytes`` (:func:`memory_split` of ``footprint_bytes`` by ``ratio``), ``memory_cost``
    (GB times price), ``cost_norm`` (over the all-DRAM cost of the same footprint) and
    ``within_budget`` (slowdown at most ``budget``)."""
    out = frame.copy()
    split = [memory_split(f, r) for f, r in zip(out["footprint_bytes"], out["ratio"], strict=True)]
    out["dram_bytes"] = [d for d, _ in split]
    out["pmm_bytes"] = [p for _, p in split]
    out["memory_cost"] = (
        out["dram_bytes"] / GB * dram_price_per_gb + out["pmm_bytes"] / GB * pmm_price_per_gb
    )
    out["cost_norm"] = out["memory_cost"] / (out["footprint_bytes"] / GB * dram_price_per_gb)
    out["within_budget"] = out["slowdown"] <= budget
    return out


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Simulate every configuration of ``config`` (:func:`experiments.conventional.slowdowns`,
    its points kept as this figure's, in ``workers`` processes, default 1, or on the Dask
    scheduler at ``dask_address``), price it (:func:`add_costs`), write
    ``out_dir/NAME.parquet`` and return its path."""
    shared = {f.name: getattr(config, f.name) for f in fields(conventional.Config)}
    frame = slowdowns(
        conventional.Config(**shared),
        out_dir,
        progress,
        name=NAME,
        workers=workers,
        dask_address=dask_address,
    )
    priced = add_costs(
        frame, config.dram_price_per_gb, config.pmm_price_per_gb, config.budget_slowdown
    )
    return write_data(priced, out_dir, NAME, config)


def curve(frame: pd.DataFrame, workload: str, strategy: str) -> pd.DataFrame:
    """The configurations of one workload under ``strategy``, by rising cost: all-PMM, the
    strategy at every ratio, all-DRAM (the endpoints are the same for every strategy).
    ``workload`` :data:`~experiments.conventional.GEOMEAN` gives the geometric mean over
    workloads of slowdown and normalized cost at each configuration."""
    if workload == GEOMEAN:
        per = [curve(frame, w, strategy) for w in dict.fromkeys(frame["workload"])]
        both = pd.concat(per, ignore_index=True)
        mean = both.groupby("ratio", sort=False)[["slowdown", "cost_norm"]].agg(geomean)
        return mean.reset_index().sort_values("cost_norm", ignore_index=True)
    rows = frame[
        (frame["workload"] == workload)
        & (frame["strategy"].isin(["all-fast", "all-slow", strategy]))
    ]
    return rows.sort_values("cost_norm", ignore_index=True)


def cheapest(points: pd.DataFrame, budget: float) -> pd.Series | None:
    """The cheapest row of ``points`` (columns ``cost_norm``, ``slowdown``) whose slowdown is
    at most ``budget`` (ties: the faster), or None if none is."""
    ok = points[points["slowdown"] <= budget]
    if ok.empty:
        return None
    return ok.sort_values(["cost_norm", "slowdown"]).iloc[0]


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Draw ``frame`` (the table :func:`compute` writes, its metadata in ``attrs``): one panel per
    workload and one for the geometric mean; normalized memory cost against slowdown, a line
    per strategy through its configurations, the budget as a dotted line and the cheapest
    configuration within it starred.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    meta = frame.attrs
    cfg = meta["config"]
    budget = float(cfg["budget_slowdown"])
    strategies = list(cfg["strategies"])
    groups = [*dict.fromkeys(frame["workload"]), GEOMEAN]
    ncols = min(3, len(groups))
    nrows = -(-len(groups) // ncols)
    fig, axes = panels(on, nrows, ncols, (3.6 * ncols, 3.1 * nrows), sharex=True)
    names = {"first-touch": "first-touch (NUMA)", "sync": "AutoTM sync"}
    for ax, panel in zip(axes.flat, groups, strict=False):
        for strategy in strategies:
            points = curve(frame, panel, strategy)
            color = COLORS.get(strategy, "k")
            label_ = names.get(strategy, strategy)
            ax.plot(points["cost_norm"], points["slowdown"], "o-", color=color, ms=4, label=label_)
            best = cheapest(points, budget)
            if best is not None:
                star = {"ms": 15, "mfc": "none", "mec": color, "mew": 1.5}
                ax.plot(best["cost_norm"], best["slowdown"], "*", **star)
            if strategy == strategies[-1]:
                _annotate_ratios(ax, points)
        ax.axhline(budget, color="0.4", ls=":", lw=1)
        ax.set_title(panel, fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0.9)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("slowdown vs all-DRAM (x)")
    for ax in axes[-1, :]:
        ax.set_xlabel("memory cost / all-DRAM cost")
    handles, labels_ = axes[0][0].get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.4", ls=":"))
    labels_.append(f"budget {budget:g}x")
    handles.append(Line2D([], [], marker="*", ls="", mfc="none", mec="k", ms=12))
    labels_.append("cheapest within budget")
    fig.legend(
        handles,
        labels_,
        loc="upper center",
        ncol=len(labels_),
        fontsize=8,
        bbox_to_anchor=(0.5, 1.0),
        frameon=False,
    )
    price = cfg["dram_price_per_gb"] / cfg["pmm_price_per_gb"]
    title = f"Memory cost against slowdown (DRAM {price:g}x PMM per GB, {cfg['platform']})"
    fig.suptitle(title, fontsize=10, y=1.05)
    if on is None:
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def _annotate_ratios(ax: Axes, points: pd.DataFrame) -> None:
    """Label each configuration of a curve with its ratio."""
    for _, p in points.iterrows():
        ax.annotate(
            str(p["ratio"]),
            (p["cost_norm"], p["slowdown"]),
            fontsize=6,
            xytext=(3, 4),
            textcoords="offset points",
        )


__all__ = [
    "NAME",
    "QUICK",
    "TITLE",
    "Config",
    "add_costs",
    "cheapest",
    "compute",
    "curve",
    "draw",
    "memory_split",
    "plot",
]
