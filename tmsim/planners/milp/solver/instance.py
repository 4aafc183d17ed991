"""One run of HiGHS on a model: an instance with the solve's options, the model, a start or
a basis, the progress callbacks (:mod:`tmsim.planners.milp.solver.driver` runs its phases on it)."""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from tmsim.errors import TmsimError

FloatArray = npt.NDArray[np.float64]

#: Held while the process's standard output points at the null device (:func:`new_highs`):
#: two threads that each saved and restored it without it could leave it pointing there.
_STDOUT_SWAP = threading.Lock()


def new_highs(highspy: Any, verbose: bool) -> Any:
    """A fresh ``highspy.Highs`` with its log on stdout only when ``verbose``. HiGHS prints
    its banner from C++ as the first instance is made, before any option can turn it off, so
    without ``verbose`` the process's standard output is pointed at the null device while the
    instance is made (output a caller prints, such as ``--json``, stays clean), one thread at
    a time (what another thread writes to it in that instant is lost)."""
    if verbose:
        highs = highspy.Highs()
    else:
        with _STDOUT_SWAP:
            sys.stdout.flush()
            saved = os.dup(1)
            try:
                with open(os.devnull, "w", encoding="utf-8") as null:
                    os.dup2(null.fileno(), 1)
                    highs = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
    highs.setOptionValue("output_flag", bool(verbose))
    return highs


#: Smallest MIP (columns) whose branch-and-bound root LP HiGHS solves by interior point: its
#: dual simplex did not end the root of the asynchronous model of ResNet-200 b64 on the RTX
#: 2080 Ti (window 15, 235k columns) within 170 s.
IPM_MIN_COLUMNS = 100_000
#: HiGHS's ``dual_simplex_cost_perturbation_multiplier`` for an LP from the zero point (the
#: asynchronous formulations' phase 1; HiGHS's default 1), unless the caller sets it: the
#: larger perturbation of the costs takes dual simplex through fewer iterations to
#: the same optimum. Measured on the bench's asynchronous LPs (window 15, written out and
#: solved alone, seconds and iterations at 1 / 5 / 25): on the RTX 2080 Ti ResNet-200 b128
#: 22.4 s, 50.9k / 10.8 s / 9.1 s, 44.3k; b64 11.0 / 5.3 / 4.8 s; DenseNet-264 b64 10.0 / 9.8 /
#: 10.0 s and b128 16.9 / 14.6 / 15.7 s; Inception v4 b128 and b256 1.5 / 0.9 / 1.0 s and 2.6 /
#: 2.0 / 1.8 s; on Optane ResNet-200 b512 at 1:1 and 4:1 6.9 / 5.3 / 3.8 s and 8.3 / 5.8 /
#: 4.6 s, DenseNet-264 b512 at 4:1 and 8:1 9.8 / 7.6 / 6.9 s and 10.4 / 9.9 / 9.0 s,
#: Inception v4 b1024 at 8:1 3.6 / 2.2 / 1.9 s and b16 at 4:1 2.7 / 2.4 / 2.7 s; fewer
#: iterations on every one (4-18% at 25). 50 and 100 gave no more (ResNet-200 b128 8.9 / 9.8 s).
ZERO_POINT_PERTURBATION = 25.0
#: Smallest LP from the zero point (columns) that HiGHS's dual simplex solves in parallel
#: (PAMI: ``parallel`` on, ``simplex_strategy`` 3) unless the caller sets ``parallel``. Measured
#: on two cores, the LP written out and solved alone (serial / PAMI, seconds and iterations):
#: LLaMA-7B b1's asynchronous model on h100-host-nvme (171k columns) 58.3 s, 39.6k / 24.3-28.4 s,
#: 32.2k (the same optimum and iterations in three runs); ResNet-200 b128 on the RTX 2080 Ti
#: (235k) 10.4 / 8.2 s; ResNet-200 b512 at 4:1 on Optane (216k) 5.0 / 5.2 s. SIP (strategy 2)
#: took 42.6 s on LLaMA-7B.
PARALLEL_LP_MIN_COLUMNS = 100_000


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
    interior: bool = False,
) -> Any:
    """A HiGHS instance that has run on model ``lp`` with ``options`` (its time limit less
    ``spent_s``), from ``start`` (column values) or ``basis`` (a ``HighsBasis``); ``relax``:
    without integrality, by dual simplex within ``lp_iterations`` iterations, and with
    ``from_zero`` and no ``basis`` from the basis HiGHS forms at the zero point (see
    :func:`~tmsim.planners.milp.chain.solve.starts_lp_at_zero`), its costs perturbed by
    :data:`ZERO_POINT_PERTURBATION` where ``options`` do not say, in parallel from
    :data:`PARALLEL_LP_MIN_COLUMNS` columns; with ``interior`` and no ``basis``, by interior
    point without crossover instead (an optimal point that need not be a vertex, and no
    basis: :mod:`~tmsim.planners.milp.solver.vertex`); ``record``: a callback of every
    improving solution and limit check."""
    highs = configured(highspy, options, verbose, spent_s)
    if relax:
        integrality = lp.integrality_
        lp.integrality_ = []
        highs.passModel(lp)
        lp.integrality_ = integrality
        if lp_iterations is not None:
            highs.setOptionValue("simplex_iteration_limit", int(lp_iterations))
        if basis is None and interior:
            highs.setOptionValue("solver", "ipx")
            highs.setOptionValue("run_crossover", "off")
        elif basis is None and from_zero:
            # HiGHS makes the columns that zero leaves off their bounds (the free ones)
            # basic and every other column nonbasic at 0: with no negative cost that basis is
            # dual feasible, so dual simplex skips its phase 1 (and HiGHS its presolve)
            zero = highspy.HighsSolution()
            zero.col_value = [0.0] * lp.num_col_
            zero.value_valid = True
            highs.setSolution(zero)
            if "dual_simplex_cost_perturbation_multiplier" not in options:
                highs.setOptionValue(
                    "dual_simplex_cost_perturbation_multiplier", ZERO_POINT_PERTURBATION
                )
            if lp.num_col_ >= PARALLEL_LP_MIN_COLUMNS and "parallel" not in options:
                highs.setOptionValue("parallel", "on")
                highs.setOptionValue("simplex_strategy", 3)
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


__all__ = [
    "IPM_MIN_COLUMNS",
    "ZERO_POINT_PERTURBATION",
    "configured",
    "lost_its_point",
    "new_highs",
    "run_model",
    "solution_value",
]
