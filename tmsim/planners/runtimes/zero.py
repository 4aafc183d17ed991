"""ZeRO-Offload (Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training",
USENIX ATC'21) and ZeRO-Infinity's offload of the optimizer state to NVMe (Rajbhandari et al.,
"ZeRO-Infinity: Breaking the GPU Memory Wall for Extreme Scale Deep Learning", SC'21), for
one device and its host, as plans.

The split both papers make: the forward and backward kernels run on the compute device with
the (16-bit) weights, activations and gradients in its memory; the optimizer step (every
kernel of the update phase: Adam per parameter in the transformer zoo) runs on the host CPU
(:class:`hwmodels.compute.HostCompute`), on host memory, where the fp32 master weights and
Adam's moments live.

- Each gradient the optimizer reads is copied to the host after its producer, beside the
  first device kernel from there with room for the copy (the kernel's own time, less the
  copies beside it already), so that the copies stream beside the backward pass; where no
  kernel before its first host use has room, the device waits for the copy right after the
  producer (a synchronous copy: DeepSpeed's backward waits when its gradient buckets are
  full, so the device holds a bucket of gradients, not all of them). Its device copy is
  freed after its copy (or after its last use on the device, if later).
- Weights start on the device and on the host (the host's copy is the one the optimizer
  updates); after the last host kernel updating one, its new value is copied back to the
  device (asynchronously at the next position; after the last kernel, synchronously), so
  that every weight ends the step where it started. Per step the copies are what the papers
  count: every gradient down and every updated weight up (4 bytes per parameter in fp16).
- ZeRO-Offload keeps the optimizer state on the host. ZeRO-Infinity keeps it on the tier
  behind the host (an NVMe drive: a tier the host copies to and from, beside the device):
  each tensor of it is read to the host beside the kernel before its first host use and,
  once updated, written back after its last (12 bytes per parameter each way for mixed
  precision Adam), its host copy freed after.
- The host runs the optimizer's kernels in the order the copies of their inputs are issued
  (by position, then in plan order, which is also the order copy engines take them): a
  gradient produced early is stepped early, beside the rest of the backward pass. Where two
  of them share a tensor, in plan order.

Both raise :class:`TmsimError` (one line) where they do not apply: a platform without a host
compute reaching a tier that copies to and from the device, or (ZeRO-Infinity) without a
tier behind the host; a step without an update phase, or one whose update kernels make new
tensors, read tensors other than gradients made on the device, weights and optimizer state,
or update a weight the device uses afterwards; a host without a peak for their dtype. They
raise :class:`NoPlanError` naming the tier, kernel and bytes where the copies overflow a
tier (the device: the planned capacity).
"""

from __future__ import annotations

import numpy as np

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import CostModel, IndexMove
from tmsim.errors import TmsimError
from tmsim.kernelwork import kernel_dtype
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.heuristics.placement import require_fast_access
from tmsim.planners.runtimes.common import DEVICE, check_fits, host_tier
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.workload.graph import PREEXISTING_ROLES, Graph, Phase, Role

ZERO_OFFLOAD = "zero-offload"
ZERO_INFINITY = "zero-infinity"


def plan_zero_offload(
    graph: Graph, platform: Platform, settings: PlanSettings | None = None
) -> Plan:
    """ZeRO-Offload's plan (see the module documentation): the optimizer step on the host,
    its state in host memory."""
    return _plan(ZERO_OFFLOAD, graph, platform, settings or PlanSettings(), nvme=False)


def plan_zero_infinity(
    graph: Graph, platform: Platform, settings: PlanSettings | None = None
) -> Plan:
    """ZeRO-Infinity's plan with the optimizer state on NVMe (see the module documentation):
    the optimizer step on the host, its state on the tier behind the host, read in before
    and written back after each step of it."""
    return _plan(ZERO_INFINITY, graph, platform, settings or PlanSettings(), nvme=True)


def state_tier(cost: CostModel, host: int, planner: str) -> int:
    """The tier behind the host: the first tier beyond it, not the device, with copy paths to
    and from the host tier. Raises :class:`TmsimError` if there is none."""
    platform = cost.platform
    for i in range(len(platform.tiers)):
        if i not in (DEVICE, host) and cost.has_path(host, i) and cost.has_path(i, host):
            return i
    raise TmsimError(
        f"{planner}: platform {platform.name!r} has no tier behind its host tier "
        f"{platform.tiers[host].name!r} (copy paths to and from it, as an NVMe drive has) to "
        "hold the optimizer state"
    )


def _plan(name: str, graph: Graph, platform: Platform, opts: PlanSettings, nvme: bool) -> Plan:
    require_fast_access(platform, name)
    cost = cost_model(graph, platform, opts.profile)
    host = host_tier(cost, name)
    store = state_tier(cost, host, name) if nvme else host
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    n_k = len(graph.kernels)
    updates = [k for k, kern in enumerate(graph.kernels) if kern.phase is Phase.UPDATE]
    if not updates:
        raise TmsimError(f"{name}: graph {graph.name!r} has no update phase to run on the host")
    on_host = set(updates)
    _check_host_dtypes(cost, updates, name)
    ptr, op_tensor = cost.op_ptr, cost.op_tensor
    host_uses: dict[int, list[int]] = {}
    device_uses: dict[int, list[int]] = {}
    for k in range(n_k):
        for t in op_tensor[int(ptr[k]) : int(ptr[k + 1])].tolist():
            (host_uses if k in on_host else device_uses).setdefault(t, []).append(k)
    updated: dict[int, int] = {}  # tensor -> the last host kernel updating it
    for k in updates:
        for tname in graph.kernels[k].updates:
            updated[graph.tensor_index(tname)] = k
    _check_operands(graph, host_uses, device_uses, updated, on_host, name)

    op_tiers = np.where(np.isin(cost.op_kernel, updates), host, DEVICE).astype(np.int64)
    initial: dict[int, tuple[int, ...]] = {}
    for t, tensor in enumerate(graph.tensors):
        if tensor.role not in PREEXISTING_ROLES:
            continue
        if t in host_uses and tensor.role is Role.OPTIMIZER_STATE:
            initial[t] = (store,)
        elif t in host_uses and tensor.role is Role.WEIGHT:
            initial[t] = (DEVICE, host)
        else:
            initial[t] = (DEVICE,)
    moves, drops, ready = _gradients_down(cost, op_tiers, host, host_uses, device_uses, on_host)
    for t, k in updated.items():
        if graph.tensors[t].role is Role.WEIGHT:
            moves.append(_after(t, host, DEVICE, k, n_k))
    if nvme:
        for t, ks in host_uses.items():
            if graph.tensors[t].role is Role.OPTIMIZER_STATE:
                moves += _round_trip(t, ks, updated.get(t), host, store, n_k, drops, ready)
    order = _host_order(graph, updates, host_uses, ready, cost)
    plan = assemble_plan(
        cost,
        name,
        limit,
        op_tiers,
        initial,
        moves,
        drops=drops,
        options=opts.to_dict(),
        host_kernels=order,
    )
    check_fits(plan, graph, platform, limit, name)
    return plan


def _check_host_dtypes(cost: CostModel, updates: list[int], name: str) -> None:
    host = cost.platform.host_compute
    assert host is not None  # host_tier checked
    for k in updates:
        dtype = kernel_dtype(cost.graph, k)
        try:
            host.compute.peak(dtype)
        except HardwareModelError:
            raise TmsimError(
                f"{name}: the host CPU of platform {cost.platform.name!r} has no {dtype} peak "
                f"for kernel {k} ({cost.graph.kernels[k].name!r}); it lists "
                f"{', '.join(host.compute.dtypes)}"
            ) from None


def _check_operands(
    graph: Graph,
    host_uses: dict[int, list[int]],
    device_uses: dict[int, list[int]],
    updated: dict[int, int],
    on_host: set[int],
    name: str,
) -> None:
    """Raise :class:`TmsimError` for an update phase this split cannot run on the host (see
    the module documentation)."""
    producers = graph.producers
    for t, ks in host_uses.items():
        tensor, p = graph.tensors[t], int(producers[t])
        where = f"{name}: kernel {ks[0]} ({graph.kernels[ks[0]].name!r}) of the update phase"
        if p in on_host:
            raise TmsimError(f"{where} makes tensor {tensor.name!r}; the host makes none here")
        if tensor.role is Role.OPTIMIZER_STATE and t in device_uses:
            k = device_uses[t][0]
            raise TmsimError(
                f"{name}: optimizer state {tensor.name!r} is used on the device by kernel {k} "
                f"({graph.kernels[k].name!r}); here it lives off the device"
            )
        if tensor.role is Role.WEIGHT:
            later = [k for k in device_uses.get(t, []) if t in updated and k > updated[t]]
            if later:
                raise TmsimError(
                    f"{name}: weight {tensor.name!r} is used on the device by kernel "
                    f"{later[0]} after its update on the host"
                )
        elif tensor.role is not Role.OPTIMIZER_STATE and p < 0:
            raise TmsimError(
                f"{where} reads {tensor.name!r} ({tensor.role.value}), which is neither made "
                "on the device nor a weight or optimizer state"
            )


def _gradients_down(
    cost: CostModel,
    op_tiers: np.ndarray,
    host: int,
    host_uses: dict[int, list[int]],
    device_uses: dict[int, list[int]],
    on_host: set[int],
) -> tuple[list[IndexMove], dict[tuple[int, int], list[int]], dict[int, tuple[int, int]]]:
    """The copies to the host of what the device makes for the optimizer (the gradients), as
    the module documentation places them; their device copies' drops; and the order each is
    issued in (its position, then its tensor: the plan's order of moves)."""
    graph = cost.graph
    room = cost.kernel_times_s(op_tiers)
    room[sorted(on_host)] = 0.0
    copy_s = cost.move_s(DEVICE, host, MoveMode.ASYNC)
    moves: list[IndexMove] = []
    drops: dict[tuple[int, int], list[int]] = {}
    ready: dict[int, tuple[int, int]] = {}
    made = sorted((int(graph.producers[t]), t) for t in host_uses if graph.producers[t] >= 0)
    for p, t in made:
        need = host_uses[t][0]
        q = next((k for k in range(p + 1, need) if k not in on_host and room[k] >= copy_s[t]), -1)
        mode = MoveMode.ASYNC
        if q >= 0:
            room[q] -= copy_s[t]
        else:  # the stream falls behind: the device waits for the copy, as a bucket waits
            q, mode = p + 1, MoveMode.SYNC
        moves.append(IndexMove(t, DEVICE, host, q, mode))
        ready[t] = (q, t)
        last_device = max(device_uses.get(t, [p]))
        drops[(t, DEVICE)] = [max(q if mode is MoveMode.ASYNC else q - 1, last_device)]
    return moves, drops, ready


def _round_trip(
    t: int,
    uses: list[int],
    updated_by: int | None,
    host: int,
    store: int,
    n_k: int,
    drops: dict[tuple[int, int], list[int]],
    ready: dict[int, tuple[int, int]],
) -> list[IndexMove]:
    """Optimizer state ``t`` read from ``store`` to the host for its host ``uses`` (beside
    the kernel before the first, or just before it when it is the first kernel) and, if a
    host kernel updates it, written back after that one; its host copy freed after (both
    recorded in ``drops`` and ``ready``)."""
    a = uses[0]
    fetch = IndexMove(t, store, host, a - 1, MoveMode.ASYNC)
    if a == 0:
        fetch = IndexMove(t, store, host, a, MoveMode.SYNC)
    ready[t] = (fetch.kernel, t)
    if updated_by is None:
        drops[(t, host)] = [uses[-1]]
        return [fetch]
    back = _after(t, host, store, updated_by, n_k)
    if back.mode is MoveMode.ASYNC:
        drops[(t, host)] = [back.kernel]
    return [fetch, back]


def _after(t: int, src: int, dst: int, k: int, n_k: int) -> IndexMove:
    """A copy of ``t`` made by kernel ``k``: beside the next kernel, or after the last."""
    if k + 1 < n_k:
        return IndexMove(t, src, dst, k + 1, MoveMode.ASYNC)
    return IndexMove(t, src, dst, n_k, MoveMode.SYNC)


def _host_order(
    graph: Graph,
    updates: list[int],
    host_uses: dict[int, list[int]],
    ready: dict[int, tuple[int, int]],
    cost: CostModel,
) -> tuple[int, ...]:
    """The host kernels by when the copy of their last input is issued (its position, then
    its tensor), then plan order; in plan order if two share a tensor (so that they keep
    it)."""
    if any(len(ks) > 1 for ks in host_uses.values()):
        return tuple(updates)
    ptr, op_tensor = cost.op_ptr, cost.op_tensor
    arrival = {
        k: max(ready.get(t, (-1, -1)) for t in op_tensor[int(ptr[k]) : int(ptr[k + 1])].tolist())
        for k in updates
    }
    return tuple(sorted(updates, key=lambda k: (arrival[k], k)))


__all__ = ["ZERO_INFINITY", "ZERO_OFFLOAD", "plan_zero_infinity", "plan_zero_offload", "state_tier"]
