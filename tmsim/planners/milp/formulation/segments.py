"""Segments of the placement MILP: the kernel ranges over which a tensor's state is one linear
expression of the variables (:mod:`~tmsim.planners.milp.formulation.network` numbers the
variables), with the membership and access expressions the capacity and time rows read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.gadgets import GadgetKind, Gadgets
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue
from tmsim.planners.milp.formulation.windows import Changes, Gaps, event_changes
from tmsim.workload.graph import PERSISTENT_ROLES

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Segments:
    """Kernel ranges over which a tensor's state is one linear expression of the variables.

    Sorted by (tensor, start). ``state_code @ x`` is 1 + the index of the tensor's state over
    the segment (one variable of each row is one); ``member[i] @ x`` is 1 where the tensor
    occupies tier ``i`` there (for the tiers whose capacity is modelled) and ``access[i] @ x``
    1 where kernels access it on tier ``i``; ``changes``: what the events of the compact form
    add to or take from ``member`` within their gaps.
    """

    tensor: IntArray
    start: IntArray
    end: IntArray
    state_code: sp.csr_matrix
    member: dict[int, sp.csr_matrix]
    access: dict[int, sp.csr_matrix]
    changes: Changes

    def covering(self, tensors: IntArray, kernels: IntArray, n_k: int) -> IntArray:
        """Index of the segment of ``tensors[i]`` that covers ``kernels[i]``."""
        key = self.tensor * (n_k + 1) + self.start
        return np.searchsorted(key, tensors * (n_k + 1) + kernels, side="right") - 1

    def covering_or_none(self, tensors: IntArray, kernels: IntArray, n_k: int) -> IntArray:
        """:meth:`covering`, with -1 where no segment of the tensor covers the kernel."""
        idx = self.covering(tensors, kernels, n_k)
        safe = np.clip(idx, 0, max(self.tensor.size - 1, 0))
        ok = (idx >= 0) & (self.tensor[safe] == tensors) & (self.end[safe] >= kernels)
        return np.asarray(np.where(ok, idx, -1), dtype=np.int64)


def build_segments(
    cost: CostModel,
    cat: Catalogue,
    g: Gadgets,
    v: Variables,
    modelled: tuple[int, ...],
    gaps: Gaps,
) -> Segments:
    """Initial segments (pre-existing tensors), during and after segments of every core
    gadget, with the membership expressions of the tiers in ``modelled`` and the access
    expressions of every tier kernels may access; and, in the compact form, the membership
    changes of the events (:attr:`Segments.changes`).

    A tensor occupies a tier during a gadget's kernel if its during state holds it, if an
    in-place update there leaves that copy stale (it is freed after the kernel), or if a
    copy writes it there beside the kernel (asynchronous) or after the step's last kernel.
    """
    graph = cost.graph
    n_k = len(graph.kernels)
    roles = [t.role for t in graph.tensors]
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    eol = np.where(persistent, n_k - 1, graph.live_last)
    n_t = len(graph.tensors)
    cg = np.flatnonzero(gaps.core)
    first_gadget = np.full(n_t, n_k, dtype=np.int64)
    np.minimum.at(first_gadget, g.tensor[cg], g.kernel[cg])
    pre = np.flatnonzero(v.init_index.max(axis=1) >= 0)
    # the segment after a gadget ends before its tensor's next core gadget (or at its end)
    next_core = gaps.next_core
    next_k = np.where(next_core >= 0, g.kernel[np.maximum(next_core, 0)], eol[g.tensor] + 1).astype(
        np.int64
    )
    tc, kc = g.tensor[cg], g.kernel[cg]
    parts = [
        (pre, np.zeros(pre.size, np.int64), np.minimum(first_gadget[pre], eol[pre] + 1) - 1),
        (tc, kc, kc),
        (tc, kc + 1, next_k[cg] - 1),
    ]
    tensor = np.concatenate([p[0] for p in parts])
    start = np.concatenate([p[1] for p in parts])
    end = np.concatenate([p[2] for p in parts])
    n_pre, n_g = pre.size, cg.size
    index = v.edge_index[cg]
    prefetch, evict = cat.of_phase(True), cat.of_phase(False)

    def block(offset: int, index: IntArray, edges: IntArray) -> tuple[IntArray, IntArray]:
        c = index[:, edges]
        r = np.broadcast_to(offset + np.arange(index.shape[0])[:, None], c.shape)
        ok = c >= 0
        return r[ok], c[ok]

    def matrix(pieces: list[tuple[IntArray, IntArray]], weights: list[float]) -> sp.csr_matrix:
        r = np.concatenate([p[0] for p in pieces])
        c = np.concatenate([p[1] for p in pieces])
        w = np.concatenate([np.full(p[0].size, x) for p, x in zip(pieces, weights, strict=True)])
        return sp.csr_matrix((w, (r, c)), shape=(tensor.size, v.count))

    def state_rows(states: npt.NDArray[np.bool_]) -> list[tuple[IntArray, IntArray]]:
        """Init, during and after rows of the variables whose state is in ``states``."""
        out = [block(0, v.init_index[pre][:, states], np.arange(int(states.sum())))]
        for offset, edges in ((n_pre, prefetch), (n_pre + n_g, evict)):
            for e in edges:
                if states[cat.edge_dst[e]]:
                    out.append(block(offset, index, np.array([e])))
        return out

    code_pieces: list[tuple[IntArray, IntArray]] = []
    code_weights: list[float] = []
    for s in range(cat.n_states):
        pieces = state_rows(np.arange(cat.n_states) == s)
        code_pieces += pieces
        code_weights += [float(s + 1)] * len(pieces)
    member: dict[int, sp.csr_matrix] = {}
    # a copy's destination is held during the kernel when the copy runs beside it (window)
    # or after the last kernel (a synchronous eviction there ends the step, which has no
    # later kernel to hold it at; counted besides a stale copy on the same tier, which the
    # plan frees as the write lands: conservative, as a union is not linear in the edges)
    held = np.flatnonzero((g.kind[cg] == GadgetKind.WINDOW) | (kc == n_k - 1))
    for tier in modelled:
        pieces = state_rows(cat.member[:, tier])
        stale = [e for e in prefetch if tier in cat.edges[e].frees]
        written = [e for e in evict if cat.edge_add[e] == tier]
        if stale:
            pieces.append(block(n_pre, index, np.array(stale)))
        if written:
            r, c = block(0, index[held], np.array(written))
            pieces.append((n_pre + held[r], c))
        member[tier] = matrix(pieces, [1.0] * len(pieces))
    access: dict[int, sp.csr_matrix] = {}
    for tier in sorted(set(cat.access[cat.access >= 0].tolist())):
        pieces = state_rows(cat.access == tier)
        access[tier] = matrix(pieces, [1.0] * len(pieces))
    keep = np.flatnonzero(end >= start)
    order = keep[np.lexsort((start[keep], tensor[keep]))]
    return Segments(
        tensor[order],
        start[order],
        end[order],
        matrix(code_pieces, code_weights)[order],
        {t: m[order] for t, m in member.items()},
        {t: m[order] for t, m in access.items()},
        event_changes(cat, g, v.edge_gadget, v.edge_type, v.count, gaps, modelled, next_k, n_k),
    )


__all__ = ["Segments", "build_segments"]
