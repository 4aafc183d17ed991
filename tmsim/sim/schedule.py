"""A plan turned into what the replay runs: kernel flows, copy flows, engines, occupancy.

:func:`build_schedule` resolves every name in a :class:`~tmsim.plans.values.Plan` against its graph
and platform and describes, in indices and :class:`~tmsim.sim.fluid.Flow` values, what
:func:`tmsim.sim.replay.replay` has to simulate. The timings come from the cost model:

- kernel ``k`` is a memory flow and a compute floor, from the plan's operand tiers
  (:func:`tmsim.sim.kernels.kernel_specs`: the roofline's time, or a profile's measured one);
- a copy reads its tensor's bytes on the source tier and writes them on the destination
  tier, one writer, at its path's synchronous or asynchronous rate; an asynchronous copy also
  crosses its path's link (one per direction, of the path's asynchronous bandwidth) and needs
  a copy engine or thread of its pool: one pool of ``copy_engines`` per direction of a duplex
  path, one pool of a single engine shared by both directions of a half-duplex path ("one
  copy runs at a time", :class:`hwmodels.CopyPath`). Between two tiers of the platform's copy
  thread (:class:`hwmodels.copythread.CopyThread`) it is a thread's flow
  (:attr:`~tmsim.sim.flows.Role.THREAD`); kernel flows are :attr:`~tmsim.sim.flows.Role.KERNEL`.
  On a path that gives ``both_bw_bytes_per_s``, both directions' asynchronous copies also
  cross one link of their two such rates summed (:func:`pair_bw_bytes_per_s`): each runs at
  its own rate alone and at its ``both`` rate while the other direction copies too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.paths import CopyPath
from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.errors import PlanError, TmsimError
from tmsim.plans.values import Plan
from tmsim.sim.flows import Flow, Role
from tmsim.sim.kernels import kernel_specs
from tmsim.workload.graph import Graph

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Concurrent writers one copy presents to its destination tier (one stream, one thread or
#: one DMA engine). The AutoTM copy rates are reached by such a stream on the presets' tiers.
COPY_WRITERS = 1


@dataclass(frozen=True, slots=True)
class MoveSpec:
    """One move of the plan, resolved: ``flow`` is its copy at its mode's rate, after
    ``latency_s`` (the pair's per-transfer latency, during which the copy moves no bytes but
    holds its engine); ``pool`` and ``link`` index the engine pool and link of an asynchronous
    move (-1 for a synchronous one)."""

    tensor: str
    src: str
    dst: str
    kernel: int
    mode: MoveMode
    nbytes: int
    flow: Flow
    pool: int
    link: int
    latency_s: float
    uncontended_s: float


@dataclass(frozen=True)
class Schedule:
    """What the replay runs (see the module documentation).

    Per kernel [K]: ``kernel_flows``, ``floor_s`` (compute floor), ``serial`` (floor then
    flow instead of both at once), ``kernel_s`` (the cost model's time),
    ``read_bytes``/``write_bytes`` [K, tiers], ``fast_bytes`` (bytes resident on the fastest
    tier), ``names``, ``phases``. ``sync_at`` [K + 1] and ``async_at`` [K]: indices into
    ``moves``, in plan order.
    ``pool_engines`` and ``link_bw_bytes_per_s``: engine pools and links.
    """

    n_kernels: int
    launch_s: float
    serial: npt.NDArray[np.bool_]
    kernel_flows: tuple[Flow, ...]
    floor_s: FloatArray
    kernel_s: FloatArray
    read_bytes: IntArray
    write_bytes: IntArray
    fast_bytes: IntArray
    names: tuple[str, ...]
    phases: tuple[str, ...]
    moves: tuple[MoveSpec, ...]
    sync_at: tuple[tuple[int, ...], ...]
    async_at: tuple[tuple[int, ...], ...]
    pool_engines: tuple[int, ...]
    link_bw_bytes_per_s: tuple[float, ...]


def build_schedule(
    plan: Plan, graph: Graph, platform: Platform, cost: CostModel | None = None
) -> Schedule:
    """Resolve ``plan`` for ``graph`` on ``platform`` (see the module documentation).

    ``cost`` defaults to ``CostModel(graph, platform)``. Raises :class:`PlanError` naming what
    is wrong if the plan is for another graph or platform, names an unknown tensor or tier,
    has the wrong number of operand tiers for a kernel, places an operand where kernels cannot
    reach it, or has a move at an impossible kernel or with no copy path; :class:`TmsimError`
    if ``cost`` was built for another graph or platform. The plan's other rules (validity,
    capacity) are :func:`tmsim.plans.validate.validate`'s business: an invalid plan is replayed as
    written. The plan's host kernels are :func:`tmsim.sim.hostside.host_side`'s.
    """
    if cost is None:
        cost = CostModel(graph, platform)
    elif cost.graph is not graph or cost.platform != platform:
        raise TmsimError("replay: the cost model was built for another graph or platform")
    if plan.graph != graph.name:
        raise PlanError(f"the plan is for graph {plan.graph!r}, not {graph.name!r}")
    if plan.platform != platform.name:
        raise PlanError(f"the plan is for platform {plan.platform!r}, not {platform.name!r}")
    n_k = len(graph.kernels)
    tiers = {name: i for i, name in enumerate(platform.tier_names)}
    op_tier = operand_tiers(plan, graph, cost)
    times = cost.kernel_times_s(op_tier)
    times[[k for k in plan.host_kernels if 0 <= k < n_k]] = 0.0  # the host's: its own check
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        k = int(bad[0])
        raise PlanError(
            f"kernel {k} ({graph.kernels[k].name!r}) has an operand on a tier kernels cannot "
            f"access (kernel tiers: {', '.join(platform.kernel_tiers)})"
        )
    specs = kernel_specs(cost, op_tier)
    moves, pools, links = _moves(plan, graph, platform, tiers)
    sync_at: list[list[int]] = [[] for _ in range(n_k + 1)]
    async_at: list[list[int]] = [[] for _ in range(n_k)]
    for i, m in enumerate(moves):
        (async_at if m.mode is MoveMode.ASYNC else sync_at)[m.kernel].append(i)
    return Schedule(
        n_kernels=n_k,
        launch_s=cost.launch_s,
        serial=specs.serial,
        kernel_flows=specs.flows,
        floor_s=specs.floor_s,
        kernel_s=specs.kernel_s,
        read_bytes=specs.read_bytes,
        write_bytes=specs.write_bytes,
        fast_bytes=_fast_bytes(plan, graph, platform),
        names=tuple(k.name for k in graph.kernels),
        phases=tuple(k.phase.value for k in graph.kernels),
        moves=tuple(moves),
        sync_at=tuple(tuple(x) for x in sync_at),
        async_at=tuple(tuple(x) for x in async_at),
        pool_engines=tuple(pools),
        link_bw_bytes_per_s=tuple(links),
    )


def copy_flow(
    platform: Platform,
    src: int,
    dst: int,
    nbytes: int,
    asynchronous: bool,
    link: int = -1,
    pair: int = -1,
) -> Flow:
    """A copy of ``nbytes`` from tier ``src`` to ``dst`` (indices) at its path's rate for
    ``asynchronous``, its writes charged the path's ``dst_cost_factor``, across ``link`` (its
    index among the replay's links; -1: none) and ``pair`` (the link both directions of the
    pair share; -1: none), one writer; a copy thread's flow where the platform's copy thread
    copies between the two tiers asynchronously. Raises :class:`PlanError` if no copy path
    joins them."""
    names = platform.tier_names
    path = _path(platform, names[src], names[dst], f"a copy {names[src]} -> {names[dst]}")
    n_t = len(names)
    read, write = [0.0] * n_t, [0.0] * n_t
    read[src] = float(nbytes)
    write[dst] = float(nbytes) * path.dst_cost_factor
    thread = platform.copy_thread
    return Flow(
        float(nbytes),
        tuple(read),
        tuple(write),
        path.bw_bytes_per_s(asynchronous),
        links=tuple((i, float(nbytes)) for i in (link, pair) if i >= 0),
        writers=COPY_WRITERS,
        role=(
            Role.THREAD
            if asynchronous and thread is not None and thread.copies(names[src], names[dst])
            else Role.OTHER
        ),
    )


def pair_bw_bytes_per_s(platform: Platform, path: CopyPath) -> float | None:
    """The rate both directions of ``path``'s pair of tiers share when both copy at once:
    the two directions' ``both_bw_bytes_per_s`` summed (a direction without one, or without a
    reverse path, counts as this one's), or None where ``path`` has none."""
    own = path.both_bw_bytes_per_s
    if own is None:
        return None
    reverse = next((p for p in platform.copy_paths if (p.src, p.dst) == (path.dst, path.src)), None)
    other = reverse.both_bw_bytes_per_s if reverse is not None else None
    return own + (own if other is None else other)


def operand_tiers(plan: Plan, graph: Graph, cost: CostModel) -> IntArray:
    """The tier index of every operand of ``plan`` (cost-model operand order). Raises
    :class:`PlanError` for a wrong number of tiers for a kernel or an unknown tier."""
    tiers = {name: i for i, name in enumerate(cost.platform.tier_names)}
    ptr = cost.op_ptr
    if len(plan.operand_tiers) != len(graph.kernels):
        raise PlanError(
            f"the plan gives operand tiers for {len(plan.operand_tiers)} kernels; the graph "
            f"has {len(graph.kernels)}"
        )
    out = np.empty(cost.op_tensor.size, dtype=np.int64)
    for k, row in enumerate(plan.operand_tiers):
        lo, hi = int(ptr[k]), int(ptr[k + 1])
        if len(row) != hi - lo:
            raise PlanError(
                f"kernel {k} ({graph.kernels[k].name!r}) has {hi - lo} operands; the plan "
                f"gives {len(row)} tiers"
            )
        for j, name in enumerate(row):
            out[lo + j] = _tier(tiers, name, f"kernel {k} ({graph.kernels[k].name!r})")
    return out


def _tier(tiers: dict[str, int], name: str, where: str) -> int:
    try:
        return tiers[name]
    except KeyError:
        raise PlanError(f"{where}: unknown tier {name!r}; tiers are {', '.join(tiers)}") from None


def _moves(
    plan: Plan, graph: Graph, platform: Platform, tiers: dict[str, int]
) -> tuple[list[MoveSpec], list[int], list[float]]:
    n_k = len(graph.kernels)
    pool_of: dict[tuple[str, str], int] = {}
    link_of: dict[tuple[str, ...], int] = {}
    pools: list[int] = []
    links: list[float] = []
    out: list[MoveSpec] = []
    for i, m in enumerate(plan.moves):
        where = f"move {i} ({m.tensor!r} {m.src} -> {m.dst} at kernel {m.kernel}, {m.mode.value})"
        try:
            t = graph.tensor_index(m.tensor)
        except (KeyError, TmsimError):
            raise PlanError(f"{where}: unknown tensor {m.tensor!r}") from None
        src, dst = _tier(tiers, m.src, where), _tier(tiers, m.dst, where)
        asynchronous = m.mode is MoveMode.ASYNC
        last = n_k - 1 if asynchronous else n_k
        if not 0 <= m.kernel <= last:
            raise PlanError(f"{where}: kernel must lie in [0, {last}]")
        path = _path(platform, m.src, m.dst, where)
        nbytes = int(graph.sizes_bytes[t])
        rate = path.bw_bytes_per_s(asynchronous)
        pool = link = pair = -1
        if asynchronous:
            ends = (m.src, m.dst)
            key = ends if path.duplex else (min(ends), max(ends))
            if key not in pool_of:
                pool_of[key] = len(pools)
                pools.append(path.copy_engines if path.duplex else 1)
            if (m.src, m.dst) not in link_of:
                link_of[(m.src, m.dst)] = len(links)
                links.append(path.async_bw_bytes_per_s)
            pool, link = pool_of[key], link_of[(m.src, m.dst)]
            both = pair_bw_bytes_per_s(platform, path)
            pair_key = (min(ends), max(ends), "both")
            if both is not None and pair_key not in link_of:
                link_of[pair_key] = len(links)
                links.append(both)
            pair = link_of[pair_key] if both is not None else -1
        flow = copy_flow(platform, src, dst, nbytes, asynchronous, link, pair)
        latency = platform.copy_latency_s(m.src, m.dst) if nbytes > 0 else 0.0
        spec = MoveSpec(
            m.tensor,
            m.src,
            m.dst,
            m.kernel,
            m.mode,
            nbytes,
            flow,
            pool,
            link,
            latency,
            latency + nbytes / rate,
        )
        out.append(spec)
    return out, pools, links


def _path(platform: Platform, src: str, dst: str, where: str) -> CopyPath:
    for p in platform.copy_paths:
        if p.src == src and p.dst == dst:
            return p
    raise PlanError(f"{where}: platform {platform.name!r} has no copy path {src} -> {dst}")


def _fast_bytes(plan: Plan, graph: Graph, platform: Platform) -> IntArray:
    """Bytes resident on the fastest tier at every kernel, from the plan's residency ranges."""
    n_k = len(graph.kernels)
    fast = platform.tiers[0].name
    delta = np.zeros(n_k + 1, dtype=np.int64)
    for r in plan.residency:
        if r.tier != fast:
            continue
        try:
            size = int(graph.sizes_bytes[graph.tensor_index(r.tensor)])
        except (KeyError, TmsimError):
            raise PlanError(f"residency of unknown tensor {r.tensor!r}") from None
        if not 0 <= r.first <= r.last < n_k:
            raise PlanError(
                f"residency of {r.tensor!r} in {fast!r}: range [{r.first}, {r.last}] outside "
                f"[0, {n_k - 1}]"
            )
        delta[r.first] += size
        delta[r.last + 1] -= size
    return np.cumsum(delta[:-1])


__all__ = [
    "COPY_WRITERS",
    "MoveSpec",
    "Schedule",
    "build_schedule",
    "copy_flow",
    "operand_tiers",
]
