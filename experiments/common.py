"""What every figure module shares: its points, its data file, its figure files.

A figure module under :mod:`experiments` follows :class:`tmsim.figures.FigureModule`
(``NAME``, ``TITLE``, ``Config``, ``QUICK``, ``compute``, ``plot``). Its compute stage splits
the work into *points*, each a JSON-ready mapping of everything that shapes its rows (the
point's own parameters and the ``Config`` fields that matter to it), and hands them to
:func:`run_figure_points`, which runs them through the sweep engine
(:func:`tmsim.sweeps.jobs.run_jobs`): in this process, a local pool or on Dask, each finished
point kept under ``out_dir/NAME.points/`` keyed by a hash of the figure's name and the point,
so an interrupted compute resumes and a changed configuration recomputes only the points it
changes. The figure then derives its columns from the rows and writes one tidy table with
:func:`write_data`; its plot stage reads only that table (:func:`read_data`) and writes
``NAME.pdf`` and ``NAME.png`` (:func:`save_figure`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import tmsim
from tmsim import STRATEGIES, Capacity, Graph, PlanSettings, Platform, TmsimError
from tmsim.api.points import PointFrame, run_points, write_figure_table
from tmsim.figures import Progress

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

#: Colours of the strategies, the same in every figure (:data:`tmsim.STRATEGIES`).
COLORS: dict[str, str] = {name: s.color for name, s in STRATEGIES.items()}

#: The interference level the figures replay at unless a config says otherwise: the API's
#: default, the full model.
DEFAULT_INTERFERENCE = tmsim.InterferenceLevel.default().value


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
    JSON-ready mapping) and its provenance (:func:`tmsim.api.points.write_figure_table`);
    return the file's path."""
    return write_figure_table(frame, data_path(out_dir, name), name, config, solver, seed)


def read_data(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A figure's frame and metadata (see :func:`tmsim.read_table`)."""
    frame = load_frame(path)
    meta = {str(k): v for k, v in frame.attrs.items()}
    frame.attrs.clear()
    return frame, meta


def load_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A figure's frame with its metadata (``config``, ``provenance``) in ``attrs``, as
    every figure's ``draw`` takes it (:func:`tmsim.read_table`)."""
    return tmsim.read_table(path)


#: What a figure's ``draw`` takes to draw on: nothing (a figure of its own), one Axes, or as
#: many Axes as it has panels (any shape; taken row by row).
AxesArg = Axes | Sequence[Axes] | np.ndarray | None


def panels(
    ax: AxesArg, rows: int, cols: int, figsize: tuple[float, float], **subplots: Any
) -> tuple[Figure, np.ndarray]:
    """The figure and the ``rows`` x ``cols`` array of Axes a ``draw`` draws on: ``ax`` (one
    Axes, or ``rows * cols`` of them, taken row by row; its figure then), or a new figure of
    ``figsize`` inches with ``fig.subplots(rows, cols, **subplots)``, not attached to pyplot.
    Raises :class:`TmsimError` when ``ax`` holds another number of Axes."""
    if ax is None:
        fig = Figure(figsize=figsize)
        grid = fig.subplots(rows, cols, squeeze=False, **subplots)
        return fig, grid
    given = [ax] if isinstance(ax, Axes) else list(np.asarray(ax, dtype=object).flat)
    if len(given) != rows * cols or not all(isinstance(a, Axes) for a in given):
        raise TmsimError(
            f"this figure draws {rows * cols} panel(s) ({rows} x {cols}); give as many "
            f"matplotlib Axes, or none, not {len(given)} object(s)"
        )
    figure = given[0].get_figure()
    assert isinstance(figure, Figure)
    return figure, np.asarray(given, dtype=object).reshape(rows, cols)


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
    graph: Graph,
    platform: Platform,
    plan: PlanSettings,
    strategies: Sequence[str],
    interference: str = DEFAULT_INTERFERENCE,
    cache_block_bytes: int | None = None,
    *,
    labels: Mapping[str, object] | None = None,
) -> pd.DataFrame:
    """:func:`tmsim.compare` of ``strategies`` for ``graph`` on ``platform`` with the planner
    settings ``plan``, replayed at the interference level ``interference`` (default: the full
    model),
    with one leading column per key of ``labels`` (e.g. ``{"model": "resnet50"}``) holding
    that value on every row (the figure writes its own metadata: ``attrs`` are
    dropped). Each comparison runs on one thread (``workers=1``): a figure runs its points
    in processes of their own, which fill the cores. Raises as :func:`tmsim.compare`."""
    wanted = list(strategies)
    frame = tmsim.compare(
        graph,
        platform,
        wanted,
        settings=plan,
        cache_block_bytes=cache_block_bytes,
        interference=interference,
        workers=1,
    )
    frame.attrs.clear()
    return insert_labels(frame, dict(labels or {}))


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


def capacity_of(ratio: str | None, fast_bytes: int | None) -> Capacity | None:
    """The capacity of a figure's point: a ``ratio`` (``"S:F"``), a size in bytes, or None
    for the platform's own fast tier. Raises :class:`tmsim.capacity.CapacityError` for a
    malformed ratio or size."""
    if fast_bytes is not None:
        return Capacity.of_bytes(fast_bytes)
    return None if ratio is None else Capacity.parse(ratio)


def point_labels(params: Mapping[str, Any], graph: Graph, limit_bytes: int) -> dict[str, object]:
    """The leading columns of a figure point on one preset (``params``: ``platform``,
    ``kind``, ``ratio``, ``device_fraction``, ``model``, ``batch``) planned for ``graph`` at a
    fast-tier limit of ``limit_bytes``: its capacity as the point states it (the ratio, the
    share of the footprint, or the limit in GiB), the workload's label and size."""
    ratio, fraction = params["ratio"], params["device_fraction"]
    if ratio is not None:
        capacity = ratio
    elif fraction is not None:
        capacity = f"{fraction:g} of footprint"
    else:
        capacity = f"{limit_bytes / 2**30:.3g} GiB"
    return {
        "platform": params["platform"],
        "kind": params["kind"],
        "capacity": capacity,
        **workload_labels(params["model"], params["batch"], graph),
    }


def workload_labels(model: str, batch: int, graph: Graph) -> dict[str, object]:
    """The columns that name a workload in a figure's table: its label, model, batch, and
    ``graph``'s kernel count and footprint (peak live bytes)."""
    return {
        "workload": label(model, batch),
        "model": model,
        "batch": batch,
        "kernels": len(graph.kernels),
        "footprint_bytes": graph.peak_live_bytes,
    }


#: The planner settings a figure's point may carry by name: every field of
#: :class:`~tmsim.planners.PlanSettings` but the capacity (each figure's own axis) and the
#: profile (a file).
PLAN_FIELDS = tuple(f.name for f in fields(PlanSettings) if f.name not in ("capacity", "profile"))


def planner_params(config: Any) -> dict[str, Any]:
    """The planner settings of a figure's ``config`` as point parameters (the dict form of
    :class:`~tmsim.planners.PlanSettings`): each field of the config named as a field of
    ``PlanSettings`` (its time limit, gap, window ...), then its ``settings``, further fields
    of ``PlanSettings`` by name, so that a figure can set every one. Raises
    :class:`~tmsim.errors.TmsimError` for a name that is not a planner setting, or one the
    config sets by a field of its own as well."""
    own = {f.name: getattr(config, f.name) for f in fields(config) if f.name in PLAN_FIELDS}
    more = dict(getattr(config, "settings", ()))
    for name in more:
        if name not in PLAN_FIELDS:
            raise TmsimError(
                f"settings: {name!r} is not a planner setting; known: {', '.join(PLAN_FIELDS)}"
            )
        if name in own:
            raise TmsimError(f"settings: set {name!r} with the config's own field")
    return {**own, **more}


def plan_settings(params: Mapping[str, Any], capacity: Capacity | None) -> PlanSettings:
    """The planner settings of a point: ``capacity`` and every planner setting ``params``
    holds by name (:func:`planner_params`; the defaults for the rest). Raises
    :class:`~tmsim.errors.TmsimError` naming a setting out of range."""
    return PlanSettings(capacity=capacity, **{k: params[k] for k in PLAN_FIELDS if k in params})


def solver_params(strategies: Iterable[str], **settings: Any) -> dict[str, Any]:
    """``settings`` (the MILP's time limit, gap, ...) if any of ``strategies`` is a MILP
    strategy, else an empty dict: heuristics and simulations ignore them, so a point without
    a MILP leaves them out of its parameters and a changed time limit does not recompute it.
    Raises :class:`~tmsim.errors.TmsimError` for an unknown strategy."""
    names = list(strategies)
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown:
        raise TmsimError(f"unknown strategy {unknown[0]!r}; known: {', '.join(STRATEGIES)}")
    return dict(settings) if any(STRATEGIES[s].kind == "milp" for s in names) else {}


def run_figure_points(
    name: str,
    points: Sequence[Mapping[str, Any]],
    point_frame: PointFrame,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
    default_workers: int = 1,
) -> pd.DataFrame:
    """The rows of ``point_frame(p)`` for every point ``p`` of figure ``name``, in the order
    of ``points`` (:func:`tmsim.api.points.run_points`, each point named by
    :func:`describe` in progress messages). Raises :class:`~tmsim.errors.TmsimError` for bad
    options or when points failed (after the others are stored)."""
    return run_points(
        name,
        points,
        point_frame,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
        default_workers=default_workers,
        describe=describe,
    )


def describe(params: Mapping[str, Any]) -> str:
    """A point in a few words: its platform, workload and ratio, where it has them."""
    parts = [str(params[k]) for k in ("platform",) if params.get(k)]
    if "model" in params and "batch" in params:
        parts.append(label(str(params["model"]), int(params["batch"])))
    parts += [str(params[k]) for k in ("ratio",) if params.get(k)]
    return " ".join(parts) or str(dict(params))


__all__ = [
    "COLORS",
    "CONVENTIONAL",
    "GPU_OVERSUBSCRIBED",
    "GPU_WORKLOADS",
    "LARGE",
    "AxesArg",
    "PointFrame",
    "Progress",
    "async_not_better",
    "capacity_of",
    "compare_frame",
    "data_path",
    "describe",
    "geomean",
    "insert_labels",
    "label",
    "load_frame",
    "panels",
    "read_data",
    "run_figure_points",
    "save_figure",
    "solver_params",
    "write_data",
]
