"""What every figure module shares: its contract, its data file, its figure files.

A figure module under :mod:`experiments` defines

- ``NAME`` (the file stem of its data and figures) and ``TITLE``;
- ``Config``, a frozen dataclass whose defaults are the full run, and ``QUICK``, the reduced
  configuration ``tmsim reproduce --quick`` runs;
- ``compute(config, out_dir, progress=None) -> Path``: runs planners and simulations and writes
  one tidy table, ``out_dir/NAME.parquet``, with the configuration and provenance
  (:func:`write_data`);
- ``plot(data, out_dir) -> list[Path]``: reads only that file (:func:`read_data`) and writes
  ``NAME.pdf`` and ``NAME.png`` (:func:`save_figure`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from tmsim.results import provenance, read_table, write_table  # noqa: E402

#: ``progress(message)``: called as a figure's compute stage reaches each point.
Progress = Callable[[str], None]

#: The AutoTM paper's conventional workloads (model, batch): footprints 111 to 143 GB.
CONVENTIONAL: tuple[tuple[str, int], ...] = (
    ("inception_v4", 1024),
    ("vgg19", 2048),
    ("resnet200", 512),
    ("densenet264", 512),
)

#: The paper's large workloads (about 650 GB), on a machine with 192 GiB of DRAM.
LARGE: tuple[tuple[str, int], ...] = (("vgg416", 320), ("resnet200", 2560))

#: The paper's GPU workloads on the RTX 2080 Ti (model, batch).
GPU_WORKLOADS: tuple[tuple[str, int], ...] = (
    ("inception_v4", 64),
    ("inception_v4", 128),
    ("inception_v4", 256),
    ("resnet200", 32),
    ("resnet200", 64),
    ("resnet200", 128),
    ("densenet264", 32),
    ("densenet264", 64),
    ("densenet264", 128),
    ("vgg19", 64),
    ("vgg19", 128),
)

#: Colours of the strategies, the same in every figure.
COLORS: dict[str, str] = {
    "all-fast": "#4d4d4d",
    "all-slow": "#bababa",
    "first-touch": "#e08214",
    "static": "#8073ac",
    "sync": "#2166ac",
    "async": "#1b7837",
    "2lm": "#b2182b",
    "unified-memory": "#b2182b",
}


def data_path(out_dir: str | os.PathLike[str], name: str) -> Path:
    """Where figure ``name``'s data file goes in ``out_dir``."""
    return Path(out_dir) / f"{name}.parquet"


def write_data(
    frame: pd.DataFrame,
    out_dir: str | os.PathLike[str],
    name: str,
    config: Any,
    solver: str = "HIGHS",
    seed: int | None = None,
) -> Path:
    """Write figure ``name``'s tidy ``frame`` with its resolved ``config`` (a dataclass or a
    JSON-ready mapping) and :func:`tmsim.results.provenance`; return the file's path."""
    resolved = asdict(config) if is_dataclass(config) and not isinstance(config, type) else config
    meta = {"figure": name, "config": resolved, "provenance": provenance(solver, seed)}
    return write_table(frame, data_path(out_dir, name), meta)


def read_data(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A figure's frame and metadata (see :func:`tmsim.results.read_table`)."""
    return read_table(path)


def save_figure(fig: Figure, out_dir: str | os.PathLike[str], name: str) -> list[Path]:
    """Write ``fig`` as ``name.pdf`` and ``name.png`` in ``out_dir``, close it, return both."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.pdf", out / f"{name}.png"]
    for p in paths:
        fig.savefig(p, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return paths


def label(model: str, batch: int) -> str:
    """A workload's label in figures, e.g. ``ResNet-200 b512``."""
    names = {
        "inception_v4": "Inception v4",
        "vgg19": "VGG19",
        "vgg416": "VGG416",
        "resnet50": "ResNet-50",
        "resnet200": "ResNet-200",
        "densenet121": "DenseNet-121",
        "densenet264": "DenseNet-264",
    }
    return f"{names.get(model, model)} b{batch}"


__all__ = [
    "COLORS",
    "CONVENTIONAL",
    "GPU_WORKLOADS",
    "LARGE",
    "Progress",
    "data_path",
    "label",
    "read_data",
    "save_figure",
    "write_data",
]
