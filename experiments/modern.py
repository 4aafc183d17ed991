"""Figure: today's machines, a transformer's training step: step time and energy against the
fast tier's capacity.

AutoTM's questions, asked of the machines that replaced Optane, on a LLaMA-style decoder
(Touvron et al., 2023: RMSNorm, rotary embeddings, SwiGLU) in mixed precision with Adam,
whose model state (16 bytes per parameter) outweighs its activations:

- **GPU HBM with host DDR5 and NVMe behind it** (``h100-host-nvme``), and **Grace Hopper**
  (``gh200``), whose GPU also loads host LPDDR5X directly over NVLink-C2C: AutoTM's
  synchronous MILP against the runtimes' own placements (ZeRO-Offload, and on the PCIe
  machine ZeRO-Infinity's optimizer state on NVMe, PyTorch's save_on_cpu and vDNN-style
  activation offload, CUDA managed memory), as the HBM shrinks;
- **Xeon Max** in flat mode (HBM2e and DDR5 as two tiers software places: the MILP, and
  first touch) against cache mode (the HBM a hardware cache of the DDR5: ``2lm``, replayed by
  the cache simulator), at the same HBM capacity;
- **CXL expansion** (``spr-ddr5-cxl``): how much of the DDR5 a Micron CZ120 expander can
  replace, the DDR5 shrinking while the expander holds the rest.

The fast tier holds a share (``budget``) of the step's peak live bytes; the slowdown is over
the all-fast step (every tensor in the fast tier, on the same machine with that tier as large
as the step needs). Every plan is validated and replayed with the full interference model,
and charged with its platform's energy model (:mod:`tmsim.energy`): the figure's second row
is each plan's energy per step over the all-fast plan's. :func:`headline_table` gives, per
platform, the least budget each strategy reaches within a slowdown, and the years the NVMe
drive lasts under each plan's writes.
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
    load_frame,
    panels,
    plan_settings,
    planner_params,
    run_figure_points,
    save_figure,
    write_data,
)
from tmsim import Capacity

NAME = "modern"
TITLE = "Today's machines: a transformer step's slowdown and energy against the fast tier's size"

#: Line styles per strategy (``2lm``: Xeon Max in cache mode).
LEGEND = {
    "sync": "AutoTM sync (MILP)",
    "zero-offload": "ZeRO-Offload",
    "zero-infinity": "ZeRO-Infinity (NVMe)",
    "save-on-cpu": "activation offload (save_on_cpu)",
    "vdnn": "activation offload (vDNN)",
    "unified-memory": "CUDA managed memory",
    "first-touch": "first touch (NUMA)",
    "2lm": "hardware cache (cache mode)",
}
MARKERS = {
    "sync": "o",
    "zero-offload": "D",
    "zero-infinity": "P",
    "save-on-cpu": "<",
    "vdnn": "s",
    "unified-memory": "x",
    "first-touch": "^",
    "2lm": "v",
}

#: The columns written before those of :func:`tmsim.comparison.rows_frame`.
LEADING = ("platform", "workload", "kernels", "peak_bytes", "budget")


@dataclass(frozen=True)
class Point:
    """One panel: ``preset``, the zoo ``model`` at ``batch`` with ``layers`` decoder layers
    (None: all of them) in ``dtype``, planned by ``strategies`` (beside ``all-fast``)."""

    preset: str
    model: str
    batch: int
    layers: int | None
    dtype: str
    strategies: tuple[str, ...]


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are the full experiment.

    ``points``: one panel each (:class:`Point`, as tuples); ``budgets``: shares of the step's peak
    live bytes the fast tier holds; ``time_limit_s``, ``gap``: the MILP's cap per chain and relative
    gap; ``interference``: the replays' interference level (default the full model; ``none``: none);
    ``workers``: processes running points in parallel when :func:`compute` is not told otherwise.

    The GPUs run LLaMA-7B's shapes cut to 8 of its 32 layers (its embedding and output
    layer whole) at sequence 2048, so that a full run's MILPs take minutes; the CPUs run 2
    layers in fp32 (the CPU presets give no 16-bit peak).
    """

    points: tuple[tuple[str, str, int, int | None, str, tuple[str, ...]], ...] = (
        (
            "h100-host-nvme",
            "llama_7b",
            1,
            8,
            "bf16",
            ("sync", "zero-offload", "zero-infinity", "save-on-cpu", "vdnn", "unified-memory"),
        ),
        ("gh200", "llama_7b", 1, 8, "bf16", ("sync", "zero-offload")),
        ("xeonmax-flat", "llama_7b", 1, 2, "fp32", ("sync", "first-touch", "2lm")),
        ("spr-ddr5-cxl", "llama_7b", 1, 2, "fp32", ("sync", "first-touch")),
    )
    budgets: tuple[float, ...] = (0.9, 0.75, 0.6, 0.45, 0.3)
    time_limit_s: float | None = 120.0
    gap: float = 0.01
    interference: str = DEFAULT_INTERFERENCE
    workers: int = 2
    #: further planner settings by name (fields of ``tmsim.PlanSettings``), for the MILP
    settings: tuple[tuple[str, Any], ...] = ()


#: Two GPT-2 small layers at sequence 256 on two presets, two budgets: seconds.
QUICK = Config(
    points=(
        ("h100-host-nvme", "gpt2_small", 1, 2, "bf16", ("sync", "vdnn")),
        ("xeonmax-flat", "gpt2_small", 1, 2, "fp32", ("sync", "first-touch", "2lm")),
    ),
    budgets=(0.8, 0.5),
    time_limit_s=30.0,
    gap=0.05,
    workers=1,
)


def workload_name(model: str, batch: int, layers: int | None) -> str:
    """A point's workload as the figure labels it, e.g. ``llama_7b 8L b1``."""
    return f"{model}{'' if layers is None else f' {layers}L'} b{batch}"


def points(config: Config) -> list[dict[str, Any]]:
    """One point per panel of ``config`` and budget, with the settings that shape it."""
    out = []
    for preset, model, batch, layers, dtype, strategies in config.points:
        for budget in config.budgets:
            out.append(
                {
                    "platform": preset,
                    "model": model,
                    "batch": batch,
                    "layers": layers,
                    "dtype": dtype,
                    "strategies": list(strategies),
                    "budget": budget,
                    **planner_params(config),
                    "interference": config.interference,
                }
            )
    return out


def point_rows(params: Mapping[str, Any]) -> pd.DataFrame:
    """``all-fast`` and the point's strategies, the fast tier at ``budget`` of the step's
    peak live bytes: the rows of :func:`tmsim.compare` after the :data:`LEADING` columns.
    Raises as :func:`tmsim.compare`."""
    options: dict[str, Any] = {"dtype": params["dtype"]}
    if params["layers"] is not None:
        options["layers"] = params["layers"]
    graph = tmsim.graph(params["model"], batch=params["batch"], **options)
    platform = tmsim.platform(params["platform"])
    peak = graph.peak_live_bytes
    plan = plan_settings(params, Capacity.of_bytes(int(peak * params["budget"])))
    strategies = ("all-fast", *params["strategies"])
    frame = compare_frame(graph, platform, plan, strategies, params["interference"])
    leading = {
        "platform": params["platform"],
        "workload": workload_name(params["model"], params["batch"], params["layers"]),
        "kernels": len(graph.kernels),
        "peak_bytes": peak,
        "budget": params["budget"],
    }
    return insert_labels(frame, leading)


def describe(params: Mapping[str, Any]) -> str:
    """A point's name in progress messages."""
    name = workload_name(params["model"], params["batch"], params["layers"])
    return f"{params['platform']} {name} at {params['budget']:g}"


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


def energy_ratio(frame: pd.DataFrame) -> pd.Series:
    """Each row's energy per step over that of the all-fast row of its platform and budget
    (``nan`` where either is unknown)."""
    keys = ["platform", "workload", "budget"]
    fast = frame[frame["strategy"] == "all-fast"].set_index(keys)["energy_j"]
    base = frame.set_index(keys).index.map(lambda k: float(fast.get(k, math.nan)))
    return pd.Series(frame["energy_j"].to_numpy(dtype=float) / np.asarray(base), frame.index)


def headline_table(frame: pd.DataFrame, within: float = 1.25) -> pd.DataFrame:
    """One row per platform and strategy of ``frame`` (:func:`compute`'s table): the least
    ``budget`` at which the strategy's slowdown stays within ``within`` (``nan`` where none
    does), its slowdown and energy ratio there (:func:`energy_ratio`), and the fewest years
    any rated device (an NVMe drive) lasts under the strategy's plans at any budget."""
    frame = frame.assign(energy_ratio=energy_ratio(frame))
    rows = []
    for (preset, strategy), group in frame.groupby(["platform", "strategy"], sort=False):
        if strategy == "all-fast":
            continue
        ok = group[group["slowdown"].astype(float) <= within].sort_values("budget")
        first = ok.iloc[0] if len(ok) else None
        wear = group["wear_years"].astype(float)
        rows.append(
            {
                "platform": preset,
                "strategy": strategy,
                "least_budget": math.nan if first is None else float(first["budget"]),
                "slowdown": math.nan if first is None else float(first["slowdown"]),
                "energy_ratio": math.nan if first is None else float(first["energy_ratio"]),
                "least_wear_years": float(wear.min()) if wear.notna().any() else math.nan,
            }
        )
    return pd.DataFrame(rows)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf`` and ``NAME.png`` to ``out_dir`` and return their paths."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """The figure of ``frame`` (:func:`compute`'s table, with its configuration in ``attrs``):
    one column per point, slowdown over all-fast in the first row and energy per step over
    all-fast in the second, the budget (share of the all-fast peak) on the x axes, one line
    per strategy (a log scale where one is twenty times another), and the years a rated device
    (an NVMe drive) lasts under each strategy that writes it; on a figure of its own, or on
    the Axes ``on`` (two rows of panels)."""
    config = frame.attrs["config"]
    presets = [p[0] for p in config["points"]]
    size = (2.9 * len(presets) + 0.6, 5.6)
    fig, axes = panels(on, 2, len(presets), size, sharey=False)
    ratio = energy_ratio(frame)
    for c, preset in enumerate(presets):
        mine = frame[frame["platform"] == preset]
        workload = str(mine["workload"].iloc[0]) if len(mine) else ""
        _lines(axes[0][c], mine, mine["slowdown"])
        _lines(axes[1][c], mine, ratio[mine.index])
        _wear_note(axes[1][c], mine)
        axes[0][c].set_title(f"{preset}\n{workload}", fontsize=8)
        axes[1][c].set_xlabel("fast tier / all-fast peak", fontsize=8)
    axes[0][0].set_ylabel("slowdown vs all-fast (x)", fontsize=8)
    axes[1][0].set_ylabel("energy per step vs all-fast (x)", fontsize=8)
    seen: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(name, handle)
    fig.legend(
        list(seen.values()),
        list(seen),
        loc="upper center",
        ncol=min(len(seen), 5),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 1.06),
    )
    if on is None:
        fig.tight_layout()
    return fig


def _wear_note(ax: Axes, rows: pd.DataFrame) -> None:
    """The fewest years a rated device lasts under each strategy that writes it, as text."""
    wear = rows.dropna(subset=["wear_years"]).groupby("strategy")["wear_years"].min()
    if wear.empty:
        return
    text = "\n".join(
        f"{LEGEND.get(str(name), str(name))}: {rows['wear_tier'].iloc[0]} worn in {years:.2g} y"
        for name, years in wear.items()
    )
    ax.text(0.02, 0.5, text, transform=ax.transAxes, fontsize=6.5, va="center")


def _lines(ax: Axes, rows: pd.DataFrame, values: pd.Series) -> None:
    """One panel: each strategy's ``values`` at each budget it ran."""
    for strategy in LEGEND:
        pick = rows["strategy"] == strategy
        if not pick.any():
            continue
        order = rows[pick].sort_values("budget").index
        x = rows.loc[order, "budget"].to_numpy(dtype=float)
        y = values[order].to_numpy(dtype=float)
        ok = np.isfinite(y)
        ax.plot(
            x[ok],
            y[ok],
            marker=MARKERS[strategy],
            ms=4,
            lw=1.2,
            color=COLORS.get(strategy, "black"),
            label=LEGEND[strategy],
        )
    ax.axhline(1.0, color=COLORS["all-fast"], lw=0.8, ls=":")
    finite = values[np.isfinite(values.to_numpy(dtype=float))]
    if len(finite) and float(finite.max()) > 20 * max(float(finite.min()), 1e-12):
        ax.set_yscale("log")  # a line two orders of magnitude above the others
    ax.invert_xaxis()
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


__all__ = [
    "LEADING",
    "LEGEND",
    "NAME",
    "QUICK",
    "TITLE",
    "Config",
    "Point",
    "compute",
    "describe",
    "draw",
    "energy_ratio",
    "headline_table",
    "plot",
    "point_rows",
    "points",
    "workload_name",
]
