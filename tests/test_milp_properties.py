"""Properties of the MILP on random small graphs and on small zoo graphs.

Every plan validates; each formulation is no worse than the one it contains and than the
heuristics it can express; more fast memory never hurts; with room for everything, every
formulation matches all-fast.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_graph_properties import graphs

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.planners.heuristics import plan_all_fast, plan_first_touch, plan_greedy
from tmsim.planners.milp.chain.plan import plan_milp
from tmsim.planners.settings import PlanSettings
from tmsim.plans.validate import validate
from tmsim.workload.graph import Graph

CPU = load_preset("cascadelake-optane")
GPU = load_preset("rtx2080ti-pcie3")
EXACT = 1e-9
REL = 1e-6
# HiGHS's feasibility and optimality tolerances are 1e-7: differences of a tenth of a
# microsecond (a few bytes of traffic) are below what it resolves.
ABS_S = 1e-7
MB = 1 << 20


def _le(a: float, b: float) -> bool:
    return a <= b * (1 + REL) + ABS_S


def _milp(graph: Graph, formulation: str, limit: int, platform=CPU, window: int = 2):  # type: ignore[no-untyped-def]
    # byte capacity only: heuristics are not laid out either, and layouts are not monotone
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), gap=EXACT, window=window, layout=False)
    result = plan_milp(graph, platform, opts, formulation)
    check = validate(result, graph, platform)
    assert check.ok, check.errors[:3]
    assert check.recomputed_s == pytest.approx(result.predicted_s, rel=REL)
    return result


@settings(max_examples=25, deadline=None)
@given(graphs(dtypes=("fp32",), unit_bytes=MB), st.floats(0.05, 1.0))
def test_formulations_nest_and_beat_static_heuristics(graph: Graph, share: float) -> None:
    limit = max(1, int(graph.peak_live_bytes * share))
    static, sync, asyn = (_milp(graph, f, limit) for f in ("static", "sync", "async"))
    assert _le(asyn.predicted_s, sync.predicted_s)
    assert _le(sync.predicted_s, static.predicted_s)
    heuristics = PlanSettings(capacity=Capacity.of_bytes(limit))
    for heuristic in (plan_first_touch, plan_greedy):
        assert _le(static.predicted_s, heuristic(graph, CPU, heuristics).predicted_s)


@settings(max_examples=15, deadline=None)
@given(
    graphs(dtypes=("fp32",), unit_bytes=MB),
    st.floats(0.05, 0.9),
    st.sampled_from(["static", "sync"]),
)
def test_more_fast_memory_never_hurts(graph: Graph, share: float, formulation: str) -> None:
    small = max(1, int(graph.peak_live_bytes * share))
    larger = max(small + 1, int(graph.peak_live_bytes * min(1.0, share * 1.5)))
    tight = _milp(graph, formulation, small)
    roomy = _milp(graph, formulation, larger)
    assert _le(roomy.predicted_s, tight.predicted_s)


@settings(max_examples=15, deadline=None)
@given(graphs(dtypes=("fp32",), unit_bytes=MB), st.sampled_from(["static", "sync", "async"]))
def test_room_for_everything_means_all_fast(graph: Graph, formulation: str) -> None:
    result = _milp(graph, formulation, max(1, graph.peak_live_bytes))
    fast = plan_all_fast(graph, CPU)
    assert result.predicted_s == pytest.approx(fast.predicted_s, rel=REL, abs=ABS_S)
    assert not result.moves


@pytest.mark.parametrize(
    ("platform", "formulations"),
    [(CPU, ("static", "sync")), (GPU, ("sync",))],
    ids=["cpu", "gpu"],
)
def test_zoo_graph_plans_validate(platform, formulations) -> None:  # type: ignore[no-untyped-def]
    _zoo_plans(platform, formulations, time_limit_s=60)


@pytest.mark.slow
@pytest.mark.parametrize("platform", [CPU, GPU], ids=["cpu", "gpu"])
def test_zoo_graph_async_plans_validate(platform) -> None:  # type: ignore[no-untyped-def]
    _zoo_plans(platform, ("async",), time_limit_s=60)


def _zoo_plans(platform, formulations, time_limit_s: float) -> None:  # type: ignore[no-untyped-def]
    from tmsim.workload.zoo import training_graph_of

    graph = training_graph_of("resnet50", 2)
    limit = graph.peak_live_bytes // 2
    fast = plan_all_fast(graph, platform).predicted_s
    for formulation in formulations:
        opts = PlanSettings(capacity=Capacity.of_bytes(limit), window=2, time_limit_s=time_limit_s)
        result = plan_milp(graph, platform, opts, formulation)
        assert validate(result, graph, platform).ok
        assert result.stats is not None
        if result.stats.status == "optimal":
            assert result.stats.gap <= 0.01 + 1e-9
        assert result.predicted_s >= fast * (1 - REL)
        # the bound, where there is one (not for a fallback), is below what the plan achieves
        if not result.stats.status.startswith("fallback"):
            assert result.stats.bound <= result.predicted_s * (1 + REL)


def test_layout_loop_leaves_a_plan_that_lays_out() -> None:
    from tmsim.layout.fast_tier import fast_layout, overflow_bytes
    from tmsim.workload.zoo import training_graph_of

    graph = training_graph_of("densenet121", 2)
    limit = graph.peak_live_bytes // 4
    result = plan_milp(
        graph, CPU, PlanSettings(capacity=Capacity.of_bytes(limit), window=2), "sync"
    )
    assert result.stats is not None and result.stats.rounds >= 1
    assert not overflow_bytes(result, graph, CPU, limit).any()
    assert validate(result, graph, CPU).ok
    assert fast_layout(result, graph, CPU).pool_bytes <= limit + 64 * len(result.residency)
