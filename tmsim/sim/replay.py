"""Replay a plan on SimPy, with or without contention for memory and link bandwidth.

The step, as the plan and the cost model define it (:mod:`tmsim.plans.values`,
:func:`tmsim.planners.assemble.step_time_s`), and as :func:`replay` runs it:

- one compute engine runs the kernels in plan order. A kernel takes its launch overhead,
  then its memory flow and its compute floor (:mod:`tmsim.sim.schedule`);
- the synchronous moves at kernel ``k`` run one after another after kernel ``k - 1`` and the
  asynchronous moves issued with it have finished, and before kernel ``k`` starts (at ``K``:
  after the last kernel), each its pair's per-transfer latency then its bytes at its path's
  synchronous rate; then the recomputes at ``k``, one after another, each its producer kernel
  run again (:mod:`tmsim.sim.rerun`);
- the asynchronous moves issued at kernel ``k`` start with it, and kernel ``k + 1`` starts
  only when kernel ``k`` and all of them have finished (so the next user of a moved tensor
  waits for its copy);
- a plan's host kernels run on a host stream of their own, in the plan's host order, on the
  host compute; across the two streams actions wait for each other as
  :mod:`tmsim.plans.streams` says (the asynchronous moves at a host kernel's position run
  each on its own and do not hold the device stream, whose next kernel, synchronous move or
  recompute waits for them; a copy waits for its host kernels before it takes an engine; a
  detached copy, wherever issued, holds only the end of the step),
  and the step ends when both streams have (:mod:`tmsim.sim.hostside`). Without host kernels
  nothing of this runs: the replay is event for event what it was.

At the levels ``bandwidth`` and ``controller`` (:mod:`tmsim.levels`) the replay runs the machine:
asynchronous copies take a copy engine or thread of their pool (more wait, first come first served
in plan order), and kernels and copies share tier and link bandwidth through
:class:`~tmsim.sim.fluid.FluidModel` with the tiers' interference models (``bandwidth``, or
``controller`` adding the platform's memory controller and its copy thread: loaded latency and, with
a shared core, a copy and the kernel beside it slowing each other, so that kernel's compute floor
runs as a flow; with a dedicated core every compute floor takes ``cores / (cores - 1)`` of its time
when the plan copies beside kernels). The level ``none`` runs the cost model's world: every kernel
and copy at its own uncontended rate, and the asynchronous moves of one kernel one after another,
whatever their engines (the cost model charges their sum). Then the simulated step time equals the
plan's predicted time up to rounding, for any plan the planners make, except a plan with host
kernels whose prediction the host memory's floor holds higher (:mod:`tmsim.plans.hostmem`): a
floor of sharing, which this level leaves out.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from hwmodels.platform import Platform
from tmsim.cost import CostModel
from tmsim.errors import PlanError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.plans.values import Plan
from tmsim.sim.body import kernel_body, kernel_losses, lost_fields, side_record
from tmsim.sim.flows import Losses, Role
from tmsim.sim.fluid import FlowResult, FluidModel
from tmsim.sim.hostside import HostSide, host_side
from tmsim.sim.rates import ChannelUse
from tmsim.sim.rerun import RecomputeSpec, recompute_specs
from tmsim.sim.schedule import MoveSpec, Schedule, build_schedule, operand_tiers
from tmsim.sim.threads import ThreadUse
from tmsim.sim.trace import ASYNC, HOST, KERNEL, RECOMPUTE, SYNC, Record, Trace
from tmsim.workload.graph import Graph

Process = Generator[simpy.Event, Any, None]


def replay(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    cost: CostModel | None = None,
    level: InterferenceLevel = DEFAULT_LEVEL,
) -> Trace:
    """Simulate one step of ``plan`` for ``graph`` on ``platform`` and return its trace.

    ``level``: the interference level (``none``: the cost model's world, module doc).
    ``cost`` is the cost model that times kernels and moves (default
    ``CostModel(graph, platform)``; pass the one the plan was made with if it differs). The
    trace's ``predicted_s`` is ``plan.predicted_s``. Deterministic: the same arguments give an
    equal trace. Raises :class:`~tmsim.errors.PlanError` for a plan that does not resolve
    against the graph and platform (see :func:`~tmsim.sim.schedule.build_schedule` and
    :func:`~tmsim.sim.hostside.host_side`: a host order that deadlocks does not resolve); a
    plan that resolves but breaks the rules :func:`tmsim.plans.validate.validate` checks is
    replayed as written.
    """
    if cost is None:
        cost = CostModel(graph, platform)
    sched = build_schedule(plan, graph, platform, cost)
    reruns = recompute_specs(plan, cost)
    host = host_side(plan, cost, operand_tiers(plan, graph, cost))
    level = InterferenceLevel(level)
    shared = level is not InterferenceLevel.NONE
    env = simpy.Environment()
    full = level is InterferenceLevel.CONTROLLER
    threads = ThreadUse.of(platform) if full else None
    fluid = FluidModel(
        env,
        platform.tiers,
        sched.link_bw_bytes_per_s,
        shared=shared,
        controllers=platform.controller_groups(),
        channel=ChannelUse.of(platform) if full else None,
        threads=threads,
    )
    floors = _floor_flows(sched, threads)
    run = _Run(env, fluid, sched, platform.tier_names, shared, floors, host)
    first_rerun = sched.n_kernels + len(sched.moves)  # action numbers of recomputes
    run.reruns_at = {
        k: tuple((first_rerun + i, r) for i, r in enumerate(reruns) if r.kernel == k)
        for k in {r.kernel for r in reruns}
    }
    # recomputes run alone, beside no copy: their floors are flows only when a dedicated
    # copy core stretches every kernel's compute
    run.rerun_floor_flow = bool(threads is not None and not threads.shared_core and any(floors))
    procs = [env.process(run.step())]
    if host is not None:
        procs.append(env.process(run.host_stream(host)))
    events = 0
    while not all(p.processed for p in procs):
        try:
            env.step()
        except simpy.core.EmptySchedule:  # pragma: no cover - host_side refuses deadlocks
            raise PlanError("the replay stopped with actions still waiting") from None
        events += 1
    run.out.sort(key=lambda item: (item[0].start_s, item[1]))
    return Trace(
        graph=plan.graph,
        platform=plan.platform,
        planner=plan.planner,
        level=level.value,
        tier_names=platform.tier_names,
        fast_limit_bytes=plan.fast_limit_bytes,
        predicted_s=plan.predicted_s,
        simulated_s=run.end_s,
        events=events,
        records=tuple(r for r, _ in run.out),
    )


@dataclass
class _Run:
    """The processes of one replay and the records they emit, with their issue order."""

    env: simpy.Environment
    fluid: FluidModel
    sched: Schedule
    tier_names: tuple[str, ...]
    shared: bool
    #: per kernel: run its compute floor as a flow (:func:`_floor_flows`)
    floor_flow: list[bool]
    host: HostSide | None = None
    out: list[tuple[Record, int]] = field(default_factory=list)
    end_s: float = 0.0
    issued: int = 0
    pools: list[simpy.Resource] = field(default_factory=list)
    #: the recomputes that run just before each kernel, in plan order, with their action
    #: numbers (:class:`~tmsim.plans.deps.StreamDeps`)
    reruns_at: dict[int, tuple[tuple[int, RecomputeSpec], ...]] = field(default_factory=dict)
    rerun_floor_flow: bool = False
    #: the end of every device-side action a host kernel waits for, and of every host kernel
    done: dict[int, simpy.Event] = field(default_factory=dict)
    host_done: dict[int, simpy.Event] = field(default_factory=dict)
    #: copies issued at host kernels' positions, not yet waited for
    pending: list[simpy.Process] = field(default_factory=list)
    #: copies that only the end of the step waits for (:attr:`HostSide.detached`)
    detached: list[simpy.Process] = field(default_factory=list)
    #: without contention, each copy path's turns for the moves that run on their own
    turns: dict[int, simpy.Resource] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pools = [simpy.Resource(self.env, capacity=c) for c in self.sched.pool_engines]
        if self.host is not None:
            waited = {a for acts in self.host.host_waits.values() for a in acts}
            self.done = {a: self.env.event() for a in sorted(waited)}
            self.host_done = {h: self.env.event() for h in self.host.order}

    def step(self) -> Process:
        s, env = self.sched, self.env
        on_host = set(self.host.order) if self.host is not None else set()
        own = self.host.detached if self.host is not None else frozenset()
        for k in range(s.n_kernels + 1):
            for i in s.sync_at[k]:
                yield from self._join()
                yield from self._wait_host(s.n_kernels + i)
                seq = self._issue()
                yield from self._transfer(s.moves[i], seq, s.n_kernels + i)
            if k == s.n_kernels:
                break
            for action, rerun in self.reruns_at.get(k, ()):
                yield from self._join()
                yield from self._wait_host(action)
                yield from self._rerun(rerun)
                self._finish(action)
            if k in on_host:  # the host runs it; copies issued here do not hold the device
                self.pending += [
                    env.process(self._copy(i, True)) for i in s.async_at[k] if i not in own
                ]
                self.detached += [
                    env.process(self._copy(i, True)) for i in s.async_at[k] if i in own
                ]
                continue
            yield from self._join()
            start, seq = float(env.now), self._issue()
            self.detached += [env.process(self._copy(i, True)) for i in s.async_at[k] if i in own]
            copies: list[simpy.Process] = self._issue_copies(k, own)
            if self.host is not None and self.host.device_waits.get(k):
                yield from self._wait_host(k)
                start = float(env.now)
            if s.launch_s > 0:
                yield env.timeout(s.launch_s)
            serial = bool(s.serial[k])
            results = yield from kernel_body(
                env,
                self.fluid,
                (s.kernel_flows[k],),
                float(s.floor_s[k]),
                serial,
                self.floor_flow[k],
            )
            delay = float(env.now) - start - float(s.kernel_s[k])
            self._kernel(k, start, seq, kernel_losses(results, serial, delay))
            self._finish(k)
            if copies:
                yield env.all_of(copies)
        yield from self._join()
        if self.detached:
            yield env.all_of(self.detached)
        self.end_s = max(self.end_s, float(env.now))

    def host_stream(self, host: HostSide) -> Process:
        """The host kernels in the host order, each after the device-side actions it waits
        for, recorded as :data:`~tmsim.sim.trace.HOST` records."""
        env = self.env
        for k in host.order:
            waits = [self.done[a] for a in host.host_waits.get(k, ())]
            if waits:
                yield env.all_of(waits)
            spec = host.specs[k]
            start, seq = float(env.now), self._issue()
            if host.launch_s > 0:
                yield env.timeout(host.launch_s)
            results = yield from kernel_body(
                env, self.fluid, (spec.flow,), spec.floor_s, spec.serial
            )
            lost = kernel_losses(results, spec.serial, float(env.now) - start - spec.kernel_s)
            names, phases = self.sched.names, self.sched.phases
            self.out.append(
                (side_record(HOST, names[k], k, phases[k], start, env, spec, lost), seq)
            )
            self.host_done[k].succeed()
        self.end_s = max(self.end_s, float(env.now))

    def _issue_copies(self, k: int, detached: frozenset[int]) -> list[simpy.Process]:
        """Start the asynchronous moves issued at kernel ``k`` but the ``detached``: one
        process each with contention (each takes an engine of its pool), else one that runs
        them in turn."""
        at = tuple(i for i in self.sched.async_at[k] if i not in detached)
        if not at:
            return []
        if self.shared:
            return [self.env.process(self._copy(i)) for i in at]
        return [self.env.process(self._copies_in_turn(at))]

    def _join(self) -> Process:
        """Wait for the copies issued at host kernels' positions so far."""
        if self.pending:
            procs, self.pending = self.pending, []
            yield self.env.all_of(procs)

    def _wait_host(self, action: int) -> Process:
        """Wait for the host kernels device-side ``action`` waits for (nothing without)."""
        if self.host is not None:
            waits = [self.host_done[h] for h in self.host.device_waits.get(action, ())]
            if waits:
                yield self.env.all_of(waits)

    def _finish(self, action: int) -> None:
        """Mark device-side ``action`` ended, for the host kernels that wait for it."""
        event = self.done.get(action)
        if event is not None:
            event.succeed()

    def _rerun(self, r: RecomputeSpec) -> Process:
        """One recompute: its producer's launch, memory flow and compute floor, recorded."""
        env, s = self.env, self.sched
        start, seq = float(env.now), self._issue()
        if s.launch_s > 0:
            yield env.timeout(s.launch_s)
        results = yield from kernel_body(
            env, self.fluid, (r.flow,), r.floor_s, r.serial, self.rerun_floor_flow
        )
        lost = kernel_losses(results, r.serial, float(env.now) - start - r.kernel_s)
        rec = side_record(RECOMPUTE, r.tensor, r.kernel, s.phases[r.kernel], start, env, r, lost)
        self.out.append((rec, seq))

    def _copy(self, i: int, on_own: bool = False) -> Process:
        """One asynchronous move: it waits for the host kernels it must follow, then, with
        contention, for an engine of its pool; without, a move ``on_own`` (issued at a host
        kernel's position, or detached) for its turn on its path
        (:attr:`~tmsim.sim.hostside.HostSide.servers`), as the prediction has it."""
        move = self.sched.moves[i]
        seq = self._issue()
        action = self.sched.n_kernels + i
        yield from self._wait_host(action)
        if not self.shared:
            if on_own and self.host is not None and self.host.servers:
                server = self.host.servers[i]
                path = self.turns.setdefault(server, simpy.Resource(self.env, capacity=1))
                with path.request() as turn:
                    yield turn
                    yield from self._transfer(move, seq, action)
                return
            yield from self._transfer(move, seq, action)
            return
        with self.pools[move.pool].request() as engine:
            yield engine
            yield from self._transfer(move, seq, action)

    def _copies_in_turn(self, moves: tuple[int, ...]) -> Process:
        for i in moves:
            seq = self._issue()
            action = self.sched.n_kernels + i
            yield from self._wait_host(action)
            yield from self._transfer(self.sched.moves[i], seq, action)

    def _transfer(self, move: MoveSpec, seq: int, action: int) -> Process:
        """One copy: its per-transfer latency, then its bytes; recorded from its start."""
        start = float(self.env.now)
        if move.latency_s > 0:
            yield self.env.timeout(move.latency_s)
        res = yield self.fluid.transfer(move.flow)
        self._move(move, res, seq, start)
        self._finish(action)

    def _issue(self) -> int:
        self.issued += 1
        return self.issued

    def _kernel(self, k: int, start_s: float, seq: int, lost: Losses) -> None:
        s = self.sched
        rec = Record(
            kind=KERNEL,
            name=s.names[k],
            kernel=k,
            phase=s.phases[k],
            src="",
            dst="",
            start_s=start_s,
            end_s=float(self.env.now),
            read_bytes=tuple(int(x) for x in s.read_bytes[k]),
            write_bytes=tuple(int(x) for x in s.write_bytes[k]),
            uncontended_s=float(s.kernel_s[k]),
            fast_resident_bytes=int(s.fast_bytes[k]),
            **(lost_fields(lost) if lost.total_s else {}),
        )
        self.out.append((rec, seq))

    def _move(self, m: MoveSpec, res: FlowResult, seq: int, start_s: float) -> None:
        s = self.sched
        # The bytes it wrote (its flow charges the destination the path's cost factor more).
        written = [0] * len(self.tier_names)
        written[self.tier_names.index(m.dst)] = m.nbytes
        rec = Record(
            kind=ASYNC if m.link >= 0 else SYNC,
            name=m.tensor,
            kernel=m.kernel,
            phase=s.phases[m.kernel] if m.kernel < s.n_kernels else "",
            src=m.src,
            dst=m.dst,
            start_s=start_s,
            end_s=float(res.end_s),
            read_bytes=tuple(int(x) for x in m.flow.read_bytes),
            write_bytes=tuple(written),
            uncontended_s=m.uncontended_s,
            fast_resident_bytes=-1,
            **(lost_fields(res.losses) if res.losses.total_s else {}),
        )
        self.out.append((rec, seq))


def _floor_flows(sched: Schedule, threads: ThreadUse | None) -> list[bool]:
    """Per kernel, whether its compute floor runs as a flow a copy thread can slow: beside a
    thread copy on a shared core that slows it; every kernel when the plan copies with
    threads on a dedicated core (taken from the kernels' pool)."""
    none = [False] * sched.n_kernels
    if threads is None or (threads.shared_core and threads.thread.core_slowdown == 0):
        return none
    beside = [
        any(sched.moves[i].flow.role is Role.THREAD for i in sched.async_at[k])
        for k in range(sched.n_kernels)
    ]
    if threads.shared_core:
        return beside
    return [any(beside) and threads.cores > 1] * sched.n_kernels


__all__ = ["replay"]
