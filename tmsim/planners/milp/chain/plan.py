"""AutoTM's placement MILP: static, synchronous and asynchronous formulations, solved.

:mod:`~tmsim.planners.milp.formulation.states`, :mod:`~tmsim.planners.milp.formulation.gadgets` and
:mod:`~tmsim.planners.milp.formulation.network` describe each tensor's flow network over the
platform's tiers; :mod:`~tmsim.planners.milp.formulation.build` writes it as one cvxpy problem and
reads plans back; :mod:`~tmsim.planners.milp.chain.solve` solves it from a warm start
(:mod:`~tmsim.planners.milp.chain.starts`, :mod:`~tmsim.planners.milp.chain.overlap`). This module
runs the whole thing: each formulation is solved after the one it contains, from its solution,
inside AutoTM's loop that lowers the fastest tier's limit wherever its layout overflows (which also
takes back the few millionths of the limit the solver's tolerance lets a rounded plan overshoot; a
later round's plan is measured against the first round's bound, raised where it must be by
:mod:`~tmsim.planners.milp.chain.rebound`). Every plan goes through
:func:`~tmsim.planners.assemble.assemble_plan`, whose predicted time is recomputed from the cost
model in exact bytes."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from hwmodels.platform import Platform
from tmsim.cost import BesideCosts, CostModel
from tmsim.errors import NoPlanError, TmsimError
from tmsim.layout.fast_tier import laid_out_overflow_bytes, resident_bytes, resident_overflow_bytes
from tmsim.planners.milp.chain.gpu import offload_plan_start
from tmsim.planners.milp.chain.handover import lifted_start, lowered_start, retire_extended
from tmsim.planners.milp.chain.nesting import (
    CONTAINS,
    STARTS,
    cutoff_s,
    heuristic_plans,
    planners_of,
)
from tmsim.planners.milp.chain.preflight import first_memo, formulation_of, setup
from tmsim.planners.milp.chain.rebound import FirstRound, bound_of, rebound
from tmsim.planners.milp.chain.schedule import CHAIN_WORKERS, Memo, solve_chains
from tmsim.planners.milp.chain.solution import Solved, against, at_floor, relabel
from tmsim.planners.milp.chain.solve import (
    SolveStopped,
    fits,
    solve,
    solve_stats,
    solve_within,
    solver_options,
    start_stats,
)
from tmsim.planners.milp.chain.starts import static_start, static_tiers
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.readback import extract_plan
from tmsim.planners.milp.solver.driver import CUT_OFF
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan, SolverStats, stop_of
from tmsim.profiles import cost_model
from tmsim.sim.beside import beside_costs
from tmsim.workload.graph import Graph

GB = 1e9

#: Share of the limit taken off, beside the overflow itself, where a layout overflows: a
#: thousand times the solver's feasibility tolerance (on resnet50-b8 at 4:1 it cut the sync
#: loop from 8 rounds to 3 against a millionth).
LAYOUT_SLACK = 1e-3


def plan_milp(
    graph: Graph,
    platform: Platform,
    settings: PlanSettings | None = None,
    formulation: Formulation | str = Formulation.SYNC,
) -> Plan:
    """Solve the MILP of ``formulation`` with ``settings`` and return its plan.

    Raises :class:`InfeasibleError` when no plan fits (naming the kernel and missing bytes),
    :class:`TmsimError` when the solver stops without any plan (time limit, solver error) or
    the platform has fewer than two addressable tiers.
    """
    opts = settings or PlanSettings()
    top = formulation_of(formulation)
    limit, gpu, deadline = setup(graph, platform, opts, top)
    memo = first_memo(graph, limit, gpu)
    known = memo.get(top)
    if isinstance(known, TmsimError):
        raise known  # before the cost model is built: nothing to plan
    cost = cost_model(graph, platform, opts.profile)
    solved = _plan(cost, opts, top, limit, gpu, deadline, memo)
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
    calling thread. Raises :class:`TmsimError` for ``workers`` < 1.
    """
    opts = replace(settings or PlanSettings(), lp_bound=False)
    wanted = [formulation] if isinstance(formulation, str) else list(formulation)
    tops = [formulation_of(f) for f in wanted]
    if not tops:
        raise TmsimError("no MILP formulation asked for")
    limit, gpu, deadline = setup(graph, platform, opts, tops[0])
    memo = first_memo(graph, limit, gpu)
    cost = cost_model(graph, platform, opts.profile)

    def task(f: Formulation, ends: float | None, seen: Memo) -> None:
        with contextlib.suppress(TmsimError):  # an error is recorded in seen
            _plan(cost, opts, f, limit, gpu, ends, seen, beside)

    def done(f: Formulation, v: Solved | TmsimError) -> None:
        if solved is not None:
            solved(f, v if isinstance(v, TmsimError) else v.plan)

    solve_chains(tops, memo, task, deadline, opts.time_limit_s, workers, done)
    return {f: (v if isinstance(v, TmsimError) else v.plan) for f, v in memo.items()}


def _plan(
    cost: CostModel,
    opts: PlanSettings,
    formulation: Formulation,
    limit: int,
    gpu: bool,
    deadline: float | None,
    memo: dict[Formulation, Solved | TmsimError],
    beside: BesideCosts | Callable[[], BesideCosts] | None = None,
) -> Solved:
    """Solve ``formulation`` with AutoTM's layout loop, warm-started from the formulation it
    contains (solved first, the same way). ``memo`` holds what each formulation already gave
    (its solution or its error) and receives this one's.

    That smaller solution is also a solution of ``formulation``; when it is better than what
    the loop ends with (the loop lowers limits where layouts overflow, and a time limit can
    cut a solve short) it is returned instead, under this formulation's name. ``beside``:
    the async-aware copy costs, as :func:`plan_milp_chain` takes them. Raises as
    :func:`plan_milp`.
    """
    known = memo.get(formulation)
    if isinstance(known, TmsimError):
        raise known
    if known is not None:
        return known
    try:
        solved = _solve_formulation(cost, opts, formulation, limit, gpu, deadline, memo, beside)
    except TmsimError as exc:
        memo[formulation] = exc
        raise
    memo[formulation] = solved
    return solved


def _solve_formulation(
    cost: CostModel,
    opts: PlanSettings,
    formulation: Formulation,
    limit: int,
    gpu: bool,
    deadline: float | None,
    memo: dict[Formulation, Solved | TmsimError],
    measured: BesideCosts | Callable[[], BesideCosts] | None = None,
) -> Solved:
    """:func:`_plan` without the memo lookup (``measured``: its ``beside``)."""
    smaller: list[Solved] = []
    if opts.warm_start:
        for f in CONTAINS.get(formulation, ()):
            with contextlib.suppress(TmsimError):  # e.g. nothing fits statically on a GPU
                smaller.append(_plan(cost, opts, f, limit, gpu, deadline, memo, measured))
    # the best plan this formulation contains, and the best it can start from
    base = min(smaller, key=lambda s: s.plan.predicted_s, default=None)
    starts = [
        s for s in smaller if s.lifts and s.plan.planner in planners_of(STARTS.get(formulation, ()))
    ]
    start_from = min(starts, key=lambda s: s.plan.predicted_s, default=None)
    build_total = sum(s.build_s for s in smaller)
    solve_total = sum(s.solve_s for s in smaller)
    if base is not None and at_floor(base, opts.gap):
        # no plan of any formulation beats the kernel-time bound, which the smaller
        # formulation's plan is already within the gap of: nothing to solve
        proven = f"optimal (within the gap of the kernel-time bound: {base.plan.planner}'s plan)"
        return relabel(base, opts, formulation, (build_total, solve_total), status=proven)
    beside = None
    if formulation is Formulation.ASYNC_AWARE:
        given = measured() if callable(measured) else measured
        beside = given if given is not None else beside_costs(cost)
        build_total += beside.measured_s
    # recomputation alone by the heuristics: where no plan of this formulation beats the best
    # of them (outside its space where they recompute longer chains) its solve stops
    started = time.perf_counter()
    graph, platform = cost.graph, cost.platform
    outside = heuristic_plans(graph, platform, opts, limit) if formulation.recomputes else []
    outside_s = [p.predicted_s for p in outside]
    if base is not None and not base.lifts:
        outside_s.append(base.plan.predicted_s)
    cutoff = cutoff_s(formulation, opts, outside_s)
    build_total += time.perf_counter() - started
    limits = np.full(len(cost.graph.kernels), limit, dtype=np.int64)
    overflowed = False  # whether a round's plan did not lay out
    result: Solved | None = None
    failure: TmsimError | None = None
    own = "not solved"  # how this formulation's own last solve ended
    basis = None  # the last round's LP basis: the next round differs in its limits only
    # offsets of fast-tier buffers of the round's start whose layout is known, by (tensor,
    # first kernel, last kernel): a plan whose fast buffers are all among them lays out
    known: dict[tuple[int, int, int], int] = {}
    # the first round's plan and proven bound: a later round solves under lowered limits, so
    # its bound holds for that problem only, while every plan whose layout fits is a point of
    # the first
    first: FirstRound | None = None
    for rounds in range(1, opts.max_rounds + 1):
        started = time.perf_counter()
        model = build_model(
            cost,
            opts.window,
            formulation,
            limits,
            relax=False,
            beside=beside,
            depth=opts.recompute_depth,
            energy_weight_s_per_j=opts.energy_weight_s_per_j,
        )
        build_total += time.perf_counter() - started
        if start_from is not None:
            started = time.perf_counter()
            x_from = np.asarray(start_from.model.x.value) > 0.5
            start = lifted_start(cost, opts, start_from.model, x_from, model, formulation)
            if (start is None or not fits(model, start)) and rounds > 1:
                # the plan started from holds more than the lowered limits: solve the
                # formulation it came from again under them, which is quick, and start there
                start = lowered_start(cost, opts, start_from, model, formulation, limits, deadline)
            build_total += time.perf_counter() - started
        elif opts.warm_start and formulation.moves is Formulation.STATIC:
            tiers, known = static_tiers(cost, formulation, gpu, int(limits.min()), opts)
            start = static_start(model, tiers) if tiers is not None else None
            if start is not None and formulation.recomputes:
                start = retire_extended(cost, model, start)
        else:
            start = None
        if start is not None and not fits(model, start):
            start = None  # e.g. a smaller formulation's plan above a lowered limit
        started = time.perf_counter()
        stopped: SolveStopped | None = None
        try:
            # a round solves under lower limits than the first: its plans are the first's
            # too, so the first round's bound holds for its optimum, and its LP, RENS and RINS
            # aim at a point within the gap of that bound (GPU ResNet-200 b64 async, window 3:
            # 1.2604 s at 1.02% in 141 s with a raise, then 1.2546 s at 0.62% in 9-10 s)
            outcome = solve_within(
                model, opts, formulation, limits, deadline, start, basis, bound_of(first), cutoff
            )
        except SolveStopped as exc:
            stopped = exc  # without a solution of its own: its start is the plan, if any
            outcome = exc.outcome
        except TmsimError as exc:
            failure, own = exc, "error"
            break
        finally:
            solve_total += time.perf_counter() - started
        seconds = (build_total, solve_total)
        own = outcome.status
        if own == CUT_OFF:
            break  # nor does a later round's plan (under lower limits) beat that plan
        basis = outcome.lp_basis or basis
        if stopped is None:
            stats = solve_stats(model, opts.solver, outcome, seconds)
        elif (
            start := start if start is not None else offload_plan_start(cost, model, gpu)
        ) is not None:
            stats = start_stats(model, start, opts.solver, outcome, seconds)
        else:
            failure = stopped
            break
        if first is None:
            x = start if stopped is not None else np.asarray(model.x.value) > 0.5
            assert x is not None  # a stopped solve without a start broke out above
            first = FirstRound(cost, formulation, limit, beside, x, stats.objective, stats.bound)
        stats = against(replace(stats, rounds=rounds), first.bound_s)
        if stats.status == "optimal" and not stats.gap <= opts.gap + 1e-9:
            # the last round reached the gap of its own bound, not of the first round's
            stats = replace(stats, status=f"optimal in layout round {rounds}")
        plan = extract_plan(cost, model, formulation, opts.to_dict(), limit, stats)
        laid: dict[tuple[int, int, int], int] = {}
        if opts.layout:
            # the layouts the chain has made (all below ``limit``) before a search of its own
            done = [v.layout for v in memo.values() if isinstance(v, Solved)]
            overflow, laid = laid_out_overflow_bytes(plan, graph, platform, limit, [known, *done])
        else:
            overflow = resident_overflow_bytes(plan, graph, platform, limit)
        if not overflow.any():
            # a later round's plan may lie beyond the gap of the first round's bound
            assert first is not None
            stats, *spent = rebound(stats, opts, first, deadline)
            build_total, solve_total = build_total + spent[0], solve_total + spent[1]
            plan = replace(plan, stats=stats)
            result = Solved(
                plan, model, limits, build_total, solve_total, layout=laid, lp_basis=basis
            )
            break
        # AutoTM's loop: take what the layout lost at each kernel off that kernel's limit
        # (or, without a layout, what the solver's tolerance let through), plus a slack so
        # that fragmentation that moves elsewhere does not cost a round each time
        margin = np.where(overflow > 0, overflow + int(np.ceil(limit * LAYOUT_SLACK)), 0)
        limits = limits - margin
        held = resident_bytes(plan, graph, platform)
        if overflowed or not np.any(held > limits):
            # a second plan that does not lay out: lowering the limits where the last layout
            # overflowed moved the peak to other kernels (ResNet-200 b512 at 8:1 on Optane:
            # 16.6 MB over at 679 kernels twice, each plan within 10 KB of the limit
            # elsewhere); or a plan that holds no more than the lowered limits anywhere, which
            # the solver may return again (VGG19 b8 async at 4:1: 9.4 MB below the limit where
            # its layout overflows, around a 411 MB tensor): cut its peak everywhere
            limits = np.minimum(limits, int(held.max()) - int(margin.max()))
        overflowed = True
    for plan in outside:  # where a heuristic's plan beats what the formulations found
        if base is None or plan.predicted_s < base.plan.predicted_s:
            stats = SolverStats(opts.solver, "heuristic", objective=plan.predicted_s)
            base = Solved(replace(plan, stats=stats), model, limits, 0.0, 0.0, lifts=False)
    if base is not None and (result is None or base.plan.predicted_s < result.plan.predicted_s):
        assert base.plan.stats is not None
        status = f"fallback to {base.plan.planner} ({base.plan.stats.status}); own solve: {own}"
        seconds = (build_total, solve_total)
        # a heuristic's plan may lie outside this formulation's space, below its bound: its
        # gap is against the kernel-time bound, which holds for every plan
        return relabel(
            base,
            opts,
            formulation,
            seconds,
            status,
            bound_of(first) if base.lifts else None,
            stop_of(own),
        )
    if result is not None:
        return result
    if failure is not None:
        raise failure
    what = "the fast-tier layout" if opts.layout else "the plan"
    raise NoPlanError(
        f"{what} still overflows {limit} bytes of fast memory after {opts.max_rounds} "
        "rounds of lowering the limit where it overflowed"
    )


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
