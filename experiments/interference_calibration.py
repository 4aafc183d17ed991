"""Figure: the interference model against the measurements it was fitted to and checked on.

Left: every measured DRAM/PMM co-run rate (PerMA-Bench, VLDB 2022; ``reference/dram-pmm-
corun.md``) beside the rate the replay's ``controller`` level gives it, one row per side of
each co-run, with the relative error; a row is shaded where a side misses by more than
:data:`tmsim.calibration.channel_fit.TOLERANCE`. Right: Optane bandwidth with 16 threads split
between readers and writers (OptaneStudy, ``06-bandwidth_thmix.csv``), measured and modelled,
with the straight line between the measured pure ends; the PMM tier's write overlap is
fitted to it (:mod:`tmsim.calibration.mixing`), the channel mechanisms are not. Far right,
checked: one flow's own read/write mix on Optane (Yang et al., FAST 2020, Fig. 17, 4 threads)
against the tier's mix factor, and AutoTM's synchronous PMM -> DRAM copy (29 GB/s measured)
against the rate the fitted channels give it. Every point carries its relative error.

The co-run rows are modelled with the fitted mechanisms
(:data:`tmsim.calibration.channel_fit.FITTED`); the mixing curve on ``platform`` (its PMM
tier's write overlap) with its controller replaced by them
(:func:`tmsim.calibration.channel_fit.calibrated`), on the curve's machine
(:func:`tmsim.calibration.mixing.machine`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from experiments.common import AxesArg, Progress, load_frame, panels, save_figure, write_data
from tmsim.api.interference import INTERFERENCE_TOLERANCE, interference_rows

NAME = "interference_calibration"
TITLE = "Interference model against measured co-runs and read/write mixes"


@dataclass(frozen=True)
class Config:
    """``platform``: the preset whose PMM tier and channels the mixing curve runs on (its
    controller replaced by the fitted one); ``refit``: search the co-run parameters again
    (:func:`tmsim.calibration.channel_fit.fit_from_starts`, minutes) instead of using the
    stored fit."""

    platform: str = "cascadelake-optane"
    refit: bool = False


#: The same figure (the stored fit: seconds).
QUICK = Config()


def rows(config: Config) -> pd.DataFrame:
    """One row per measured rate (:func:`tmsim.api.interference_rows`)."""
    return interference_rows(config.platform, refit=config.refit)


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Write the table of :func:`rows` with ``config``; return its path (one process: the
    fit takes seconds, so ``workers`` and ``dask_address`` are not used)."""
    return write_data(rows(config), out_dir, NAME, config)


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` with :func:`draw`; write ``NAME.pdf`` and ``NAME.png``."""
    return save_figure(draw(load_frame(data)), out_dir, NAME)


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Three panels: measured and modelled co-run rates per side with their errors, the
    reader/writer mixing curve with its straight line, and one flow's own mixes with the
    copy check (see the module documentation). ``on``: three Axes, or None. Returns the
    figure."""
    fig, axes = panels(on, 1, 3, (17.0, 7.5), gridspec_kw={"width_ratios": [1.6, 1.0, 1.0]})
    ax, mix, own = axes[0, 0], axes[0, 1], axes[0, 2]
    corun = frame[frame["set"] == "corun"].reset_index(drop=True)
    y = np.arange(len(corun))
    tol = INTERFERENCE_TOLERANCE
    bad = corun.groupby("case")["error"].transform(lambda e: (e.abs() > tol).any())
    for i in y[bad.to_numpy()]:
        ax.axhspan(i - 0.5, i + 0.5, color="0.9", zorder=0)
    ax.scatter(corun["measured_gbps"], y, marker="o", color="black", label="measured", zorder=3)
    ax.scatter(corun["modelled_gbps"], y, marker="x", color="C3", label="modelled", zorder=3)
    ax.set_xscale("log")
    ax.set_yticks(y, [f"{c}: {s}" for c, s in zip(corun["case"], corun["side"], strict=True)])
    ax.tick_params(axis="y", labelsize=6)
    ax.invert_yaxis()
    for i, e in zip(y, corun["error"], strict=True):
        ax.annotate(
            f"{e:+.0%}", (1.01, i), xycoords=("axes fraction", "data"), fontsize=6, va="center"
        )
    good = len(set(corun["case"])) - int(corun.loc[bad, "case"].nunique())
    ax.set_xlabel("GB/s together (log)")
    ax.set_title(
        f"DRAM/PMM co-runs (PerMA-Bench): both sides within {tol:.0%} on "
        f"{good} of {corun['case'].nunique()} rows",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="lower right")
    curve = frame[frame["set"] == "mixing"].reset_index(drop=True)
    readers = np.array([int(c.split("-")[0]) for c in curve["case"]])
    mix.plot(readers, curve["measured_gbps"], "o-", color="black", label="measured")
    mix.plot(readers, curve["modelled_gbps"], "x-", color="C3", label="modelled (controller)")
    mix.plot(readers, curve["line_gbps"], ":", color="0.5", label="line between pure ends")
    mix.set_xlabel("reader threads (of 16; the rest write)")
    mix.set_ylabel("Optane GB/s")
    mix.set_title("Read/write thread mix (OptaneStudy 06; write overlap fitted)", fontsize=9)
    mix.legend(fontsize=7)
    for x, e, m in zip(readers, curve["error"], curve["modelled_gbps"], strict=True):
        mix.annotate(f"{e:+.0%}", (x, m), textcoords="offset points", xytext=(0, -11), fontsize=6)
    local = frame[frame["set"] == "local-mix"].reset_index(drop=True)
    share = local["case"].astype(float)
    own.plot(share, local["measured_gbps"], "o-", color="black", label="measured")
    own.plot(share, local["modelled_gbps"], "x-", color="C3", label="modelled (mix factor)")
    for x, e, m in zip(share, local["error"], local["modelled_gbps"], strict=True):
        own.annotate(f"{e:+.0%}", (x, m), textcoords="offset points", xytext=(0, -11), fontsize=6)
    copy = frame[frame["set"] == "copy"]
    if len(copy):
        c = copy.iloc[0]
        own.text(
            0.02,
            0.02,
            f"AutoTM sync PMM->DRAM copy: {c['modelled_gbps']:.1f} GB/s modelled, "
            f"{c['measured_gbps']:.0f} measured ({c['error']:+.0%})",
            transform=own.transAxes,
            fontsize=7,
        )
    own.set_xlabel("read fraction of each thread's traffic")
    own.set_ylabel("Optane GB/s (4 threads)")
    own.set_title("One flow's own mix (Yang et al. Fig. 17), checked", fontsize=9)
    own.legend(fontsize=7)
    return fig


__all__ = ["NAME", "QUICK", "TITLE", "Config", "compute", "draw", "plot", "rows"]
