"""A first point of a MIP where there is no start and its LP's neighbourhood held none.

:func:`~tmsim.planners.milp.solver.driver.run_highs` starts its large-neighbourhood search from a
start or from RENS's point. Where it has neither, HiGHS's branch and bound must find a first
point itself while it also works on the objective, and may find none: the ``remat`` model of
DenseNet-264 b512 on Optane at 0.4 of its peak (recomputation alone, depth 2) had no point
after 58 s. The same MIP with no objective stops at its first point, which HiGHS's heuristics
found there after the root's cuts, in 10 s; RINS around that point and the branch and bound
after it then ended within 1% of the bound in 10 s more (26.15 s a step, where the
checkpoint heuristic the chain fell back to takes 33.44 s). A MIP with no point at all is
proven so just as the whole MIP would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tmsim.planners.milp.solver.compiled import FloatArray
from tmsim.planners.milp.solver.instance import run_model


def first_point(
    highspy: Any, lp: Any, options: Mapping[str, Any], verbose: bool, spent_s: float
) -> tuple[FloatArray | None, bool, tuple[int, float]]:
    """A point of MIP ``lp`` (None where HiGHS finds none within ``options``' limits, its
    time limit less ``spent_s``), whether HiGHS proved it has none, and the (simplex
    iterations, seconds) that cost. ``lp`` is solved with every cost 0 and is left as it
    was."""
    costs = np.array(lp.col_cost_, dtype=np.float64)  # a copy: the model's may be a view
    lp.col_cost_ = np.zeros(lp.num_col_)
    try:
        highs = run_model(highspy, lp, options, verbose, None, spent_s=spent_s)
    finally:
        lp.col_cost_ = costs
    info = highs.getInfo()
    work = (max(int(info.simplex_iteration_count), 0), float(highs.getRunTime()))
    infeasible = highs.getModelStatus() == highspy.HighsModelStatus.kInfeasible
    if int(info.primal_solution_status) != 2:  # kSolutionStatusFeasible
        return None, infeasible, work
    return np.asarray(highs.getSolution().col_value), False, work


__all__ = ["first_point"]
