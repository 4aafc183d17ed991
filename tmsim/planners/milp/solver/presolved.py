"""The LP relaxation of a mixed-integer problem after HiGHS's MIP presolve, mapped back.

HiGHS's presolve of a mixed-integer problem keeps its optimum (an optimal point of the
original maps onto the reduced problem and back) but not its LP relaxation: it fixes
dominated columns and tightens what integrality allows, so the reduced problem's LP optimum
is a bound on the mixed-integer optimum that can lie above the original LP's. It is the
bound HiGHS's own branch and bound starts from. Measured on Optane at 4:1 (window 15; LP
optimum of the original / of the reduced problem, seconds for the original LP / for presolve
and the reduced LP): ResNet-200 b512 sync 41.0702 / 41.3146 (the bound HiGHS's branch and
bound ended that solve with), 3.5 / 1.6 + 0.8 s; DenseNet-264 b512 sync 33.8372 / 33.9893,
5.3 / 2.1 + 1.4 s; ResNet-200 b512 async 40.4977 / 40.7339, 14.8 / 7.2 + 6.7 s; Inception v4
b1024 sync at 8:1 52.7863 / 52.8408, 0.55 / 0.55 + 0.32 s.

The reduced LP's point, mapped back by HiGHS's postsolve and clipped to the column bounds, is what
the sub-MIPs after it fix their columns by (:mod:`~tmsim.planners.milp.solver.neighbourhood`: the
binaries it leaves at 0 or 1). It need not satisfy the original rows: postsolve undoes reductions
that hold at integer points only (a knapsack of eight binaries came back with one at 1.83 before
clipping)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: HiGHS's presolve statuses and the model status each stands for here.
_PRESOLVE_STATUS = {
    "kInfeasible": "kInfeasible",
    "kUnboundedOrInfeasible": "kUnboundedOrInfeasible",
    "kTimeout": "kTimeLimit",
}


#: Least share of ``1 + |optimum|`` an interior point run's bound lies below its objective
#: (:func:`lp_optimum`): HiGHS's default dual feasibility and optimality tolerance.
INTERIOR_BOUND_TOL = 1e-7


@dataclass(frozen=True)
class Relaxed:
    """An LP relaxation solved: ``status`` (a HiGHS model status name, ``kOptimal`` when
    ``objective`` holds its optimum, in HiGHS's sense: the costs times the original columns),
    ``point``: values of the original columns, within their bounds, where known (None
    without; after presolve not necessarily a point of the original LP, module doc), ``basis``: an
    optimal basis of the original problem's LP where one was solved (None after presolve:
    the reduced problem's basis does not carry over), and the simplex ``iterations`` and
    ``seconds`` it took. ``interior``: ``point`` is an interior point method's, without
    crossover (not a vertex; no basis), and ``objective`` its optimum less the run's
    primal-dual objective error (:func:`lp_optimum`)."""

    status: str
    objective: float = math.nan
    point: FloatArray | None = field(default=None, repr=False)
    basis: Any = field(default=None, repr=False)
    iterations: int = 0
    seconds: float = 0.0
    interior: bool = False


def presolved_relaxation(
    highspy: Any,
    lp: Any,
    configured: Callable[[], Any],
    solve_lp: Callable[[Any, float], Any],
) -> Relaxed | None:
    """The LP relaxation of mixed-integer model ``lp`` after HiGHS's MIP presolve (module
    doc), or None where presolve does not reduce it. ``configured()`` gives a ``Highs`` with
    the solve's options set; ``solve_lp(reduced, seconds)`` solves the reduced model's LP
    relaxation (``seconds`` already spent) and returns the ``Highs`` that ran it.

    A reduced problem HiGHS finds infeasible (or runs out of time on) gives that status and
    no point; a reduced LP not solved to its optimum gives its status; a point postsolve
    cannot map back leaves ``point`` None beside a valid ``objective``."""
    highs = configured()
    highs.passModel(lp)
    began = time.perf_counter()
    highs.presolve()
    seconds = time.perf_counter() - began
    status = highs.getModelPresolveStatus().name
    if status in _PRESOLVE_STATUS:
        return Relaxed(_PRESOLVE_STATUS[status], seconds=seconds)
    if status not in ("kReduced", "kReducedToEmpty"):
        return None
    reduced = highs.getPresolvedLp()
    reduced.integrality_ = []
    if reduced.num_col_ == 0:
        solution = highspy.HighsSolution()
        solution.row_value = [0.0] * reduced.num_row_
        solution.value_valid = True
        objective, iterations, interior = float(reduced.offset_), 0, False
    else:
        relaxed = solve_lp(reduced, seconds)
        name = relaxed.getModelStatus().name
        iterations = max(int(relaxed.getInfo().simplex_iteration_count), 0)
        seconds += float(relaxed.getRunTime())
        if name != "kOptimal":
            return Relaxed(name, iterations=iterations, seconds=seconds)
        solution = relaxed.getSolution()
        objective, interior = lp_optimum(relaxed)
    began = time.perf_counter()
    highs.postsolve(solution)
    seconds += time.perf_counter() - began
    back = highs.getSolution()
    values = np.asarray(back.col_value, dtype=np.float64)
    point = None
    if back.value_valid and values.size == lp.num_col_:
        point = np.clip(values, np.asarray(lp.col_lower_), np.asarray(lp.col_upper_))
    return Relaxed("kOptimal", objective, point, None, iterations, seconds, interior)


def relaxation_of(highs: Any) -> Relaxed:
    """What a ``Highs`` instance that ran an LP relaxation of the original model found (its
    point, and its basis where it has one, where it reached the optimum)."""
    name = highs.getModelStatus().name
    optimal = name == "kOptimal"
    objective, interior = lp_optimum(highs) if optimal else (math.nan, False)
    return Relaxed(
        name,
        objective,
        np.asarray(highs.getSolution().col_value, dtype=np.float64) if optimal else None,
        highs.getBasis() if optimal and not interior else None,
        max(int(highs.getInfo().simplex_iteration_count), 0),
        float(highs.getRunTime()),
        interior,
    )


def lp_optimum(highs: Any) -> tuple[float, bool]:
    """The optimum a ``Highs`` instance that solved an LP reports, as a bound, and whether it
    ended without a basis (an interior point method's run without crossover). That run's
    primal and dual objectives differ by up to its tolerances (2.2e-6 of the optimum on
    LLaMA-7B b1's asynchronous model on the GH200): its bound is the smaller, the optimum
    less HiGHS's relative primal-dual objective error ``e`` (``|p - d| / (1 + |p| + |d|)``)
    times ``(1 + 2 |p|) / (1 - e)``, which is at least ``|p - d|``, and no less than
    :data:`INTERIOR_BOUND_TOL` times ``1 + |p|`` (the error HiGHS reports can be smaller than
    the gap between the objective and the dual objective of its own duals: 1.8e-10 against
    2.1e-9 on a one-row LP); ``-inf`` (no bound) where the run reports no error below 1. A
    vertex's bound is the optimum."""
    info = highs.getInfo()
    value = float(info.objective_function_value)
    if int(info.basis_validity) == 1:  # kBasisValidityValid
        return value, False
    error = max(float(info.primal_dual_objective_error), 0.0)
    if not error < 1.0:  # unknown (HiGHS's infinity) or meaningless
        return -math.inf, True
    by_error = error * (1.0 + 2.0 * abs(value)) / (1.0 - error)
    return value - max(by_error, INTERIOR_BOUND_TOL * (1.0 + abs(value))), True


__all__ = ["INTERIOR_BOUND_TOL", "Relaxed", "lp_optimum", "presolved_relaxation", "relaxation_of"]
