"""Figure: MILP solve time against graph size.

AutoTM (Hildebrand et al., ASPLOS 2020) names ILP solution time as a limitation (the talk's
"Limitations" slide); its asynchronous formulation, with a window of kernels either side of
each use where a copy may run, is much larger than the synchronous one.

Here each workload's MILP chain (:func:`tmsim.plan_chain`: static, then
sync from it, then async from that) is solved once under one wall-clock limit for the whole
chain, and each formulation's solver statistics are tabulated: model size, build and solve
seconds (cumulative over the chain, as the planner reports them: what it costs to get that
plan), gap and whether the time limit cut it short. A point is one workload's chain; run
points in parallel (``--workers``) only on a machine with a core for each, since the solve
seconds are the measurement.
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
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

import tmsim
from experiments.common import (
    COLORS,
    CONVENTIONAL,
    LARGE,
    AxesArg,
    Progress,
    capacity_of,
    label,
    load_frame,
    panels,
    plan_settings,
    planner_params,
    run_figure_points,
    save_figure,
    write_data,
)
from tmsim import Plan, PlanSettings, TmsimError

NAME = "solve_time"

#: The MILP formulations, in the order a chain solves them.
MILP: tuple[str, ...] = tuple(n for n, s in tmsim.STRATEGIES.items() if s.kind == "milp")
TITLE = "MILP solve time against graph size"

#: A formulation whose cumulative build and solve seconds reach this share of the time limit
#: ran out of time (the chain's deadline is shared, so the one that exhausted it is at ~1).
LIMIT_SHARE = 0.95


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the paper's workloads.

    ``workloads``: (zoo model, batch) pairs; ``platform``: a :mod:`hwmodels.presets` name;
    ``ratio``: the PMM:DRAM capacity ratio planned for; ``formulations``: the MILP
    formulations tabulated (the chain is solved up to the largest); ``time_limit_s``:
    wall-clock cap of one workload's whole chain (a chain that reaches it is marked
    ``time_limit_hit``); ``gap``: the relative optimality gap at
    which the solver stops; ``window``: the asynchronous window (kernels either side of a use).
    """

    workloads: tuple[tuple[str, int], ...] = CONVENTIONAL + LARGE
    platform: str = "cascadelake-optane"
    ratio: str = "4:1"
    formulations: tuple[str, ...] = ("static", "sync", "async")
    time_limit_s: float = 300.0
    gap: float = 0.01
    window: int = PlanSettings.window
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Three small graphs (142 to 1396 kernels), 20 s per chain; about 50 s.
QUICK = Config(workloads=(("vgg19", 8), ("resnet50", 8), ("densenet121", 4)), time_limit_s=20.0)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per workload of ``config``, with the settings of its chain. Raises
    ``ValueError`` for an unknown formulation."""
    for f in config.formulations:
        if f not in MILP:
            raise ValueError(f"unknown MILP formulation {f!r}; formulations: {', '.join(MILP)}")
    return [
        {
            "model": model,
            "batch": batch,
            "platform": config.platform,
            "ratio": config.ratio,
            "formulations": list(config.formulations),
            **planner_params(config),
        }
        for model, batch in config.workloads
    ]


def chain_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of one point of :func:`points` (see :func:`compute` for the columns): its MILP
    chain solved up to the largest formulation asked for, one row per formulation asked for.
    """
    wanted = list(params["formulations"])
    top = max(wanted, key=MILP.index)
    model, batch = params["model"], params["batch"]
    hw = tmsim.platform(params["platform"])
    limit_s = params["time_limit_s"]
    settings = plan_settings(params, capacity_of(params["ratio"], None))
    graph = tmsim.graph(model, batch=batch)
    try:
        chain = tmsim.plan_chain(graph, hw, top, settings=settings)
    except TmsimError as exc:
        chain = dict.fromkeys(MILP, exc)
    workload = {
        "workload": label(model, batch),
        "model": model,
        "batch": batch,
        "kernels": len(graph.kernels),
        "tensors": len(graph.tensors),
        "footprint_bytes": graph.peak_live_bytes,
    }
    rows = []
    before = 0.0
    for formulation in MILP:
        row = _row(chain.get(formulation), limit_s, before)
        before = row["solve_s"] if math.isfinite(row["solve_s"]) else before
        if formulation in wanted:
            rows.append({**workload, "formulation": formulation, **row})
    return pd.DataFrame(rows)


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Solve every workload's MILP chain (in ``workers`` processes, default 1, or on the Dask
    scheduler at ``dask_address``); write ``out_dir/NAME.parquet`` and return its path.

    One row per workload and formulation: ``workload``, ``model``, ``batch``, ``kernels``,
    ``tensors``, ``footprint_bytes``, ``formulation``, ``status`` (the solver's, ``fallback
    to ...`` where the smaller formulation's plan was kept, or ``error``), ``error``,
    ``variables``, ``constraints`` (of the model the plan came from), ``build_s``, ``solve_s``
    (cumulative over the chain), ``own_solve_s`` (minus the formulation before it), ``gap``
    (proven: against ``bound``, the solver's dual bound or the kernel-time bound, whichever
    is higher), ``bound``, ``predicted_s``, ``fallback`` and ``time_limit_hit``. Raises
    ``ValueError`` for an
    unknown formulation before any point runs, :class:`TmsimError` when points failed (an
    unknown model or platform).
    """
    frame = run_figure_points(
        NAME,
        points(config),
        chain_rows,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
    )
    return write_data(frame, out_dir, NAME, config)


def _row(got: Plan | TmsimError | None, limit_s: float, before_s: float) -> dict[str, Any]:
    """The statistics columns of one formulation's outcome."""
    nan = math.nan
    if not isinstance(got, Plan) or got.stats is None:
        error = str(got) if got is not None else "not solved"
        columns = ("build_s", "solve_s", "own_solve_s", "gap", "bound", "predicted_s")
        times = dict.fromkeys(columns, nan)
        return {
            **{"status": "error", "error": error, "variables": 0, "constraints": 0},
            **times,
            **{"fallback": False, "time_limit_hit": "time limit" in error},
        }
    s = got.stats
    spent = s.build_s + s.solve_s
    return {
        "status": s.status,
        "error": "",
        "variables": s.variables,
        "constraints": s.constraints,
        "build_s": s.build_s,
        "solve_s": s.solve_s,
        "own_solve_s": s.solve_s - before_s,
        "gap": s.gap,
        "bound": s.bound,
        "predicted_s": got.predicted_s,
        "fallback": s.status.startswith("fallback"),
        "time_limit_hit": "time_limit" in s.status or spent >= LIMIT_SHARE * limit_s,
    }


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Draw ``frame`` (the table :func:`compute` writes, its metadata in ``attrs``): log-log solve
    seconds against kernels (left) and against MILP variables (right, plans of their own
    model only); hollow markers where the time limit cut the chain short (labelled with the
    gap proven by then), crosses at the limit where no plan came back, and the limit as a
    dashed line.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    meta = frame.attrs
    limit = float(meta["config"]["time_limit_s"])
    fig, grid = panels(on, 1, 2, (10, 4), sharey=True)
    left, right = grid[0]
    marker = {"static": "s", "sync": "o", "async": "^"}
    for formulation, rows in frame.groupby("formulation", sort=False):
        color = COLORS.get(str(formulation), "k")
        shape = marker.get(str(formulation), "o")
        ok = rows[rows["status"] != "error"]
        for ax, x_col, part in ((left, "kernels", ok), (right, "variables", ok[~ok["fallback"]])):
            hit = part["time_limit_hit"].astype(bool)
            solid, hollow = part[~hit], part[hit]
            ax.scatter(solid[x_col], solid["solve_s"], marker=shape, s=40, color=color)
            ax.scatter(
                hollow[x_col],
                hollow["solve_s"],
                marker=shape,
                s=40,
                facecolors="none",
                edgecolors=color,
                linewidths=1.5,
            )
            for x, y, gap in zip(hollow[x_col], hollow["solve_s"], hollow["gap"], strict=True):
                if np.isfinite(gap):  # where the limit stopped it: the gap it had proven
                    ax.annotate(
                        f"{100 * gap:.1f}%",
                        (float(x), float(y)),
                        fontsize=6,
                        color=color,
                        xytext=(6, 0),
                        textcoords="offset points",
                        va="center",
                    )
        failed = rows[rows["status"] == "error"]
        left.scatter(failed["kernels"], [limit] * len(failed), marker="x", s=50, color=color)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(limit, color="0.3", ls="--", lw=1)
        ax.grid(which="both", alpha=0.25)
        ax.margins(x=0.15, y=0.15)
    # kernels span a decade or two: label 1, 2, 5 x 10^k; variables span more: powers of ten
    left.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    left.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    left.xaxis.set_minor_formatter(NullFormatter())
    left.set_xlabel("graph size (kernels)")
    right.set_xlabel("MILP size (variables)")
    wanted = 100 * float(meta["config"]["gap"])
    left.set_ylabel(f"time to a {wanted:g}% gap (s, cumulative over the chain)")
    left.set_title("against kernels (same workload: same x)", fontsize=9)
    right.set_title("against MILP variables (plans of their own model)", fontsize=9)
    for _, rows in frame.groupby("kernels"):
        y = rows["solve_s"].min()
        if np.isfinite(y):
            text = "\n".join(dict.fromkeys(rows["workload"].astype(str)))
            left.annotate(
                text,
                (float(rows["kernels"].iloc[0]), y),
                fontsize=6,
                xytext=(0, -5),
                textcoords="offset points",
                ha="center",
                va="top",
            )
    present = list(dict.fromkeys(frame["formulation"]))
    handles = [
        Line2D([], [], marker=marker.get(f, "o"), ls="", color=COLORS.get(f, "k")) for f in present
    ]
    labels_ = list(present)
    handles += [
        Line2D([], [], marker="o", ls="", mfc="none", mec="k", mew=1.5),
        Line2D([], [], marker="x", ls="", color="k"),
        Line2D([], [], color="0.3", ls="--"),
    ]
    labels_ += ["time limit hit", "no plan in time", f"time limit ({limit:g} s per chain)"]
    right.legend(handles, labels_, fontsize=7, loc="lower right")
    cfg = meta["config"]
    where = f"{cfg['platform']}, PMM:DRAM {cfg['ratio']}, HiGHS, gap {cfg['gap']:g}"
    fig.suptitle(f"{TITLE} ({where})", fontsize=10)
    if on is None:
        fig.tight_layout()
    return fig


__all__ = [
    "LIMIT_SHARE",
    "NAME",
    "QUICK",
    "TITLE",
    "Config",
    "chain_rows",
    "compute",
    "draw",
    "plot",
    "points",
]
