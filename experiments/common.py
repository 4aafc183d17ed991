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

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from hwmodels.platform import Platform
from tmsim.capacity import Capacity
from tmsim.compare import CompareSettings, compare, rows_frame
from tmsim.results import provenance, read_table, write_table
from tmsim.strategies import STRATEGIES
from tmsim.workload.graph import Graph

#: ``progress(message)``: called as a figure's compute stage reaches each point.
Progress = Callable[[str], None]

#: The AutoTM paper's conventional workloads (model, batch): footprints 111 to 143 GB.
CONVENTIONAL: tuple[tuple[str, int], ...] = (
    ("inception_v4", 1024),
    ("vgg19", 2048),
    ("resnet200", 512),
    ("densenet264", 512),
)

#: The paper's large workloads (659 to 688 GB there; here Inception v4 b6144 673 GB, VGG416
#: b320 and ResNet-200 b2560 about 650 GB), on a machine with 192 GiB of DRAM. The paper's
#: DenseNet-264 b3072 is left out: the standard DenseNet-BC of the zoo needs 841 GB at that
#: batch, and its sync MILP did not reach the 1% gap within 600 s (its plan there simulated
#: 1.91x faster than 2LM).
LARGE: tuple[tuple[str, int], ...] = (("inception_v4", 6144), ("vgg416", 320), ("resnet200", 2560))

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

#: Colours of the strategies, the same in every figure (:data:`tmsim.strategies.STRATEGIES`).
COLORS: dict[str, str] = {name: s.color for name, s in STRATEGIES.items()}


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


# Shared helpers of the figure modules (appended; the contract above is unchanged).


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of ``values``; ``nan`` if there are none or any is not a finite
    positive number (a failed point must not vanish into a mean of the others)."""
    logs = []
    for v in values:
        if not (math.isfinite(v) and v > 0):
            return math.nan
        logs.append(math.log(v))
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


def compare_frame(
    graph: Graph, platform: Platform, settings: CompareSettings, **labels: object
) -> pd.DataFrame:
    """:func:`tmsim.compare.compare` of ``graph`` on ``platform`` as a frame
    (:func:`tmsim.compare.rows_frame`), with one leading column per keyword of ``labels``
    (e.g. ``model="resnet50", batch=2``) holding that value on every row. Raises as
    :func:`~tmsim.compare.compare`."""
    return insert_labels(rows_frame(compare(graph, platform, settings)), labels)


def insert_labels(frame: pd.DataFrame, labels: dict[str, object]) -> pd.DataFrame:
    """``frame`` with one leading column per item of ``labels``, in order, holding that value
    on every row (in place; returned for chaining)."""
    for i, (key, value) in enumerate(labels.items()):
        frame.insert(i, key, [value] * len(frame))
    return frame


def async_not_better(frame: pd.DataFrame) -> pd.Series:
    """Per row of a frame of one workload's strategies (columns ``strategy`` and
    ``predicted_s``): whether it is an ``async`` row whose plan predicts no shorter step than
    the ``sync`` plan, i.e. the MILP fell back to the sync plan or stopped at that warm start,
    so the row says nothing about asynchronous movement. False everywhere when there is no
    sync row."""
    sync = frame.loc[frame["strategy"] == "sync", "predicted_s"].to_numpy(dtype=float)
    if sync.size == 0:
        return pd.Series(False, index=frame.index)
    best_sync = float(sync.min())
    return (frame["strategy"] == "async") & ~(frame["predicted_s"] < best_sync * (1 - 1e-9))


__all__ += ["async_not_better", "compare_frame", "geomean", "insert_labels"]


_P = TypeVar("_P")
_R = TypeVar("_R")


def run_points(
    fn: Callable[[_P], _R],
    points: Sequence[_P],
    workers: int = 1,
    progress: Progress | None = None,
    describe: Callable[[_P], str] = str,
) -> list[_R]:
    """``[fn(p) for p in points]``, in order, in a pool of ``workers`` processes when
    ``workers > 1`` (independent MILP solves use one core each; HiGHS gains nothing from
    threads). ``fn`` must be a module-level function and the points picklable. Workers are
    forked where the platform can (so a calling script needs no ``__main__`` guard; a parent
    that has already run HiGHS forks cleanly), spawned elsewhere. ``progress(describe(p))``
    is called as each point finishes. Raises ``ValueError`` if ``workers < 1`` and whatever
    ``fn`` raises.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(points) <= 1:
        results = []
        for p in points:
            results.append(fn(p))
            if progress is not None:
                progress(describe(p))
        return results
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(min(workers, len(points)), mp_context=context) as pool:
        futures = {pool.submit(fn, p): i for i, p in enumerate(points)}
        done: dict[int, _R] = {}
        for future in as_completed(futures):
            i = futures[future]
            done[i] = future.result()
            if progress is not None:
                progress(describe(points[i]))
    return [done[i] for i in range(len(points))]


__all__ += ["run_points"]

#: The paper's GPU workloads whose training step does not fit the RTX 2080 Ti's 11 GiB in our
#: model (peak live bytes 1.2 to 3.0 times the device); the others fit whole, where every plan
#: is the all-fast plan.
GPU_OVERSUBSCRIBED: tuple[tuple[str, int], ...] = (
    ("inception_v4", 128),
    ("inception_v4", 256),
    ("resnet200", 64),
    ("resnet200", 128),
    ("densenet264", 64),
    ("densenet264", 128),
)

__all__ += ["GPU_OVERSUBSCRIBED"]


def capacity_of(ratio: str | None, fast_bytes: int | None) -> Capacity | None:
    """The capacity of a figure's point: a ``ratio`` (``"S:F"``), a size in bytes, or None
    for the platform's own fast tier. Raises :class:`tmsim.capacity.CapacityError` for a
    malformed ratio or size."""
    if fast_bytes is not None:
        return Capacity.of_bytes(fast_bytes)
    return None if ratio is None else Capacity.parse(ratio)


__all__ += ["capacity_of"]
