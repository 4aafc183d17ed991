"""What makes the asynchronous model solve faster without changing its optimum: the copy cut
and the kernel-time floor (valid at every binary point, tightening the LP relaxation) and the
window gadgets left out where a copy beside a kernel can never pay off."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiny_graphs import MB, random_graph, spill_step, tiny_graphs

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError
from tmsim.planners.heuristics import plan_all_fast
from tmsim.planners.milp.chain.plan import plan_milp
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind, build_gadgets
from tmsim.planners.milp.formulation.kernel_rows import copy_rows
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.prune import prune_windows
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import Graph


def _model(graph: Graph, platform: str, limit: int, window: int, relax: bool) -> Model:
    cost = CostModel(graph, load_preset(platform))
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    return build_model(cost, window, Formulation.ASYNC, limits, relax=relax)


def _cut_index(model: Model) -> int | None:
    """Where the cut row is (const = the floor, right after the copies' row of zero const;
    the copy rows' thresholds follow it) in an async model with a long copy."""
    for i in range(1, len(model.rows)):
        const, matrix = model.rows[i]
        before, copies = model.rows[i - 1]
        floor = np.array_equal(const, model.floor_s)
        if matrix is not None and copies is not None and floor and not before.any():
            return i
    return None


def _cut(model: Model) -> tuple[np.ndarray, object] | None:
    """The cut row, or None."""
    i = _cut_index(model)
    return None if i is None else model.rows[i]


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
    # any 0/1 vector, feasible or not: the copy cut and the thresholds are below
    # max(floor, sum of copies beside k) (the copy rows come last, the copies' own first)
    model = _model(graph, platform, 10**12, window, relax=False)
    assume(bool(model.copies.asynchronous.any()))  # else the model has no copy rows
    count = len(copy_rows(model.copies, model.floor_s, model.vars.count))
    copies_const, copies = model.rows[len(model.rows) - count]
    assert copies is not None and not copies_const.any()
    rng = np.random.default_rng(seed)
    for density in (0.05, 0.3, 0.7, 1.0):
        x = (rng.random(model.vars.count) < density).astype(np.float64)
        most = np.maximum(model.floor_s, copies @ x) * (1 + 1e-12) + 1e-15
        for const, matrix in model.rows[len(model.rows) - count + 1 :]:
            assert matrix is not None and np.all(const + matrix @ x <= most)


def test_floor_is_the_all_fast_step() -> None:
    # the kernel floor: every operand where kernels access it fastest (DRAM on Optane)
    graph = spill_step()
    platform = load_preset("cascadelake-optane")
    model = _model(graph, "cascadelake-optane", 10**12, 1, relax=False)
    assert model.lower_bound_s == pytest.approx(plan_all_fast(graph, platform).predicted_s)


def _lp(model: Model, rows: int, cliques: bool = True) -> float:
    """The LP relaxation of ``model`` rebuilt from its parts with only its first ``rows``
    time rows (the copy cut follows the copies' row, the thresholds follow it), and with its
    clique rows or without them."""
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
    # the compact form's event order, then the clique rows
    keep = model.a_ub.shape[0] - (0 if cliques else model.cliques)
    if keep:
        constraints.append(model.a_ub[:keep] @ x <= model.b_ub[:keep])
    for const, matrix in model.rows[:rows]:
        constraints.append(c >= const + (matrix @ x if matrix is not None else 0.0))
    problem = cp.Problem(cp.Minimize(cp.sum(c) + model.sync_s @ x), constraints)
    problem.solve(solver="HIGHS")
    return float(problem.value)


def test_cut_tightens_the_lp_to_the_spill_step_optimum() -> None:
    # on the GPU, with convolutions of 3e10 FLOPs (~3.5 ms), the copies of ``a`` (100 MB,
    # ~8 ms over PCIe 3) take longer than the kernels beside them; without the cut the LP
    # runs a fraction of each copy beside a kernel, where it hides, and pays for the rest
    # synchronously
    graph = spill_step(conv_flops=3 * 10**10)
    model = _model(graph, "rtx2080ti-pcie3", 250 * MB, 1, relax=True)
    assert _cut(model) is not None
    model.problem.solve(solver="HIGHS")
    with_cut = float(model.problem.value)
    assert _lp(model, len(model.rows)) == pytest.approx(with_cut, rel=1e-6)  # rebuilt alike
    cost = CostModel(graph, load_preset("rtx2080ti-pcie3"))
    optimum = brute_force(cost, 250 * MB, "async", 1)
    # without the clique rows (c, 200 MB, and a, 100 MB, cannot share the 250 MB device)
    cut = _cut_index(model)
    assert cut is not None
    alone = _lp(model, cut + 1, cliques=False)  # the cut without the thresholds after it
    without = _lp(model, cut, cliques=False)
    assert without < alone * (1 - 0.1)  # the cut binds in the LP (by 20% here)
    assert alone <= with_cut * (1 + 1e-9) and with_cut <= optimum * (1 + 1e-9)  # and is valid
    # the clique rows alone give this LP the same bound
    assert model.cliques > 0
    assert _lp(model, cut) == pytest.approx(with_cut, rel=1e-6)


@settings(max_examples=30, deadline=None)
@given(tiny_graphs, st.floats(0.2, 1.2), st.integers(1, 2))
@example(random_graph([2, 5, 4, 2], [0, 0, 0], False), 0.75, 1)  # layout once lowered its limit
def test_pruned_windows_keep_the_optimum(graph: Graph, share: float, window: int) -> None:
    # on Optane the copy thread is slow enough that some window copies can never pay off;
    # the model leaves them out and must still reach the exhaustive search's optimum
    plat = load_preset("cascadelake-optane")
    cost = CostModel(graph, plat)
    full = build_gadgets(cost, Formulation.ASYNC, window)
    pruned = prune_windows(cost, full, (0,), cost.kernel_time_range_s()[1])
    assume(pruned.tensor.size < full.tensor.size)
    limit = max(1, int(graph.peak_live_bytes * share))
    best = brute_force(cost, limit, "async", window)
    # bytes only, as the search counts them (a layout loop may lower the limit further)
    opts = PlanSettings(
        capacity=Capacity.of_bytes(limit), gap=0.0, window=window, time_limit_s=None, layout=False
    )
    try:
        result = plan_milp(graph, plat, opts, "async")
    except InfeasibleError:
        assert best == math.inf
        return
    assert result.predicted_s == pytest.approx(best, rel=1e-6)


def test_nothing_is_pruned_where_copies_run_as_fast_beside_kernels() -> None:
    # on the GPU a copy beside a kernel runs as fast as a blocking one: every window stays
    cost = CostModel(spill_step(conv_flops=10**6), load_preset("rtx2080ti-pcie3"))
    full = build_gadgets(cost, Formulation.ASYNC, 2)
    assert prune_windows(cost, full, (0,), cost.kernel_time_range_s()[1]) is full


def test_a_slow_copy_beside_short_kernels_is_pruned() -> None:
    # Optane: the copy thread writes 100 MB far slower than the parallel blocking copy, and
    # the kernels beside it are short: none of a's window gadgets is kept
    cost = CostModel(spill_step(conv_flops=10**6), load_preset("cascadelake-optane"))
    full = build_gadgets(cost, Formulation.ASYNC, 1)
    pruned = prune_windows(cost, full, (0,), cost.kernel_time_range_s()[1])
    a = 1  # tensor index of ``a``
    kinds = pruned.kind[pruned.tensor == a]
    assert (full.kind[full.tensor == a] == GadgetKind.WINDOW).any()
    assert not (kinds == GadgetKind.WINDOW).any()


def test_a_plan_at_the_kernel_time_bound_ends_the_chain() -> None:
    # everything fits the device: the static plan runs every kernel at its fastest, which no
    # formulation can beat, so sync and async return it without building their models
    graph = spill_step()
    plat = load_preset("rtx2080ti-pcie3")
    opts = PlanSettings(capacity=Capacity.of_bytes(graph.peak_live_bytes), window=2)
    static = plan_milp(graph, plat, opts, "static")
    result = plan_milp(graph, plat, opts, "async")
    assert result.planner == "milp-async" and result.stats is not None
    assert result.stats.status.startswith("optimal (within the gap of the kernel-time bound")
    assert result.stats.variables == static.stats.variables  # type: ignore[union-attr]
    assert result.predicted_s == pytest.approx(plan_all_fast(graph, plat).predicted_s)
    assert result.stats.gap <= 0.01
