"""Measured kernel times in the placement MILP: AutoTM's one-hot form over a kernel's
placements, kept to the placements a profile measured (:mod:`tmsim.profiles`).

The rows of :func:`~tmsim.planners.milp.formulation.kernel_rows.time_rows` bound kernel ``k``'s cost
``c_k`` by linear functions of where its operands are: the roofline. A profile gives kernel ``k`` a
time ``t_c`` at some placements ``c`` (tier ``c_j`` for operand ``j``, ``m`` operands), which no
linear function need match. Each such placement (on tiers kernels reach) gets a variable ``z_{k,c}``
with

- ``z_{k,c} <= a_j(x)`` for every operand ``j``, and ``z_{k,c} >= sum_j a_j(x) - (m - 1)``,
  ``0 <= z_{k,c} <= 1``, where ``a_j(x)`` is 1 when operand ``j`` is accessed on tier ``c_j``
  (the access expressions of :class:`~tmsim.planners.milp.formulation.network.Segments`), so that at
  every binary ``x``, ``z_{k,c}`` is 1 exactly when the operands sit on ``c`` (at most one
  placement of a kernel at a time) and 0 otherwise;
- every time row ``r`` of kernel ``k`` gains ``sum_c z_{k,c} (t_c - r(c))``, ``r(c)`` its
  value at placement ``c`` (a constant,
  :func:`~tmsim.planners.milp.formulation.kernel_rows.time_row_values`).

Under a measured placement every time row of the kernel then equals ``t_c``, so ``c_k >= t_c`` (and
the copies beside it, as ever); under any other the roofline holds. The binaries fix ``z``, so it is
a continuous variable: a profile adds no integer variable, and without one (or where kernels reach a
single tier, whose one placement :func:`~tmsim.planners.milp.formulation.kernel_rows.time_rows`
times as the cost model does) the problem is unchanged."""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.heuristics.placement import kernel_tiers
from tmsim.planners.milp.formulation.kernel_rows import time_row_values

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MeasuredTerms:
    """The one-hot variables of the measured placements and what they add (see the module
    documentation). Per variable [n_z]: ``kernel``, ``seconds`` (its measured time),
    ``arity`` (the kernel's operand count). ``picks`` [n_pairs, n]: ``a_j(x)`` of each pair
    of a variable and an operand; ``owner`` [n_z, n_pairs]: 1 where the pair is the
    variable's; ``shifts``: per time row, [n_kernels, n_z], what each variable adds to it."""

    kernel: IntArray
    seconds: FloatArray
    arity: FloatArray
    picks: sp.csr_matrix
    owner: sp.csr_matrix
    shifts: tuple[sp.csr_matrix, ...]

    @property
    def count(self) -> int:
        """The number of variables ``z``."""
        return int(self.kernel.size)

    @property
    def pairs(self) -> int:
        """The number of (variable, operand) pairs: one upper-bound row each."""
        return int(self.picks.shape[0])

    def values(self, x: npt.ArrayLike) -> FloatArray:
        """``z`` at binaries ``x``: 1 where every operand of the placement sits there."""
        on = self.owner @ (self.picks @ np.asarray(x, dtype=np.float64))
        return np.asarray(np.clip(on - (self.arity - 1.0), 0.0, 1.0), dtype=np.float64)

    def constraints(self, x: cp.Variable, z: cp.Variable) -> list[cp.Constraint]:
        """The rows that tie ``z`` to the binaries ``x``."""
        together = sp.csr_matrix(self.owner @ self.picks)
        return [
            self.owner.T @ z <= self.picks @ x,
            z >= together @ x - (self.arity - 1.0),
            z >= 0,
            z <= 1,  # implied by the first rows, but for a kernel without operands
        ]


def measured_terms(
    cost: CostModel, access: dict[int, sp.csr_matrix], op_seg: IntArray, n: int
) -> MeasuredTerms | None:
    """The one-hot terms of ``cost``'s measured placements for a model with ``n`` binaries,
    operand ``j`` covered by segment ``op_seg[j]`` whose access expressions are ``access``;
    None where there are none to add (no measured times, or kernels reach one tier)."""
    reach = kernel_tiers(cost.platform)
    entries = sorted(
        (k, placement, seconds)
        for (k, placement), seconds in cost.measured.items()
        if all(t in access for t in placement)
    )
    if len(reach) < 2 or not entries:
        return None
    n_k = len(cost.graph.kernels)
    pair_op, pair_tier, pair_z = [], [], []
    for i, (k, placement, _) in enumerate(entries):
        lo = int(cost.op_ptr[k])
        for j, tier in enumerate(placement):
            pair_op.append(lo + j)
            pair_tier.append(tier)
            pair_z.append(i)
    ops, tiers, owners = (np.asarray(a, dtype=np.int64) for a in (pair_op, pair_tier, pair_z))
    order = np.argsort(tiers, kind="stable")  # one block of access rows per tier
    ops, tiers, owners = ops[order], tiers[order], owners[order]
    blocks = [access[t][op_seg[ops[tiers == t]]] for t in np.unique(tiers).tolist()]
    n_z, n_pairs = len(entries), ops.size
    picks = sp.csr_matrix(sp.vstack(blocks) if blocks else (0, n), shape=(n_pairs, n))
    owner = sp.csr_matrix((np.ones(n_pairs), (owners, np.arange(n_pairs))), shape=(n_z, n_pairs))
    kernel = np.array([k for k, _, _ in entries], dtype=np.int64)
    seconds = np.array([s for _, _, s in entries], dtype=np.float64)
    values = np.array([time_row_values(cost, k, p) for k, p, _ in entries], dtype=np.float64)
    shifts = tuple(
        sp.csr_matrix((seconds - values[:, r], (kernel, np.arange(n_z))), shape=(n_k, n_z))
        for r in range(values.shape[1])
    )
    arity = np.array([len(p) for _, p, _ in entries], dtype=np.float64)
    return MeasuredTerms(kernel, seconds, arity, picks, owner, shifts)


__all__ = ["MeasuredTerms", "measured_terms"]
