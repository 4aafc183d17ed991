"""cvxpy's compiled form of a linear problem as a HiGHS model, and values between the two.

cvxpy compiles the problem (``Problem.get_problem_data``) into ``A x (=, <=) b`` with costs
``c``; :func:`compile_problem` makes the ``highspy.HighsLp`` of it, :func:`column_vector` the
column vector of values given per variable, and :func:`write_values` stores a column vector
back in the problem's variables.

Three pieces of cvxpy used here are not its documented API: the column each variable was
given (``ParamConeProg.var_id_to_col``), the constant of the objective (the last entry of
``ParamConeProg.q``) and ``Leaf.save_value``, which stores a solver's values as cvxpy's own
solve does (the public setter rejects values of an empty boolean variable in cvxpy 1.9);
:func:`check_cvxpy_version` guards them by the releases they were tested with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import cvxpy as cp
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from cvxpy import settings as cps

from tmsim.errors import TmsimError
from tmsim.planners.milp.solver.lp_arrays import LpData

#: The cvxpy releases (major, minor) whose problem data (``var_id_to_col``) has been tested.
CVXPY_TESTED = ((1, 9), (1, 9))

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Compiled:
    """A problem compiled for HiGHS: cvxpy's ``data``, the first column of each variable
    (by variable id: ``columns``), the HiGHS model ``lp`` and its constraint ``matrix`` (by
    columns), and its ``key``: a digest of the matrix's shape and pattern and of the costs,
    under which an LP basis of it is kept (values left out: a layout round scales its
    capacity rows anew); ``arrays``: its LP (integrality left out) as the arrays ``lp`` was
    built from."""

    data: dict[str, Any] = field(repr=False)
    columns: Mapping[int, int] = field(repr=False)
    lp: Any = field(repr=False)
    key: str
    matrix: sp.csc_matrix = field(repr=False)
    arrays: LpData = field(repr=False)


def check_cvxpy_version(found: str | None = None) -> None:
    """Raise :class:`TmsimError` unless the installed cvxpy (or version ``found``) is a
    release in :data:`CVXPY_TESTED`; the message says how to go on."""
    from importlib.metadata import version

    text = found or version("cvxpy")
    parts = [int(p) for p in text.split(".")[:2] if p.isdigit()]
    low, high = CVXPY_TESTED
    if len(parts) < 2 or not low <= (parts[0], parts[1]) <= high:
        tested = f"{low[0]}.{low[1]}" + ("" if low == high else f" to {high[0]}.{high[1]}")
        raise TmsimError(
            f"the HiGHS path reads cvxpy's problem data, tested with cvxpy {tested}.x, not "
            f"{text}: install the tested versions (pip install -c constraints.txt) or plan "
            "with another solver"
        )


def compile_problem(highspy: Any, problem: cp.Problem) -> Compiled:
    """``problem`` compiled by cvxpy for HiGHS, as a HiGHS model. Raises
    :class:`TmsimError` for a problem that is not linear, or an untested cvxpy."""
    check_cvxpy_version()
    try:
        data, _, _ = problem.get_problem_data(cp.HIGHS)
    except cp.error.SolverError as exc:
        raise TmsimError(f"HiGHS solves linear problems only: {exc}") from None
    dims = data[cps.DIMS]
    if dims.exp or dims.soc or dims.psd or dims.p3d:
        raise TmsimError("HiGHS solves linear problems only")
    a = data[cps.A].tocsc()
    arrays = _arrays(data, a, dims.zero, dims.nonneg, highspy.kHighsInf)
    lp = _lp(highspy, data, arrays)
    return Compiled(data, data[cps.PARAM_PROB].var_id_to_col, lp, _key(a, data[cps.C]), a, arrays)


def objective_shift(data: Mapping[str, Any], sign: float) -> float | None:
    """The constant the problem's objective adds to ``sign * c x`` (``sign``: -1 for a
    maximisation, whose compiled costs and constant cvxpy negates), read from the compiled
    problem, or None for a problem with parameters (whose constant depends on their
    values)."""
    prob = data[cps.PARAM_PROB]
    if prob.parameters:
        return None
    q = prob.q
    last = q[-1] if not sp.issparse(q) else q.tocsr()[-1]
    value = float(last.toarray().ravel()[0]) if sp.issparse(last) else float(np.ravel(last)[0])
    return sign * value


def _key(a: sp.csc_matrix, cost: FloatArray) -> str:
    """The key of a problem with matrix ``a`` and costs ``cost`` (:attr:`Compiled.key`)."""
    digest = hashlib.sha256()
    for part in (np.asarray(a.shape), a.indptr, a.indices, cost):
        digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


def column_vector(
    values: Mapping[cp.Variable, FloatArray], columns: Mapping[int, int], n: int
) -> FloatArray:
    """The column vector of ``values`` (columns of variables not named: 0)."""
    out = np.zeros(n)
    for var, value in values.items():
        if var.id in columns:  # cvxpy drops a variable the problem does not use
            out[columns[var.id] : columns[var.id] + var.size] = np.ravel(value, "F")
    return out


def write_values(
    problem: cp.Problem,
    columns: Mapping[int, int],
    x: FloatArray,
    data: Mapping[str, Any],
    sign: float,
) -> tuple[float, float]:
    """Store column vector ``x`` in ``problem``'s variables; return the problem's objective
    there and its shift from ``sign * c x`` (the constant term)."""
    for var in problem.variables():
        value = np.zeros(var.shape)  # empty, or unused by the problem: cvxpy dropped it
        if var.id in columns:
            first = columns[var.id]
            value = np.reshape(x[first : first + var.size], var.shape, "F")
        var.save_value(value)  # as cvxpy stores a solver's values: no rounding
    objective = float(problem.objective.value)
    return objective, objective - sign * float(np.dot(data[cps.C], x))


def _arrays(
    data: Mapping[str, Any], a: sp.csc_matrix, equalities: int, inequalities: int, inf: float
) -> LpData:
    """The LP of cvxpy's ``data`` (``a``: its matrix, by columns): ``A x = b`` on its first
    ``equalities`` rows, ``A x <= b`` on the next ``inequalities``; boolean columns bounded to
    [0, 1]."""
    n = a.shape[1]
    b = np.asarray(data[cps.B], dtype=np.float64)
    low, high = data[cps.LOWER_BOUNDS], data[cps.UPPER_BOUNDS]
    col_lower = np.full(n, -inf) if low is None else np.array(low, dtype=np.float64)
    col_upper = np.full(n, inf) if high is None else np.array(high, dtype=np.float64)
    booleans = np.asarray(data[cps.BOOL_IDX], dtype=np.int64)
    col_lower[booleans] = np.maximum(col_lower[booleans], 0.0)
    col_upper[booleans] = np.minimum(col_upper[booleans], 1.0)
    return LpData(
        np.asarray(data[cps.C], dtype=np.float64),
        col_lower,
        col_upper,
        np.concatenate([b[:equalities], np.full(inequalities, -inf)]),
        b,
        a.indptr,
        a.indices,
        a.data,
    )


def _lp(highspy: Any, data: Mapping[str, Any], arrays: LpData) -> Any:
    """The HiGHS model of ``arrays``, its boolean and integer columns (cvxpy's ``data``)
    integral."""
    lp = arrays.model(highspy)
    booleans = np.asarray(data[cps.BOOL_IDX], dtype=np.int64)
    integers = np.concatenate([booleans, np.asarray(data[cps.INT_IDX], dtype=np.int64)])
    if integers.size:
        kinds = [highspy.HighsVarType.kContinuous] * arrays.cost.size
        for i in integers.tolist():
            kinds[i] = highspy.HighsVarType.kInteger
        lp.integrality_ = kinds
    return lp
