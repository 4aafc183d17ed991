"""A vertex of an LP relaxation near its interior-point optimum, for the sub-MIPs that fix
columns by an LP point (:mod:`~tmsim.planners.milp.solver.neighbourhood`).

An interior point method without crossover ends in the relative interior of the optimal face:
where that face is large (a degenerate LP), most binaries are fractional there and a RENS or
RINS neighbourhood of the point is almost the whole MIP. Crossover finds a vertex of the face,
but pushes each of those columns to a bound in turn. :func:`vertex_near` instead fixes the
binaries the interior point leaves within :data:`VERTEX_TOL` of the value an incumbent gives
them and solves the LP of what is left by dual simplex: the fixed columns sit at their bounds,
so the restricted LP's optimal vertex, widened, is a vertex of the whole LP, and its
objective lies near the LP's optimum where the incumbent agrees with most of the face.

Measured on LLaMA-7B b1's asynchronous model on the GH200 (window 15, 180k columns, two
cores): interior point without crossover 22 s (dual simplex from the zero point in parallel:
271 s; crossover had not ended at 300 s), 52% of the binaries fractional beyond 1e-6 and a
RINS neighbourhood of the chain's start leaving 90k of 175k free (the sub-MIP found nothing
better than the start in 60 s); with this vertex (:data:`VERTEX_TOL` 0.1: 32k columns left,
1.9 s, objective 0.26780 s against the LP's 0.26773 s), RINS left 12.6k free and found a plan
0.59% above the LP's bound in 2.0 s. Fixing at 1e-3 left 70k columns, whose LP took 113 s.

Once the step time also held the host memory's floor (a suffix of many small copy terms,
:mod:`~tmsim.planners.milp.formulation.host_memory`), 0.1 fixed too much: on the H100
(h100-host-nvme) the vertex's LP ended at 0.37642 s against the LP's 0.36474 s (each binary
rounded to the start's value adds its share of the floor), and the sub-MIPs around it found
0.37643 s, 3.1% above the bound at the 60 s cap. At 0.02 the vertex lay at the LP's optimum
on both platforms, and RENS around it found plans within the gap at once: H100 0.36717 s
(49.5 s into the chain), GH200 0.27200 s against 0.26991 s (54.7 s; both measured before the
refreshes were charged to the tiers an eviction keeps alone). The bench's rows since: H100
async 0.3650 s at 0.08% in 37 s, GH200 0.2709 s at 0.37% in 41 s (``bench/README.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tmsim.planners.milp.solver.compiled import FloatArray
from tmsim.planners.milp.solver.instance import run_model
from tmsim.planners.milp.solver.neighbourhood import IntArray, fixed_bounds, restrict

#: How far from the incumbent's 0 or 1 an interior point's binary may be and still be fixed
#: there for the vertex's LP (module doc).
VERTEX_TOL = 0.02


def vertex_near(
    highspy: Any,
    lp: Any,
    matrix: Any,
    interior: FloatArray,
    start: FloatArray,
    booleans: IntArray,
    options: Mapping[str, Any],
    verbose: bool,
    spent_s: float,
    lp_iterations: int | None = None,
) -> tuple[FloatArray | None, tuple[int, float]]:
    """A vertex of the LP relaxation of ``lp`` (constraint ``matrix``, boolean columns
    ``booleans``) with every boolean fixed where the interior point ``interior`` lies within
    :data:`VERTEX_TOL` of the value the feasible point ``start`` gives it, and the (simplex
    iterations, seconds) it cost; None where that LP does not solve to its optimum (a limit in
    ``options`` or of ``lp_iterations`` simplex iterations, or, for a ``start`` off its
    binaries by more than HiGHS's tolerances, rows its rounded values break). Its objective
    is no lower than the LP's optimum and no higher than ``start``'s, a point of the
    restricted LP."""
    fixed = fixed_bounds(interior, start, booleans, (lp.col_lower_, lp.col_upper_), tol=VERTEX_TOL)
    assert fixed is not None  # a neighbourhood of a start is never refused
    restricted = restrict(highspy, lp, matrix, *fixed)
    if restricted is None:
        return None, (0, 0.0)
    if restricted.free.size == 0:  # every column fixed at a bound: a vertex already
        return restricted.fixed_x, (0, 0.0)
    highs = run_model(
        highspy,
        restricted.lp,
        options,
        verbose,
        None,
        relax=True,
        spent_s=spent_s,
        lp_iterations=lp_iterations,
    )
    work = (max(int(highs.getInfo().simplex_iteration_count), 0), float(highs.getRunTime()))
    if highs.getModelStatus().name != "kOptimal":
        return None, work
    values = highs.getSolution().col_value
    return restricted.widen(np.asarray(values, dtype=np.float64)), work


__all__ = ["VERTEX_TOL", "vertex_near"]
