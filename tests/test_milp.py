"""The MILP against exhaustive search on tiny graphs, and its plans against the validator."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import brute_force

from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError
from tmsim.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.planners.milp import MilpOptions, plan_milp

MB = 1_000_000
F, B, U = Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE


def tiny_step(scale: int = 1) -> Graph:
    """Input, a weight updated in place, a long-lived activation, a gradient."""
    tensors = [
        Tensor("x", 40 * MB * scale, Role.INPUT),
        Tensor("w", 20 * MB * scale, Role.WEIGHT),
        Tensor("a", 80 * MB * scale, Role.ACTIVATION),
        Tensor("b", 60 * MB * scale, Role.ACTIVATION),
        Tensor("g", 20 * MB * scale, Role.GRADIENT),
    ]
    kernels = [
        Kernel("f1", "conv2d", ("x", "w"), ("a",), F, 4 * 10**9 * scale),
        Kernel("f2", "relu", ("a",), ("b",), F, 10**6),
        Kernel("f3", "add", ("b", "a"), ("g",), B, 10**6),
        Kernel("sgd", "sgd_momentum", ("g",), (), U, 10**6, updates=("w",)),
    ]
    return Graph("tiny", tensors, kernels)


# Limits chosen so that static, sync and async differ (brute force at 60 MB on the CPU:
# 29.2, 27.7, 27.7 ms; at 160 MB on the GPU: nothing static fits, sync 4.54, async 4.25 ms),
# meet where everything fits, or nothing fits at all (140 MB on the GPU).
CASES = [
    ("cascadelake-optane", 1, [60, 100, 150, 220]),
    ("rtx2080ti-pcie3", 1, [140, 160, 200]),
]


@pytest.mark.parametrize("formulation", ["static", "sync", "async"])
@pytest.mark.parametrize(("platform", "scale", "limits_mb"), CASES)
def test_milp_optimum_equals_exhaustive_search(
    platform: str, scale: int, limits_mb: list[int], formulation: str
) -> None:
    graph = tiny_step(scale)
    plat = load_preset(platform)
    cost = CostModel(graph, plat)
    for limit_mb in limits_mb:
        limit = limit_mb * MB * scale
        best = brute_force(cost, limit, formulation, window=1)
        opts = MilpOptions(formulation=formulation, fast_bytes=limit, gap=1e-9, window=1)
        if best == float("inf"):
            with pytest.raises(InfeasibleError, match=r"more than the limit|fast memory"):
                plan_milp(graph, plat, opts)
            continue
        plan = plan_milp(graph, plat, opts)
        assert plan.predicted_s == pytest.approx(best, rel=1e-6), (platform, limit_mb)
        assert plan.stats is not None
        assert plan.stats.objective == pytest.approx(best, rel=1e-6)


@pytest.mark.parametrize(
    ("platform", "limit_mb"), [("cascadelake-optane", 60), ("rtx2080ti-pcie3", 160)]
)
def test_each_formulation_contains_the_one_before(platform: str, limit_mb: int) -> None:
    cost = CostModel(tiny_step(), load_preset(platform))
    static, sync, asynchronous = (
        brute_force(cost, limit_mb * MB, f, window=1) for f in ("static", "sync", "async")
    )
    assert asynchronous <= sync <= static
    assert sync < static  # moving pays off at this capacity


tiny_graphs = st.builds(
    lambda sizes, flops, extra: _random_graph(sizes, flops, extra),
    st.lists(st.integers(1, 60), min_size=4, max_size=4),
    st.lists(st.integers(0, 5 * 10**9), min_size=3, max_size=3),
    st.booleans(),
)


def _random_graph(sizes: list[int], flops: list[int], extra: bool) -> Graph:
    tensors = [
        Tensor("w", sizes[0] * MB, Role.WEIGHT),
        Tensor("a", sizes[1] * MB, Role.ACTIVATION),
        Tensor("b", sizes[2] * MB, Role.ACTIVATION),
        Tensor("c", sizes[3] * MB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k0", "conv2d", ("w",), ("a",), F, flops[0]),
        Kernel("k1", "relu", ("a",), ("b",), F, flops[1]),
        Kernel("k2", "linear", ("b", "a") if extra else ("b",), ("c",), F, flops[2]),
        Kernel("k3", "sgd_momentum", ("c",), (), U, 10, updates=("w",)),
    ]
    return Graph("random", tensors, kernels)


@settings(max_examples=15, deadline=None)
@given(tiny_graphs, st.floats(0.2, 1.2), st.sampled_from(["static", "sync"]))
def test_milp_matches_exhaustive_search_on_random_graphs(
    graph: Graph, share: float, formulation: str
) -> None:
    plat = load_preset("cascadelake-optane")
    cost = CostModel(graph, plat)
    limit = max(1, int(graph.peak_live_bytes * share))
    best = brute_force(cost, limit, formulation)
    opts = MilpOptions(formulation=formulation, fast_bytes=limit, gap=1e-9, layout=False)
    plan = plan_milp(graph, plat, opts)
    assert plan.predicted_s == pytest.approx(best, rel=1e-6)


def test_static_start_reproduces_the_heuristic_it_comes_from() -> None:
    import numpy as np

    from tmsim.planners.heuristics import HeuristicOptions, plan_greedy
    from tmsim.planners.milp_build import build_model
    from tmsim.planners.milp_model import Formulation
    from tmsim.planners.milp_solve import best_heuristic_fast, static_start

    graph = tiny_step()
    plat = load_preset("cascadelake-optane")
    cost = CostModel(graph, plat)
    limit = 100 * MB
    model = build_model(cost, 1, Formulation.STATIC, np.full(4, limit), False, False)
    fast = best_heuristic_fast(cost, limit)
    start = static_start(model, fast)
    assert start is not None
    x = start.astype(float)
    u, c = model.complete(x)
    assert u.max() <= 1 + 1e-12  # capacity is in units of the limit
    greedy = plan_greedy(graph, plat, HeuristicOptions(fast_bytes=limit))
    assert c.sum() == pytest.approx(greedy.predicted_s, rel=1e-9)
    # the start satisfies every constraint of the problem: pinning x to it stays feasible
    import cvxpy as cp

    pinned = cp.Problem(model.problem.objective, [*model.problem.constraints, model.x == x])
    pinned.solve(solver="HIGHS")
    assert pinned.status == "optimal"
    assert pinned.value == pytest.approx(greedy.predicted_s, rel=1e-6)
