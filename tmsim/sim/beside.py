"""What an asynchronous copy beside a kernel really costs, measured on the replay's own model.

The asynchronous MILP charges a copy beside kernel ``k`` its idle time and the kernel nothing.
:func:`beside_costs` measures instead, for every kernel and copy path, what the replay at an
interference level (:mod:`tmsim.levels`) gives when one long copy starts with the kernel:

- the kernel alone takes ``T0`` (launch, then its body: :func:`tmsim.sim.body.kernel_body`);
- beside the copy it takes ``T1``, while the copy moves ``B`` bytes;
- so a copy runs at ``T1 / B`` seconds per byte beside the kernel, and delays it by
  ``(T1 - T0) / B`` seconds per byte copied (:class:`tmsim.cost.BesideCosts`).

Both are linear in the copy's bytes, as the MILP needs them. The copy is made long enough to
outlast the kernel (``B`` is then what it moved by ``T1``: its size less what it moved alone
afterwards, at its idle rate); where it ends first, ``B`` is its size and ``T1`` its end. A
copy that moves less than :data:`MIN_SHARE` of what it would alone cannot run beside the
kernel: its cost is ``inf``.

The kernel's traffic depends on where the plan puts its operands; the costs are the worse of
two placements, every operand on the fastest tier kernels reach and every operand on the
slowest, so that the charge holds whatever the plan decides. Kernels with the same flows,
floor and rule share one measurement.

What the linear charge leaves out: a copy that outlasts its kernel delays it by ``T1 - T0`` at
most, not by its bytes times the rate (the charge is then too high, never too low); several
copies beside one kernel each pay as if alone. A dedicated copy core's stretch of every
compute floor is a cost of the plan having any copy at all, in neither ``T0`` nor ``T1``: the
costs carry it (``compute_factor``) for the plan's predicted time, not for the MILP's
objective, and a plan it makes slower than the sync plan loses to that plan in the chain.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator
from typing import Any

import numpy as np
import numpy.typing as npt
import simpy

from hwmodels.platform import Platform
from tmsim.cost import BesideCosts, CostModel
from tmsim.levels import InterferenceLevel
from tmsim.plans.values import Plan
from tmsim.sim.body import kernel_body
from tmsim.sim.flows import Flow
from tmsim.sim.fluid import FluidModel
from tmsim.sim.kernels import kernel_specs
from tmsim.sim.rates import ChannelUse
from tmsim.sim.schedule import copy_flow
from tmsim.sim.threads import ThreadUse

FloatArray = npt.NDArray[np.float64]

#: A copy beside a kernel moving less than this share of what it moves alone in the same time
#: cannot run there (its rate is rounding, not a rate).
MIN_SHARE = 1e-3

#: The planner name of plans predicted with :func:`beside_costs`.
AWARE_PLANNER = "milp-async-aware"

#: The copy measured beside a kernel carries this many times what it moves alone during the
#: kernel's uncontended time, so that it outlasts the kernel unless that slows it as much.
LONG = 4.0


def beside_costs(
    cost: CostModel, level: InterferenceLevel = InterferenceLevel.CONTROLLER
) -> BesideCosts:
    """The cost of a copy beside each kernel of ``cost``'s graph on each of its platform's
    copy paths, at ``level`` (see the module documentation). At ``none`` every copy runs at
    its idle rate and slows nothing. Deterministic (but for ``measured_s``)."""
    started = time.perf_counter()
    platform = cost.platform
    names = platform.tier_names
    paths = tuple((names.index(p.src), names.index(p.dst)) for p in platform.copy_paths)
    n_k = len(cost.graph.kernels)
    copy = np.zeros((n_k, len(paths)))
    slow = np.zeros((n_k, len(paths)))
    bench = _Bench(platform, level, cost.launch_s)
    idle = [bench.idle_s_per_byte(src, dst) for src, dst in paths]
    reach = np.flatnonzero(cost.tier_allowed)
    for tier in sorted({int(reach[0]), int(reach[-1])}):
        specs = kernel_specs(cost, np.full(cost.op_tensor.size, tier, dtype=np.int64))
        for k in range(n_k):
            body = (specs.flows[k], float(specs.floor_s[k]), bool(specs.serial[k]))
            for p, (src, dst) in enumerate(paths):
                got = bench.beside(body, src, dst, idle[p])
                copy[k, p] = max(copy[k, p], got[0])
                slow[k, p] = max(slow[k, p], got[1])
    factor, stretching = _stretch(platform, level, paths)
    seconds = time.perf_counter() - started
    level_name = InterferenceLevel(level).value
    return BesideCosts(paths, copy, slow, level_name, factor, stretching, seconds)


def _stretch(
    platform: Platform, level: InterferenceLevel, paths: tuple[tuple[int, int], ...]
) -> tuple[float, tuple[bool, ...]]:
    """The compute factor of every kernel once a plan copies on a copy thread that has a
    core of its own (``cores / (cores - 1)``, as the replay's floors run at ``controller``),
    and which ``paths`` that thread copies on; (1, no path) where copies take no core from
    the kernels."""
    threads = ThreadUse.of(platform) if level is InterferenceLevel.CONTROLLER else None
    if threads is None or threads.shared_core or threads.cores <= 1:
        return 1.0, tuple(False for _ in paths)
    names = platform.tier_names
    on = tuple(threads.thread.copies(names[s], names[d]) for s, d in paths)
    return threads.cores / (threads.cores - 1), on


_Body = tuple[Flow, float, bool]


class _Bench:
    """Small replays of one kernel beside one copy on ``platform`` at ``level``, memoised by
    the kernel's body."""

    def __init__(self, platform: Platform, level: InterferenceLevel, launch_s: float) -> None:
        self.platform = platform
        self.level = InterferenceLevel(level)
        self.launch_s = launch_s
        full = self.level is InterferenceLevel.CONTROLLER
        self.channel = ChannelUse.of(platform) if full else None
        self.threads = ThreadUse.of(platform) if full else None
        self._memo: dict[tuple[_Body, int, int], tuple[float, float]] = {}

    def _model(self, env: simpy.Environment, link_bw: float) -> FluidModel:
        return FluidModel(
            env,
            self.platform.tiers,
            (link_bw,),
            shared=self.level is not InterferenceLevel.NONE,
            controllers=self.platform.controller_groups(),
            channel=self.channel,
            threads=self.threads,
        )

    def _copy(self, src: int, dst: int, nbytes: float) -> tuple[Flow, float]:
        names = self.platform.tier_names
        path = next(
            p for p in self.platform.copy_paths if (p.src, p.dst) == (names[src], names[dst])
        )
        flow = copy_flow(self.platform, src, dst, max(int(nbytes), 1), True, link=0)
        return flow, float(path.async_bw_bytes_per_s)

    def idle_s_per_byte(self, src: int, dst: int) -> float:
        """Seconds per byte of a copy alone on the idle machine."""
        flow, link_bw = self._copy(src, dst, 1e9)
        env = simpy.Environment()
        done = self._model(env, link_bw).transfer(flow)
        env.run()
        return float(done.value.end_s) / flow.nbytes

    def beside(
        self, body: _Body, src: int, dst: int, idle_s_per_byte: float
    ) -> tuple[float, float]:
        """``(copy seconds per byte, kernel delay seconds per byte)`` beside ``body``."""
        key = (body, src, dst)
        got = self._memo.get(key)
        if got is None:
            got = self._measure(body, src, dst, idle_s_per_byte)
            self._memo[key] = got
        return got

    def _measure(
        self, body: _Body, src: int, dst: int, idle_s_per_byte: float
    ) -> tuple[float, float]:
        alone_s = self._kernel_s(body, None)
        if not alone_s > 0 or self.level is InterferenceLevel.NONE:
            return idle_s_per_byte, 0.0
        size = LONG * alone_s / idle_s_per_byte
        flow, link_bw = self._copy(src, dst, size)
        ends: list[float] = []
        together_s = self._kernel_s(body, (flow, link_bw), ends)
        copy_end_s = ends[0]
        if copy_end_s <= together_s:
            moved = flow.nbytes
            span_s = copy_end_s
        else:
            moved = flow.nbytes - (copy_end_s - together_s) / idle_s_per_byte
            span_s = together_s
        if moved < MIN_SHARE * span_s / idle_s_per_byte:
            return math.inf, math.inf
        return span_s / moved, max(together_s - alone_s, 0.0) / moved

    def _kernel_s(
        self, body: _Body, copy: tuple[Flow, float] | None, ends: list[float] | None = None
    ) -> float:
        """The kernel's time from its launch, alone or with ``copy`` started with it (whose
        end is appended to ``ends``)."""
        flow, floor_s, serial = body
        env = simpy.Environment()
        model = self._model(env, copy[1] if copy else 1.0)
        done = model.transfer(copy[0]) if copy else None
        out: list[float] = []

        def run() -> Generator[simpy.Event, Any, None]:
            if self.launch_s > 0:
                yield env.timeout(self.launch_s)
            yield from kernel_body(
                env, model, (flow,), floor_s, serial, floor_flow=self.threads is not None
            )
            out.append(float(env.now))

        env.process(run())
        env.run()
        if done is not None and ends is not None:
            ends.append(float(done.value.end_s))
        return out[0]


def beside_for(
    plan: Plan, cost: CostModel, measured: BesideCosts | None = None
) -> BesideCosts | None:
    """The costs ``plan``'s predicted time charges its asynchronous copies: those of
    :func:`beside_costs` for an ``async-aware`` plan (``measured``, when the caller already
    has them for ``cost``), None (idle rates) for any other."""
    if plan.planner != AWARE_PLANNER:
        return None
    return measured if measured is not None else beside_costs(cost)


__all__ = ["AWARE_PLANNER", "LONG", "MIN_SHARE", "beside_costs", "beside_for"]
