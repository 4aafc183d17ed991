"""One formulation of the placement MILP solved inside AutoTM's layout loop.

Each round solves the formulation under per-kernel limits of the fastest tier, warm-started
from the formulation it contains (:mod:`~tmsim.planners.milp.chain.handover`) or, for the
first, from a heuristic (:mod:`~tmsim.planners.milp.chain.starts`); the plan is laid out in
addresses (:mod:`tmsim.layout.fast_tier`) and, wherever the layout overflows, the limit at
those kernels is lowered by the overflow and a slack and the formulation solved again (which
also takes back the few millionths of the limit the solver's tolerance lets a rounded plan
overshoot). A later round's plan is measured against the first round's bound, raised where it
must be by :mod:`~tmsim.planners.milp.chain.rebound`; where the smaller formulation's plan or
a heuristic's beats what the loop ends with, that plan is returned under this formulation's
name (a fallback, its own solve's end in its status). A plan of a formulation it contains but
cannot start from (async's, for async-rc) that the first round's LP proves within the gap
ends the solve there (``held``: status ``optimal (within the gap of its LP bound: ...)``).
The first round takes its model and LP from :mod:`~tmsim.planners.milp.chain.ahead` where
they were made there.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tmsim.cost import BesideCosts, CostModel
from tmsim.errors import NoPlanError, TmsimError
from tmsim.layout.fast_tier import laid_out_overflow_bytes, resident_bytes, resident_overflow_bytes
from tmsim.planners.milp.chain.ahead import Ahead
from tmsim.planners.milp.chain.gpu import offload_plan_start
from tmsim.planners.milp.chain.handover import lifted_start, lowered_start, retire_extended
from tmsim.planners.milp.chain.nesting import (
    CONTAINS,
    STARTS,
    cutoff_s,
    heuristic_plans,
    outside_names,
    planners_of,
)
from tmsim.planners.milp.chain.outside import outside_start
from tmsim.planners.milp.chain.rebound import FirstRound, bound_of, rebound
from tmsim.planners.milp.chain.solution import Solved, against, at_floor, relabel
from tmsim.planners.milp.chain.solve import SolveStopped, fits, solve_within
from tmsim.planners.milp.chain.starts import static_start, static_tiers
from tmsim.planners.milp.chain.stats import solve_stats, start_stats
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.readback import extract_plan
from tmsim.planners.milp.solver.outcome import CUT_OFF, HELD
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import SolverStats, stop_of
from tmsim.sim.beside import beside_costs

GB = 1e9

#: Share of the limit taken off, beside the overflow itself, where a layout overflows: a
#: thousand times the solver's feasibility tolerance (on resnet50-b8 at 4:1 it cut the sync
#: loop from 8 rounds to 3 against a millionth).
LAYOUT_SLACK = 1e-3


def solved_formulation(
    cost: CostModel,
    opts: PlanSettings,
    formulation: Formulation,
    limit: int,
    gpu: bool,
    deadline: float | None,
    memo: dict[Formulation, Solved | TmsimError],
    beside: BesideCosts | Callable[[], BesideCosts] | None = None,
    ahead: Ahead | None = None,
) -> Solved:
    """Solve ``formulation`` with AutoTM's layout loop, warm-started from the formulation it
    contains (solved first, the same way). ``memo`` holds what each formulation already gave
    (its solution or its error) and receives this one's; ``ahead``: where it holds this
    formulation's first-round model and LP (:mod:`~tmsim.planners.milp.chain.ahead`), the
    first round takes them from there.

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
        solved = _solve_formulation(
            cost, opts, formulation, limit, gpu, deadline, memo, beside, ahead
        )
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
    ahead: Ahead | None = None,
) -> Solved:
    """:func:`solved_formulation` without the memo lookup (``measured``: its ``beside``)."""
    smaller: list[Solved] = []
    if opts.warm_start:
        for f in CONTAINS.get(formulation, ()):
            with contextlib.suppress(TmsimError):  # e.g. nothing fits statically on a GPU
                smaller.append(
                    solved_formulation(cost, opts, f, limit, gpu, deadline, memo, measured, ahead)
                )
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
    # recomputation alone by the heuristics, the runtimes' host offload: where no plan of this
    # formulation beats the best of them its solve stops
    started = time.perf_counter()
    graph, platform = cost.graph, cost.platform
    names = outside_names(formulation, platform, opts)
    outside = heuristic_plans(graph, platform, opts, limit, names) if names else []
    outside_s = [p.predicted_s for p in outside]
    if base is not None and not base.lifts:
        outside_s.append(base.plan.predicted_s)
    cutoff = cutoff_s(formulation, opts, outside_s)
    # the best plan of a formulation this one contains but cannot start from (async's, for
    # async-rc): a point of this model whose objective the first round's LP may prove within
    # the gap, which then ends the solve (its plan is returned, with that bound)
    held_s = None
    base_stats = None if base is None else base.plan.stats
    if base is not None and base.lifts and base is not start_from and base_stats is not None:
        held_s = base_stats.objective
    held_bound: float | None = None  # the LP's bound, where it proved ``held_s`` so
    held_base: Solved | None = None
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
        # the first round's model and LP, where they were made ahead (the wait is not work)
        made = ahead.take(formulation) if ahead is not None and rounds == 1 else None
        started = time.perf_counter()
        if made is not None:
            model = made.model
            build_total, solve_total = build_total + made.build_s, solve_total + made.solve_s
        else:
            model = build_model(
                cost,
                opts.window,
                formulation,
                limits,
                relax=False,
                beside=beside,
                depth=opts.recompute_depth,
                energy_weight_s_per_j=opts.energy_weight_s_per_j,
                host_kernels=opts.host_kernels,
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
        origin = ""  # the planner whose plan the start is a point of, if not the MILP
        # a point of a runtime's or heuristic's plan: the start where it beats the start the
        # formulation has; where that has none, only the plan of a solve stopped before its
        # own (as a search from it may end on it within the gap: LLaMA-7B b1 sync on the H100
        # ended at 0.3960 s, 0.4003 s as the plan is timed, where a search from nothing ended
        # at 0.3952 s, the plan's time)
        stop_point: tuple[np.ndarray | None, str] = (None, "")
        if opts.warm_start and outside:
            started = time.perf_counter()
            point = outside_start(cost, model, outside, start)
            if start is not None:
                start, origin = point
            else:
                stop_point = point
            build_total += time.perf_counter() - started
        started = time.perf_counter()
        stopped: SolveStopped | None = None
        try:
            # a round solves under lower limits than the first: its plans are the first's
            # too, so the first round's bound holds for its optimum, and its LP, RENS and RINS
            # aim at a point within the gap of that bound (GPU ResNet-200 b64 async, window 3:
            # 1.2604 s at 1.02% in 141 s with a raise, then 1.2546 s at 0.62% in 9-10 s)
            outcome = solve_within(
                model,
                opts,
                formulation,
                limits,
                deadline,
                start,
                basis,
                bound_of(first),
                cutoff,
                None if made is None else made.prepared,
                held_s if first is None else None,
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
        if own == HELD:
            held_bound, held_base = outcome.bound, base  # base's plan within the gap of it
            break
        if own == CUT_OFF:
            break  # nor does a later round's plan (under lower limits) beat that plan
        basis = outcome.lp_basis or basis
        if stopped is None:
            stats = solve_stats(model, opts.solver, outcome, seconds)
        else:
            if start is None:
                start, origin = stop_point
            if start is None:
                start = offload_plan_start(cost, model, gpu)
            if start is None:
                failure = stopped
                break
            stats = start_stats(model, start, opts.solver, outcome, seconds, origin)
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
        if held_bound is not None and base is held_base:  # proven within the gap
            status = f"optimal (within the gap of its LP bound: {base.plan.planner}'s plan)"
        seconds = (build_total, solve_total)
        # a heuristic's plan may lie outside this formulation's space, below its bound: its
        # gap is against the kernel-time bound, which holds for every plan
        # (a held stop ends the first round, so ``first`` is then None)
        own_bound = held_bound if base is held_base else bound_of(first)
        return relabel(
            base,
            opts,
            formulation,
            seconds,
            status,
            own_bound if base.lifts else None,
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


__all__ = ["LAYOUT_SLACK", "solved_formulation"]
