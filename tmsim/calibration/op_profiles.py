"""Eager per-op profiles of a training step, lined up with the kernels of its traced graph.

An eager profile (``calibration/h200/ops_<config>.csv``, written by ``h200_measure.py``) lists
every top-level ATen op of one training step in execution order with the device time of the
CUDA kernels it launched. The graph ``tmsim import`` traces from the same model holds the
decomposed joint graph: mostly the same ops in the same order, under other names
(``conv2d`` -> ``convolution``, ``relu_`` -> ``relu``, ``linear`` -> ``addmm``), and a few
that differ (a per-parameter optimizer update against PyTorch's multi-tensor one,
``cross_entropy_loss`` against ``_log_softmax`` and ``nll_loss_forward``).

:func:`line_up` pairs them by key (:func:`align_key`: the family for GEMMs, else the op's name
with the eager aliases resolved), in order: where a key has as many ops on both sides, each
graph kernel gets its op's time (an :class:`Sample` of one kernel); the rest are summed per
family on each side (one :class:`Sample` of many kernels). Eager ``matmul`` ops time the
copies that make their operands contiguous with the product, which the graph holds as
separate ``clone`` kernels: they are paired but not kept.
"""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from hwmodels.kernels import GEMM_FAMILIES, KernelFamily, base_op_name, family_of
from tmsim.errors import TmsimError
from tmsim.workload.graph import Graph

#: Eager op names and the names the traced graph gives the same kernel.
EAGER_ALIASES = {
    "conv2d": "convolution",
    "batch_norm": "_native_batch_norm_legit_functional",
    "cudnn_batch_norm_backward": "native_batch_norm_backward",
    "relu_": "relu",
    "add_": "add",
    "softmax": "_softmax",
    "dropout": "native_dropout",
    "layer_norm": "native_layer_norm",
    "embedding_backward": "embedding_dense_backward",
    "max_pool2d": "max_pool2d_with_indices",
}

#: Eager ops whose device time also covers copies the graph holds as kernels of their own.
WITH_HIDDEN_COPIES = frozenset({"matmul"})


@dataclass(frozen=True, slots=True)
class EagerOp:
    """One row of an eager profile: the op's name, its device time (seconds) and its input
    shapes as recorded (text)."""

    name: str
    device_s: float
    shapes: str


def read_eager_profile(path: str | os.PathLike[str]) -> list[EagerOp]:
    """The ops of an eager profile CSV (columns ``name``, ``device_us``, ``shapes``; others
    ignored) that ran on the device (device time > 0), in order. Raises :class:`TmsimError`
    naming the file and line for a missing column or a time that is not a number >= 0."""
    where = Path(path)
    try:
        with where.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = {"name", "device_us", "shapes"} - set(reader.fieldnames or ())
            if missing:
                raise TmsimError(f"{where}: missing column(s) {', '.join(sorted(missing))}")
            ops = []
            for line, row in enumerate(reader, start=2):
                try:
                    device_us = float(row["device_us"])
                except (TypeError, ValueError):
                    raise TmsimError(
                        f"{where}:{line}: device_us {row['device_us']!r} is not a number"
                    ) from None
                if not device_us >= 0 or device_us == float("inf"):
                    raise TmsimError(f"{where}:{line}: device_us must be >= 0, got {device_us}")
                if device_us > 0:
                    ops.append(EagerOp(row["name"], device_us * 1e-6, row["shapes"] or ""))
    except OSError as exc:
        raise TmsimError(f"cannot read {where}: {exc.strerror or exc}") from None
    return ops


def align_key(op: str) -> str:
    """The key an op is lined up by: its family for GEMMs, else its base name with
    :data:`EAGER_ALIASES` resolved."""
    family = family_of(op)
    if family in GEMM_FAMILIES:
        return family.value
    name = base_op_name(op)
    return EAGER_ALIASES.get(name, name)


@dataclass(frozen=True, slots=True)
class Sample:
    """Measured ``seconds`` of graph kernels ``kernels`` of ``graph`` together (one kernel:
    its own time; several: the sum of a family's unpaired ops)."""

    graph: Graph
    kernels: tuple[int, ...]
    seconds: float
    family: KernelFamily


def line_up(graph: Graph, ops: list[EagerOp]) -> list[Sample]:
    """The samples of ``graph``'s kernels from the eager profile ``ops`` of the same step
    (module documentation). Families with ops on only one side give no sample."""
    by_graph: dict[str, list[int]] = defaultdict(list)
    for k, kern in enumerate(graph.kernels):
        by_graph[align_key(kern.op)].append(k)
    by_eager: dict[str, list[EagerOp]] = defaultdict(list)
    for op in ops:
        by_eager[align_key(op.name)].append(op)
    samples: list[Sample] = []
    left_kernels: dict[KernelFamily, list[int]] = defaultdict(list)
    left_seconds: dict[KernelFamily, float] = defaultdict(float)
    for key in sorted(set(by_graph) | set(by_eager)):
        kernels, eager = by_graph.get(key, []), by_eager.get(key, [])
        if kernels and len(kernels) == len(eager):
            for k, op in zip(kernels, eager, strict=True):
                if base_op_name(op.name) not in WITH_HIDDEN_COPIES:
                    fam = family_of(graph.kernels[k].op)
                    samples.append(Sample(graph, (k,), op.device_s, fam))
            continue
        for k in kernels:
            left_kernels[family_of(graph.kernels[k].op)].append(k)
        for op in eager:
            left_seconds[family_of(op.name)] += op.device_s
    for fam in sorted(set(left_kernels) & set(left_seconds)):
        samples.append(Sample(graph, tuple(sorted(left_kernels[fam])), left_seconds[fam], fam))
    return samples
