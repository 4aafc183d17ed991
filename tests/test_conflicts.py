"""Clique rows of the fastest tier's capacity (tensors too large to share it): built where
tensors conflict, absent where none do, and the MILP with them keeps the optimum of exhaustive
search on hand cases (tests/test_milp.py checks random graphs against it, and 187 of the 277
models its MILP tests build carry such rows)."""

from __future__ import annotations

import numpy as np
import pytest
from milp_brute import brute_force
from tiny_graphs import MB, tiny_step

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.planners.milp.chain.plan import plan_milp
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.settings import PlanSettings

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
