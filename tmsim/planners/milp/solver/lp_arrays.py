"""A linear program as plain arrays, and the HiGHS model made from them.

:func:`~tmsim.planners.milp.solver.compiled.compile_problem` reads cvxpy's problem data into
:class:`LpData` and builds its HiGHS model from it; the process that solves an LP ahead
(:mod:`~tmsim.planners.milp.solver.remote`) is sent the same arrays and builds the same model
(this module imports numpy alone, so that process loads neither cvxpy nor the planner).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LpData:
    """An LP (integrality left out): costs, column and row bounds, the constraint matrix by
    columns (``start``, ``index``, ``value``) and the objective's constant ``offset``."""

    cost: FloatArray
    col_lower: FloatArray
    col_upper: FloatArray
    row_lower: FloatArray
    row_upper: FloatArray
    start: IntArray
    index: IntArray
    value: FloatArray
    offset: float = 0.0

    def model(self, highspy: Any) -> Any:
        """The ``highspy.HighsLp`` of these arrays (every column continuous)."""
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.cost.size, self.row_lower.size
        lp.offset_ = self.offset
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = self.cost, self.col_lower, self.col_upper
        lp.row_lower_, lp.row_upper_ = self.row_lower, self.row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = self.start
        lp.a_matrix_.index_ = self.index
        lp.a_matrix_.value_ = self.value
        return lp


__all__ = ["LpData"]
