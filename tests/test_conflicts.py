"""Clique rows of the fastest tier's capacity (tensors too large to share it): built where
tensors conflict, absent where none do, and the MILP with them keeps the optimum of exhaustive
search on hand cases and random graphs (tests/test_milp.py checks random graphs too, most of
whose models carry such rows)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiny_graphs import MB, tiny_graphs, tiny_step

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError
from tmsim.planners.milp.build import build_model
from tmsim.planners.milp.chain import plan_milp
from tmsim.planners.milp.gadgets import Formulation
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import Graph

CPU = load_preset("cascadelake-optane")
FORMULATIONS = ("static", "sync", "async")


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_tensors_that_cannot_share_the_tier_form_cliques_and_keep_the_optimum(
    formulation: str,
) -> None:
    # tiny_step: x 40, w 20, a 80, b 60, g 20 MB. At 70 and 90 MB, a and b are larger than
    # half the limit and conflict with x: cliques. At 200 MB nothing conflicts.
    graph = tiny_step()
    cost = CostModel(graph, CPU)
    n_k = len(graph.kernels)
    for limit_mb, conflicting in ((70, True), (90, True), (200, False)):
        limit = limit_mb * MB
        limits = np.full(n_k, limit, dtype=np.int64)
        model = build_model(cost, 1, Formulation(formulation), limits, relax=False)
        assert (model.cliques > 0) == conflicting, limit_mb
        best = brute_force(cost, limit, formulation, window=1)
        opts = PlanSettings(capacity=Capacity.of_bytes(limit), gap=1e-9, window=1)
        plan = plan_milp(graph, CPU, opts, formulation)
        assert plan.predicted_s == pytest.approx(best, rel=1e-6), limit_mb


@settings(max_examples=40, deadline=None)
@given(tiny_graphs, st.floats(0.15, 0.8), st.sampled_from(FORMULATIONS))
def test_the_milp_with_cliques_matches_exhaustive_search(
    graph: Graph, share: float, formulation: str
) -> None:
    cost = CostModel(graph, CPU)
    limit = max(1, int(graph.peak_live_bytes * share))
    best = brute_force(cost, limit, formulation, window=1)
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), gap=1e-9, layout=False, window=1)
    if best == float("inf"):
        with pytest.raises(InfeasibleError):
            plan_milp(graph, CPU, opts, formulation)
        return
    plan = plan_milp(graph, CPU, opts, formulation)
    assert plan.predicted_s == pytest.approx(best, rel=1e-6)
