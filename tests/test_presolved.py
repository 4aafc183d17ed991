"""The LP relaxation after HiGHS's MIP presolve: a bound between the LP's and the optimum
(brute force), a point mapped back within the column bounds, and whole solves that take this path
giving the exhaustive search's optima."""

from __future__ import annotations

import itertools
from typing import Any
from unittest import mock

import cvxpy as cp
import highspy
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from milp_brute import check_against_search, check_path_to_optimum
from tiny_graphs import MB, tiny_graphs, tiny_step

import tmsim.planners.milp.solver.first_lp as first_lp_module
from tmsim.planners.milp.chain.solve import presolves_lp
from tmsim.planners.milp.solver.compiled import compile_problem
from tmsim.planners.milp.solver.driver import run_highs
from tmsim.planners.milp.solver.instance import configured, run_model
from tmsim.planners.milp.solver.presolved import presolved_relaxation
from tmsim.workload.graph import Graph


def _relaxed(problem: cp.Problem) -> Any:
    """presolved_relaxation of ``problem``'s HiGHS model, and that model."""
    lp = compile_problem(highspy, problem).lp
    out = presolved_relaxation(
        highspy,
        lp,
        lambda: configured(highspy, {}, False, 0.0),
        lambda reduced, used: run_model(highspy, reduced, {}, False, None, True, spent_s=used),
    )
    return out, lp


def _knapsacks(values: list[int], weights: list[list[int]], rooms: list[int]) -> float:
    """The least of ``-values @ pick`` over picks within every room, by enumeration."""
    best = 0.0
    for pick in itertools.product((0, 1), repeat=len(values)):
        if all(np.dot(w, pick) <= r for w, r in zip(weights, rooms, strict=True)):
            best = min(best, -float(np.dot(values, pick)))
    return best


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.integers(1, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40)),
        min_size=2,
        max_size=9,
    ),
    rows=st.integers(1, 3),
    shares=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0)),
)
# postsolve brought one binary of this instance back at 1.83 (before clipping)
@example(
    items=[
        (1, 0, 0, 0),
        (1, 0, 0, 0),
        (1, 0, 0, 0),
        (14, 13, 0, 0),
        (12, 12, 0, 0),
        (1, 1, 0, 0),
        (1, 22, 0, 0),
        (24, 24, 0, 0),
    ],
    rows=1,
    shares=(0.5, 0.0, 0.0),
)
def test_the_bound_lies_between_the_lp_and_the_optimum_and_the_point_within_bounds(
    items: list[tuple[int, int, int, int]], rows: int, shares: tuple[float, float, float]
) -> None:
    n = len(items)
    values = [item[0] for item in items]
    weights = [[item[1 + r] for item in items] for r in range(rows)]
    rooms = [int(share * sum(w)) for share, w in zip(shares, weights, strict=False)]
    x = cp.Variable(n, boolean=True)
    objective = cp.Minimize(-(np.array(values) @ x))
    constraints = [np.array(w) @ x <= r for w, r in zip(weights, rooms, strict=True)]
    problem = cp.Problem(objective, constraints)
    out, lp = _relaxed(problem)
    y = cp.Variable(n)
    lp_optimum = cp.Problem(
        cp.Minimize(-(np.array(values) @ y)),
        [np.array(w) @ y <= r for w, r in zip(weights, rooms, strict=True)] + [y >= 0, y <= 1],
    ).solve(solver=cp.HIGHS)
    best = _knapsacks(values, weights, rooms)
    if out is None:  # presolve left the problem as it was
        return
    assert out.status == "kOptimal" and out.basis is None
    # a bound on the optimum, no weaker than the LP's
    assert lp_optimum - 1e-6 <= out.objective <= best + 1e-6
    # the point has every original column, within its bounds (not necessarily in the rows)
    assert out.point is not None and out.point.size == lp.num_col_
    assert np.all(out.point >= np.asarray(lp.col_lower_))
    assert np.all(out.point <= np.asarray(lp.col_upper_))


def test_a_problem_presolve_solves_whole_gives_its_optimum_and_point() -> None:
    x = cp.Variable(4, boolean=True)
    problem = cp.Problem(cp.Minimize(np.array([1.0, 2.0, 3.0, 4.0]) @ x), [cp.sum(x) >= 1])
    out, lp = _relaxed(problem)
    assert out is not None and out.status == "kOptimal"
    assert out.objective == pytest.approx(1.0)
    assert out.point is not None and out.point.size == lp.num_col_
    assert out.point[:4] == pytest.approx([1.0, 0.0, 0.0, 0.0])


def test_a_problem_presolve_proves_infeasible_says_so() -> None:
    x = cp.Variable(3, boolean=True)
    problem = cp.Problem(cp.Minimize(cp.sum(x)), [cp.sum(x) >= 4])
    out, _ = _relaxed(problem)
    assert out is not None and out.status == "kInfeasible" and out.point is None
    with mock.patch.object(first_lp_module, "PRESOLVE_MIN_COLUMNS", 0):
        outcome = run_highs(problem, {}, False, lp_iterations=10**6, lp_presolve=True)
    assert outcome.status == cp.INFEASIBLE and not outcome.solved and x.value is None


@pytest.mark.parametrize("interior", [False, True])
@settings(max_examples=25, deadline=None)
@given(tiny_graphs, st.floats(0.2, 1.2), st.sampled_from(["cascadelake-optane", "rtx2080ti-pcie3"]))
def test_sync_solves_through_presolve_give_the_exhaustive_searchs_optimum(
    interior: bool, graph: Graph, share: float, platform: str
) -> None:
    # interior: the reduced problem's LP by interior point, its point mapped back by postsolve
    with (
        mock.patch.object(first_lp_module, "PRESOLVE_MIN_COLUMNS", 0),
        mock.patch("tmsim.planners.milp.chain.solve.lp_by_interior_point", return_value=interior),
    ):
        check_against_search(graph, platform, share, "sync")


def test_a_sync_solve_where_moving_pays_takes_the_presolve_path_to_the_optimum() -> None:
    spy = mock.Mock(wraps=presolved_relaxation)
    patches = [
        mock.patch.object(first_lp_module, "PRESOLVE_MIN_COLUMNS", 0),
        mock.patch.object(first_lp_module, "presolved_relaxation", spy),
    ]
    check_path_to_optimum(tiny_step(), "sync", 60 * MB, spy, patches)


def test_only_the_synchronous_formulations_presolve_their_lp() -> None:
    assert [f for f in ("static", "sync", "async", "sync-rc", "async-rc") if presolves_lp(f)] == [
        "sync",
        "sync-rc",
    ]
