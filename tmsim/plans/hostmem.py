"""The host memory's floor under a step whose host runs kernels: the time the host's tiers need
to serve what must pass through them once the host may start.

A host kernel streams its operands from a tier the host reaches, and the copies to and from
that tier (the gradients the device sends, the weights the host sends back) pass through the
same memory. The replay shares a tier as a device with one second of service per second
(:mod:`tmsim.sim.fluid`): a flow costs ``read bytes / read bandwidth + written bytes / write
bandwidth`` device-seconds there, over its efficiency, never less beside others. The two-stream
timeline (:mod:`tmsim.plans.streams`) times each action alone, so where the host's kernels
and the copies overlap it promises the tier more than one second per second.

The floor: for every position ``L`` (-1 for the start of the step) and every tier ``τ`` the
host reaches,

    ``step >= S_L + (device-seconds on τ of the host kernels ready at or after L)
    + (device-seconds on τ of the moves issued at positions after L)``,

with ``S_L`` the time the device stream starts kernel ``L`` (after the synchronous moves and
recomputes issued there; 0 for -1). A host kernel is *ready* at the last kernel before it
outside the update phase that writes one of its operands (:func:`ready_positions`); it
cannot start before that kernel ends. A move issued at position ``k`` starts once the device
stream has reached it, after kernel ``k - 1``. So everything counted starts at ``S_L`` or later and
must pass through ``τ`` before the step ends. Each term is the flow's
cost alone (the least the replay charges it: a host kernel's roofline time per tier, a copy's
bytes over nominal bandwidths at efficiency 1), so
the floor is below the replay's step at its ``bandwidth`` level wherever no action starts
earlier there than in the timeline. Sharing can reorder the copies queued on a path, so that
one does: on ZeRO-Infinity's GPT-2 small step (two layers, h100-host-nvme) its first Adam
kernel started 66 us earlier with the tiers shared, and the floor lay 0.02% above that replay.
Kernels of the compute device that read the host's tier directly are left out (a lower floor).

Measured on LLaMA-7B b1 at the device's capacity, the plans of the MILP's async and sync
formulations (60 s; before the MILP knew this floor), predicted step before / with the floor
/ the replay at its ``bandwidth`` level, seconds: GH200 async 0.2696 / 0.3119 / 0.3313, sync
0.2742 / 0.2917 / 0.3189 (the floor puts them in the replay's order); h100-host-nvme async
0.3621 / 0.3930 / 0.3962, sync 0.3947 / 0.4141 / 0.4170.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.cost import CostModel, IndexMove
from tmsim.workload.graph import Phase

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def ready_positions(cost: CostModel, kernels: Sequence[int]) -> IntArray:
    """Per kernel of ``kernels``, the last kernel before it outside the update phase that
    writes (makes or updates) one of its operands (-1: none): a host kernel reads what such a
    kernel wrote (a gradient, copied to the host once made), so it starts after that kernel
    ends. A device kernel that only reads an operand (a weight) does not hold it back: the
    host updates its own copy."""
    outside = np.array([k.phase is not Phase.UPDATE for k in cost.graph.kernels], dtype=bool)
    writes = (cost.op_write_bytes > 0) & outside[cost.op_kernel]
    writers: dict[int, list[int]] = {}  # per tensor, its writers in plan order
    for k, t in zip(cost.op_kernel[writes].tolist(), cost.op_tensor[writes].tolist(), strict=True):
        writers.setdefault(t, []).append(k)
    out = np.full(len(kernels), -1, dtype=np.int64)
    for i, k in enumerate(int(k) for k in kernels):
        for t in cost.op_tensor[int(cost.op_ptr[k]) : int(cost.op_ptr[k + 1])].tolist():
            before = writers.get(t, [])
            j = bisect_left(before, k)
            if j:
                out[i] = max(out[i], before[j - 1])
    return out


def reached_tiers(platform: Platform) -> IntArray:
    """The tiers the host compute reaches (none without one)."""
    if platform.host_compute is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.array(platform.host_kernel_tier_mask(), dtype=bool))


def copy_tier_s(platform: Platform, nbytes: FloatArray, src: IntArray, dst: IntArray) -> FloatArray:
    """[n, tiers]: the device-seconds copies of ``nbytes`` from tier ``src`` to ``dst`` cost
    each tier alone (efficiency 1, nominal bandwidths): their bytes over the source's read
    bandwidth there and over the destination's write bandwidth there."""
    n_t = len(platform.tiers)
    read_bw = np.array([t.read_bw_bytes_per_s for t in platform.tiers], dtype=np.float64)
    write_bw = np.array([t.write_bw_bytes_per_s for t in platform.tiers], dtype=np.float64)
    size = np.asarray(nbytes, dtype=np.float64)
    out = np.zeros((size.size, n_t))
    rows = np.arange(size.size)
    np.add.at(out, (rows, np.asarray(src)), size / read_bw[np.asarray(src)])
    np.add.at(out, (rows, np.asarray(dst)), size / write_bw[np.asarray(dst)])
    return out


def floor_s(
    n_kernels: int,
    kernel_start_s: FloatArray,
    ready: IntArray,
    kernel_s: FloatArray,
    position: IntArray,
    move_s: FloatArray,
) -> float:
    """The floor of the module documentation on one tier: ``kernel_start_s`` [n_kernels]
    when the device stream starts each kernel (``S_L``); per host kernel its ``ready``
    position and its device-seconds ``kernel_s`` on the tier; per move its ``position`` (0 to
    ``n_kernels``) and its device-seconds ``move_s`` there."""
    # after[L + 1]: what is ready at or after L, and issued after L (L = -1 .. n_kernels - 1)
    at = np.zeros(n_kernels + 2)
    np.add.at(at, np.asarray(ready, dtype=np.int64) + 1, np.asarray(kernel_s, dtype=np.float64))
    np.add.at(at, np.asarray(position, dtype=np.int64), np.asarray(move_s, dtype=np.float64))
    after = np.cumsum(at[::-1])[::-1][: n_kernels + 1]
    start = np.concatenate(([0.0], np.asarray(kernel_start_s, dtype=np.float64)))
    return float(np.max(start + after))


def plan_floor_s(
    cost: CostModel,
    host_order: Sequence[int],
    host_tier_s: FloatArray,
    moves: Sequence[IndexMove],
    kernel_start_s: FloatArray,
) -> float:
    """The floor of a plan whose host runs ``host_order`` (costing each tier the device-seconds
    ``host_tier_s`` [len(host_order), tiers], :attr:`~tmsim.plans.streams.HostTimes.tier_s`),
    issuing ``moves``, with the device stream starting each kernel at ``kernel_start_s``: the
    largest over the tiers the host reaches (0 with none)."""
    platform = cost.platform
    n_k = len(cost.graph.kernels)
    tiers = reached_tiers(platform)
    if not tiers.size or not len(host_order):
        return 0.0
    ready = ready_positions(cost, host_order)
    on_host = np.asarray(host_tier_s, dtype=np.float64)
    sizes = cost.graph.sizes_bytes
    if moves:
        nbytes = np.array([sizes[m.tensor] for m in moves], dtype=np.float64)
        src = np.array([m.src for m in moves], dtype=np.int64)
        dst = np.array([m.dst for m in moves], dtype=np.int64)
        position = np.array([m.kernel for m in moves], dtype=np.int64)
        copies = copy_tier_s(platform, nbytes, src, dst)
    else:
        position, copies = np.zeros(0, dtype=np.int64), np.zeros((0, len(platform.tiers)))
    return max(
        floor_s(n_k, kernel_start_s, ready, on_host[:, t], position, copies[:, t])
        for t in tiers.tolist()
    )


__all__ = [
    "copy_tier_s",
    "floor_s",
    "plan_floor_s",
    "reached_tiers",
    "ready_positions",
]
