"""What each kernel of a graph does, as a calibrated kernel model prices it.

:class:`hwmodels.kernels.KernelModel` prices kernels by family, FLOPs, elements, dtype and
GEMM alignment (:class:`hwmodels.kernel_time.KernelWork`); this module reads those off a
:class:`~tmsim.workload.graph.Graph` and turns the model's parts into the cost model's
per-kernel compute time and memory efficiency (:func:`calibrated_parts`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.kernel_time import KernelWork, dispatch_waits, kernel_parts
from hwmodels.kernels import KernelFamily, KernelModel, MathMode, family_of
from hwmodels.platform import Platform
from tmsim.workload.graph import Graph

FloatArray = npt.NDArray[np.float64]


def kernel_dtype(graph: Graph, k: int) -> str:
    """The dtype a kernel computes in: that of its largest floating-point operand."""
    ptr, tensor = graph.operand_csr
    best, best_size = "fp32", -1
    for t in tensor[ptr[k] : ptr[k + 1]]:
        tt = graph.tensors[int(t)]
        if tt.dtype.startswith(("fp", "bf")) and tt.size_bytes > best_size:
            best, best_size = tt.dtype, tt.size_bytes
    return best


def gemm_aligned(graph: Graph, k: int, multiple: int) -> bool:
    """Whether the leading dimension of every matrix kernel ``k`` reads or writes (the last
    dimension of each operand of rank 2 or more whose shape is known, row-major storage) is
    a multiple of ``multiple`` elements. A kernel with no known shape counts as aligned."""
    kern = graph.kernels[k]
    for name in (*kern.inputs, *kern.outputs, *kern.updates):
        shape = graph.tensor(name).shape
        if len(shape) >= 2 and shape[-1] % multiple:
            return False
    return True


def conv_aligned(graph: Graph, k: int, multiple: int) -> bool:
    """Whether the channels (dimension 1) of every image and filter kernel ``k`` reads or
    writes (operands of rank 3 or more whose shape is known) are a multiple of ``multiple``:
    tensor-core convolutions pad other channel counts (a first layer's 3 colour channels)."""
    kern = graph.kernels[k]
    for name in (*kern.inputs, *kern.outputs, *kern.updates):
        shape = graph.tensor(name).shape
        if len(shape) >= 3 and shape[1] % multiple:
            return False
    return True


#: Families whose kernels reduce each channel on their own: their units are the channels.
PER_CHANNEL = frozenset({KernelFamily.BATCH_NORM, KernelFamily.BATCH_NORM_BACKWARD})


def kernel_work(graph: Graph, multiple: int) -> KernelWork:
    """Every kernel of ``graph`` as :class:`~hwmodels.kernel_time.KernelWork`: its family (by op
    name), FLOPs, the elements of its largest operand, its dtype (:func:`kernel_dtype`), for
    matrix products :func:`gemm_aligned`, for convolutions :func:`conv_aligned`, at
    ``multiple``, and for batch norms their units: the channels (dimension 1) of the largest
    operand, where its shape is known (0 where not)."""
    ptr, tensor = graph.operand_csr
    families, flops, elements, dtypes, aligned, units = [], [], [], [], [], []
    for k, kern in enumerate(graph.kernels):
        fam = family_of(kern.op)
        families.append(fam)
        flops.append(float(kern.flops))
        operands = [graph.tensors[int(t)] for t in tensor[ptr[k] : ptr[k + 1]]]
        largest = max(operands, key=lambda t: t.elements, default=None)
        shape = largest.shape if largest is not None else ()
        elements.append(float(largest.elements) if largest is not None else 0.0)
        units.append(float(shape[1]) if fam in PER_CHANNEL and len(shape) >= 2 else 0.0)
        dtypes.append(kernel_dtype(graph, k))
        if fam is KernelFamily.MATMUL:
            aligned.append(gemm_aligned(graph, k, multiple))
        elif fam in (KernelFamily.CONV, KernelFamily.CONV_BACKWARD):
            aligned.append(conv_aligned(graph, k, multiple))
        else:
            aligned.append(True)
    return KernelWork(
        tuple(families), tuple(flops), tuple(elements), tuple(dtypes), tuple(aligned), tuple(units)
    )


@dataclass(frozen=True)
class CalibratedParts:
    """A calibrated model's view of a graph's kernels: ``compute_s`` [K] (the compute part,
    with the device's fixed cost; for a kernel the device waits for the host to issue, its
    whole time on the device and the wait), ``memory_efficiency`` [K] (fraction of
    the kernel tiers' rates each kernel's bytes reach: the stream rate over the fastest
    kernel tier's read rate, over the family's passes, at most 1), ``families`` [K]."""

    compute_s: FloatArray
    memory_efficiency: FloatArray
    families: tuple[KernelFamily, ...]


def calibrated_parts(
    graph: Graph, platform: Platform, model: KernelModel, kernel_bytes: FloatArray
) -> CalibratedParts:
    """The compute time and memory efficiency of every kernel of ``graph`` under ``model``
    (in the graph's own math modes where it records any: the step's framework settings win
    over the platform's defaults) on ``platform``'s compute device
    (:func:`hwmodels.kernel_time.kernel_parts`), given the bytes each kernel reads and writes
    over its operands, ``kernel_bytes`` [K]. Raises
    :class:`hwmodels.errors.HardwareModelError` for a GEMM whose math mode has no peak."""
    if graph.math:  # the step's own math modes, as its framework was set
        math = dataclasses.replace(model.math, **{k: MathMode(v) for k, v in graph.math})
        model = dataclasses.replace(model, math=math)
    work = kernel_work(graph, model.tensor_core_multiple)
    compute_s, passes = kernel_parts(model, dict(platform.compute.peak_flop_per_s), work)
    fastest = max(platform.tier(t).read_bw_bytes_per_s for t in platform.kernel_tiers)
    stream = model.stream_bw_bytes_per_s / fastest
    eff = np.minimum(1.0, stream / passes)
    # The host's dispatch, timed with every operand at the stream rate (on a GPU, where
    # kernels reach device memory alone, the only placement): a kernel the device waits for
    # takes its wait on top of its time, in its compute part.
    device = np.maximum(compute_s, passes * kernel_bytes / model.stream_bw_bytes_per_s)
    device += platform.compute.launch_overhead_s
    issued = [f is not KernelFamily.OPTIMIZER for f in work.families]
    waits = np.asarray(dispatch_waits(device.tolist(), model.dispatch_s, issued))
    waited = waits > 0
    compute_s[waited] = device[waited] - platform.compute.launch_overhead_s + waits[waited]
    return CalibratedParts(compute_s, eff, work.families)
