"""A kernel as the replay runs it: a memory flow and a compute floor.

Kernel ``k``, with its operands on the tiers a plan gives them, is a memory flow (the bytes it
reads and writes on each tier, from the cost model's operand bytes) capped at the rate that
makes it last its roofline memory time, and a compute floor (its compute time), combined as
the cost model combines them (overlapped: both must end; not overlapped: one after the
other), after the launch overhead (:func:`kernel_specs`).

A kernel with a measured time (a profile's, :mod:`tmsim.profiles`) takes that time alone: its
floor and its flow both span it less the launch overhead, and where it is shorter than the
roofline's memory time the flow's demand on the tiers is scaled down to fit
(:func:`measured_demand`, as if caches had served the rest). Under contention that demand
shares the tiers and links as any kernel's bytes do, so beside other traffic a measured
kernel can take longer than measured, never less.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.timing import Overlap
from tmsim.cost import CostModel
from tmsim.sim.flows import Flow, Role

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class KernelSpecs:
    """Every kernel under one operand placement, as the replay runs it: ``flows`` (its memory
    flow), ``floor_s`` (compute floor), ``serial`` (floor then flow), ``kernel_s`` (the cost
    model's time), ``read_bytes``/``write_bytes`` [K, tiers]."""

    flows: tuple[Flow, ...]
    floor_s: FloatArray
    serial: npt.NDArray[np.bool_]
    kernel_s: FloatArray
    read_bytes: IntArray
    write_bytes: IntArray


def kernel_specs(cost: CostModel, op_tier: IntArray) -> KernelSpecs:
    """The kernels of ``cost``'s graph with operand ``j`` on tier ``op_tier[j]`` (every tier
    one kernels may access; see the module documentation for the rule)."""
    graph, platform = cost.graph, cost.platform
    n_k, n_t = len(graph.kernels), len(platform.tiers)
    kernel_s = cost.kernel_times_s(op_tier)
    mem_s = cost.memory_s(op_tier)
    cell = cost.op_kernel * n_t + op_tier
    reads = np.bincount(cell, weights=cost.op_read_bytes, minlength=n_k * n_t)
    writes = np.bincount(cell, weights=cost.op_write_bytes, minlength=n_k * n_t)
    read_bytes = np.rint(reads).astype(np.int64).reshape(n_k, n_t)
    write_bytes = np.rint(writes).astype(np.int64).reshape(n_k, n_t)
    floor_s = cost.compute_s.copy()
    body_s = mem_s.copy()
    demand = np.ones(n_k)
    serial = np.full(n_k, cost.overlap is Overlap.SUM)
    for k in _measured_kernels(cost, op_tier):
        # A measured time is the whole kernel: its bytes and its floor span it together.
        floor_s[k] = body_s[k] = max(0.0, float(kernel_s[k]) - cost.launch_s)
        demand[k] = measured_demand(float(body_s[k]), float(mem_s[k]))
        serial[k] = False
    eff = cost.memory_efficiency
    writers = platform.compute.cores
    flows = tuple(
        kernel_flow(
            read_bytes[k],
            write_bytes[k],
            float(body_s[k]),
            writers,
            float(eff[k]),
            float(demand[k]),
        )
        for k in range(n_k)
    )
    return KernelSpecs(flows, floor_s, serial, kernel_s, read_bytes, write_bytes)


def measured_demand(body_s: float, memory_s: float) -> float:
    """The share of a measured kernel's bytes its flow puts on the tiers so that it can last
    ``body_s`` (its measured time less the launch overhead) alone: 1 where the roofline's
    memory time ``memory_s`` fits in it, else ``body_s / memory_s``."""
    return 1.0 if memory_s <= body_s else body_s / memory_s


def kernel_flow(
    read_bytes: IntArray,
    write_bytes: IntArray,
    body_s: float,
    writers: int,
    efficiency: float,
    demand: float = 1.0,
) -> Flow:
    """A kernel's memory traffic as one flow that alone lasts ``body_s`` seconds.

    ``read_bytes``/``write_bytes`` [tiers] are the bytes it reads and writes on each tier; the
    flow is capped at their sum over ``body_s``. ``demand`` in (0, 1] scales what the flow
    reads and writes on each tier, not its size (:func:`measured_demand`). A kernel with no
    memory time (a measured time within its launch overhead) moves its bytes in no time: a
    flow of size 0.
    """
    nbytes = int(read_bytes.sum() + write_bytes.sum()) if body_s > 0 else 0
    cap = nbytes / body_s if nbytes > 0 else math.inf
    return Flow(
        float(nbytes),
        tuple(float(x) * demand for x in read_bytes),
        tuple(float(x) * demand for x in write_bytes),
        cap,
        writers=writers,
        efficiency=efficiency,
        role=Role.KERNEL,
    )


def _measured_kernels(cost: CostModel, op_tier: IntArray) -> list[int]:
    out = []
    for k, placement in cost.measured:
        lo, hi = int(cost.op_ptr[k]), int(cost.op_ptr[k + 1])
        if tuple(int(x) for x in op_tier[lo:hi]) == placement:
            out.append(k)
    return sorted(out)


__all__ = ["KernelSpecs", "kernel_flow", "kernel_specs", "measured_demand"]
