"""The LP relaxation of an asynchronous formulation in which the host may run kernels,
solved ahead, beside the formulations it contains.

A formulation is solved after those it contains, from their plans
(:mod:`~tmsim.planners.milp.chain.nesting`), but the first thing its solve does, the LP
relaxation of its first layout round (phase 1 of
:func:`~tmsim.planners.milp.solver.driver.run_highs`), needs none of them where it starts
from no basis, as the asynchronous formulations' does. Where the host may run kernels that LP
goes by interior point (:func:`~tmsim.planners.milp.chain.solve.lp_by_interior_point`) and
takes most of the chain's time: on LLaMA-7B b1 on h100-host-nvme, 27-29 s of a 40 s ``async``
chain, and ``async-rc``'s as much again after it. :class:`Ahead` builds that round's model on
threads of its own (:data:`AHEAD_WORKERS`) from the chain's start, and solves its LP in a
process of its own (:mod:`~tmsim.planners.milp.solver.remote`, which the end of the chain can
stop at once), while the chain solves the formulations it contains; the formulation's first
round then takes the model and the LP instead of making them
(:func:`~tmsim.planners.milp.chain.rounds.solved_formulation`), waiting for them where they
are not done. The LP is the same either way, so the plans are the ones the chain finds
without it, unless a wall-clock time limit stops a solve.

Measured on two cores (LLaMA-7B b1, 60 s chains, ``bench/README.md``; wall seconds to the
plan without / with the LP ahead, the same plans): ``async`` on h100-host-nvme 35.6-40.4 /
29.9, on the GH200 47.1 / 32.1. ``async-rc`` used to stop at the 60 s cap with its own solve
unfinished (falling back to async's plan, 12% / 7% from the kernel-time bound); with both LPs
ahead at once its LP proves async's plan within the gap (which ends its solve,
:func:`~tmsim.planners.milp.solver.driver.run_highs`' ``held``) at 44.5 s on h100-host-nvme
and 52.1 s on the GH200.

Only the interior point LPs of models with host kernels are solved ahead: a simplex LP is
short beside them (GPU ResNet-200 b64's asynchronous LP: 5 s), and the model of a formulation
the chain may not solve (one whose smaller formulation's plan is already within the gap of
the kernel-time bound) is built for nothing; that build, if it is under way when the chain
ends, is finished first (seconds). ``async-aware`` is not solved ahead (its model needs the
copy costs the chain measures when it starts that formulation), nor any formulation with a
solver other than HiGHS, without ``lp_iterations`` (no LP first) or without warm starts
(nothing to solve beside it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType

import numpy as np

from hwmodels.platform import Platform
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.planners.milp.chain.solve import lp_by_interior_point, solver_options, until_deadline
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.solver.first_lp import Prepared, has_first_lp
from tmsim.planners.milp.solver.remote import RemoteLp, compiled_for_highs
from tmsim.planners.settings import PlanSettings

#: Threads :class:`Ahead` builds models and runs LPs on: ``async-rc``'s chain has two LPs
#: (``async``'s and its own), which one thread runs one after the other and two at once.
#: Measured on LLaMA-7B b1 on h100-host-nvme with an earlier draft that ran the LPs on the
#: threads themselves: ``async-rc`` ended at 71 s with one (the chain's own threads idle from
#: 38 s), 52 s with two; with the LPs in their own processes and two threads, 44.5-45.1 s.
AHEAD_WORKERS = 2
#: Seconds past the chain's deadline that the LP's process, whose time limit ends it at the
#: deadline, may take to answer before it is ended (its start and its answer's transfer).
ANSWER_SLACK_S = 30.0


@dataclass(frozen=True)
class Made:
    """A formulation's first-round ``model`` and its LP first (``prepared``; None where the
    model has no host kernel, module doc), with the seconds spent building the model
    (``build_s``) and compiling it and solving the LP (``solve_s``)."""

    model: Model = field(repr=False)
    prepared: Prepared | None = field(repr=False)
    build_s: float
    solve_s: float


def prepares(formulation: Formulation, opts: PlanSettings, platform: Platform) -> bool:
    """Whether ``formulation``'s model is built ahead under ``opts`` on ``platform`` (module
    doc): an asynchronous formulation but ``async-aware``, in which the host may run kernels
    (a host compute, ``host_kernels``, no energy weight), solved by HiGHS with an LP first and
    warm starts. Its LP is solved ahead where the model has host kernels."""
    return (
        formulation.asynchronous
        and formulation is not Formulation.ASYNC_AWARE
        and platform.host_compute is not None
        and opts.host_kernels
        and not opts.energy_weight_s_per_j
        and opts.solver.upper() == "HIGHS"
        and opts.lp_iterations is not None
        and opts.warm_start
    )


class Ahead:
    """First-round models and LPs of formulations, made on threads of their own in the order
    :meth:`start` is given them; :meth:`take` hands each over once. Use it as a context
    manager: on leaving, an LP still running is stopped and the threads joined (a model being
    built is finished first)."""

    def __init__(
        self, cost: CostModel, opts: PlanSettings, limit: int, deadline: float | None
    ) -> None:
        self._cost, self._opts, self._limit, self._deadline = cost, opts, limit, deadline
        self._pool: ThreadPoolExecutor | None = None
        self._made: dict[Formulation, Future[Made]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: list[RemoteLp] = []

    def __enter__(self) -> Ahead:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self._lock:
            self._stop.set()
            for remote in self._running:
                remote.stop()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def start(self, formulations: Iterable[Formulation]) -> None:
        """Make the model and LP of each of ``formulations`` that :func:`prepares` allows
        and that is not started yet (up to :data:`AHEAD_WORKERS` at once, in this order)."""
        for f in formulations:
            if f in self._made or not prepares(f, self._opts, self._cost.platform):
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(AHEAD_WORKERS, thread_name_prefix="tmsim-lp")
            self._made[f] = self._pool.submit(self._make, f)

    def take(self, formulation: Formulation) -> Made | None:
        """``formulation``'s model and LP, once they are made (None where they were not
        started, were taken before, or could not be made: the caller makes its own, and
        meets the error itself). An error other than :class:`TmsimError` is raised."""
        future = self._made.pop(formulation, None)
        if future is None:
            return None
        try:
            return future.result()
        except TmsimError:
            return None

    def _make(self, formulation: Formulation) -> Made:
        opts, cost = self._opts, self._cost
        started = time.perf_counter()
        model = build_model(
            cost,
            opts.window,
            formulation,
            np.full(len(cost.graph.kernels), self._limit, dtype=np.int64),
            relax=False,
            depth=opts.recompute_depth,
            energy_weight_s_per_j=opts.energy_weight_s_per_j,
            host_kernels=opts.host_kernels,
        )
        built = time.perf_counter()
        if not lp_by_interior_point(model):  # no host kernel: its LP goes by simplex
            return Made(model, None, built - started, 0.0)
        compiled = compiled_for_highs(model.problem)
        if not has_first_lp(compiled, opts.lp_iterations):
            return Made(model, Prepared(compiled, None), built - started, 0.0)
        remaining = None if self._deadline is None else self._deadline - time.perf_counter()
        options = until_deadline(
            solver_options(opts.solver, opts.gap, remaining, opts.node_limit), self._deadline
        )
        # the process's own time limit ends it; a process that does not answer by then and
        # a slack more is ended here
        wait_s = None if remaining is None else max(remaining, 0.0) + ANSWER_SLACK_S
        with self._lock:
            if self._stop.is_set():
                raise TmsimError("stopped")
            remote = RemoteLp(compiled.arrays, options, opts.verbose, opts.lp_iterations, wait_s)
            self._running.append(remote)
        relaxed = remote.result()
        return Made(
            model, Prepared(compiled, relaxed), built - started, time.perf_counter() - built
        )


__all__ = ["AHEAD_WORKERS", "ANSWER_SLACK_S", "Ahead", "Made", "prepares"]
