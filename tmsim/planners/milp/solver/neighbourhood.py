"""Neighbourhoods of a MIP for large-neighbourhood search: which booleans to fix, and the
smaller MIP over the columns left free.

RENS (Berthold, Math. Prog. Comp. 2014) fixes the booleans an LP point sets integrally; RINS
(Danna, Rothberg and Le Pape, Math. Prog. 2005) fixes those where the LP point and an incumbent
agree. :func:`fixed_bounds` gives the column bounds of either. :func:`restrict` then takes the
fixed columns out of the model before HiGHS sees it: their share of each row's activity moves
into the row's bounds, and rows left without a free column are dropped once checked. HiGHS's
presolve would remove them too, but spends most of a neighbourhood's time doing it (a RINS
neighbourhood of Inception v4 b1024's synchronous model at 8:1 on Optane, 8,133 of 39,572
columns free: presolve 1.40 s of the sub-MIP's 1.41 s). :func:`search` runs HiGHS on what is
left.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.planners.milp.solver.instance import lost_its_point, run_model, solution_value

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Most share of the booleans a RENS neighbourhood may leave free (Berthold, "RENS", Math.
#: Prog. Comp. 2014, finds it pays where at most about half are fractional).
RENS_MAX_FREE = 0.5
#: How far from 0 or 1 an LP value may be and still count as integral when fixing.
INTEGRAL_TOL = 1e-6
#: How far a dropped row's fixed activity may lie outside its bounds (relative to the larger
#: of 1 and the bound) and still count as satisfied, as HiGHS's primal feasibility tolerance.
ROW_TOL = 1e-7


def fixed_bounds(
    x_lp: FloatArray,
    start: FloatArray | None,
    booleans: IntArray,
    bounds: tuple[FloatArray, FloatArray],
    tol: float = INTEGRAL_TOL,
) -> tuple[FloatArray, FloatArray] | None:
    """Column bounds ``bounds`` with every boolean column (indices ``booleans``) fixed where
    the LP point ``x_lp`` is integral (within ``tol``) and, with a ``start``, agrees with it
    (RINS's neighbourhood of ``start``; without one, RENS's neighbourhood of the LP point).
    None for a RENS neighbourhood that leaves more than :data:`RENS_MAX_FREE` of the booleans
    free: almost the whole MIP."""
    lower = np.array(bounds[0], dtype=np.float64)
    upper = np.array(bounds[1], dtype=np.float64)
    value = np.round(x_lp[booleans])
    agree = np.abs(x_lp[booleans] - value) <= tol
    if start is not None:
        agree &= value == np.round(start[booleans])
    elif booleans.size and (~agree).mean() > RENS_MAX_FREE:
        return None
    lower[booleans[agree]] = value[agree]
    upper[booleans[agree]] = value[agree]
    return lower, upper


@dataclass(frozen=True)
class Restricted:
    """A MIP with some columns fixed, as a smaller HiGHS model ``lp`` over the free columns
    ``free`` (indices into the whole model's columns); ``fixed_x`` is the whole column vector
    with the fixed values in place (0 at the free columns). ``lp``'s objective includes the
    fixed columns' cost (its offset), so objectives of the two models compare directly."""

    lp: Any
    free: IntArray
    fixed_x: FloatArray

    def widen(self, x_free: FloatArray) -> FloatArray:
        """The whole model's column vector of a point ``x_free`` of the smaller model."""
        out = self.fixed_x.copy()
        out[self.free] = x_free
        return out


def restrict(
    highspy: Any,
    lp: Any,
    matrix: sp.csc_matrix,
    lower: FloatArray,
    upper: FloatArray,
) -> Restricted | None:
    """``lp`` (whose constraint matrix is ``matrix``) with its column bounds replaced by
    ``lower`` and ``upper`` and the columns they fix (``lower == upper``) taken out, or None
    when the fixed columns alone violate a row that no free column enters (the neighbourhood
    then holds no point)."""
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    free = np.flatnonzero(lower < upper).astype(np.int64)
    fixed_x = np.where(lower < upper, 0.0, lower)
    activity = matrix @ fixed_x
    row_lower = np.asarray(lp.row_lower_, dtype=np.float64) - activity
    row_upper = np.asarray(lp.row_upper_, dtype=np.float64) - activity
    sub_matrix = matrix[:, free].tocsr()
    alive = np.diff(sub_matrix.indptr) > 0
    slack = ROW_TOL * np.maximum(1.0, np.maximum(np.abs(row_lower), np.abs(row_upper)))
    slack = np.where(np.isfinite(slack), slack, ROW_TOL)
    if np.any(~alive & ((row_lower > slack) | (row_upper < -slack))):
        return None
    sub_matrix = sub_matrix[alive].tocsc()
    cost = np.asarray(lp.col_cost_, dtype=np.float64)
    sub = highspy.HighsLp()
    sub.num_col_, sub.num_row_ = int(free.size), int(alive.sum())
    sub.offset_ = float(lp.offset_) + float(cost @ fixed_x)
    sub.col_cost_ = cost[free]
    sub.col_lower_, sub.col_upper_ = lower[free], upper[free]
    sub.row_lower_, sub.row_upper_ = row_lower[alive], row_upper[alive]
    sub.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    sub.a_matrix_.start_ = sub_matrix.indptr
    sub.a_matrix_.index_ = sub_matrix.indices
    sub.a_matrix_.value_ = sub_matrix.data
    kinds = list(lp.integrality_)
    if kinds:
        sub.integrality_ = [kinds[i] for i in free.tolist()]
    return Restricted(sub, free, fixed_x)


def search(
    highspy: Any,
    lp: Any,
    matrix: Any,
    fixed: tuple[FloatArray, FloatArray],
    options: Mapping[str, Any],
    verbose: bool,
    start: FloatArray | None,
    spent_s: float,
    enough: float = -math.inf,
) -> tuple[FloatArray | None, tuple[int, float]]:
    """The best point HiGHS finds in ``lp`` (constraint ``matrix``) with its column bounds
    set to ``fixed`` (from ``start`` if given; None if it finds none), and the (simplex
    iterations, seconds) that cost; HiGHS is interrupted at a point of objective ``enough``
    or less (HiGHS's, which it minimises). The fixed columns are taken out first
    (:func:`~tmsim.planners.milp.solver.neighbourhood.restrict`)."""
    restricted = restrict(highspy, lp, matrix, *fixed)
    if restricted is None:
        return None, (0, 0.0)
    checks = int(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)

    def stop_at_enough(event: Any) -> None:
        if int(event.callback_type) == checks and event.data_out.mip_primal_bound <= enough:
            event.data_in.user_interrupt = True

    sub_start = None if start is None else start[restricted.free]
    sub = run_model(
        highspy, restricted.lp, options, verbose, sub_start, spent_s=spent_s, record=stop_at_enough
    )
    work = (max(int(sub.getInfo().simplex_iteration_count), 0), float(sub.getRunTime()))
    cost, offset = np.asarray(restricted.lp.col_cost_, dtype=np.float64), restricted.lp.offset_
    if sub_start is not None and lost_its_point(sub, cost, offset):
        # HiGHS 1.16 scored a better point in its presolved space and returned the start
        # (DenseNet-264 b512's static-rc at 0.4 of its peak on Optane: 26.1013 reported, the
        # start's 26.1450 held; 26.1217 found without the start): again without it
        again = run_model(
            highspy, restricted.lp, options, verbose, None, spent_s=spent_s, record=stop_at_enough
        )
        more = (max(int(again.getInfo().simplex_iteration_count), 0), float(again.getRunTime()))
        work = (work[0] + more[0], work[1] + more[1])
        if solution_value(again, cost) < solution_value(sub, cost):
            sub = again
    if int(sub.getInfo().primal_solution_status) != 2:  # kSolutionStatusFeasible
        return None, work
    return restricted.widen(np.asarray(sub.getSolution().col_value)), work


__all__ = ["INTEGRAL_TOL", "RENS_MAX_FREE", "Restricted", "fixed_bounds", "restrict", "search"]
