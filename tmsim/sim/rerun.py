"""A plan's recomputes as the replay runs them: each one its producer kernel again, as a
memory flow and a compute floor timed like a kernel (:mod:`tmsim.sim.schedule`, measured
times included), with the producer's operands on the recompute's tiers.

The replay runs the recomputes at kernel ``k`` one after another, after the synchronous moves
at ``k`` and before kernel ``k`` (:mod:`tmsim.plans.values`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.timing import Overlap
from tmsim.cost import CostModel
from tmsim.errors import PlanError
from tmsim.plans.values import Plan
from tmsim.sim.flows import Flow
from tmsim.sim.kernels import kernel_flow, measured_demand

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RecomputeSpec:
    """One recompute, resolved: ``tensor`` made anew by kernel ``producer`` before kernel
    ``kernel``; ``flow`` its memory traffic, ``floor_s`` its compute floor, ``serial`` floor
    then flow, ``kernel_s`` the cost model's time, ``read_bytes``/``write_bytes`` per tier."""

    tensor: str
    kernel: int
    producer: int
    flow: Flow
    floor_s: float
    serial: bool
    kernel_s: float
    read_bytes: tuple[int, ...]
    write_bytes: tuple[int, ...]


def recompute_specs(plan: Plan, cost: CostModel) -> tuple[RecomputeSpec, ...]:
    """The recomputes of ``plan`` in its order, timed by ``cost``. Raises :class:`PlanError`
    for one that does not resolve: an unknown tensor or tier, a tensor without a producer, a
    kernel out of range, or a tier count other than the producer's operands."""
    graph, platform = cost.graph, cost.platform
    n_k, n_t = len(graph.kernels), len(platform.tiers)
    tiers = {name: i for i, name in enumerate(platform.tier_names)}
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    eff = cost.memory_efficiency
    out = []
    for i, rc in enumerate(plan.recomputes):
        where = f"recompute {i} ({rc.tensor!r} at kernel {rc.kernel})"
        t = index.get(rc.tensor, -1)
        p = int(graph.producers[t]) if t >= 0 else -1
        lo, hi = (int(cost.op_ptr[p]), int(cost.op_ptr[p + 1])) if p >= 0 else (0, 0)
        if p < 0 or not 0 <= rc.kernel < n_k or len(rc.tiers) != hi - lo:
            raise PlanError(
                f"{where}: does not name a produced tensor, a kernel and a tier per operand "
                "of its producer"
            )
        unknown = [name for name in rc.tiers if name not in tiers]
        if unknown:
            raise PlanError(f"{where}: unknown tier {unknown[0]!r}")
        at = np.array([tiers[name] for name in rc.tiers], dtype=np.int64)
        kernel_s = cost.recompute_s(p, at)
        if not np.isfinite(kernel_s):
            raise PlanError(f"{where}: an operand is on a tier kernels cannot access")
        reads = np.bincount(at, weights=cost.op_read_bytes[lo:hi], minlength=n_t)
        writes = np.bincount(at, weights=cost.op_write_bytes[lo:hi], minlength=n_t)
        read_bytes, write_bytes = np.rint(reads).astype(np.int64), np.rint(writes).astype(np.int64)
        measured = (p, tuple(int(x) for x in at)) in cost.measured
        memory_s, demand = cost.kernel_memory_s(p, at), 1.0
        if measured:  # a measured time is the whole kernel: bytes and floor span it together
            floor = body = max(0.0, kernel_s - cost.launch_s)
            demand = measured_demand(body, memory_s)
        else:
            floor, body = float(cost.compute_s[p]), memory_s
        cores = platform.compute.cores
        flow = kernel_flow(read_bytes, write_bytes, body, cores, float(eff[p]), demand)
        out.append(
            RecomputeSpec(
                tensor=rc.tensor,
                kernel=rc.kernel,
                producer=p,
                flow=flow,
                floor_s=floor,
                serial=cost.overlap is Overlap.SUM and not measured,
                kernel_s=kernel_s,
                read_bytes=tuple(int(x) for x in read_bytes),
                write_bytes=tuple(int(x) for x in write_bytes),
            )
        )
    return tuple(out)


__all__ = ["RecomputeSpec", "recompute_specs"]
