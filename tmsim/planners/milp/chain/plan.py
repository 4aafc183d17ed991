"""AutoTM's placement MILP, solved: :func:`plan_milp` (one formulation) and
:func:`plan_milp_chain` (several at once, each solved after those it contains and from their
solutions, :mod:`~tmsim.planners.milp.chain.schedule`), and one entry point per formulation.

The formulation is :mod:`tmsim.planners.milp.formulation`'s, solved on HiGHS by
:mod:`tmsim.planners.milp.solver`; each formulation runs inside AutoTM's layout loop
(:mod:`~tmsim.planners.milp.chain.rounds`). Every plan goes through
:func:`~tmsim.planners.assemble.assemble_plan`, whose predicted time is recomputed from the
cost model in exact bytes.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from hwmodels.platform import Platform
from tmsim.cost import BesideCosts
from tmsim.errors import TmsimError
from tmsim.planners.milp.chain.ahead import Ahead
from tmsim.planners.milp.chain.nesting import chain_of
from tmsim.planners.milp.chain.preflight import first_memo, formulation_of, setup
from tmsim.planners.milp.chain.rounds import solved_formulation
from tmsim.planners.milp.chain.schedule import CHAIN_WORKERS, Memo, solve_chains
from tmsim.planners.milp.chain.solution import Solved
from tmsim.planners.milp.chain.solve import ModelInfeasible, solve, solver_options
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.workload.graph import Graph

GB = 1e9


#: The deepest recompute depth a recomputing formulation deepens to where no plan fits at the
#: settings' own (doubling from it). Each level adds variables and time: on the zoo's steps a
#: depth of 4 planned budgets that 2 did not (ResNet-50 b64 on the RTX 2080 Ti at 40% of its
#: peak), while proving a budget infeasible took 5 s at depth 2 and 20 s at 16 (ResNet-50 b8,
#: sync-rc, a 10 MB host tier on h100-host-nvme): 8 bounds what a refusal costs.
MAX_DEEPENED_DEPTH = 8


def plan_milp(
    graph: Graph,
    platform: Platform,
    settings: PlanSettings | None = None,
    formulation: Formulation | str = Formulation.SYNC,
) -> Plan:
    """Solve the MILP of ``formulation`` with ``settings`` and return its plan.

    A formulation that recomputes and has no plan at the settings' ``recompute_depth`` is
    solved again at twice the depth, and so on up to :data:`MAX_DEEPENED_DEPTH`, within the
    time limit (:func:`deeper`); its plan records the depth that planned it.

    Raises :class:`InfeasibleError` when no plan fits (naming the kernel and missing bytes,
    and the depths tried), :class:`TmsimError` when the solver stops without any plan (time
    limit, solver error) or the platform has fewer than two addressable tiers.
    """
    opts = settings or PlanSettings()
    top = formulation_of(formulation)
    started, tried, limit_s = time.perf_counter(), [], opts.time_limit_s
    while True:
        try:
            return plan_milp_at_depth(graph, platform, opts, top)
        except ModelInfeasible as exc:
            tried.append(opts.recompute_depth)
            again = deeper(opts, top, started, limit_s)
            if again is None:
                raise refusal(exc, tried) from None
            opts = again


def deeper(
    opts: PlanSettings, formulation: Formulation, started: float, limit_s: float | None
) -> PlanSettings | None:
    """The settings to solve ``formulation`` again with where its model had no plan: twice
    the recompute depth (at most :data:`MAX_DEEPENED_DEPTH`), the time limit ``limit_s`` (the
    whole solve's) less what has passed since ``started`` (a ``time.perf_counter()``
    reading); None for a formulation that does not recompute, a depth at the cap, or a time
    limit spent."""
    depth = opts.recompute_depth
    if not formulation.recomputes or depth >= MAX_DEEPENED_DEPTH:
        return None
    limit = limit_s
    if limit is not None:
        limit -= time.perf_counter() - started
        if limit <= 0:
            return None
    return replace(opts, recompute_depth=min(2 * depth, MAX_DEEPENED_DEPTH), time_limit_s=limit)


def refusal(exc: ModelInfeasible, tried: Sequence[int]) -> ModelInfeasible:
    """``exc`` as the refusal of a formulation tried at the recompute depths ``tried``."""
    if len(tried) < 2:
        return exc
    depths = ", ".join(map(str, tried))
    return ModelInfeasible(
        f"{exc}, at recompute depths {depths} (the longest chains of producers run again "
        "before one kernel; a deeper one may still fit: recompute_depth)"
    )


def plan_milp_at_depth(
    graph: Graph, platform: Platform, opts: PlanSettings, top: Formulation
) -> Plan:
    """:func:`plan_milp` at the settings' recompute depth alone (no deepening): a formulation
    with no plan there raises :class:`ModelInfeasible`."""
    limit, gpu, deadline = setup(graph, platform, opts, top)
    memo = first_memo(graph, limit, gpu, platform, (top,))
    known = memo.get(top)
    if isinstance(known, TmsimError):
        raise known  # before the cost model is built: nothing to plan
    cost = cost_model(graph, platform, opts.profile)
    with Ahead(cost, opts, limit, deadline) as ahead:
        ahead.start(f for f in chain_of(top) if f not in memo)
        solved = solved_formulation(cost, opts, top, limit, gpu, deadline, memo, ahead=ahead)
    plan = solved.plan
    if opts.lp_bound and plan.stats is not None:
        relaxed = build_model(
            cost,
            opts.window,
            top,
            solved.limits,
            relax=True,
            beside=solved.model.beside,
            depth=opts.recompute_depth,
            energy_weight_s_per_j=opts.energy_weight_s_per_j,
            host_kernels=opts.host_kernels,
        )
        lp = math.nan
        try:
            outcome = solve(relaxed, opts.solver, solver_options(opts.solver, 0.0, None), False)
            if outcome.solved:
                lp = outcome.objective
        except TmsimError:
            pass  # the bound is optional: an unknown one is reported as nan
        plan = replace(plan, stats=replace(plan.stats, lp_bound=lp))
    return plan


def plan_milp_chain(
    graph: Graph,
    platform: Platform,
    settings: PlanSettings | None = None,
    formulation: Formulation | str | Sequence[Formulation | str] = Formulation.ASYNC,
    beside: BesideCosts | Callable[[], BesideCosts] | None = None,
    workers: int = CHAIN_WORKERS,
    solved: Callable[[Formulation, Plan | TmsimError], None] | None = None,
) -> dict[Formulation, Plan | TmsimError]:
    """The plans of ``formulation`` (one, or several) and of every formulation each contains,
    each solved once: static, then sync from it, then async (and async-aware) from that (what
    :func:`plan_milp` solves on the way to its answer anyway); formulations that do not
    contain each other on up to ``workers`` threads at once, with the same plans as on one
    (:mod:`~tmsim.planners.milp.chain.schedule`).

    Maps each formulation to its plan, or to the error its solve raised (a formulation whose
    smaller one failed starts cold, as in :func:`plan_milp`). A formulation's build and solve
    seconds include those of the ones it was started from, and ``time_limit_s`` caps the whole
    chain of each formulation asked for (the formulations two chains share are solved once,
    within the first's). Raises :class:`TmsimError` for a platform the MILP cannot plan for and
    :class:`InfeasibleError` when a kernel's own operands do not fit, as :func:`plan_milp`.
    ``beside``: the async-aware formulation's copy costs where the caller has measured them
    (:func:`~tmsim.sim.beside.beside_costs` of this graph, platform and profile; their
    ``measured_s`` count in that formulation's build seconds), or a function that gives them
    when that formulation's solve starts (called once; from its thread); measured here
    otherwise.
    ``solved(formulation, plan_or_error)`` is called as each formulation is solved, on the
    calling thread (a recomputing formulation that deepens, :func:`plan_milp`, once it is
    done). Raises :class:`TmsimError` for ``workers`` < 1.
    """
    opts = replace(settings or PlanSettings(), lp_bound=False)
    wanted = [formulation] if isinstance(formulation, str) else list(formulation)
    tops = [formulation_of(f) for f in wanted]
    if not tops:
        raise TmsimError("no MILP formulation asked for")
    started, limit_s = time.perf_counter(), opts.time_limit_s
    failed: list[Formulation] = []

    def holding(f: Formulation, v: Plan | TmsimError) -> None:
        # a recomputing formulation without a plan at this depth may get one deeper; a
        # deeper chain hands over only what it solved again for those
        if solved is None or (f.recomputes and isinstance(v, ModelInfeasible)):
            return
        if not failed or f in failed:
            solved(f, v)

    out = _chain(graph, platform, opts, tops, beside, workers, holding)
    tried = {f: [opts.recompute_depth] for f in out}
    while failed := [f for f, v in out.items() if f.recomputes and isinstance(v, ModelInfeasible)]:
        again = deeper(opts, failed[0], started, limit_s)
        if again is None:
            break
        opts = again
        deeper_out = _chain(graph, platform, opts, failed, beside, workers, holding)
        for f in failed:
            out[f] = deeper_out.get(f, out[f])
            tried[f].append(opts.recompute_depth)
    for f, v in out.items():
        if f.recomputes and isinstance(v, ModelInfeasible):
            out[f] = refusal(v, tried[f])
            if solved is not None:
                solved(f, out[f])
    return out


def _chain(
    graph: Graph,
    platform: Platform,
    opts: PlanSettings,
    tops: Sequence[Formulation],
    beside: BesideCosts | Callable[[], BesideCosts] | None,
    workers: int,
    solved: Callable[[Formulation, Plan | TmsimError], None] | None,
) -> dict[Formulation, Plan | TmsimError]:
    """:func:`plan_milp_chain` at one recompute depth."""
    limit, gpu, deadline = setup(graph, platform, opts, tops[0])
    memo = first_memo(graph, limit, gpu, platform, tops)
    cost = cost_model(graph, platform, opts.profile)

    def done(f: Formulation, v: Solved | TmsimError) -> None:
        if solved is not None:
            solved(f, v if isinstance(v, TmsimError) else v.plan)

    with Ahead(cost, opts, limit, deadline) as ahead:
        # the first top's formulations: those of later tops have later deadlines
        ahead.start(f for f in chain_of(tops[0]) if f not in memo)

        def task(f: Formulation, ends: float | None, seen: Memo) -> None:
            with contextlib.suppress(TmsimError):  # an error is recorded in seen
                solved_formulation(cost, opts, f, limit, gpu, ends, seen, beside, ahead)

        solve_chains(tops, memo, task, deadline, opts.time_limit_s, workers, done)
    return {f: (v if isinstance(v, TmsimError) else v.plan) for f, v in memo.items()}


def plan_static(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """The static MILP: every tensor stays where it is created."""
    return plan_milp(graph, platform, settings, Formulation.STATIC)


def plan_sync(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """The synchronous MILP: blocking copies at a tensor's users."""
    return plan_milp(graph, platform, settings, Formulation.SYNC)


def plan_async(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """The asynchronous MILP: also copies beside kernels near a tensor's users."""
    return plan_milp(graph, platform, settings, Formulation.ASYNC)


def plan_async_aware(
    graph: Graph, platform: Platform, settings: PlanSettings | None = None
) -> Plan:
    """The asynchronous MILP with each copy beside a kernel charged what the full
    interference model makes it cost, and the delay it causes the kernel
    (:mod:`tmsim.sim.beside`)."""
    return plan_milp(graph, platform, settings, Formulation.ASYNC_AWARE)
