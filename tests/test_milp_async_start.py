"""The asynchronous MILP's first incumbent: the sync solution with copies moved into windows."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiny_graphs import MB, spill_step, tiny_graphs

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.planners.milp.chain.overlap import _Search, overlap_copies
from tmsim.planners.milp.chain.starts import lift
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.model import Model
from tmsim.workload.graph import Graph


def _sync_and_async(
    graph: Graph, platform: str | Platform, limit: int, window: int, compact: bool = True
) -> tuple[Model, np.ndarray, Model] | None:
    """The async model and the optimal sync solution lifted into it (None: no sync plan)."""
    machine = load_preset(platform) if isinstance(platform, str) else platform
    cost = CostModel(graph, machine)
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    sync = build_model(cost, window, Formulation.SYNC, limits, relax=False)
    sync.problem.solve(solver="HIGHS", mip_rel_gap=0.0, mip_abs_gap=0.0)
    if sync.problem.status != cp.OPTIMAL:
        return None
    large = build_model(cost, window, Formulation.ASYNC, limits, relax=False, compact=compact)
    start = lift(sync, np.asarray(sync.x.value) > 0.5, large)
    assert start is not None
    return large, start, sync


def _pinned_value(model: Model, x: np.ndarray) -> float | None:
    """The problem's optimum with the binaries fixed to ``x`` (None if that is infeasible)."""
    pinned = cp.Problem(
        model.problem.objective, [*model.problem.constraints, model.x == x.astype(float)]
    )
    pinned.solve(solver="HIGHS")
    return float(pinned.value) if pinned.status == cp.OPTIMAL else None


def _check_incremental(model: Model, start: np.ndarray, rounds: int) -> int:
    """Walk from ``start`` and check the walk's incrementally kept occupancy and kernel times
    against recomputing them from its binaries; return how many moves it kept."""
    search = _Search(model, start)
    if model.gaps.compact:  # two tiers: every window slot is one event
        moved = search.events_round()
    else:
        moved = sum(search.round() for _ in range(rounds))
    u, c = model.complete(search.x.astype(float))
    np.testing.assert_allclose(search.u, u, atol=1e-9)
    np.testing.assert_allclose(search.c, c, rtol=1e-12, atol=1e-15)
    return moved


@pytest.mark.parametrize("compact", [True, False], ids=["compact", "general"])
def test_gpu_copies_move_beside_long_kernels(compact: bool) -> None:
    # sync writes ``a`` out after make_a and fetches it before use_a, blocking both times;
    # window 1 lets the write run beside conv1 and the fetch beside conv2, in the compact form
    # as events, in the general form by moving through window gadgets' layers of edges
    graph = spill_step()
    plat = load_preset("rtx2080ti-pcie3")
    found = _sync_and_async(graph, plat, 250 * MB, window=1, compact=compact)
    assert found is not None
    model, start, _ = found
    assert model.gaps.compact is compact
    before = model.objective(start)
    assert _check_incremental(model, start, rounds=1) == 2  # the write and the fetch
    better = overlap_copies(model, start, rounds=1)
    after = model.objective(better)
    assert after < before * (1 - 1e-6)
    optimum = brute_force(CostModel(graph, plat), 250 * MB, "async", 1)
    assert after == pytest.approx(optimum, rel=1e-9)
    assert _pinned_value(model, better) == pytest.approx(after, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 1.2),
    st.sampled_from(["cascadelake-optane", "rtx2080ti-pcie3"]),
    st.integers(1, 2),
)
def test_overlapped_start_is_feasible_and_no_worse(
    graph: Graph, share: float, platform: str, window: int
) -> None:
    limit = max(1, int(graph.peak_live_bytes * share))
    found = _sync_and_async(graph, platform, limit, window)
    if found is None:
        return  # no sync plan fits: there is nothing to start from
    model, start, _ = found
    _check_incremental(model, start, window)
    better = overlap_copies(model, start, rounds=window)
    after = model.objective(better)
    assert after <= model.objective(start) + 1e-12
    # every constraint of the async problem holds at the new binaries, at that objective
    assert _pinned_value(model, better) == pytest.approx(after, rel=1e-6)


def test_no_rounds_changes_nothing() -> None:
    found = _sync_and_async(spill_step(), "rtx2080ti-pcie3", 250 * MB, window=1)
    assert found is not None
    model, start, _ = found
    assert np.array_equal(overlap_copies(model, start, rounds=0), start)
