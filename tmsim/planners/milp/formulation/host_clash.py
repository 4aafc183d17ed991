"""Copies a host kernel would wait for, or hold back, ruled out while the host runs it.

The host stream of a plan (:mod:`tmsim.plans.deps`) waits for every device-side action at or
before its position that reads a copy the host kernel writes, or writes a copy the host kernel
accesses; a device-side action after its position that does the same waits for the host kernel.
The MILP times the host stream from the start of each candidate's release kernel
(:mod:`~tmsim.planners.milp.formulation.host`), and its refreshes from the host kernel's end:
it does not time a copy of an operand that runs beside or after the release kernel, nor one
after the host kernel. So such a copy and the host running the kernel exclude each other
(``x_v + h_i <= 1``) for each candidate ``i`` and each copy variable ``v`` of one of its
operands that

- touches a tier the host reaches (its source or its destination), where the host kernel
  writes the operand (an in-place update), or writes such a tier, where the host only reads it;
- does not end before the release kernel starts: an asynchronous copy beside the release
  kernel or later, a synchronous one after it (a synchronous copy runs before its kernel on
  the device stream), at any position before or after the candidate's own; every copy where
  the candidate has no release (the host may start at once).

Without the rows an asynchronous plan of LLaMA-7B on the H100 fetched optimizer state and old
weights beside the kernels just before their host updates (free in the model, as the copy path
was idle there): the host stream waited for each fetch, and the plan the MILP priced at 0.363 s
took 0.655 s. No plan the rows remove is needed where the host runs the kernel: the device
uses none of its operands after the release
(:func:`~tmsim.planners.milp.formulation.host.find_candidates`), and the refreshes bring an
updated copy back. Where the device runs it, nothing changes.

The rows are written per group of copies of which a plan runs at most one, as
``sum(x_v) + h_i <= 1`` (as tight as one row per copy, with far fewer rows): the copies of one
phase at one gadget (the tensor's flow takes one edge of each layer) and, in the compact form
(:mod:`~tmsim.planners.milp.formulation.windows`), the events of one phase in one gap (a fetch
leaves the slow-only state, which only a write-drop enters, and a write or write-drop leaves the
fast-only state, which no event enters: the flow's one unit allows one of each).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.host import HostCandidates
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue, is_prefetch
from tmsim.planners.milp.formulation.windows import Gaps

BoolArray = npt.NDArray[np.bool_]


def clash_rows(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    cand: HostCandidates,
    copies: Copies,
    reach: BoolArray,
    gaps: Gaps,
) -> sp.csr_matrix:
    """``A x <= 1``: a row ``sum(x_v) + h_i`` per candidate ``i`` and group of its operands'
    copy variables that exclude it (see the module documentation). ``reach`` [n_tiers]: the
    tiers the host reaches; ``copies``:
    :func:`~tmsim.planners.milp.formulation.copies.move_costs` of the model's variables;
    ``gaps``: the model's core gadgets."""
    n_e, n = var.edge_gadget.size, var.count
    v = np.flatnonzero(copies.source[:n_e] >= 0)
    gadget, n_g = var.edge_gadget[v], gad.tensor.size
    tensor = gad.tensor[gadget]
    dst = cat.edge_add[var.edge_type[v]]
    writes_host = reach[dst]
    touches = reach[copies.source[v]] | writes_host
    position, early = copies.kernel[v], ~copies.asynchronous[v]
    # a plan runs at most one copy of a group: one phase at a core gadget, or in a gap (named
    # by the core gadget before it, or, before the tensor's first, by the one after it)
    prev, nxt = gaps.prev_core[gadget], gaps.next_core[gadget]
    place = np.where(gaps.core[gadget], gadget, np.where(prev >= 0, n_g + prev, 2 * n_g + nxt))
    group = 2 * place + is_prefetch(cat.edge_kind[var.edge_type[v]])
    span = 6 * n_g  # groups per candidate
    order = np.argsort(tensor, kind="stable")
    ranked = tensor[order]
    ptr, op_t, op_w = cost.op_ptr, cost.op_tensor, cost.op_write_bytes
    keys: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for i, (k, release) in enumerate(zip(cand.kernel.tolist(), cand.release.tolist(), strict=True)):
        lo, hi = int(ptr[k]), int(ptr[k + 1])
        for t in sorted(set(op_t[lo:hi].tolist())):
            host_writes = bool(np.any(op_w[lo:hi][op_t[lo:hi] == t] > 0))
            a, b = np.searchsorted(ranked, [t, t + 1])
            pick = order[a:b]
            done = (position[pick] < release) | (early[pick] & (position[pick] == release))
            clash = touches[pick] & (host_writes | writes_host[pick]) & ~done
            hit = pick[clash]
            keys.append(i * span + group[hit])
            cols.append(v[hit])
    if not keys:
        return sp.csr_matrix((0, n))
    key, c = np.concatenate(keys), np.concatenate(cols)
    rows, row = np.unique(key, return_inverse=True)
    m = rows.size
    h = var.host_first + rows // span
    r = np.concatenate((row, np.arange(m)))
    return sp.csr_matrix((np.ones(r.size), (r, np.concatenate((c, h)))), shape=(m, n))


__all__ = ["clash_rows"]
