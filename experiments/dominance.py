"""Figure: the best MILP plan beside every baseline on the same budget (does the planner lose?).

tmsim's MILP is meant to be the optimum every runtime heuristic is measured against. Each
point here plans one workload on one platform at one fast-memory budget (a share of its
all-fast peak) with every strategy that applies to the platform
(:func:`tmsim.strategies.applicable`): the heuristics (first-touch, greedy, vDNN), the
runtime baselines (ZeRO-Offload, ZeRO-Infinity, save_on_cpu), recomputation (checkpoint,
selective), the hardware's own answers (2LM, unified memory) and every MILP formulation
(``static``, ``sync``, ``async``, ``async-aware``, ``remat``, ``static-rc``, ``sync-rc``,
``async-rc``). Every plan is validated and replayed at the same interference level.

:func:`dominance_table` puts, per point, each baseline's replayed step beside the best MILP
plan's and lists every case where the baseline is more than :data:`TOLERANCE` faster, with
the reason read from the rows (:func:`reason`):

- ``formulation``: the baseline's own prediction is below the best MILP plan's, so the MILP
  could not express its plan (a limit of the formulation: a mechanism it does not model, or a
  solve stopped short of it);
- ``replay``: the baseline is predicted slower but replays faster, so the replay does not
  honour a prediction (interference the cost model leaves out);
- ``hardware``: a simulated strategy (2LM, unified memory, first touch by pages), which plans
  nothing to compare predictions with.

The target is an empty list. The figure draws each baseline's step over the best MILP plan's,
one marker per point and baseline, the line at ``1 - TOLERANCE`` marking where a baseline wins.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
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
from tmsim import STRATEGIES, Capacity, applicable

NAME = "dominance"
TITLE = "The best MILP plan beside every baseline on the same budget"

#: How much faster than the best MILP plan a baseline's replayed step must be to be reported.
TOLERANCE = 0.01
#: The columns written before those of :func:`tmsim.comparison.rows_frame`.
LEADING = ("set", "platform", "workload", "model", "batch", "peak_bytes", "budget")


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``points``: (set, preset, zoo model, batch): the conventional set on the Optane socket,
    the GPU set on the RTX 2080 Ti, and the modern set (a transformer step on machines with a
    host CPU and a drive); each planned at every share of ``budgets`` of its all-fast peak;
    ``time_limit_s``, ``gap``: the MILP's cap per chain and relative gap; ``interference``:
    the replays' level; ``workers``: processes running points in parallel when :func:`compute`
    is not told otherwise; ``settings``: further planner settings by name.
    """

    points: tuple[tuple[str, str, str, int], ...] = (
        ("conventional", "cascadelake-optane", "vgg19", 16),
        ("conventional", "cascadelake-optane", "inception_v4", 16),
        ("conventional", "cascadelake-optane", "resnet50", 16),
        ("gpu", "rtx2080ti-pcie3", "vgg19", 16),
        ("gpu", "rtx2080ti-pcie3", "resnet50", 16),
        ("modern", "h100-host-nvme", "gpt2_small", 4),
        ("modern", "gh200", "gpt2_small", 4),
    )
    budgets: tuple[float, ...] = (0.6, 0.4)
    time_limit_s: float | None = 120.0
    gap: float = 0.01
    interference: str = DEFAULT_INTERFERENCE
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Two small steps, one budget, a 5% gap and no wall-clock cap (the same table on any load).
QUICK = Config(
    points=(
        ("conventional", "cascadelake-optane", "vgg19", 4),
        ("gpu", "rtx2080ti-pcie3", "resnet50", 4),
    ),
    budgets=(0.5,),
    time_limit_s=None,
    gap=0.05,
    workers=1,
)


def points(config: Config) -> list[dict[str, Any]]:
    """One point per (set, preset, model, batch) of ``config`` and budget."""
    return [
        {
            "set": group,
            "platform": preset,
            "model": model,
            "batch": batch,
            "budget": budget,
            **planner_params(config),
            "interference": config.interference,
        }
        for group, preset, model, batch in config.points
        for budget in config.budgets
    ]


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """Every strategy that applies to the point's platform, the fast tier at ``budget`` of
    the step's peak live bytes: :data:`LEADING`, then the rows of :func:`tmsim.compare`.
    Raises as :func:`tmsim.compare`."""
    graph = tmsim.graph(params["model"], batch=params["batch"])
    platform = tmsim.platform(params["platform"])
    peak = graph.peak_live_bytes
    plan = plan_settings(params, Capacity.of_bytes(int(peak * params["budget"])))
    frame = compare_frame(graph, platform, plan, applicable(platform), params["interference"])
    leading = {
        "set": params["set"],
        "platform": params["platform"],
        "workload": label(params["model"], params["batch"]),
        "model": params["model"],
        "batch": params["batch"],
        "peak_bytes": peak,
        "budget": params["budget"],
    }
    return insert_labels(frame, leading)


def describe(params: Mapping[str, Any]) -> str:
    """A point's name in progress messages."""
    where = f"{params['platform']} {label(params['model'], params['batch'])}"
    return f"{where} at {params['budget']:g}"


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Run every point of ``config`` (in ``workers`` processes, default ``config.workers``,
    or on the Dask scheduler at ``dask_address``) and write the table with the
    configuration; return the data file's path. Raises :class:`tmsim.TmsimError` once the
    other points are stored if a point raised."""
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


def _is_milp(strategy: str) -> bool:
    return STRATEGIES[strategy].kind == "milp"


def reason(baseline: Mapping[Any, Any], best_milp: Mapping[Any, Any]) -> str:
    """Why ``baseline`` (a row) replays faster than ``best_milp`` (a row): ``hardware`` for
    a simulated strategy, ``formulation`` where its own prediction is below the MILP plan's,
    else ``replay`` (module documentation)."""
    predicted = float(baseline["predicted_s"])
    if STRATEGIES[str(baseline["strategy"])].kind == "simulation" or not math.isfinite(predicted):
        return "hardware"
    return "formulation" if predicted < float(best_milp["predicted_s"]) else "replay"


def dominance_table(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per point and baseline of ``frame`` (:func:`compute`'s table) that replayed
    (valid, a finite step): ``set``, ``platform``, ``workload``, ``budget``, ``baseline``, its
    ``simulated_s``, the best MILP plan's (``milp``, ``milp_s``: the MILP row with the
    shortest replayed step), ``ratio`` (baseline over MILP), ``wins`` (ratio below
    ``1 - TOLERANCE``) and ``reason`` (:func:`reason`, where it wins; "" elsewhere). A point
    where no MILP plan replayed has ``milp`` "" and ``ratio`` nan. ``all-fast`` (an oracle
    where the step does not fit) is no baseline."""
    out = []
    keys = ["set", "platform", "workload", "budget"]
    for key, group in frame.groupby(keys, sort=False):
        ran = group[group["valid"].astype(bool) & group["simulated_s"].astype(float).notna()]
        milps = ran[ran["strategy"].map(_is_milp)].sort_values("simulated_s", kind="stable")
        best: dict[str, Any] | None = (
            {str(k): v for k, v in milps.iloc[0].items()} if len(milps) else None
        )
        for row in ran.to_dict("records"):
            strategy = str(row["strategy"])
            if _is_milp(strategy) or strategy == "all-fast":
                continue
            milp_s = math.nan if best is None else float(best["simulated_s"])
            ratio = float(row["simulated_s"]) / milp_s if best is not None else math.nan
            wins = bool(ratio < 1 - TOLERANCE)
            out.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "baseline": strategy,
                    "simulated_s": float(row["simulated_s"]),
                    "milp": "" if best is None else str(best["strategy"]),
                    "milp_s": milp_s,
                    "ratio": ratio,
                    "wins": wins,
                    "reason": reason(row, best) if wins and best is not None else "",
                }
            )
    return pd.DataFrame(out)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """The figure of ``frame`` (:func:`compute`'s table): one panel, each point (set,
    workload, platform and budget) along x, each baseline's replayed step over the best MILP
    plan's on y (log scale), coloured by baseline, the line at ``1 - TOLERANCE`` below which a
    baseline wins; on a figure of its own, or on the Axes ``on`` (one)."""
    table = dominance_table(frame)
    cases = list(
        dict.fromkeys(
            zip(table["set"], table["workload"], table["platform"], table["budget"], strict=True)
        )
    )
    fig, axes = panels(on, 1, 1, (max(4.0, 0.6 * len(cases) + 2.0), 3.6), sharey=False)
    ax = axes[0][0]
    for baseline, rows in table.groupby("baseline", sort=False):
        x = [
            cases.index(c)
            for c in zip(
                rows["set"], rows["workload"], rows["platform"], rows["budget"], strict=True
            )
        ]
        ax.scatter(
            x, rows["ratio"], s=18, color=COLORS.get(str(baseline), "gray"), label=str(baseline)
        )
    ax.axhline(1 - TOLERANCE, color="black", lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{w}\n{p}\n{b:g}" for _, w, p, b in cases], fontsize=6)
    ax.set_ylabel("baseline step / best MILP step", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=3, frameon=False)
    if on is None:
        fig.tight_layout()
    return fig


__all__ = [
    "LEADING",
    "NAME",
    "QUICK",
    "TITLE",
    "TOLERANCE",
    "Config",
    "compute",
    "describe",
    "dominance_table",
    "draw",
    "plot",
    "point_rows",
    "points",
    "reason",
]
