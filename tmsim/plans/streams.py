"""A step on two streams: the compute device's, in plan order, and the host CPU's, for the
kernels a plan runs on the host (:attr:`~tmsim.plans.values.Plan.host_kernels`), in the
plan's host order. What such a plan means in time, and its predicted step time.

Every action has a plan position: kernel ``k`` is at ``k``, a move or a recompute at the
kernel it is issued at. The rules of :mod:`tmsim.plans.values` (residency, validity) are about
positions; this module says when things run once some kernels run on the host.

- The device stream runs the positions in order, as in a plan without host kernels: the
  synchronous moves at ``k`` one after another, the recomputes at ``k``, then kernel ``k``
  with the asynchronous moves issued beside it (one after another, as the cost model charges
  them), and position ``k + 1`` starts when all of these have ended. At a host kernel's
  position the device runs no kernel: the asynchronous moves issued there each start when
  the device stream reaches it (and what they wait for has ended), on their own, and do not
  hold it; the device's next kernel, synchronous move or recompute, and the end of its
  stream, wait for them.
- An asynchronous move that waits for a host kernel (a copy of what the host updated), whose
  two copies stay resident from its position to the end of the step and which no later
  device-side action touches, is *detached* (:attr:`~tmsim.plans.deps.StreamDeps.detached`):
  wherever it is issued, it starts on its own once the device stream reaches its position
  and its host kernels have ended, and only the end of the step waits for it (the updated weights
  ZeRO-Offload copies back to the device on a stream of their own while the device steps
  the rest of the model).
- The moves that run on their own (issued at a host kernel's position, or detached) take
  their copy path one at a time, in the order they become ready (:func:`copy_servers`: a
  path that is not duplex shares its turns with the reverse direction), so that a link's
  bytes take the link's time however many copies want it at once.
- The host stream runs the host kernels one at a time in the plan's host order, each for its
  roofline time on the host compute (:func:`host_times`).
- Across the streams, two accesses to one copy (a tensor on a tier) of which at least one
  writes keep their plan order (:func:`~tmsim.plans.deps.stream_deps`): the later waits for
  the earlier to end. A move or recompute at a host kernel's own position comes before it.
- The step ends when both streams and the detached moves have ended.

Without host kernels this is exactly :func:`tmsim.cost.step_time_s`, which
:func:`plan_step_time_s` then returns; with them, the predicted time is the longest path
through these waits (:func:`timeline`), which the replay without contention reproduces, or
the host memory's floor where that is higher (:mod:`tmsim.plans.hostmem`: what the host's
kernels and the copies must pass through its memory once it may start, which the timeline
times as if each had the memory alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.opclass import op_class
from hwmodels.platform import Platform
from hwmodels.timing import MoveMode, roofline
from tmsim.cost import BesideCosts, CostModel, IndexMove, IndexRecompute, step_time_s
from tmsim.errors import TmsimError
from tmsim.kernelwork import kernel_dtype
from tmsim.plans.deps import StreamDeps, stream_deps
from tmsim.plans.hostmem import plan_floor_s
from tmsim.plans.waits import Waits

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class StreamDeadlock(TmsimError):
    """The host order makes a host kernel wait, through the device stream, for itself."""


@dataclass(frozen=True)
class HostTimes:
    """Kernels on the host compute (:func:`host_times`), indexed like ``kernels``: ``time_s``
    (``inf`` where an operand is on a tier the host does not reach), ``compute_s``,
    ``memory_s``, the bytes each reads and writes per tier [n, tiers], and ``tier_s`` [n,
    tiers]: the device-seconds each costs a tier alone (the roofline's, which the replay
    charges a flow alone there)."""

    kernels: tuple[int, ...]
    time_s: FloatArray
    compute_s: FloatArray
    memory_s: FloatArray
    read_bytes: FloatArray
    write_bytes: FloatArray
    launch_s: float
    tier_s: FloatArray


def host_times(cost: CostModel, kernels: Sequence[int], op_tiers: npt.ArrayLike) -> HostTimes:
    """The roofline times of ``kernels`` on the host compute of ``cost``'s platform, with
    operand ``j`` on tier ``op_tiers[j]`` (measured tables do not apply on the host).

    Raises :class:`hwmodels.errors.HardwareModelError` if the platform has no host compute
    or it has no peak for a dtype one of the kernels computes in.
    """
    platform, graph = cost.platform, cost.graph
    tiers = np.asarray(op_tiers, dtype=np.int64)
    n_t, ks = len(platform.tiers), tuple(int(k) for k in kernels)
    reads, writes = np.zeros((len(ks), n_t)), np.zeros((len(ks), n_t))
    for i, k in enumerate(ks):
        lo, hi = int(cost.op_ptr[k]), int(cost.op_ptr[k + 1])
        np.add.at(reads[i], tiers[lo:hi], cost.op_read_bytes[lo:hi])
        np.add.at(writes[i], tiers[lo:hi], cost.op_write_bytes[lo:hi])
    reach = np.array(platform.host_kernel_tier_mask())
    bad = (((reads > 0) | (writes > 0)) & ~reach[None, :]).any(axis=1)
    ok = np.where(bad[:, None], 0.0, 1.0)
    times = roofline(
        platform,
        [graph.kernels[k].flops for k in ks],
        [op_class(graph.kernels[k].op) for k in ks],
        reads * ok,
        writes * ok,
        dtype=[kernel_dtype(graph, k) for k in ks],
        overlap=cost.overlap,
        host=True,
    )
    time_s = np.where(bad, np.inf, times.time_s)
    return HostTimes(
        ks,
        time_s,
        times.compute_s,
        times.memory_s,
        reads,
        writes,
        float(times.launch_s),
        np.asarray(times.memory_by_tier_s, dtype=np.float64),
    )


@dataclass(frozen=True)
class Timeline:
    """When a plan's step ends on its two streams: ``total_s`` (both ended, and the
    detached copies),
    ``device_s`` and ``host_s`` (each stream's end), ``per_kernel_s`` [K + 1]: the device
    stream's advance at each position, the last entry also holding what the step waits past
    its last position (pending copies, the host), so that the entries sum to ``total_s``;
    ``kernel_start_s`` [K]: when the device stream starts each kernel (after the synchronous
    moves and recomputes issued there; at a host kernel's position, when it reaches it)."""

    total_s: float
    device_s: float
    host_s: float
    per_kernel_s: FloatArray
    kernel_start_s: FloatArray


def timeline(
    n_kernels: int,
    kernel_s: FloatArray,
    host_order: Sequence[int],
    host_s: Mapping[int, float],
    moves: Sequence[IndexMove],
    move_s: Sequence[float],
    recomputes: Sequence[IndexRecompute],
    recompute_s: Sequence[float],
    deps: StreamDeps,
    servers: Sequence[int] | None = None,
) -> Timeline:
    """The step's times by the rules of the module documentation, without contention:
    every action for its own time (``kernel_s`` [K] for kernels on the device, ``host_s`` for
    host kernels, ``move_s`` and ``recompute_s`` for moves and recomputes, in their order);
    ``servers`` (:func:`copy_servers`): per move, the path it takes turns on when it runs on
    its own (None: such moves run side by side).

    Raises :class:`StreamDeadlock` naming a host kernel that can never start (the host order
    makes it wait for itself through the device stream).
    """
    graph = Waits()
    n_m = len(moves)
    host = set(host_order)
    sync_at: list[list[int]] = [[] for _ in range(n_kernels + 1)]
    async_at: list[list[int]] = [[] for _ in range(n_kernels)]
    for i, m in enumerate(moves):
        (async_at if m.mode is MoveMode.ASYNC else sync_at)[m.kernel].append(i)
    rerun_at: dict[int, list[int]] = {}
    for i, r in enumerate(recomputes):
        rerun_at.setdefault(r.kernel, []).append(i)
    node_of: dict[int, int] = {}  # device-side action -> node
    host_node = {h: graph.node(float(host_s[h])) for h in host_order}

    def action(a: int, dur: float, after: list[int], server: int = -1) -> int:
        n = graph.node(dur, after + [host_node[h] for h in deps.device_waits.get(a, ())], server)
        node_of[a] = n
        return n

    def on_own(i: int, after: list[int]) -> int:
        """Move ``i`` running on its own: on its path's server, where there are servers."""
        return action(n_kernels + i, move_s[i], after, servers[i] if servers else -1)

    clock, pending, detached = -1, list[int](), list[int]()
    marks: list[int] = []  # the device clock after each position
    gates: list[int] = []  # where each kernel starts
    for k in range(n_kernels + 1):
        for i in sync_at[k]:
            clock = action(n_kernels + i, move_s[i], [clock, *pending])
            pending = []
        if k < n_kernels:
            for i in rerun_at.get(k, ()):
                clock = action(n_kernels + n_m + i, recompute_s[i], [clock, *pending])
                pending = []
            gate = graph.node(0.0, [clock, *pending]) if k not in host else clock
            gates.append(gate)
            detached += [on_own(i, [gate]) for i in async_at[k] if i in deps.detached]
            held = [i for i in async_at[k] if i not in deps.detached]
            if k in host:  # copies on their own, not holding the device
                pending += [on_own(i, [clock]) for i in held]
            else:
                chain = gate
                for i in held:
                    chain = action(n_kernels + i, move_s[i], [chain])
                pending = []
                kernel = action(k, float(kernel_s[k]), [gate])
                clock = graph.node(0.0, [kernel, chain])
        marks.append(clock)
    device_end = graph.node(0.0, [clock, *pending])
    copies_end = graph.node(0.0, detached)
    prev = -1
    for h in host_order:
        graph.add(host_node[h], [prev, *(node_of[a] for a in deps.host_waits.get(h, ()))])
        prev = host_node[h]
    end = graph.solve()
    if end is None:
        stuck = next((h for h in host_order if graph.end[host_node[h]] is None), -1)
        raise StreamDeadlock(
            f"host kernel {stuck} can never start: through the device stream it waits for a "
            "host kernel that the host order runs after it"
        )
    at = [end[m] if m >= 0 else 0.0 for m in marks]
    device_s, host_end = end[device_end], end[prev] if prev >= 0 else 0.0
    total = max(device_s, host_end, end[copies_end])
    per = np.diff(np.asarray([0.0, *at]))
    per[-1] += total - at[-1]
    starts = np.asarray([end[g] if g >= 0 else 0.0 for g in gates], dtype=np.float64)
    return Timeline(total, device_s, host_end, per, starts)


def copy_servers(platform: Platform, moves: Sequence[IndexMove]) -> list[int]:
    """Per move, the server its path is (:class:`~tmsim.plans.waits.Waits`): one per
    direction of a duplex path, one for both directions of a path that is not duplex."""
    names = platform.tier_names
    ids: dict[tuple[int, int], int] = {}
    out = []
    for m in moves:
        key = (m.src, m.dst)
        if key not in ids:
            path = platform.copy_path(names[m.src], names[m.dst])
            shared = not path.duplex and (m.dst, m.src) in ids
            ids[key] = ids[(m.dst, m.src)] if shared else len(ids)
        out.append(ids[key])
    return out


def plan_step_time_s(
    cost: CostModel,
    op_tiers: npt.ArrayLike,
    moves: Iterable[IndexMove],
    beside: BesideCosts | None = None,
    recomputes: Iterable[IndexRecompute] = (),
    host_kernels: Sequence[int] = (),
    lasting: Mapping[int, int] | None = None,
) -> tuple[float, FloatArray]:
    """The predicted step time of a plan in indices and each position's share, as
    :func:`tmsim.cost.step_time_s` gives it; with ``host_kernels`` (in host order), by
    :func:`timeline`, kernels on the device at their cost-model times, host kernels at their
    :func:`host_times`, moves and recomputes as the cost model times them, and no less than
    the host memory's floor (:func:`~tmsim.plans.hostmem.plan_floor_s`, what the last share
    then holds beyond the timeline's end); ``lasting``: as
    :func:`~tmsim.plans.deps.stream_deps` takes it (the plan's copies resident to the end of
    the step).

    Raises :class:`TmsimError` for ``beside`` costs with host kernels (interference-aware
    copies are the MILP's, which runs nothing on the host), :class:`StreamDeadlock` as
    :func:`timeline`, and :class:`hwmodels.errors.HardwareModelError` as :func:`host_times`.
    """
    move_list, reruns = list(moves), list(recomputes)
    if not host_kernels:
        return step_time_s(cost, op_tiers, move_list, beside, reruns)
    if beside is not None:
        raise TmsimError("interference-aware copy costs do not apply to plans with host kernels")
    tiers = np.asarray(op_tiers, dtype=np.int64)
    order = [int(h) for h in host_kernels]
    on_host = host_times(cost, order, tiers)
    seconds: dict[tuple[int, int, MoveMode], FloatArray] = {}
    move_s = []
    for m in move_list:
        key = (m.src, m.dst, m.mode)
        if key not in seconds:
            seconds[key] = cost.move_s(m.src, m.dst, m.mode)
        move_s.append(float(seconds[key][m.tensor]))
    run_s = [cost.recompute_s(r.producer, r.tiers) for r in reruns]
    kernel_s = cost.kernel_times_s(tiers)
    kernel_s[order] = 0.0  # the device runs no kernel at a host kernel's position
    deps = stream_deps(cost, tiers, move_list, reruns, order, lasting)
    servers = copy_servers(cost.platform, move_list)
    line = timeline(
        len(cost.graph.kernels),
        kernel_s,
        order,
        dict(zip(order, (float(x) for x in on_host.time_s), strict=True)),
        move_list,
        move_s,
        reruns,
        run_s,
        deps,
        servers,
    )
    # the host memory's floor (tmsim.plans.hostmem): the step waits past its last position
    floor = plan_floor_s(cost, order, on_host.tier_s, move_list, line.kernel_start_s)
    per = line.per_kernel_s.copy()
    per[-1] += max(floor - line.total_s, 0.0)
    return max(line.total_s, floor), per


__all__ = [
    "HostTimes",
    "StreamDeadlock",
    "Timeline",
    "copy_servers",
    "host_times",
    "plan_step_time_s",
    "timeline",
]
