"""The first layout round's bound raised for a later round's plan: valid against the
exhaustive search's optimum, as tight as asked, and left alone where it cannot be raised."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiny_graphs import tiny_graphs, tiny_step

import tmsim
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.planners.milp.chain.rebound import FirstRound, raised_bound
from tmsim.planners.milp.chain.solve import solve, solver_options
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import Graph

#: HiGHS's mip_feasibility_tolerance (its default), by which its bound may stop short of a
#: point, in seconds of objective.
TOLERANCE_S = 1.5e-6


def _first_round(cost: CostModel, formulation: Formulation, limit: int, window: int) -> FirstRound:
    """A plan of the problem solved to a loose 50% gap, its objective, and the kernel-time
    bound, which holds for every plan."""
    limits = np.full(len(cost.graph.kernels), limit, dtype=np.int64)
    model = build_model(cost, window, formulation, limits, relax=False)
    outcome = solve(model, "HIGHS", solver_options("HIGHS", 0.5, None), False)
    assert outcome.solved
    x = np.asarray(model.x.value) > 0.5
    return FirstRound(cost, formulation, limit, None, x, outcome.objective, model.lower_bound_s)


@settings(max_examples=25, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.3, 1.2),
    st.sampled_from([Formulation.SYNC, Formulation.ASYNC]),
    st.floats(0.0, 0.08),
    st.sampled_from([0.0, 0.01, 0.05]),
)
def test_the_raised_bound_holds_and_reaches_the_gap_of_the_later_plan(
    graph: Graph, share: float, formulation: Formulation, worse: float, gap: float
) -> None:
    platform = load_preset("cascadelake-optane")
    cost = CostModel(graph, platform)
    limit = max(1, int(graph.peak_live_bytes * share))
    best = brute_force(cost, limit, formulation.value, 1)
    assume(math.isfinite(best))
    first = _first_round(cost, formulation, limit, 1)
    opts = PlanSettings(
        capacity=Capacity.of_bytes(limit), gap=gap, window=1, time_limit_s=None, layout=False
    )
    reached = best * (1 + worse)  # a later round's plan: no better than the optimum
    aim = reached * (1 - gap)
    assume(first.bound_s < aim)  # the kernel-time bound alone is too low
    bound, build_s, solve_s = raised_bound(opts, first, reached, None)
    if first.objective_s < aim:
        # the first plan, and so the optimum, lies below the bound aimed at: nothing to do
        assert (bound, build_s, solve_s) == (first.bound_s, 0.0, 0.0)
        event("first plan below the aim")
        return
    assert first.bound_s <= bound <= best * (1 + 1e-6)  # raised, never past the optimum
    if best < aim:
        event("optimum below the aim")
        return  # the solve may stop at a point below the bound aimed at, which none passes
    # within the gap of the later plan, or the optimum itself (HiGHS's bound may stop
    # TOLERANCE_S short of a point it has, as it prunes nodes that close)
    assert reached - bound <= gap * reached + TOLERANCE_S or bound == pytest.approx(
        best, abs=TOLERANCE_S
    )
    event("the aim reached or the optimum proven")
    assert build_s >= 0 and solve_s >= 0


def test_no_bound_is_raised_after_the_deadline_or_with_another_solver() -> None:
    graph = tiny_step()
    cost = CostModel(graph, load_preset("cascadelake-optane"))
    limit = graph.peak_live_bytes
    first = _first_round(cost, Formulation.SYNC, limit, 1)
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), window=1, layout=False)
    passed = time.perf_counter() - 1.0
    out = raised_bound(opts, first, 1.0, passed)
    assert out == (first.bound_s, 0.0, 0.0)
    scip = PlanSettings(capacity=Capacity.of_bytes(limit), window=1, solver="SCIP")
    out = raised_bound(scip, first, 1.0, None)
    assert out == (first.bound_s, 0.0, 0.0)


@pytest.mark.slow
def test_vgg19_b8_async_at_4_to_1_is_proven_within_the_gap_after_its_layout_rounds() -> None:
    # Once the first round's plan (0.73795 s, 0.98% from its bound of 0.73070 s) did not lay
    # out and the second round's (0.73893 s) was 1.11% from that bound until it was raised;
    # on 2026-11-28 the first round's plan laid out (0.73838 s at 0.999%, one round). Either
    # way the plan is proven within the gap of the first round's bound.
    graph, platform = tmsim.graph("vgg19", batch=8), tmsim.platform("cascadelake-optane")
    plan = tmsim.plan(graph, platform, "async", fast="4:1", time_limit_s=None)
    assert plan.stats is not None and plan.stats.rounds >= 1
    assert plan.stats.status == "optimal" and plan.stats.gap <= 0.01
