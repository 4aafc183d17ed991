"""The roofline's cut (:func:`tmsim.planners.milp.formulation.kernel_rows.memory_cut_rows`): valid at every
placement, so the kernel costs and the optimum stay as they were, and it lifts the LP
relaxation where an integer placement's compute cannot hide a slow operand that a fraction
of it could."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiers3 import cpu3
from tiny_graphs import MB, tiny_graphs

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.planners.milp.chain.starts import static_start
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

F = Phase.FORWARD


def _platform(name: str, graph: Graph) -> Platform:
    if name == "cpu3":
        total = int(graph.sizes_bytes.sum())
        return cpu3(total // 2, total // 2, 10 * total)
    return load_preset(name)


@settings(max_examples=40, deadline=None)
@given(
    tiny_graphs,
    st.sampled_from(["cascadelake-optane", "gh200", "cpu3"]),
    st.integers(0, 2**32 - 1),
)
def test_the_cut_changes_no_kernel_cost_at_a_placement(graph: Graph, name: str, seed: int) -> None:
    # each tensor on a random kernel tier for its whole life: the static model's point of
    # that placement costs every kernel the same with the cut as without it
    platform = _platform(name, graph)
    cost = CostModel(graph, platform)
    limits = np.full(len(graph.kernels), 10**15, dtype=np.int64)
    reach = np.flatnonzero(platform.kernel_tier_mask())
    tiers = np.random.default_rng(seed).choice(reach, size=len(graph.tensors))
    costs = []
    for cut in (False, True):
        model = build_model(cost, 1, Formulation.STATIC, limits, relax=False, roofline_cut=cut)
        x = static_start(model, tiers)
        assert x is not None
        costs.append(model.complete(x.astype(np.float64))[1])
    assert len(costs[1]) == len(graph.kernels)
    np.testing.assert_allclose(costs[1], costs[0], rtol=1e-12, atol=0.0)


def _two_weights(flops: int) -> Graph:
    """Two kernels, each reading its own 100 MB weight; a limit of one weight and the small
    activations leaves room for one weight in DRAM."""
    tensors = [
        Tensor("x", MB, Role.INPUT),
        Tensor("w1", 100 * MB, Role.WEIGHT),
        Tensor("w2", 100 * MB, Role.WEIGHT),
        Tensor("a", MB, Role.ACTIVATION),
        Tensor("b", MB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k1", "conv2d", ("x", "w1"), ("a",), F, flops),
        Kernel("k2", "conv2d", ("a", "w2"), ("b",), F, flops),
    ]
    return Graph("two-weights", tensors, kernels)


def _lp(cost: CostModel, limit: int, cut: bool) -> float:
    limits = np.full(len(cost.graph.kernels), limit, dtype=np.int64)
    model = build_model(cost, 1, Formulation.STATIC, limits, relax=True, roofline_cut=cut)
    model.problem.solve(solver="HIGHS")
    return float(model.problem.value)


def test_the_cut_lifts_the_lp_to_the_optimum_by_hand() -> None:
    # each kernel's compute hides half a weight's slow reads but not a whole one: the LP
    # without the cut keeps half of each weight in DRAM and pays nothing for the other half;
    # a placement keeps one weight whole and its kernel waits for the other's reads
    platform = load_preset("cascadelake-optane")
    probe = CostModel(_two_weights(10**9), platform)
    fast = probe.operand_s(np.zeros(probe.op_tensor.size, dtype=np.int64))
    slow = probe.operand_s(np.ones(probe.op_tensor.size, dtype=np.int64))
    k1 = probe.op_kernel == 0
    all_fast_s = float(fast[k1].sum())
    weight = int(np.flatnonzero(k1 & (probe.op_tensor == 1))[0])
    extra_s = float(slow[weight] - fast[weight])
    target_s = all_fast_s + 0.75 * extra_s  # compute between half and a whole weight's wait
    flops = int(10**9 * target_s / float(probe.compute_s[0]))
    cost = CostModel(_two_weights(flops), platform)
    compute_s = float(cost.compute_s[0])
    assert all_fast_s + 0.5 * extra_s < compute_s < all_fast_s + extra_s
    limit = 103 * MB
    optimum = brute_force(cost, limit, "static")
    launch = 2 * cost.launch_s
    # by hand: one kernel at its compute, the other waiting on its weight's slow reads
    slow_kernel_s = all_fast_s + extra_s  # a and b are written to DRAM in either placement
    assert optimum == pytest.approx(compute_s + slow_kernel_s + launch, rel=1e-9)
    without = _lp(cost, limit, cut=False)
    assert without == pytest.approx(2 * compute_s + launch, rel=1e-6)
    assert _lp(cost, limit, cut=True) == pytest.approx(optimum, rel=1e-6)
