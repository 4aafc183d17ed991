"""A HiGHS run whose reported objective and solution disagree: a better point reported and
lost is looked for again without the start, and a solution at least as good as reported is
kept (HiGHS 1.16 showed both: a knapsack that reported -36 and held its start's -35, and
DenseNet-264 b512's remat model at 0.4 of its peak that reported 26.145022 and held its start's
26.144914, where running it again lost the plan to the time limit)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import cvxpy as cp
import numpy as np
import pytest

import tmsim.planners.milp.solver.driver as highs_module
from tmsim.planners.milp.solver.driver import run_highs
from tmsim.planners.milp.solver.instance import lost_its_point, run_model, solution_value


class _Shown:
    """A finished HiGHS run as another run would show it: ``objective`` reported, ``x``
    held (None: no feasible solution)."""

    def __init__(self, highs: Any, objective: float, x: np.ndarray | None) -> None:
        self.highs, self.objective, self.x = highs, objective, x

    def getInfo(self) -> Any:
        info = self.highs.getInfo()
        fields = (
            "mip_node_count",
            "simplex_iteration_count",
            "mip_dual_bound",
        )
        shown = {name: getattr(info, name) for name in fields}
        shown["objective_function_value"] = self.objective
        shown["primal_solution_status"] = 0 if self.x is None else 2
        return SimpleNamespace(**shown)

    def getSolution(self) -> Any:
        return SimpleNamespace(col_value=[] if self.x is None else list(self.x))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.highs, name)


def _losing(reported: float, again_finds: bool, calls: list[bool]) -> Any:
    """A stand-in for ``run_model`` whose run from a start reports ``reported`` (as HiGHS's
    c x; the knapsacks here have no constant) and holds the start, and whose run without one
    is HiGHS's own where ``again_finds``, else shows no solution; ``calls`` records whether
    each run had a start."""

    def run(
        highspy: Any, lp: Any, options: Any, verbose: bool, start: Any, *a: Any, **kw: Any
    ) -> Any:
        calls.append(start is not None)
        highs = run_model(highspy, lp, options, verbose, start, *a, **kw)
        if start is not None:
            return _Shown(highs, reported, np.asarray(start))
        return highs if again_finds else _Shown(highs, reported, None)

    return run


def _knapsack() -> tuple[cp.Problem, cp.Variable, float]:
    """A knapsack of 30 items as a minimum, and its optimum."""
    rng = np.random.default_rng(5)
    weights = rng.integers(10, 60, 30)
    values = weights + rng.integers(0, 9, 30)
    x = cp.Variable(30, boolean=True)
    problem = cp.Problem(cp.Minimize(-(values @ x)), [weights @ x <= int(0.4 * weights.sum())])
    exact = run_highs(problem, {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0}, False)
    return problem, x, exact.objective


@pytest.mark.parametrize(
    ("reported", "held", "lost"),
    [
        (-36.0, -35.0, True),  # the knapsack's: a better point reported than held
        (26.145022, 26.144914, False),  # remat's: the solution better than reported
        (26.145008, 26.145022, False),  # within a millionth: tolerances
        (10.0, 10.0, False),
    ],
)
def test_a_point_is_lost_only_where_the_report_beats_the_solution(
    reported: float, held: float, lost: bool
) -> None:
    highs = SimpleNamespace(
        getInfo=lambda: SimpleNamespace(
            primal_solution_status=2, objective_function_value=reported
        ),
        getSolution=lambda: SimpleNamespace(col_value=[held]),
    )
    assert lost_its_point(highs, np.array([1.0])) is lost
    assert solution_value(highs, np.array([1.0])) == held
    none = SimpleNamespace(
        getInfo=lambda: SimpleNamespace(primal_solution_status=0, objective_function_value=-1.0)
    )
    assert not lost_its_point(none, np.array([1.0]))
    assert solution_value(none, np.array([1.0])) == np.inf


@pytest.mark.parametrize("again_finds", [True, False])
def test_a_lost_point_is_looked_for_again_and_the_first_solution_kept_if_it_is_better(
    monkeypatch: pytest.MonkeyPatch, again_finds: bool
) -> None:
    """The run from the start reports the optimum and holds the start (the empty knapsack);
    the run again without it finds the optimum (kept) or nothing (the start kept)."""
    problem, x, best = _knapsack()
    calls: list[bool] = []
    monkeypatch.setattr(highs_module, "run_model", _losing(best, again_finds, calls))
    options = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0}
    outcome = run_highs(problem, options, False, {x: np.zeros(30)})
    assert calls == [True, False]
    assert outcome.solved
    if again_finds:
        assert outcome.objective == pytest.approx(best, abs=1e-9)
        assert float(problem.objective.value) == pytest.approx(best, abs=1e-9)
    else:
        assert outcome.objective == pytest.approx(0.0, abs=1e-9)  # the start, as held
        assert np.allclose(x.value, 0.0)


@pytest.mark.parametrize("again_finds", [True, False])
def test_a_sub_mip_that_lost_its_point_is_run_again_without_the_start(
    monkeypatch: pytest.MonkeyPatch, again_finds: bool
) -> None:
    """RINS's sub-MIP (here every column free) from the empty knapsack reports the optimum
    and holds the start: it runs again without the start, whose point is kept where it is
    better (the optimum), else the start's."""
    import highspy

    import tmsim.planners.milp.solver.neighbourhood as neighbourhood_module
    from tmsim.planners.milp.solver.compiled import compile_problem
    from tmsim.planners.milp.solver.neighbourhood import search

    problem, _, best = _knapsack()
    compiled = compile_problem(highspy, problem)
    lp = compiled.lp
    calls: list[bool] = []
    monkeypatch.setattr(neighbourhood_module, "run_model", _losing(best, again_finds, calls))
    bounds = (np.asarray(lp.col_lower_), np.asarray(lp.col_upper_))
    options = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0}
    start = np.zeros(lp.num_col_)
    found, work = search(highspy, lp, compiled.matrix, bounds, options, False, start, 0.0)
    assert calls == [True, False] and work[1] > 0
    assert found is not None
    cost = np.asarray(lp.col_cost_)
    assert float(cost @ found) == pytest.approx(best if again_finds else 0.0, abs=1e-9)
