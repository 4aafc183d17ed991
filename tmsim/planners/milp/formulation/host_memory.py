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
binary points they equal the plan's floor (:func:`~tmsim.plans.hostmem.plan_floor_s`) as
the plan is timed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.host import HostCandidates, host_access
from tmsim.planners.milp.formulation.host_time import refresh_position
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue, Kind
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
    it is issued at, a refresh of a host kernel at the position after it."""
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
    # refreshes: from the host's tier of a several-tier during state to its other tiers, at
    # the position after the host kernel (refresh_matrix's edges)
    access = host_access(cat.states, np.isin(np.arange(len(platform.tiers)), tiers))
    stays = [
        int(e)
        for e in cat.of_phase(True)
        if cat.edge_kind[e] == Kind.STAY and len(cat.states[int(cat.edge_src[e])]) > 1
    ]
    picked = np.flatnonzero(gad.updates & np.isin(gad.kernel, cand.kernel))
    r_rows, r_cols, r_each = [], [], []
    for g in picked.tolist():
        for e in stays:
            v = int(var.edge_index[g, e])
            state = int(cat.edge_src[e])
            tier = int(access[state])
            if v < 0 or tier < 0:
                continue
            others = sorted(cat.states[state] - {tier})
            size = np.full(len(others), sizes[int(gad.tensor[g])])
            share = copy_tier_s(
                platform, size, np.full(len(others), tier, dtype=np.int64), np.array(others)
            )
            r_rows.append(min(refresh_position(int(gad.kernel[g])), n_k))
            r_cols.append(v)
            r_each.append(share.sum(axis=0))
    if r_rows:
        rows.append(np.asarray(r_rows, dtype=np.int64))
        cols.append(np.asarray(r_cols, dtype=np.int64))
        each.append(np.asarray(r_each, dtype=np.float64))
    row, col = np.concatenate(rows), np.concatenate(cols)
    values = np.concatenate(each, axis=0)
    out = []
    for t in tiers.tolist():
        keep = values[:, t] > 0
        out.append(sp.csr_matrix((values[keep, t], (row[keep], col[keep])), shape=(n_k + 1, n)))
    return tuple(out)


__all__ = ["floor_matrices"]
