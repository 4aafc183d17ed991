"""The refreshes of host kernels in the placement MILP: after an in-place update on the host,
the copies of the new value from the tier the host updated to the other tiers its during
state holds and its eviction edge keeps (the updated weights ZeRO-Offload copies back to the
device; :mod:`~tmsim.planners.milp.formulation.host`'s rules). The plan's readback issues the
same copies (:mod:`~tmsim.planners.milp.formulation.readback`), at the position after the host
kernel (:func:`~tmsim.planners.milp.formulation.host_time.refresh_position`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.host import HostCandidates, host_access
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue

BoolArray = npt.NDArray[np.bool_]


def refresh_seconds(cost: CostModel, refresh: Refresh) -> float:
    """Seconds the copies of ``refresh`` take (one after another); inf where a copy path is
    missing."""
    total = 0.0
    for dst in refresh.targets:
        if not cost.has_path(refresh.source, dst):
            return float("inf")
        total += float(cost.move_s(refresh.source, dst, MoveMode.ASYNC)[refresh.tensor])
    return total


@dataclass(frozen=True)
class Refresh:
    """The copies a host kernel's in-place update makes by one eviction edge: from the
    ``source`` tier (the fastest of the during state the host reaches, where it updated the
    tensor) to each of ``targets`` (the during state's other tiers that the edge keeps)."""

    candidate: int
    column: int
    tensor: int
    source: int
    targets: tuple[int, ...]


def refreshes(
    cat: Catalogue, gad: Gadgets, var: Variables, cand: HostCandidates, reach: BoolArray
) -> list[Refresh]:
    """Every eviction edge at a candidate's in-place update whose during state has several
    tiers (only a host kernel may update such a state, :func:`link_rows`), with the refresh it
    makes there: what the plan's readback issues at the next position."""
    index = {int(k): i for i, k in enumerate(cand.kernel.tolist())}
    access = host_access(cat.states, reach)
    evicts = [
        int(e)
        for e in cat.of_phase(False)
        if len(cat.states[int(cat.edge_src[e])]) > 1 and access[int(cat.edge_src[e])] >= 0
    ]
    out = []
    for g in np.flatnonzero(gad.updates & np.isin(gad.kernel, cand.kernel)).tolist():
        i, t = index[int(gad.kernel[g])], int(gad.tensor[g])
        for e in evicts:
            v = int(var.edge_index[g, e])
            if v < 0:
                continue
            during, after = cat.states[int(cat.edge_src[e])], cat.states[int(cat.edge_dst[e])]
            src = int(access[int(cat.edge_src[e])])
            targets = tuple(sorted((during & after) - {src}))
            if targets:
                out.append(Refresh(i, v, t, src, targets))
    return out


def refresh_matrix(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    cand: HostCandidates,
    reach: BoolArray,
) -> tuple[sp.csr_matrix, BoolArray]:
    """[n_candidates, n]: the refresh seconds of each candidate's eviction edges from a
    several-tier during state at its in-place updates (:func:`refreshes`: to the tiers the
    edge keeps), and the variables whose refresh cannot run (a copy path missing: to be fixed
    at 0)."""
    n = var.count
    forbidden = np.zeros(n, dtype=bool)
    rows, cols, data = [], [], []
    for r in refreshes(cat, gad, var, cand, reach):
        seconds = refresh_seconds(cost, r)
        if np.isfinite(seconds):
            rows.append(r.candidate)
            cols.append(r.column)
            data.append(seconds)
        else:
            forbidden[r.column] = True
    return sp.csr_matrix((data, (rows, cols)), shape=(cand.count, n)), forbidden


__all__ = ["Refresh", "refresh_matrix", "refresh_seconds", "refreshes"]
