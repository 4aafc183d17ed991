"""Running HiGHS on a cvxpy problem through highspy's public API.

cvxpy compiles the problem (``Problem.get_problem_data``); this module hands the matrices to
``highspy.Highs`` itself, so that a warm start goes in through ``Highs.setSolution`` and the
solver's progress comes out through its callbacks: every improving solution and every limit
check of the branch and bound adds a point to the solve's trace
(:data:`~tmsim.planners.milp.solver.outcome.TracePoint`: seconds since the run began, primal
bound, dual bound), from which the time to any gap can be read after one run. The solution
is written back into the problem's variables (:mod:`tmsim.planners.milp.solver.compiled`
makes the model and moves values between the two). The settings of the solve's phases are
:mod:`tmsim.planners.milp.solver.phases`'.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import cvxpy as cp
import numpy as np
from cvxpy import settings as cps

from tmsim.planners.milp.solver.compiled import (
    FloatArray,
    column_vector,
    compile_problem,
    objective_shift,
    write_values,
)
from tmsim.planners.milp.solver.feasibility import first_point
from tmsim.planners.milp.solver.first_lp import Prepared, first_relaxation
from tmsim.planners.milp.solver.instance import (
    lost_its_point,
    run_model,
    solution_value,
)
from tmsim.planners.milp.solver.neighbourhood import fixed_bounds, search
from tmsim.planners.milp.solver.outcome import (
    CUT_OFF,
    HELD,
    LpBasis,
    Outcome,
    TracePoint,
    status_of,
)
from tmsim.planners.milp.solver.phases import (
    AFTER_NEIGHBOURHOODS,
    NEAR_GAPS,
    RINS_GAP_SHARE,
    RINS_ROUNDS,
)
from tmsim.planners.milp.solver.vertex import vertex_near

#: Relative slack (of ``1 + |held|``) by which ``held`` may lie below the LP's bound and
#: still be taken for a point of the problem: the interior point's bound tolerance
#: (:data:`~tmsim.planners.milp.solver.presolved.INTERIOR_BOUND_TOL`) ten times over.
HELD_TOL = 1e-6


def run_highs(
    problem: cp.Problem,
    options: Mapping[str, Any],
    verbose: bool,
    start: Mapping[cp.Variable, FloatArray] | None = None,
    lp_iterations: int | None = None,
    lp_basis: LpBasis | None = None,
    known_bound: float | None = None,
    lp_from_zero: bool = False,
    lp_presolve: bool = False,
    reached: float | None = None,
    cutoff: float | None = None,
    lp_interior: bool = False,
    prepared: Prepared | None = None,
    held: float | None = None,
) -> Outcome:
    """Solve the linear (mixed-integer) ``problem`` with HiGHS and write its solution into
    the problem's variables (left unset without one).

    ``options`` are HiGHS option names and values (``mip_max_nodes`` is read back to tell a
    node limit from other stops, ``mip_rel_gap`` is the gap every phase below aims at,
    ``time_limit`` covers them all); ``start`` maps variables to values of a feasible point,
    handed to HiGHS as its first incumbent (variables it does not name start at 0).

    With ``lp_iterations``, a mixed-integer problem of at most
    :data:`~tmsim.planners.milp.solver.phases.LP_FIRST_MAX_COLUMNS` columns is solved in up to
    four phases (a larger one goes to phase 4 at once):

    1. its LP relaxation, within that many simplex iterations (where it needs more, or an
       interior point run ends imprecise, the solve goes on to phase 4 at once); the LP's
       optimum is a bound every later phase keeps. With ``lp_presolve``, a problem of
       :data:`~tmsim.planners.milp.solver.phases.PRESOLVE_MIN_COLUMNS` columns or more
       offered no basis goes through HiGHS's MIP presolve first, and the bound is then
       the reduced problem's LP optimum, a bound on the mixed-integer optimum often above
       the LP's (:mod:`~tmsim.planners.milp.solver.presolved`). With ``lp_interior`` and no
       basis offered, the LP goes by interior point without crossover, and the point phases
       2 and 3 fix columns by is a vertex near it, once there is an incumbent
       (:mod:`~tmsim.planners.milp.solver.vertex`; before one, the interior point, which RENS
       may use; RINS runs only around a vertex);
    2. the MIP restricted to the binaries the LP leaves fractional, the rest fixed as the LP
       has them (RENS, Berthold, Math. Prog. Comp. 2014), where at most
       :data:`~tmsim.planners.milp.solver.neighbourhood.RENS_MAX_FREE` of them are fractional;
    3. with a ``start`` (or, without one, where RENS found no point, the first point of the
       MIP without its objective: :mod:`~tmsim.planners.milp.solver.feasibility`, which also proves
       a MIP with none infeasible): the MIP restricted to the binaries the LP leaves
       fractional or sets unlike the start (the rest fixed as both have them: RINS, Danna,
       Rothberg and Le Pape, Math. Prog. 2005), from the start, which is a point of it, so
       its optimum is no worse; again around each better point it finds, up to
       :data:`RINS_ROUNDS` times;
    4. with the best point of phases 2 and 3 still not within the gap of the bound: the
       whole MIP from that point, in what is left of the time limit (from a point of a
       sub-MIP of phase 2 or 3 that ran within :data:`NEAR_GAPS` gaps of the LP's bound,
       without HiGHS's own RENS, RINS and restart: :data:`AFTER_NEIGHBOURHOODS`).

    A phase whose point is within the gap of the LP's bound ends the solve (``optimal``); a
    sub-MIP of phase 2 or 3 is interrupted as soon as it has such a point.
    ``lp_basis`` (an earlier outcome's) starts phase 1 where its key is this problem's, and
    is ignored otherwise; without one, ``lp_from_zero`` starts phase 1 at the zero point
    (:func:`~tmsim.planners.milp.solver.instance.run_model`). ``known_bound``: a bound on the
    optimum the caller has proven (in the problem's own sense: that of a larger problem whose
    points include this one's, such as a layout round's first), kept beside the LP's: phases
    1-3 end the solve at a point within the gap of it (or, where the LP's bound proves there
    is none, of the LP's bound); phase 4 ends at a point within the gap of its own bound.
    ``reached``: the objective of a point the caller holds outside the problem (a plan of a
    smaller problem whose points are all the problem's, e.g. of a layout round under lowered
    limits): the solve then aims at a bound within the gap of it rather than of its own
    points: phases 2 and 3 are left out, and phase 4 from ``start`` runs with HiGHS's gap 0 and
    :data:`AFTER_NEIGHBOURHOODS` (points are not what it is for) until its bound is within
    the gap of ``reached``, its optimum, a limit, or a point of its own below that bound,
    which the bound cannot pass (status ``interrupted``).
    ``cutoff``: the objective of a point the caller holds outside the problem (one of no
    point of it): the solve stops with status
    :data:`~tmsim.planners.milp.solver.outcome.CUT_OFF` once its bound (the LP's, or the branch
    and bound's) proves no point of the problem better, unless it has one as good.
    ``prepared``: ``problem`` compiled and its phase 1 solved ahead with these arguments and
    no basis (:mod:`~tmsim.planners.milp.solver.first_lp`), which the solve takes instead of
    compiling and solving them again. ``held``: the objective of a point of the problem the
    caller holds but cannot hand over as ``start`` (a plan of a smaller problem whose points
    are all this one's, in other variables): where phase 1 leaves no own point within the gap
    and its bound proves ``held`` within the gap of the optimum, the solve stops there with
    status :data:`~tmsim.planners.milp.solver.outcome.HELD` and that bound (a ``held`` more
    than :data:`HELD_TOL` below the bound, which no point of the problem can have, is
    ignored). ``prepared`` and ``held`` are for a first solve: with ``prepared`` the
    arguments that shape phase 1 (``lp_basis``, ``lp_presolve``, ``lp_from_zero``,
    ``lp_interior``) are those it was solved with, and the time it took is not counted in
    ``options``' time limit.
    Raises :class:`TmsimError` for an option HiGHS refuses or a problem that is not linear.
    """
    import highspy

    compiled = prepared.compiled if prepared is not None else compile_problem(highspy, problem)
    data, columns, lp = compiled.data, compiled.columns, compiled.lp
    mip = bool(data[cps.BOOL_IDX] or data[cps.INT_IDX])
    cost = np.asarray(data[cps.C], dtype=np.float64)
    best = None if start is None else column_vector(start, columns, lp.num_col_)
    gap = float(options.get("mip_rel_gap", 0.0))
    # HiGHS minimises c x; the problem's objective is sign * c x + shift
    sign = -1.0 if isinstance(problem.objective, cp.Maximize) else 1.0
    lp_bound, iterations, spent_s = -math.inf, 0, 0.0
    shift = objective_shift(data, sign)
    if known_bound is not None and shift is not None and math.isfinite(known_bound):
        lp_bound = sign * (known_bound - shift)  # a bound of c x, as HiGHS minimises it
    known = lp_bound
    basis: LpBasis | None = None

    def done(x: FloatArray, bound: float) -> Outcome:
        objective, shift = write_values(problem, columns, x, data, sign)
        return Outcome(
            cp.OPTIMAL, True, objective, sign * bound + shift, 0, iterations, lp_basis=basis
        )

    # the point whose gap ends the solve: ``reached`` (as c x) where given, else each own point;
    # with ``reached``, the bound aimed at
    target = None if reached is None or shift is None else sign * (reached - shift)
    aim = None if target is None else target - gap * abs(target)
    if target is not None:
        options = {**options, "mip_rel_gap": 0.0}
    # ``cutoff`` as c x
    beaten = math.inf if cutoff is None or shift is None else sign * (cutoff - shift)

    def goal(own: float) -> float:
        # the bound a point is to be within the gap of: the caller's, until the problem's own
        # bound ``own`` proves no point within the gap of it
        return known if own - known <= gap * abs(own) + 1e-12 else own

    def within_gaps(value: float, gaps: float) -> bool:
        # whether ``value`` lies within ``gaps`` times the gap of the LP's bound
        return value - lp_bound <= gaps * gap * abs(value) + 1e-12

    def within(x: FloatArray | None) -> bool:
        value = target if target is not None else None if x is None else float(cost @ x)
        return value is not None and value - goal(lp_bound) <= gap * abs(value) + 1e-12

    def near(x: FloatArray) -> bool:
        return within_gaps(float(cost @ x), NEAR_GAPS)

    if prepared is not None:
        relaxed = prepared.relaxed  # solved ahead: its seconds were spent before this call
    else:
        relaxed = first_relaxation(
            highspy,
            compiled,
            options,
            verbose,
            lp_iterations,
            lp_basis,
            lp_from_zero,
            lp_presolve,
            lp_interior,
        )
        spent_s += 0.0 if relaxed is None else relaxed.seconds
    if relaxed is not None:
        iterations += relaxed.iterations
        # an interior point run HiGHS finds imprecise ends ``kUnknown``: no bound, as a limit
        unfinished = ("kIterationLimit", "kUnknown") if lp_interior else ("kIterationLimit",)
        if relaxed.status != "kOptimal" and relaxed.status not in unfinished:
            return Outcome(status_of(relaxed.status, 0, None), solved=False, iterations=iterations)
    if relaxed is not None and relaxed.status == "kOptimal":
        lp_bound = max(lp_bound, relaxed.objective)
        basis = None if relaxed.basis is None else LpBasis(compiled.key, relaxed.basis)
        if lp_bound >= beaten and (best is None or float(cost @ best) > beaten):
            bound = sign * lp_bound + (shift or 0.0)
            return Outcome(CUT_OFF, False, bound=bound, iterations=iterations, lp_basis=basis)
        if best is not None and within(best):
            return done(best, lp_bound)
        kept = None if held is None or shift is None else sign * (held - shift)
        # a held value below the LP's bound is no point of this problem: it is ignored
        sane = kept is not None and kept >= lp_bound - HELD_TOL * (1.0 + abs(kept))
        if kept is not None and sane and kept - goal(lp_bound) <= gap * abs(kept) + 1e-12:
            bound = sign * lp_bound + (shift or 0.0)
            return Outcome(HELD, False, bound=bound, iterations=iterations, lp_basis=basis)
    x_lp = None if relaxed is None else relaxed.point
    booleans = np.asarray(data[cps.BOOL_IDX], dtype=np.int64)
    # an interior point's vertex is sought once there is an incumbent to fix columns by
    interior = x_lp is not None and relaxed is not None and relaxed.interior

    def to_vertex(point: FloatArray, incumbent: FloatArray) -> tuple[FloatArray, bool]:
        # the vertex near ``point``, or ``point`` where none was found, and whether it is still
        # the interior point
        nonlocal iterations, spent_s
        found, work = vertex_near(
            highspy,
            lp,
            compiled.matrix,
            point,
            incumbent,
            booleans,
            options,
            verbose,
            spent_s,
            lp_iterations,
        )
        iterations, spent_s = iterations + work[0], spent_s + work[1]
        return (point, True) if found is None else (found, False)

    if interior and best is not None and target is None:
        assert x_lp is not None
        x_lp, interior = to_vertex(x_lp, best)
    searched = False  # whether a RENS or RINS sub-MIP ran (not one whose neighbourhood is empty)
    first = False  # whether the best point comes from a point found without the objective
    if x_lp is not None and target is None:
        sub_options = {**options, "mip_rel_gap": gap * RINS_GAP_SHARE}
        # a sub-MIP's point within the gap of the LP's bound ends the whole solve, so the
        # sub-MIP need not prove its own smaller gap first: it stops at such a point
        enough = goal(lp_bound) / (1.0 - gap) if goal(lp_bound) > 0 else goal(lp_bound)
        bounds = lp.col_lower_, lp.col_upper_
        # RENS: the MIP over the binaries the LP leaves fractional, the rest fixed as the LP has
        # them; it needs no start
        rens = None
        fixed = fixed_bounds(x_lp, None, booleans, bounds)
        if fixed is not None:
            rens, work = search(
                highspy, lp, compiled.matrix, fixed, sub_options, verbose, None, spent_s, enough
            )
            searched = searched or work[1] > 0
            iterations, spent_s = iterations + work[0], spent_s + work[1]
            if within(rens):
                assert rens is not None
                return done(rens, lp_bound)
        if best is None and rens is None:
            # no start and no point near the LP's: a first point, of the MIP without its
            # objective (:mod:`~tmsim.planners.milp.solver.feasibility`), for RINS to start from
            best, none, work = first_point(highspy, lp, options, verbose, spent_s)
            iterations, spent_s = iterations + work[0], spent_s + work[1]
            if none:
                return Outcome(cp.INFEASIBLE, solved=False, iterations=iterations)
            first = True
        if interior and best is not None:
            x_lp, interior = to_vertex(x_lp, best)
        assert x_lp is not None
        # RINS around the start (around RENS's point it would be RENS's neighbourhood again);
        # not around an interior point, where almost every binary is free (vertex doc)
        for _ in range(RINS_ROUNDS if best is not None and not interior else 0):
            assert best is not None
            fixed = fixed_bounds(x_lp, best, booleans, bounds)
            assert fixed is not None  # RINS always has a neighbourhood
            found, work = search(
                highspy, lp, compiled.matrix, fixed, sub_options, verbose, best, spent_s, enough
            )
            searched = searched or work[1] > 0
            iterations, spent_s = iterations + work[0], spent_s + work[1]
            if found is None or not float(cost @ found) < float(cost @ best) - 1e-12:
                break  # the same neighbourhood again: nothing more to find there
            best = found
            if within(best):
                return done(best, lp_bound)
        if rens is not None and (best is None or float(cost @ rens) < float(cost @ best)):
            best = rens
    trace: list[TracePoint] = []
    # the branch and bound's regular limit checks, where a solve may be interrupted
    checks = int(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)

    def record(event: Any) -> None:
        out = event.data_out
        dual = max(float(out.mip_dual_bound), lp_bound)
        primal = float(out.mip_primal_bound)
        point = (spent_s + float(out.running_time), primal, dual)
        if not trace or trace[-1][1:] != point[1:]:
            trace.append(point)
        if target is None:
            # within the gap of a bound HiGHS does not know (the LP's or the caller's); before
            # its first incumbent HiGHS may report a primal bound below every bound
            held = math.isfinite(primal) and dual <= primal
            enough = held and primal - dual <= gap * abs(primal)
        else:
            # the bound aimed at; or a point below it (by more than rounding), which no bound
            # passes
            assert aim is not None
            enough = dual >= aim or primal < aim - 1e-9 * abs(aim)
        if int(event.callback_type) == checks and (enough or dual >= beaten):
            event.data_in.user_interrupt = True

    if best is not None and (target is not None or (searched and not first and near(best))):
        # from RENS's or RINS's point near the LP's bound, or after a bound alone:
        # AFTER_NEIGHBOURHOODS (a point found without the objective, or one far from the
        # bound, leaves HiGHS's own searches their use)
        options = {**AFTER_NEIGHBOURHOODS, **options}
    highs = run_model(highspy, lp, options, verbose, best, spent_s=spent_s, record=record)
    if best is not None and lost_its_point(highs, cost):
        # a better point found and lost: the whole MIP again without the start, whose
        # solution is kept where it is better than the first run's (or the first run's is)
        iterations += max(int(highs.getInfo().simplex_iteration_count), 0)
        spent_s += float(highs.getRunTime())
        kept, kept_trace = highs, list(trace)
        trace.clear()  # the progress of the run whose point is kept
        highs = run_model(highspy, lp, options, verbose, None, spent_s=spent_s, record=record)
        if solution_value(highs, cost) > solution_value(kept, cost):
            # counted above: the first run's iterations, counted below again as ``highs``'s
            ran = max(int(highs.getInfo().simplex_iteration_count), 0)
            iterations += ran - max(int(kept.getInfo().simplex_iteration_count), 0)
            highs, trace[:] = kept, kept_trace
    info = highs.getInfo()
    nodes = max(int(info.mip_node_count), 0)
    iterations += max(int(info.simplex_iteration_count), 0)
    status = status_of(highs.getModelStatus().name, nodes, options.get("mip_max_nodes"))
    objective, shift = math.nan, 0.0
    solved = int(info.primal_solution_status) == 2  # kSolutionStatusFeasible
    dual = max(float(info.mip_dual_bound), lp_bound)
    reached_aim = aim is None or dual >= aim
    if status == "interrupted" and dual >= beaten and not solution_value(highs, cost) <= beaten:
        status = CUT_OFF
    elif status == "interrupted" and solved and reached_aim:
        status = cp.OPTIMAL  # the gap of the bound above interrupted it, not a point below
    if solved:
        objective, shift = write_values(
            problem, columns, np.asarray(highs.getSolution().col_value), data, sign
        )
    dual = sign * dual + shift
    bound = dual if math.isfinite(dual) and mip else math.nan
    if status == cp.OPTIMAL and math.isnan(bound):
        bound = objective  # an LP, or a MIP solved at presolve: the optimum is the bound
    points = tuple((t, sign * p + shift, sign * d + shift) for t, p, d in trace)
    return Outcome(status, solved, objective, bound, nodes, iterations, points, basis)
