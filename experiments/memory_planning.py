"""Figure and tables: memory planning as the lecture teaches it, on every CNN of the zoo.

The CSE599G1 lecture on memory optimisation (University of Washington, 2017) plans a graph's
memory ahead of time: with no reuse, "temporary space linear to number of ops"; *normal
sharing* recycles memory that is no longer needed; *in-place* stores the result in the input:
"we can only do inplace if result op is the only consumer of the current value" (counting, in
its algorithm, the consumers yet to run); and its allocation algorithm hands out tags from a
box of free tags. Here every CNN's training step is planned under the four schemes of
:func:`tmsim.memory_reuse` (no reuse, in place, shared, shared and in place): each scheme's
liveness lower bound (the most bytes live at one kernel, which no layout beats), the pool of
each static allocator, and the memory of the lecture's tags, weights and optimizer state
included. A point is one workload.

Besides the figure, :func:`plot` writes one table per workload in Markdown
(:func:`tables_markdown`) beside it, all drawn from the data file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

import tmsim
from experiments.common import (
    CONVENTIONAL,
    LARGE,
    AxesArg,
    Progress,
    load_frame,
    panels,
    run_figure_points,
    save_figure,
    workload_labels,
    write_data,
)
from tmsim import TmsimError

NAME = "memory_planning"
TITLE = "Memory planning as the lecture teaches it: reuse schemes against the liveness bound"

#: Every CNN of the zoo at the AutoTM paper's batch: its conventional workloads, VGG416 at its
#: large batch; ResNet-50 and DenseNet-121, which the paper does not run, at the batch of their
#: deeper siblings (512).
ZOO: tuple[tuple[str, int], ...] = (
    *CONVENTIONAL,
    *((m, b) for m, b in LARGE if m == "vgg416"),
    ("resnet50", 512),
    ("densenet121", 512),
)

#: The schemes, in the order of :func:`tmsim.memory_reuse`, with their colours.
SCHEMES: dict[str, str] = {
    "no-reuse": "#9e9e9e",
    "in-place": "#8da0cb",
    "shared": "#66c2a5",
    "shared+in-place": "#1b7f5f",
}
#: The allocators' colours: the static allocator's strategies, then the lecture's tags.
ALLOCATORS: dict[str, str] = {
    "first-fit": "#4c72b0",
    "best-fit": "#55a868",
    "first-fit-start": "#c44e52",
    "tags": "#8172b2",
}
#: Labels of the allocators in the figure and the tables.
ALLOCATOR_LABELS = {"tags": "lecture's tags"}
_POOL = re.compile(r"^pool_(.+)_bytes$")


@dataclass(frozen=True)
class Config:
    """What the figure runs; the defaults are every CNN of the zoo at the paper's batch.

    ``workloads``: (zoo model, batch) pairs; ``alignment_bytes``: every buffer's size is
    rounded up to it before any counting (the static allocator's default, 64).
    """

    workloads: tuple[tuple[str, int], ...] = ZOO
    alignment_bytes: int = 64


#: Three small workloads; under a second.
QUICK = Config(workloads=(("vgg19", 16), ("resnet50", 16), ("inception_v4", 16)))


def points(config: Config) -> list[dict[str, Any]]:
    """One point per workload of ``config``. Raises :class:`TmsimError` for an alignment that
    is not a whole number of bytes >= 1."""
    align = config.alignment_bytes
    if isinstance(align, bool) or not isinstance(align, int) or align < 1:
        raise TmsimError(f"alignment_bytes must be a whole number of bytes >= 1, got {align!r}")
    return [
        {"model": model, "batch": batch, "alignment_bytes": align}
        for model, batch in config.workloads
    ]


def pool_column(allocator: str) -> str:
    """The column of an allocator's pool, e.g. ``pool_first_fit_bytes``."""
    return f"pool_{allocator.replace('-', '_')}_bytes"


def point_frame(params: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of one workload, one per scheme (see :func:`compute` for the columns)."""
    model, batch = params["model"], params["batch"]
    graph = tmsim.graph(model, batch=batch)
    reuse = tmsim.memory_reuse(graph, alignment_bytes=params["alignment_bytes"])
    labels = {
        **workload_labels(model, batch, graph),
        "tensors": len(graph.tensors),
        "persistent_bytes": reuse.persistent_bytes,
        "in_place_pairs": len(reuse.in_place),
    }
    plain = reuse.schemes[0].bound_bytes
    rows = []
    for m in reuse.schemes:
        pools = {pool_column(str(s)): b for s, b in m.pools_bytes.items()}
        rows.append(
            {
                **labels,
                "scheme": m.scheme.value,
                "buffers": m.buffers,
                "bound_bytes": m.bound_bytes,
                **pools,
                pool_column("tags"): m.tags_bytes,
                "best_pool_bytes": m.pool_bytes,
                "best_allocator": str(m.strategy),
                "fragmentation": 1 - m.bound_bytes / m.pool_bytes,
                "tags_fragmentation": 1 - m.bound_bytes / m.tags_bytes,
                "saving_vs_no_reuse": 1 - m.bound_bytes / plain,
            }
        )
    return pd.DataFrame(rows)


def compute(
    config: Config,
    out_dir: str | os.PathLike[str],
    progress: Progress | None = None,
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Path:
    """Plan every workload's memory under every scheme (in ``workers`` processes, default 1,
    or on the Dask scheduler at ``dask_address``); write ``out_dir/NAME.parquet`` and return
    its path.

    One row per workload and scheme: ``workload``, ``model``, ``batch``, ``kernels``,
    ``footprint_bytes`` (peak live bytes), ``tensors``, ``persistent_bytes`` (weights and
    optimizer state, in every other byte count), ``in_place_pairs`` (outputs the in-place
    schemes write into an input's buffer), ``scheme``, ``buffers``, ``bound_bytes`` (the
    liveness lower bound), ``pool_<allocator>_bytes`` for each strategy of the static
    allocator and for the lecture's tags (``pool_tags_bytes``), ``best_pool_bytes`` and
    ``best_allocator`` (the static allocator's smallest pool), ``fragmentation`` (``1 -
    bound / best pool``), ``tags_fragmentation`` (``1 - bound / tags``) and
    ``saving_vs_no_reuse`` (``1 - bound / the no-reuse bound``). Raises :class:`TmsimError`
    for a bad alignment before any point runs, and when points failed (an unknown model).
    """
    frame = run_figure_points(
        NAME,
        points(config),
        point_frame,
        out_dir,
        progress,
        workers=workers,
        dask_address=dask_address,
    )
    return write_data(frame, out_dir, NAME, config, solver="none")


def allocators(frame: pd.DataFrame) -> list[str]:
    """The allocators whose pools ``frame`` holds, in column order (the lecture's tags last)."""
    found = [m.group(1).replace("_", "-") for c in frame.columns if (m := _POOL.match(str(c)))]
    return [a for a in found if a != "tags"] + [a for a in found if a == "tags"]


def model_table(frame: pd.DataFrame, workload: str) -> pd.DataFrame:
    """One workload's table: a row per scheme, its buffers, bound and every pool in GB
    (10^9 bytes), and how far the best pool and the tags lie above the bound, in per cent."""
    rows = frame[frame["workload"] == workload]
    table = pd.DataFrame({"scheme": rows["scheme"], "buffers": rows["buffers"]})
    table["bound GB"] = rows["bound_bytes"] / 1e9
    for a in allocators(frame):
        table[f"{ALLOCATOR_LABELS.get(a, a)} GB"] = rows[pool_column(a)] / 1e9
    table["best over bound %"] = 100 * (rows["best_pool_bytes"] / rows["bound_bytes"] - 1)
    table["tags over bound %"] = 100 * (rows[pool_column("tags")] / rows["bound_bytes"] - 1)
    return table.reset_index(drop=True)


def tables_markdown(frame: pd.DataFrame) -> str:
    """Every workload's :func:`model_table` in Markdown, under a heading that names the
    workload, its kernels, weights and in-place pairs."""
    parts = [f"# {TITLE}\n"]
    for workload in dict.fromkeys(frame["workload"]):
        row = frame[frame["workload"] == workload].iloc[0]
        parts.append(
            f"## {workload}\n\n{int(row['kernels'])} kernels, {int(row['tensors'])} tensors, "
            f"weights and optimizer state {row['persistent_bytes'] / 1e9:.3f} GB (in every "
            f"number), {int(row['in_place_pairs'])} in-place pairs.\n"
        )
        table = model_table(frame, str(workload))
        head = "| " + " | ".join(table.columns) + " |"
        rule = "|" + "|".join("---" if c == "scheme" else "---:" for c in table.columns) + "|"
        body = [
            "| " + " | ".join(_cell(v) for v in values) + " |"
            for values in table.itertuples(index=False)
        ]
        parts.append("\n".join([head, rule, *body]) + "\n")
    return "\n".join(parts)


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | np.integer):
        return str(value)
    return f"{float(value):.3f}"


def plot(data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Draw the table ``data`` (written by :func:`compute`) with :func:`draw`; write
    ``NAME.pdf``, ``NAME.png`` and the per-workload tables, ``NAME.md``
    (:func:`tables_markdown`), to ``out_dir`` and return their paths."""
    frame = load_frame(data)
    paths = save_figure(draw(frame), out_dir, NAME)
    tables = Path(out_dir) / f"{NAME}.md"
    tables.write_text(tables_markdown(frame), encoding="utf-8")
    return [*paths, tables]


def draw(frame: pd.DataFrame, on: AxesArg = None) -> Figure:
    """Draw ``frame`` (the table :func:`compute` writes, its metadata in ``attrs``): top,
    each scheme's liveness bound as a share of no reuse, per workload (its no-reuse and
    best bytes in the labels); middle and bottom, how far each allocator's pool lies above
    the bound with shared buffers, without and with in-place updates.

    ``on``: the Axes to draw on, one per panel (:func:`experiments.common.panels`); default a
    figure of its own. Returns the figure.
    """
    workloads = list(dict.fromkeys(frame["workload"]))
    x = np.arange(len(workloads))
    fig, grid = panels(on, 3, 1, (3.0 + 1.6 * len(workloads), 10.5))
    left, middle, right = grid[:, 0]

    width = 0.8 / len(SCHEMES)
    for j, (scheme, color) in enumerate(SCHEMES.items()):
        share = [
            _get(frame, w, scheme, "bound_bytes") / _get(frame, w, "no-reuse", "bound_bytes")
            for w in workloads
        ]
        left.bar(x + (j - 1.5) * width, share, width, color=color, label=scheme)
    for i, w in enumerate(workloads):
        best = _get(frame, w, "shared+in-place", "bound_bytes")
        height = best / _get(frame, w, "no-reuse", "bound_bytes")
        left.text(i + 1.5 * width, height, _gb(best), ha="center", va="bottom", fontsize=6)
    left.set_ylim(0, 1.3)
    left.set_ylabel("liveness bound / no-reuse bytes")
    left.set_title("memory by scheme (label: shared+in-place GB)", fontsize=9)
    ticks = [
        f"{w}\n{_gb(_get(frame, w, 'no-reuse', 'bound_bytes'))} GB no reuse" for w in workloads
    ]
    left.set_xticks(x, ticks, fontsize=7)

    names = allocators(frame)
    width = 0.8 / max(1, len(names))
    for ax, scheme in ((middle, "shared"), (right, "shared+in-place")):
        for j, a in enumerate(names):
            over = [_over_bound_pct(frame, w, scheme, pool_column(a)) for w in workloads]
            at = x + (j - (len(names) - 1) / 2) * width
            ax.bar(at, over, width, color=ALLOCATORS.get(a, "k"), label=ALLOCATOR_LABELS.get(a, a))
            for xi, v in zip(at, over, strict=True):
                ax.text(xi, v, f"{v:.1f}", ha="center", va="bottom", fontsize=5, rotation=90)
        ax.set_xticks(x, workloads, fontsize=7)
        ax.set_ylabel("pool over the liveness bound (%)")
        ax.set_title(f"allocators, {scheme} buffers", fontsize=9)
    top = max(middle.get_ylim()[1], right.get_ylim()[1]) * 1.15
    for ax in (left, middle, right):
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", ncol=4)
    for ax in (middle, right):
        ax.set_ylim(0, top)
    align = frame.attrs.get("config", {}).get("alignment_bytes", "?")
    fig.suptitle(f"{TITLE} (buffers aligned to {align} B)", fontsize=10)
    if on is None:
        fig.tight_layout()
    return fig


def _gb(n_bytes: float) -> str:
    """``n_bytes`` in GB (10^9 bytes): whole above 100, else three significant figures."""
    gb = n_bytes / 1e9
    return f"{gb:,.0f}" if gb >= 100 else f"{gb:.3g}"


def _over_bound_pct(frame: pd.DataFrame, workload: str, scheme: str, column: str) -> float:
    """How far one workload's pool ``column`` lies above its bound in ``scheme``, in %."""
    return 100 * (
        _get(frame, workload, scheme, column) / _get(frame, workload, scheme, "bound_bytes") - 1
    )


def _get(frame: pd.DataFrame, workload: str, scheme: str, column: str) -> float:
    """One value of one workload's scheme row; ``nan`` if the row is missing."""
    hit = frame[(frame["workload"] == workload) & (frame["scheme"] == scheme)]
    return float(hit[column].iloc[0]) if len(hit) else float("nan")


__all__ = [
    "NAME",
    "QUICK",
    "TITLE",
    "ZOO",
    "Config",
    "allocators",
    "compute",
    "draw",
    "model_table",
    "plot",
    "point_frame",
    "points",
    "pool_column",
    "tables_markdown",
]
