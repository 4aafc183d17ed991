"""The host compute's side of a replay: a plan's host kernels as flows on the host's tiers,
and who waits for whom across the device and host streams (the rules of
:mod:`tmsim.plans.streams`, which :func:`tmsim.sim.replay.replay` runs).

A host kernel is timed like a kernel of the compute device (:mod:`tmsim.sim.schedule`): after
the host compute's launch overhead, a memory flow on the tiers of its operands, capped at the
rate that makes it last its roofline memory time on the host, and a compute floor of its
roofline compute time, with the host compute's cores as its writers and its op class's memory
efficiency on the host compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.errors import HardwareModelError
from hwmodels.opclass import op_class
from hwmodels.timing import Overlap
from tmsim.cost import CostModel, IndexMove, IndexRecompute
from tmsim.errors import PlanError
from tmsim.plans.deps import lasting_copies, stream_deps
from tmsim.plans.streams import StreamDeadlock, copy_servers, host_times, timeline
from tmsim.plans.values import Plan
from tmsim.sim.flows import Flow
from tmsim.sim.kernels import kernel_flow

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One host kernel, resolved: ``flow`` its memory traffic, ``floor_s`` its compute floor,
    ``serial`` floor then flow, ``kernel_s`` its roofline time on the host (with the launch),
    ``read_bytes``/``write_bytes`` per tier."""

    kernel: int
    flow: Flow
    floor_s: float
    serial: bool
    kernel_s: float
    read_bytes: tuple[int, ...]
    write_bytes: tuple[int, ...]


@dataclass(frozen=True)
class HostSide:
    """What the host stream runs and the waits across the streams.

    ``order``: the host kernels in the order the host runs them; ``specs`` each one's
    :class:`HostSpec`; ``launch_s``: the host compute's launch overhead. Device-side actions
    are numbered as :class:`~tmsim.plans.deps.StreamDeps` numbers them: ``host_waits[h]``
    the actions host kernel ``h`` waits for, ``device_waits[a]`` the host kernels action
    ``a`` waits for; ``detached``: the moves only the end of the step waits for;
    ``servers``: per move, the copy path it takes turns on when it runs on its own
    (:func:`~tmsim.plans.streams.copy_servers`).
    """

    order: tuple[int, ...]
    specs: Mapping[int, HostSpec]
    launch_s: float
    host_waits: Mapping[int, tuple[int, ...]]
    device_waits: Mapping[int, tuple[int, ...]]
    detached: frozenset[int] = frozenset()
    servers: tuple[int, ...] = ()


def host_side(plan: Plan, cost: CostModel, op_tier: IntArray) -> HostSide | None:
    """The host side of ``plan`` (None if it runs nothing on the host), its moves and
    recomputes resolved already (:func:`~tmsim.sim.schedule.build_schedule`,
    :func:`~tmsim.sim.rerun.recompute_specs`).

    Raises :class:`PlanError` if the platform has no host compute, a host kernel is not a
    kernel of the graph or is listed twice, one has an operand on a tier the host does not
    reach or computes in a dtype it has no peak for, or the host order makes a host kernel
    wait for itself (a deadlock).
    """
    order = plan.host_kernels
    if not order:
        return None
    graph, platform = cost.graph, cost.platform
    host = platform.host_compute
    if host is None:
        raise PlanError(f"the plan runs kernels on the host; platform {platform.name!r} has none")
    n_k = len(graph.kernels)
    if len(set(order)) != len(order) or not all(0 <= k < n_k for k in order):
        raise PlanError(f"host_kernels must list kernels of [0, {n_k - 1}] once each")
    try:
        times = host_times(cost, order, op_tier)
    except HardwareModelError as exc:
        raise PlanError(f"a host kernel cannot run on the host: {exc}") from None
    bad = np.flatnonzero(~np.isfinite(times.time_s))
    if bad.size:
        k = order[int(bad[0])]
        raise PlanError(
            f"host kernel {k} ({graph.kernels[k].name!r}) has an operand on a tier the host "
            f"compute cannot access (its tiers: {', '.join(host.kernel_tiers)})"
        )
    moves, reruns = _index_moves(plan, cost), _index_recomputes(plan, cost)
    tensor_of = {t.name: i for i, t in enumerate(graph.tensors)}
    tier_of = {name: i for i, name in enumerate(platform.tier_names)}
    lasting = lasting_copies(
        (
            (tensor_of[r.tensor], tier_of[r.tier], r.first, r.last)
            for r in plan.residency
            if r.tensor in tensor_of and r.tier in tier_of
        ),
        len(platform.tiers),
        n_k,
    )
    deps = stream_deps(cost, op_tier, moves, reruns, order, lasting)
    try:  # unit times: only whether every action can start matters here
        timeline(
            n_k,
            np.ones(n_k),
            order,
            dict.fromkeys(order, 1.0),
            moves,
            [1.0] * len(moves),
            reruns,
            [1.0] * len(reruns),
            deps,
        )
    except StreamDeadlock as exc:
        raise PlanError(str(exc)) from None
    comp = host.compute
    specs = {}
    for i, k in enumerate(order):
        rd = np.rint(times.read_bytes[i]).astype(np.int64)
        wr = np.rint(times.write_bytes[i]).astype(np.int64)
        eff = comp.efficiency(op_class(graph.kernels[k].op)).memory
        flow = kernel_flow(rd, wr, float(times.memory_s[i]), comp.cores, eff)
        specs[k] = HostSpec(
            k,
            flow,
            float(times.compute_s[i]),
            cost.overlap is Overlap.SUM,
            float(times.time_s[i]),
            tuple(int(x) for x in rd),
            tuple(int(x) for x in wr),
        )
    return HostSide(
        tuple(order),
        specs,
        times.launch_s,
        deps.host_waits,
        deps.device_waits,
        deps.detached,
        tuple(copy_servers(platform, moves)),
    )


def _index_moves(plan: Plan, cost: CostModel) -> list[IndexMove]:
    tier = {name: i for i, name in enumerate(cost.platform.tier_names)}
    return [
        IndexMove(cost.graph.tensor_index(m.tensor), tier[m.src], tier[m.dst], m.kernel, m.mode)
        for m in plan.moves
    ]


def _index_recomputes(plan: Plan, cost: CostModel) -> list[IndexRecompute]:
    tier = {name: i for i, name in enumerate(cost.platform.tier_names)}
    graph = cost.graph
    out = []
    for r in plan.recomputes:
        t = graph.tensor_index(r.tensor)
        tiers = tuple(tier[name] for name in r.tiers)
        out.append(IndexRecompute(t, r.kernel, int(graph.producers[t]), tiers))
    return out


__all__ = ["HostSide", "HostSpec", "host_side"]
