"""A MIP's first point without its objective: a point of the MIP where it has one, a proof
where it has none, the model's costs left as they were, and the solve that starts there."""

from __future__ import annotations

import itertools

import cvxpy as cp
import highspy
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmsim.planners.milp.solver import driver as highs
from tmsim.planners.milp.solver.compiled import compile_problem
from tmsim.planners.milp.solver.feasibility import first_point

rows = st.lists(
    st.tuples(st.lists(st.integers(-3, 3), min_size=4, max_size=4), st.integers(-4, 6)),
    min_size=1,
    max_size=4,
)


def _points(coefficients: np.ndarray, rhs: np.ndarray) -> list[np.ndarray]:
    """Every 0/1 point of ``coefficients @ x == rhs``, by enumeration."""
    return [
        np.array(x)
        for x in itertools.product((0, 1), repeat=coefficients.shape[1])
        if np.array_equal(coefficients @ np.array(x), rhs)
    ]


@settings(max_examples=60, deadline=None)
@given(rows)
def test_a_point_where_there_is_one_and_a_proof_where_there_is_none(
    equations: list[tuple[list[int], int]],
) -> None:
    # equality rows over four binaries: small enough to enumerate, often without a point
    coefficients = np.array([c for c, _ in equations])
    rhs = np.array([r for _, r in equations])
    x = cp.Variable(4, boolean=True)
    costs = np.array([3.0, -1.0, 2.0, -5.0])
    problem = cp.Problem(cp.Minimize(costs @ x), [coefficients @ x == rhs])
    lp = compile_problem(highspy, problem).lp
    before = np.array(lp.col_cost_)
    point, none, (iterations, seconds) = first_point(highspy, lp, {}, False, 0.0)
    assert np.array_equal(np.array(lp.col_cost_), before)  # the model's costs kept
    assert iterations >= 0 and seconds >= 0
    if _points(coefficients, rhs):
        assert point is not None and not none
        found = np.round(point[: x.size])
        assert np.allclose(point[: x.size], found, atol=1e-6)
        assert np.array_equal(coefficients @ found, rhs)
    else:
        assert point is None and none


def test_the_solve_without_a_start_or_a_rens_point_proves_an_integral_misfit() -> None:
    # the LP's only point sets x to 1/2: RENS frees x and finds nothing; the MIP without its
    # objective proves that no binary x has 2 x = 1
    x = cp.Variable(1, boolean=True)
    problem = cp.Problem(cp.Minimize(cp.sum(x)), [2 * x == 1])
    outcome = highs.run_highs(problem, {"mip_rel_gap": 0.0}, False, None, 10**6)
    assert outcome.status == cp.INFEASIBLE and not outcome.solved


def test_the_solve_without_a_start_goes_on_from_the_first_point_to_the_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a perfect matching of 0..5 at least weight: edges inside the triangles 012 and 345
    # weigh 1, the others 10. The LP's optimum puts 1/2 on each triangle edge (weight 3);
    # RENS keeps the other edges at 0, where no perfect matching is left, so the solve finds
    # its first point without the objective, then RINS and the branch and bound go on to
    # the optimum (weight 12: one edge between the triangles, one inside each)
    pairs = list(itertools.combinations(range(6), 2))
    weights = np.array([1.0 if (a < 3) == (b < 3) else 10.0 for a, b in pairs])
    cover = np.array([[1.0 if i in pair else 0.0 for pair in pairs] for i in range(6)])
    x = cp.Variable(len(pairs), boolean=True)
    problem = cp.Problem(cp.Minimize(weights @ x), [cover @ x == 1])
    calls: list[bool] = []

    def counted(*args: object, **kwargs: object) -> object:
        out = first_point(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(out[0] is not None)
        return out

    monkeypatch.setattr(highs, "first_point", counted)
    outcome = highs.run_highs(problem, {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0}, False, None, 10**6)
    assert calls == [True]
    assert outcome.status == cp.OPTIMAL and outcome.objective == pytest.approx(12.0)
    assert outcome.bound == pytest.approx(12.0)
