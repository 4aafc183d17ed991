"""The sensitivity figure's drawing: which variants flip the conclusion, and one panel per
strategy of every assumed parameter's range (:mod:`experiments.sensitivity` computes the
table).
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from experiments.common import AxesArg, panels

#: ``parameter`` and ``label`` of the variants that set every parameter to one end at once.
CORNER = "*"
CORNER_LABEL = "all at once"

#: The plans compared with the sync plan.
SHOWN = ("async", "async-aware")


def flips(frame: pd.DataFrame) -> pd.Series:
    """Per row: whether the ratios of its (workload, capacity, strategy, parameter) group's
    ends and the shipped preset's ratio lie on both sides of 1 (by more than 1e-9): the
    parameter's range decides whether the strategy beats the sync plan there. False for the
    shipped rows."""
    keys = ["workload", "capacity", "strategy"]
    excess = frame["over_sync"].to_numpy(dtype=float) - 1
    side = pd.Series(np.sign(np.where(np.abs(excess) > 1e-9, excess, 0.0)), index=frame.index)
    shipped = frame["end"] == "shipped"
    base = side[shipped].groupby([frame.loc[shipped, k] for k in keys]).first()
    own = pd.MultiIndex.from_frame(frame[keys]).map(base.to_dict()).to_numpy(dtype=float)
    group = [frame[k] for k in [*keys, "parameter"]]
    above = pd.Series((side > 0) | (own > 0), index=frame.index).groupby(group).transform("any")
    below = pd.Series((side < 0) | (own < 0), index=frame.index).groupby(group).transform("any")
    return pd.Series(above & below & ~shipped, index=frame.index, dtype=bool)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """One panel per strategy: a row per parameter, a segment per workload from the ratio at
    the low end of the parameter's range (open circle) to that at the high end (filled), the
    shipped preset's ratio as a tick; a segment crossing the line at 1 flips the conclusion
    and is labelled so. Workloads whose async MILP kept the sync plan say so in the legend.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    frame = frame.assign(case=frame["workload"] + " @" + frame["capacity"].astype(str))
    shown = [s for s in SHOWN if s in set(frame["strategy"])]
    params = list(dict.fromkeys(frame.loc[frame["end"] != "shipped", "label"]))
    cases = list(dict.fromkeys(frame["case"]))
    colours = plt.get_cmap("tab10")
    fig, axes = panels(on, 1, len(shown), (6.0 * len(shown), 0.55 * len(params) * 1.3 + 1.8))
    for ax, strategy in zip(axes[0], shown, strict=True):
        mine = frame[frame["strategy"] == strategy]
        _panel(ax, mine, strategy, params, cases, colours)
    shipped = frame[(frame["end"] == "shipped") & (frame["strategy"] == "async")]
    same = set(shipped.loc[~shipped["improved"].astype(bool), "case"])
    handles = [
        Line2D(
            [],
            [],
            color=colours(i % 10),
            marker="o",
            linewidth=1.2,
            label=c + (" (= sync plan)" if c in same else ""),
        )
        for i, c in enumerate(cases)
    ]
    handles += [
        Line2D([], [], color="grey", marker="o", fillstyle="none", linestyle="", label="low end"),
        Line2D([], [], color="grey", marker="o", linestyle="", label="high end"),
        Line2D([], [], color="grey", marker="|", markersize=9, linestyle="", label="as shipped"),
    ]
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=min(len(handles), 4),
        frameon=False,
        bbox_to_anchor=(0.5, 1.0 + 0.02 * (len(handles) // 4 + 1)),
        fontsize=7,
    )
    if on is None:
        fig.tight_layout()
    return fig


def _panel(
    ax: Axes,
    rows: pd.DataFrame,
    strategy: str,
    params: list[str],
    cases: list[str],
    colours: Any,
) -> None:
    n = max(len(cases), 1)
    for j, case in enumerate(cases):
        sub = rows[rows["case"] == case]
        if sub.empty:
            continue
        shipped = sub.loc[sub["end"] == "shipped", "over_sync"]
        colour = colours(j % 10)
        for i, name in enumerate(params):
            y = i + (j - (n - 1) / 2) * 0.7 / n
            ends = sub[sub["label"] == name].set_index("end")["over_sync"]
            low, high = float(ends.get("low", np.nan)), float(ends.get("high", np.nan))
            ax.plot([low, high], [y, y], color=colour, linewidth=1.2)
            ax.plot([low], [y], marker="o", fillstyle="none", color=colour, markersize=4)
            ax.plot([high], [y], marker="o", color=colour, markersize=4)
            if len(shipped):
                ax.plot([float(shipped.iloc[0])], [y], marker="|", color=colour, markersize=8)
            if bool(sub.loc[sub["label"] == name, "flips"].any()):
                ax.annotate(
                    "flips",
                    (max(low, high), y),
                    fontsize=6,
                    xytext=(3, -2),
                    textcoords="offset points",
                    color=colour,
                )
    ax.axvline(1.0, color="black", linewidth=0.8)
    low, high = ax.get_xlim()
    ax.set_xlim(min(low, 0.99), max(high, 1.01))  # a span of differences that matter
    ax.set_yticks(range(len(params)), params, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"{strategy} step / sync step, full model (below 1: {strategy} faster)")
    ax.set_title(f"{strategy}: {rows['platform'].iloc[0] if len(rows) else ''}", fontsize=9)
    ax.grid(axis="x", linewidth=0.3)


__all__ = ["CORNER", "CORNER_LABEL", "SHOWN", "draw", "flips"]
