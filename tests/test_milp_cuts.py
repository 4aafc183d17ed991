"""The asynchronous model's copy cut and the kernel-time floor: valid at every binary point,
never changing the optimum, and tightening the LP relaxation."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiny_graphs import MB, spill_step, tiny_graphs

from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.planners.heuristics import plan_all_fast
from tmsim.planners.milp.build import Model, build_model
from tmsim.planners.milp.gadgets import Formulation
from tmsim.workload.graph import Graph


def _model(graph: Graph, platform: str, limit: int, window: int, relax: bool) -> Model:
    cost = CostModel(graph, load_preset(platform))
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    return build_model(cost, window, Formulation.ASYNC, limits, relax=relax)


def _cut(model: Model) -> tuple[np.ndarray, object] | None:
    """The cut row (const = the floor, the last row of an async model with a long copy)."""
    const, matrix = model.rows[-1]
    if matrix is None or not np.array_equal(const, model.floor_s) or len(model.rows) < 2:
        return None
    return const, matrix


@settings(max_examples=30, deadline=None)
@given(
    tiny_graphs,
    st.sampled_from(["cascadelake-optane", "rtx2080ti-pcie3"]),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
)
def test_cut_never_exceeds_the_copies_or_the_floor_at_a_binary_point(
    graph: Graph, platform: str, window: int, seed: int
) -> None:
    # any 0/1 vector, feasible or not: the cut is below max(floor, sum of copies beside k)
    model = _model(graph, platform, 10**12, window, relax=False)
    cut = _cut(model)
    assume(cut is not None)
    assert cut is not None
    const, matrix = cut
    copies_const, copies = model.rows[-2]
    assert copies is not None and not copies_const.any()
    rng = np.random.default_rng(seed)
    for density in (0.05, 0.3, 0.7, 1.0):
        x = (rng.random(model.vars.count) < density).astype(np.float64)
        cut_s = const + matrix @ x  # type: ignore[operator]
        assert np.all(cut_s <= np.maximum(model.floor_s, copies @ x) * (1 + 1e-12) + 1e-15)


def test_floor_is_the_all_fast_step() -> None:
    # the kernel floor: every operand where kernels access it fastest (DRAM on Optane)
    graph = spill_step()
    platform = load_preset("cascadelake-optane")
    model = _model(graph, "cascadelake-optane", 10**12, 1, relax=False)
    assert model.lower_bound_s == pytest.approx(plan_all_fast(graph, platform).predicted_s)


def _lp(model: Model, rows: int) -> float:
    """The LP relaxation of ``model`` rebuilt from its parts with only its first ``rows``
    time rows (the copy cut is the last)."""
    n_k = model.n_kernels
    x = cp.Variable(model.vars.count)
    c = cp.Variable(n_k)
    blocks = len(model.tiers)
    running = sp.kron(sp.eye(blocks), sp.csr_matrix(np.tril(np.ones((n_k, n_k)))))
    occupancy = running @ model.delta
    constraints = [
        model.a_eq @ x == model.b_eq,
        occupancy @ x >= 0,
        occupancy @ x <= model.capacity,
        x >= 0,
        x <= 1,
    ]
    for const, matrix in model.rows[:rows]:
        constraints.append(c >= const + (matrix @ x if matrix is not None else 0.0))
    problem = cp.Problem(cp.Minimize(cp.sum(c) + model.sync_s @ x), constraints)
    problem.solve(solver="HIGHS")
    return float(problem.value)


def test_cut_tightens_the_lp_to_the_spill_step_optimum() -> None:
    # on Optane the copy thread's copies of ``a`` (100 MB) take longer than the kernels
    # beside them; without the cut the LP runs a fraction of each copy beside a kernel, where
    # it hides, and pays for the rest synchronously
    graph = spill_step()
    model = _model(graph, "cascadelake-optane", 250 * MB, 1, relax=True)
    assert _cut(model) is not None
    model.problem.solve(solver="HIGHS")
    with_cut = float(model.problem.value)
    assert _lp(model, len(model.rows)) == pytest.approx(with_cut, rel=1e-6)  # rebuilt alike
    without = _lp(model, len(model.rows) - 1)
    cost = CostModel(graph, load_preset("cascadelake-optane"))
    optimum = brute_force(cost, 250 * MB, "async", 1)
    assert without < with_cut * (1 - 1e-2)  # the cut binds in the LP (by 1.4% here)
    assert with_cut <= optimum * (1 + 1e-9)  # and is valid
