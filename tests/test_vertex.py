"""The LP by interior point without crossover: its bound (never above the LP's optimum), the
vertex near it that the sub-MIPs fix columns by (a basic point of the LP, between the LP's
optimum and the incumbent's objective), and whole solves that take this path giving the
exhaustive search's optima."""

from __future__ import annotations

from unittest import mock

import highspy
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import check_against_search, check_path_to_optimum
from tiny_graphs import MB, tiny_graphs, tiny_step

from tmsim.planners.milp.solver.instance import run_model
from tmsim.planners.milp.solver.presolved import lp_optimum, relaxation_of
from tmsim.planners.milp.solver.vertex import vertex_near
from tmsim.workload.graph import Graph


def covering(
    costs: list[int], sets: list[list[int]], copies: int
) -> tuple[highspy.HighsLp, sp.csc_matrix]:
    """The MIP: cover every element of ``sets`` (column ``j`` covers the elements whose set
    lists it) at least cost ``costs``, each column repeated ``copies`` times (equal columns:
    a degenerate LP, whose optimal face an interior point crosses), as a HiGHS model."""
    n = len(costs) * copies
    rows, cols = [], []
    for r, members in enumerate(sets):
        for j in members:
            for k in range(copies):
                rows.append(r)
                cols.append(j * copies + k)
    matrix = sp.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(sets), n))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, len(sets)
    lp.col_cost_ = np.repeat(np.asarray(costs, dtype=np.float64), copies)
    lp.col_lower_, lp.col_upper_ = np.zeros(n), np.ones(n)
    lp.row_lower_, lp.row_upper_ = np.ones(len(sets)), np.full(len(sets), highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = matrix.indptr
    lp.a_matrix_.index_ = matrix.indices
    lp.a_matrix_.value_ = matrix.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    return lp, matrix


def relaxed(lp: highspy.HighsLp, interior: bool) -> highspy.Highs:
    """A HiGHS run on ``lp``'s LP relaxation: by interior point without crossover (without
    presolve, which would merge the equal columns and leave a vertex), or dual simplex."""
    options = {"presolve": "off"} if interior else {}
    return run_model(highspy, lp, options, False, None, relax=True, interior=interior)


problems = st.integers(2, 6).flatmap(
    lambda m: st.tuples(
        st.lists(st.integers(1, 5), min_size=m, max_size=m),
        st.lists(
            st.lists(st.integers(0, m - 1), min_size=1, max_size=m, unique=True),
            min_size=1,
            max_size=6,
        ),
        st.integers(1, 3),
    )
)


@settings(max_examples=60, deadline=None)
@given(problems)
def test_the_vertex_is_a_basic_point_between_the_lp_optimum_and_the_start(
    problem: tuple[list[int], list[list[int]], int],
) -> None:
    costs, sets, copies = problem
    lp, matrix = covering(costs, sets, copies)
    exact = relaxation_of(relaxed(lp, interior=False))
    inner = relaxation_of(relaxed(lp, interior=True))
    assert exact.status == inner.status == "kOptimal"
    assert not exact.interior and exact.basis is not None
    assert inner.interior and inner.basis is None and inner.point is not None
    # a bound: never above the LP's optimum, and within its tolerances of it
    assert inner.objective <= exact.objective + 1e-9
    assert inner.objective == pytest.approx(exact.objective, rel=1e-5, abs=1e-7)
    start = np.ones(lp.num_col_)  # every column taken: a cover
    booleans = np.arange(lp.num_col_, dtype=np.int64)
    point, _ = vertex_near(highspy, lp, matrix, inner.point, start, booleans, {}, False, 0.0)
    assert point is not None
    cost = np.asarray(lp.col_cost_)
    # a point of the LP, no better than its optimum and no worse than the start
    assert np.all(matrix @ point >= 1 - 1e-7)
    assert np.all(point >= -1e-9) and np.all(point <= 1 + 1e-9)
    assert exact.objective - 1e-7 <= float(cost @ point) <= float(cost @ start) + 1e-9
    # basic: no more columns off their bounds than the LP has rows
    inside = np.sum((point > 1e-7) & (point < 1 - 1e-7))
    assert inside <= lp.num_row_


def test_an_interior_run_reports_a_bound_below_its_objective() -> None:
    lp, _ = covering([1, 1, 1], [[0, 1], [1, 2], [0, 2]], 2)
    inner = relaxed(lp, interior=True)
    value, interior = lp_optimum(inner)
    assert interior
    assert value <= float(inner.getInfo().objective_function_value)
    assert value <= 1.5  # never above the optimum
    exact = relaxed(lp, interior=False)
    assert lp_optimum(exact) == (float(exact.getInfo().objective_function_value), False)
    assert value == pytest.approx(
        1.5, rel=1e-6
    )  # three pairs, an odd cycle: each column half taken


@settings(max_examples=25, deadline=None)
@given(tiny_graphs, st.floats(0.2, 1.2), st.sampled_from(["sync", "async"]))
def test_solves_by_interior_point_give_the_exhaustive_searchs_optimum(
    graph: Graph, share: float, formulation: str
) -> None:
    with mock.patch("tmsim.planners.milp.chain.solve.lp_by_interior_point", return_value=True):
        check_against_search(graph, "cascadelake-optane", share, formulation)


def test_a_step_where_moving_pays_takes_the_interior_path_to_the_optimum() -> None:
    spy = mock.Mock(wraps=vertex_near)
    interior = mock.patch("tmsim.planners.milp.chain.solve.lp_by_interior_point", return_value=True)
    vertex = mock.patch("tmsim.planners.milp.solver.driver.vertex_near", spy)
    check_path_to_optimum(tiny_step(), "async", 60 * MB, spy, [interior, vertex])
