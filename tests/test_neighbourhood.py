"""A neighbourhood's MIP with its fixed columns taken out: the same optimum as the whole MIP
with those columns fixed by their bounds (brute force on small problems), points that widen to
points of the whole model, and None where the fixed columns alone break a row."""

from __future__ import annotations

import itertools

import cvxpy as cp
import highspy
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tmsim.planners.milp.solver.compiled import compile_problem
from tmsim.planners.milp.solver.neighbourhood import fixed_bounds, restrict


def _solve(lp: object) -> tuple[str, float, np.ndarray]:
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("mip_rel_gap", 0.0)
    highs.setOptionValue("mip_abs_gap", 0.0)
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus().name
    objective = float(highs.getInfo().objective_function_value)
    return status, objective, np.asarray(highs.getSolution().col_value)


def _problem(
    values: list[int], weights: list[int], extra: list[int]
) -> tuple[cp.Problem, cp.Variable]:
    """A knapsack with two rows (capacities) and a continuous slack column with a cost, so
    that restricted models keep a continuous column and equality-free inequality rows."""
    x = cp.Variable(len(values), boolean=True)
    y = cp.Variable(nonneg=True)
    room = [
        np.asarray(weights) @ x <= sum(weights) // 2 + y,
        np.asarray(extra) @ x <= sum(extra) // 2,
        y <= 3,
    ]
    return cp.Problem(cp.Minimize(-(np.asarray(values) @ x) + 2 * y), room), x


def _brute(
    values: list[int], weights: list[int], extra: list[int], fix: dict[int, int]
) -> float | None:
    """The optimum with the booleans in ``fix`` fixed, by enumeration (y: the least slack the
    first row needs, if at most 3 and worth it)."""
    best: float | None = None
    n = len(values)
    for pick in itertools.product((0, 1), repeat=n):
        if any(pick[i] != v for i, v in fix.items()):
            continue
        if np.dot(extra, pick) > sum(extra) // 2:
            continue
        need = max(0, int(np.dot(weights, pick)) - sum(weights) // 2)
        if need > 3:
            continue
        value = -float(np.dot(values, pick)) + 2 * need
        best = value if best is None else min(best, value)
    return best


small = st.lists(st.integers(1, 30), min_size=2, max_size=7)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), values=small)
def test_the_restricted_mip_has_the_optimum_of_the_whole_one_with_its_columns_fixed(
    data: st.DataObject, values: list[int]
) -> None:
    n = len(values)
    weights = data.draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    extra = data.draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    fix = data.draw(st.dictionaries(st.integers(0, n - 1), st.integers(0, 1)))
    problem, x = _problem(values, weights, extra)
    compiled = compile_problem(highspy, problem)
    lp, columns = compiled.lp, compiled.columns
    lower = np.array(lp.col_lower_, dtype=np.float64)
    upper = np.array(lp.col_upper_, dtype=np.float64)
    first = columns[x.id]
    for i, v in fix.items():
        lower[first + i] = upper[first + i] = v
    restricted = restrict(highspy, lp, compiled.matrix, lower, upper)
    expected = _brute(values, weights, extra, fix)
    if restricted is None:
        # only where a row that no free column enters is broken: then nothing is feasible
        assert expected is None
        return
    assert restricted.free.size == int((lower < upper).sum())
    status, objective, x_free = _solve(restricted.lp)
    if expected is None:
        assert status == "kInfeasible"
        return
    assert status == "kOptimal"
    assert abs(objective - expected) <= 1e-6
    whole = restricted.widen(x_free)
    # the widened point keeps the fixed columns and satisfies every row of the whole model
    assert np.all(whole >= lower - 1e-9) and np.all(whole <= upper + 1e-9)
    activity = compiled.matrix @ whole
    assert np.all(activity <= np.asarray(lp.row_upper_) + 1e-6)
    assert np.all(activity >= np.asarray(lp.row_lower_) - 1e-6)
    assert abs(float(np.dot(lp.col_cost_, whole)) - objective) <= 1e-6


def test_a_row_the_fixed_columns_alone_break_makes_the_neighbourhood_empty() -> None:
    x = cp.Variable(3, boolean=True)
    problem = cp.Problem(cp.Minimize(-cp.sum(x)), [x[0] + x[1] <= 1, x[2] <= 1])
    compiled = compile_problem(highspy, problem)
    lp = compiled.lp
    lower = np.array(lp.col_lower_, dtype=np.float64)
    upper = np.array(lp.col_upper_, dtype=np.float64)
    first = compiled.columns[x.id]
    lower[first : first + 2] = upper[first : first + 2] = 1.0  # x0 + x1 = 2 > 1
    assert restrict(highspy, lp, compiled.matrix, lower, upper) is None
    # with x2 free its row stays; with every column fixed and the rows kept, the model is empty
    lower[first : first + 2] = upper[first : first + 2] = [1.0, 0.0]
    lower[first + 2] = upper[first + 2] = 1.0
    restricted = restrict(highspy, lp, compiled.matrix, lower, upper)
    assert restricted is not None and restricted.free.size == 0
    assert restricted.lp.num_row_ == 0 and restricted.lp.offset_ == -2.0


def test_fixed_bounds_fix_only_integral_booleans_and_rins_only_where_the_start_agrees() -> None:
    booleans = np.array([0, 1, 2])
    bounds = (np.zeros(4), np.array([1.0, 1.0, 1.0, 5.0]))
    x_lp = np.array([1.0, 0.3, 0.0, 2.5])
    lower, upper = fixed_bounds(x_lp, None, booleans, bounds) or (None, None)
    assert lower is not None and upper is not None
    assert list(lower) == [1.0, 0.0, 0.0, 0.0] and list(upper) == [1.0, 1.0, 0.0, 5.0]
    got = fixed_bounds(x_lp, np.array([1.0, 0.0, 1.0, 0.0]), booleans, bounds)
    assert got is not None
    assert list(got[0]) == [1.0, 0.0, 0.0, 0.0] and list(got[1]) == [1.0, 1.0, 1.0, 5.0]
