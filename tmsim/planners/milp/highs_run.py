"""One run of HiGHS on a model: an instance with the solve's options, the model, a start or
a basis, the progress callbacks (:mod:`tmsim.planners.milp.highs` runs its phases on it)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tmsim.errors import TmsimError
from tmsim.planners.milp.highs_model import FloatArray, new_highs

#: Smallest MIP (columns) whose branch-and-bound root LP HiGHS solves by interior point: its
#: dual simplex did not end the root of the asynchronous model of ResNet-200 b64 on the RTX
#: 2080 Ti (window 15, 235k columns) within 170 s.
IPM_MIN_COLUMNS = 100_000


def configured(highspy: Any, options: Mapping[str, Any], verbose: bool, spent_s: float) -> Any:
    """A fresh HiGHS instance with ``options`` set (its time limit less ``spent_s``); raises
    :class:`TmsimError` for an option HiGHS refuses."""
    highs = new_highs(highspy, verbose)
    for name, value in options.items():
        if highs.setOptionValue(name, value) == highspy.HighsStatus.kError:
            raise TmsimError(f"HiGHS refused option {name} = {value!r}")
    if "time_limit" in options:
        highs.setOptionValue("time_limit", max(float(options["time_limit"]) - spent_s, 1e-3))
    return highs


def run_model(
    highspy: Any,
    lp: Any,
    options: Mapping[str, Any],
    verbose: bool,
    start: FloatArray | None,
    relax: bool = False,
    spent_s: float = 0.0,
    record: Any = None,
    lp_iterations: int | None = None,
    basis: Any = None,
    from_zero: bool = False,
) -> Any:
    """A HiGHS instance that has run on model ``lp`` with ``options`` (its time limit less
    ``spent_s``), from ``start`` (column values) or ``basis`` (a ``HighsBasis``); ``relax``:
    without integrality, by dual simplex within ``lp_iterations`` iterations, and with
    ``from_zero`` and no ``basis`` from the basis HiGHS forms at the zero point (see
    :func:`~tmsim.planners.milp.solve.starts_lp_at_zero`); ``record``: a callback of every
    improving solution and limit check."""
    highs = configured(highspy, options, verbose, spent_s)
    if relax:
        integrality = lp.integrality_
        lp.integrality_ = []
        highs.passModel(lp)
        lp.integrality_ = integrality
        if lp_iterations is not None:
            highs.setOptionValue("simplex_iteration_limit", int(lp_iterations))
        if basis is None and from_zero:
            # HiGHS makes the columns that zero leaves off their bounds (the free ones)
            # basic and every other column nonbasic at 0: with no negative cost that basis is
            # dual feasible, so dual simplex skips its phase 1 (and HiGHS its presolve)
            zero = highspy.HighsSolution()
            zero.col_value = [0.0] * lp.num_col_
            zero.value_valid = True
            highs.setSolution(zero)
    else:
        highs.passModel(lp)
        if lp.num_col_ >= IPM_MIN_COLUMNS:
            # the root LP of a large MIP by interior point: HiGHS's dual simplex did not end
            # it within 170 s on the asynchronous model of ResNet-200 b64 on the RTX 2080 Ti
            highs.setOptionValue("mip_lp_solver", "ipm")
    if basis is not None:
        highs.setBasis(basis)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        highs.setSolution(solution)
    if record is not None:
        highs.cbMipImprovingSolution.subscribe(record)
        highs.cbMipInterrupt.subscribe(record)
    highs.run()
    return highs


def solution_value(highs: Any, cost: FloatArray, offset: float = 0.0) -> float:
    """The objective ``cost @ x + offset`` of the solution a HiGHS run ended with (``cost``
    and ``offset``: its model's); ``inf`` without a feasible one."""
    if int(highs.getInfo().primal_solution_status) != 2:  # kSolutionStatusFeasible
        return math.inf
    return float(cost @ np.asarray(highs.getSolution().col_value)) + offset


def lost_its_point(highs: Any, cost: FloatArray, offset: float = 0.0) -> bool:
    """Whether a HiGHS run reports a better objective (HiGHS minimises) than the solution it
    ended with has: it found a point and kept another (HiGHS 1.16: a knapsack of nine items
    ended with objective -36 and its start, of -35, as its solution). A solution better than
    the objective reported is not a loss: DenseNet-264 b512's remat model at 0.4 of its peak
    ended with its start (26.144914) and reported 26.145022. Differences within a millionth
    are HiGHS's tolerances (static-rc's model there: 26.145008 reported, 26.145022 held)."""
    value = solution_value(highs, cost, offset)
    if not math.isfinite(value):
        return False
    reported = float(highs.getInfo().objective_function_value)
    return reported < value - 1e-6 * max(1.0, abs(value))


__all__ = ["IPM_MIN_COLUMNS", "configured", "lost_its_point", "run_model", "solution_value"]
