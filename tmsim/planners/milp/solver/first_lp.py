"""The LP first: phase 1 of :func:`~tmsim.planners.milp.solver.driver.run_highs`, the LP
relaxation of a mixed-integer problem, which every later phase keeps as its bound and fixes
columns by.

Where it starts from nothing the caller holds (no basis: from the zero point, by interior
point, or after presolve) it depends on the problem and the solve's settings alone (its time
limit, ``lp_iterations``), so a caller may solve it *ahead*,
beside other work, and hand it in (:class:`Prepared`): the solve then goes on from phase 2
exactly as if it had solved phase 1 itself
(:mod:`tmsim.planners.milp.chain.ahead` does so for the asynchronous formulations while the
formulations they contain are solved).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cvxpy import settings as cps

from tmsim.planners.milp.solver.compiled import Compiled
from tmsim.planners.milp.solver.instance import configured, run_model
from tmsim.planners.milp.solver.outcome import LpBasis
from tmsim.planners.milp.solver.phases import LP_FIRST_MAX_COLUMNS, PRESOLVE_MIN_COLUMNS
from tmsim.planners.milp.solver.presolved import Relaxed, presolved_relaxation, relaxation_of


@dataclass(frozen=True)
class Prepared:
    """A problem compiled for HiGHS (``compiled``) and its LP first as
    :func:`first_relaxation` solved it (``relaxed``: None where the problem has no phase 1),
    with no basis offered."""

    compiled: Compiled
    relaxed: Relaxed | None = field(repr=False)


def has_first_lp(compiled: Compiled, lp_iterations: int | None) -> bool:
    """Whether the solve of ``compiled`` starts with its LP relaxation (phase 1): a
    mixed-integer problem of at most :data:`LP_FIRST_MAX_COLUMNS` columns, with
    ``lp_iterations``."""
    data = compiled.data
    mip = bool(data[cps.BOOL_IDX] or data[cps.INT_IDX])
    return lp_iterations is not None and mip and compiled.lp.num_col_ <= LP_FIRST_MAX_COLUMNS


def first_relaxation(
    highspy: Any,
    compiled: Compiled,
    options: Mapping[str, Any],
    verbose: bool,
    lp_iterations: int | None,
    lp_basis: LpBasis | None = None,
    lp_from_zero: bool = False,
    lp_presolve: bool = False,
    lp_interior: bool = False,
    spent_s: float = 0.0,
) -> Relaxed | None:
    """Phase 1 of :func:`~tmsim.planners.milp.solver.driver.run_highs` on ``compiled`` with
    that function's arguments of the same names (``options``: HiGHS's, its time limit less
    ``spent_s``), or None where the problem has none (:func:`has_first_lp`)."""
    if not has_first_lp(compiled, lp_iterations):
        return None
    lp = compiled.lp
    offered = lp_basis.basis if lp_basis is not None and lp_basis.key == compiled.key else None

    def relax(model: Any, used: float, start_basis: Any = None) -> Any:
        return run_model(
            highspy,
            model,
            options,
            verbose,
            None,
            True,
            spent_s=spent_s + used,
            lp_iterations=lp_iterations,
            basis=start_basis,
            from_zero=lp_from_zero,
            interior=lp_interior,
        )

    relaxed = None
    if offered is None and lp_presolve and lp.num_col_ >= PRESOLVE_MIN_COLUMNS:
        relaxed = presolved_relaxation(
            highspy, lp, lambda: configured(highspy, options, verbose, spent_s), relax
        )
    return relaxed if relaxed is not None else relaxation_of(relax(lp, 0.0, offered))


__all__ = ["Prepared", "first_relaxation", "has_first_lp"]
