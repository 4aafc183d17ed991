"""The host memory's floor as rows of the placement MILP whose host may run kernels (the rule:
:mod:`tmsim.plans.hostmem`).

Per tier ``τ`` the host reaches, a suffix variable ``s`` [K + 2] holds, at index ``i``, the
device-seconds on ``τ`` of what starts no earlier than kernel ``i - 1``: the candidates the
host runs that are ready at ``i - 1`` or later, and the copies (and the refreshes after a host
kernel) issued at position ``i`` or later. With ``S_L = p_L - c_L`` the time the device stream
starts kernel ``L`` (:class:`~tmsim.planners.milp.formulation.host_time.HostTerms`), the rows

    ``s_i - s_{i+1} = at_i x``, ``s_{K+1} = 0``, ``t >= s_0``, ``t >= S_L + s_{L+1}``

hold the step to the floor at every ``L`` (``K + 2`` equalities and ``K + 1`` rows per tier;
the suffix keeps each copy's binary in one row rather than in every row after it). At
binary points of the synchronous formulations they equal the plan's floor
(:func:`~tmsim.plans.hostmem.plan_floor_s`) as the plan is timed; in the asynchronous ones
the model's device stream holds a host kernel's position for the copies beside it, which the
timeline lets run on their own, so ``S_L`` after such a position may differ a little (1.3e-6
relative in ``tests/test_hostmem.py``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.host import HostCandidates, host_reach
from tmsim.planners.milp.formulation.host_refresh import refreshes
from tmsim.planners.milp.formulation.host_time import refresh_position
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue
from tmsim.plans.hostmem import copy_tier_s, reached_tiers

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def floor_matrices(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    cand: HostCandidates,
    copies: Copies,
    columns: IntArray,
) -> tuple[sp.csr_matrix, ...]:
    """Per tier the host reaches, ``at`` [K + 1, n]: at row ``i``, the device-seconds on that
    tier of each binary counted from position ``i`` on (see the module documentation):
    candidate ``j`` (its binary ``columns[j]``) at ``ready_j + 1``, a copy at the position
    it is issued at, a refresh of a host kernel at the position after it
    (:func:`~tmsim.planners.milp.formulation.host.refreshes`, on its eviction edge)."""
    platform = cost.platform
    n_k, n = len(cost.graph.kernels), var.count
    tiers = reached_tiers(platform)
    sizes = np.asarray(cost.graph.sizes_bytes, dtype=np.float64)
    rows: list[IntArray] = []
    cols: list[IntArray] = []
    each: list[FloatArray] = []  # [entries, tiers]
    # the candidates the host runs
    rows.append(np.asarray(cand.ready + 1, dtype=np.int64))
    cols.append(np.asarray(columns, dtype=np.int64))
    each.append(np.asarray(cand.tier_s, dtype=np.float64))
    # copies, where they are issued
    n_e = var.edge_gadget.size
    copying = np.flatnonzero((copies.source[:n_e] >= 0) & (cat.edge_add[var.edge_type] >= 0))
    if copying.size:
        nbytes = sizes[gad.tensor[var.edge_gadget[copying]]]
        src = copies.source[copying]
        dst = cat.edge_add[var.edge_type[copying]]
        rows.append(np.asarray(copies.kernel[copying], dtype=np.int64))
        cols.append(copying)
        each.append(copy_tier_s(platform, nbytes, src, dst))
    # refreshes: from the tier the host updated to those the eviction edge keeps, at the
    # position after the host kernel (what the readback issues)
    made = refreshes(cat, gad, var, cand, host_reach(cost))
    if made:
        each.append(
            np.array(
                [
                    copy_tier_s(
                        platform,
                        np.full(len(r.targets), sizes[r.tensor]),
                        np.full(len(r.targets), r.source, dtype=np.int64),
                        np.asarray(r.targets, dtype=np.int64),
                    ).sum(axis=0)
                    for r in made
                ]
            )
        )
        at = [min(refresh_position(int(cand.kernel[r.candidate])), n_k) for r in made]
        rows.append(np.asarray(at, dtype=np.int64))
        cols.append(np.asarray([r.column for r in made], dtype=np.int64))
    row, col = np.concatenate(rows), np.concatenate(cols)
    values = np.concatenate(each, axis=0)
    out = []
    for t in tiers.tolist():
        keep = values[:, t] > 0
        out.append(sp.csr_matrix((values[keep, t], (row[keep], col[keep])), shape=(n_k + 1, n)))
    return tuple(out)


__all__ = ["floor_matrices"]
