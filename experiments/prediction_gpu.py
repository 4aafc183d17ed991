"""Figure: predicted against measured step time on a real GPU.

Each row of a measurements file is a training step someone ran and timed: the graph it ran
(a file ``tmsim import`` wrote), the platform, the strategy it ran under (``all-fast``: every
tensor on the device; ``save-on-cpu``: PyTorch's activation offload) and the measured step in
seconds. The figure plans each (:func:`tmsim.plan`), replays the plan with contention
(:func:`tmsim.simulate`), and puts both beside the measurement. The default file is
``calibration/h200/steps.csv``: one H200 SXM, PyTorch 2.11, 2026-11-28. A user's own file
(from their runs, or a profile's plans) takes its place in ``Config.measurements``.

A measurements file is a CSV with the header ``workload,graph,platform,strategy,
measured_s,source``; ``graph`` and a ``platform`` that is a file are relative to it.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

import tmsim
from experiments.common import AxesArg, Progress, load_frame, panels, save_figure, write_data
from tmsim import TmsimError

NAME = "prediction_gpu"
TITLE = "Predicted against measured step time on a GPU"

#: The H200 measurements shipped with the repository.
H200_STEPS = Path(__file__).resolve().parent.parent / "calibration" / "h200" / "steps.csv"
#: The columns a measurements file must have.
COLUMNS = ("workload", "graph", "platform", "strategy", "measured_s", "source")
#: The band the figure marks around a perfect prediction.
BAND = 0.10


@dataclass(frozen=True)
class Config:
    """``measurements``: the measurements file (default: the H200's)."""

    measurements: str = str(H200_STEPS)


#: The same file: a handful of plans, seconds.
QUICK = Config()


def read_measurements(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a measurements file (module documentation), ``graph`` and a platform file
    resolved against its folder. Raises :class:`TmsimError` naming the file and line."""
    where = Path(path)
    try:
        with where.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise TmsimError(f"{where}: missing column(s) {', '.join(missing)}")
            rows = []
            for line, row in enumerate(reader, start=2):
                try:
                    measured = float(row["measured_s"])
                except (TypeError, ValueError):
                    measured = float("nan")
                if not measured > 0 or measured == float("inf"):
                    raise TmsimError(f"{where}:{line}: measured_s must be a time > 0")
                platform = row["platform"]
                local = where.parent / platform
                rows.append(
                    {
                        "workload": row["workload"],
                        "graph": str(where.parent / row["graph"]),
                        "platform": str(local) if local.is_file() else platform,
                        "strategy": row["strategy"],
                        "measured_s": measured,
                        "source": row["source"],
                    }
                )
    except OSError as exc:
        raise TmsimError(f"cannot read {where}: {exc.strerror or exc}") from None
    if not rows:
        raise TmsimError(f"{where}: no measured step")
    return rows


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Plan and replay every measured step of ``config.measurements``; write
    ``out_dir/NAME.parquet`` and return its path (``workers`` and ``dask_address`` are
    accepted for the figure contract; the points run here, a few seconds in all).

    One row per measured step: ``workload``, ``strategy``, ``platform``, ``kernels``,
    ``measured_s``, ``predicted_s`` (the plan's), ``simulated_s`` (replayed with contention),
    ``ratio`` (predicted / measured), ``source``. Raises :class:`TmsimError` for a bad file
    or a step that cannot be planned.
    """
    rows = read_measurements(config.measurements)
    out = []
    for i, row in enumerate(rows):
        graph = tmsim.load_graph(row["graph"])
        platform = tmsim.platform(row["platform"])
        plan = tmsim.plan(graph, platform, row["strategy"])
        run = tmsim.simulate(plan, graph, platform)
        out.append(
            {
                "workload": row["workload"],
                "strategy": row["strategy"],
                "platform": platform.name,
                "kernels": len(graph.kernels),
                "measured_s": row["measured_s"],
                "predicted_s": plan.predicted_s,
                "simulated_s": run.step_time_s,
                "ratio": plan.predicted_s / row["measured_s"],
                "source": row["source"],
            }
        )
        if progress is not None:
            progress(f"{row['workload']} ({row['strategy']}): {i + 1} of {len(rows)}")
    return write_data(pd.DataFrame(out), out_dir, NAME, config)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw ``NAME.pdf`` and ``NAME.png`` from the data file."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Two panels: predicted (and replayed) against measured step time, log-log, beside the
    line of a perfect prediction; and each step's predicted / measured with a band of
    +-:data:`BAND`."""
    if not frame.attrs.get("config"):
        raise TmsimError("this table holds no configuration: draw it from its data file")
    fig, grid = panels(on, 1, 2, (12.0, 4.0), gridspec_kw={"wspace": 0.7})
    scatter, bars = grid[0]
    ms = frame["measured_s"].to_numpy() * 1e3
    scatter.loglog(ms, frame["predicted_s"].to_numpy() * 1e3, "o", label="predicted (plan)")
    scatter.loglog(ms, frame["simulated_s"].to_numpy() * 1e3, "x", label="replayed")
    low, high = float(np.min(ms)) / 1.5, float(np.max(ms)) * 1.5
    scatter.plot([low, high], [low, high], "k-", lw=0.8)
    for axis in (scatter.xaxis, scatter.yaxis):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    scatter.set_xlabel("measured step (ms)")
    scatter.set_ylabel("tmsim's step (ms)")
    scatter.legend(fontsize=8)
    y = np.arange(len(frame))
    bars.barh(y, frame["ratio"].to_numpy(), color="tab:blue")
    bars.axvspan(1 - BAND, 1 + BAND, color="0.9", zorder=0)
    bars.axvline(1.0, color="k", lw=0.8)
    bars.set_yticks(y, [f"{w}" for w in frame["workload"]], fontsize=8)
    bars.set_xlim(0.5, max(1.5, float(frame["ratio"].max()) * 1.05))
    bars.set_xlabel("predicted / measured")
    fig.suptitle(TITLE)
    return fig
