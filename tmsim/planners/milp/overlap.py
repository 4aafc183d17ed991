"""A better first incumbent for the asynchronous MILP: the sync plan with its copies overlapped.

The sync solution, lifted into the asynchronous model (:func:`~tmsim.planners.milp.solve.lift`),
blocks on every copy. Beside each user the asynchronous model has window gadgets where the
same copy may run during a neighbouring kernel instead. This module walks the lifted solution
and moves copies into those windows one gadget at a time, a fetch to the gadget before, an
eviction to the gadget after, and keeps a move only when the model's own objective
(``sum(c) + sync_s @ x``) falls and fast memory stays within every kernel's limit. Each move
is evaluated exactly and incrementally: it changes at most six binaries, so the occupancy and
the per-kernel time rows change only at a few kernels.

HiGHS alone rarely finds these moves on large graphs (the lifted sync solution is a deep local
optimum for its heuristics); handed this incumbent it starts from a plan that already overlaps
what fits and searches from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.planners.milp.build import Model
from tmsim.planners.milp.network import Edge, Kind

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

#: A move must lower the objective by more than this share of it to be kept (rounding noise).
MIN_GAIN = 1e-12
#: Occupancy changes below this (in units of the largest limit) are rounding, not a tensor.
LEVEL_EPS = 1e-12


def overlap_copies(model: Model, x: BoolArray, rounds: int) -> BoolArray:
    """Binaries of ``model`` at least as good as ``x``: ``x`` with copies moved into
    asynchronous window gadgets while that lowers the objective and fits fast memory.

    ``x`` must satisfy the model's flow (``a_eq @ x == b_eq``); ``rounds`` bounds how many
    gadgets a copy moves (one per round). The result satisfies the flow, keeps the occupancy
    of every kernel within ``max(capacity, occupancy under x)`` and has an objective no
    higher than that of ``x``; where a final check finds otherwise, ``x`` is returned.
    """
    search = _Search(model, x)
    for _ in range(max(rounds, 0)):
        if search.round() == 0:
            break
    out = search.x
    return out if _acceptable(model, x, out) else x


def _acceptable(model: Model, before: BoolArray, after: BoolArray) -> bool:
    """Flow holds, no kernel's occupancy got worse past its limit, objective not higher."""
    xf = after.astype(np.float64)
    if not np.allclose(model.a_eq @ xf, model.b_eq, atol=1e-9):
        return False
    u_after, _ = model.complete(xf)
    u_before, _ = model.complete(before.astype(np.float64))
    bound = np.maximum(model.capacity, u_before) + 1e-9
    if np.any(u_after > bound):
        return False
    return model.objective(after) <= model.objective(before) + 1e-12


@dataclass
class _Rows:
    """One lower bound of ``c`` in column form: its current value per kernel and matrix."""

    value: FloatArray
    matrix: sp.csc_matrix | None


class _Search:
    """The incremental state of the walk: binaries, chosen edge per gadget phase, occupancy,
    the time rows and ``c``."""

    def __init__(self, model: Model, x: BoolArray) -> None:
        self.model = model
        self.g = model.gadgets
        self.v = model.vars
        self.x = x.copy()
        xf = x.astype(np.float64)
        self.u, self.c = model.complete(xf)
        self.delta = sp.csc_matrix(model.delta)
        self.rows = [
            _Rows(
                const + (matrix @ xf if matrix is not None else 0.0),
                sp.csc_matrix(matrix) if matrix is not None else None,
            )
            for const, matrix in model.rows
        ]
        n_g = self.g.tensor.size
        self.pre = np.full(n_g, -1, dtype=np.int64)
        self.evict = np.full(n_g, -1, dtype=np.int64)
        n_e = self.v.edge_gadget.size
        on = np.flatnonzero(x[:n_e])
        et, eg = self.v.edge_type[on], self.v.edge_gadget[on]
        prefetch = et <= Edge.FETCH_INVAL
        self.pre[eg[prefetch]] = et[prefetch]
        self.evict[eg[~prefetch]] = et[~prefetch]
        self.scale = max(abs(float(self.c.sum() + model.sync_s @ xf)), 1e-30)

    # -- candidates ------------------------------------------------------------------------

    def _fetch_change(self, b: int) -> tuple[list[int], list[int]] | None:
        """Columns (off, on) that move the fetch at gadget ``b`` to the gadget before it."""
        g, ei = self.g, self.v.edge_index
        a = b - 1
        if a < 0 or g.first[b] or g.tensor[a] != g.tensor[b] or g.kind[a] != Kind.WINDOW:
            return None
        if self.pre[a] != Edge.STAY_S or self.evict[a] != Edge.KEEP_S:
            return None
        if self.pre[b] == Edge.FETCH:
            b_new = Edge.STAY_FS
        elif self.pre[b] == Edge.FETCH_INVAL:
            b_new = Edge.INVAL
        else:
            return None
        on = [int(ei[a, Edge.FETCH]), int(ei[a, Edge.KEEP_FS]), int(ei[b, b_new])]
        off = [int(ei[a, Edge.STAY_S]), int(ei[a, Edge.KEEP_S]), int(ei[b, self.pre[b]])]
        return None if min(on) < 0 else (off, on)

    def _evict_change(self, a: int) -> tuple[list[int], list[int]] | None:
        """Columns (off, on) that move the eviction at gadget ``a`` to the gadget after it."""
        g, ei = self.g, self.v.edge_index
        b = a + 1
        if b >= g.tensor.size or g.last[a] or g.tensor[b] != g.tensor[a]:
            return None
        if g.kind[b] != Kind.WINDOW:
            return None
        kind = self.evict[a]
        if kind == Edge.WRITE_DROP:
            stay, keep = Edge.STAY_S, Edge.KEEP_S
        elif kind == Edge.WRITE:
            stay, keep = Edge.STAY_FS, Edge.KEEP_FS
        else:
            return None
        if self.pre[b] != stay or self.evict[b] != keep:
            return None
        on = [int(ei[a, Edge.KEEP_F]), int(ei[b, Edge.STAY_F]), int(ei[b, kind])]
        off = [int(ei[a, kind]), int(ei[b, stay]), int(ei[b, keep])]
        return None if min(on) < 0 else (off, on)

    # -- evaluation ------------------------------------------------------------------------

    def _try(self, off: list[int], on: list[int]) -> bool:
        """Apply the change if it lowers the objective and fits; return whether it did."""
        cols = off + on
        signs = [-1.0] * len(off) + [1.0] * len(on)
        gain = -float(self.model.sync_s[on].sum() - self.model.sync_s[off].sum())
        # occupancy: u is the running sum of delta @ x, so a change is a step function
        steps = sorted(_column_sum(self.delta, cols, signs).items())
        level, ranges = 0.0, []
        n_k = self.u.size
        for i, (k, w) in enumerate(steps):
            level += w
            end = steps[i + 1][0] if i + 1 < len(steps) else n_k
            if abs(level) > LEVEL_EPS and end > k:
                ranges.append((k, end, level))
        for lo, hi, lvl in ranges:
            if lvl > 0 and np.any(
                self.u[lo:hi] + lvl > np.maximum(self.model.capacity[lo:hi], self.u[lo:hi])
            ):
                return False
        changes = [
            _column_sum(r.matrix, cols, signs) if r.matrix is not None else {} for r in self.rows
        ]
        kernels = sorted({k for ch in changes for k in ch})
        new_c = {}
        for k in kernels:
            new_c[k] = max(
                r.value[k] + ch.get(k, 0.0) for r, ch in zip(self.rows, changes, strict=True)
            )
            gain -= new_c[k] - self.c[k]
        if gain <= MIN_GAIN * self.scale:
            return False
        for lo, hi, lvl in ranges:
            self.u[lo:hi] += lvl
        for r, ch in zip(self.rows, changes, strict=True):
            for k, w in ch.items():
                r.value[k] += w
        for k, value in new_c.items():
            self.c[k] = value
        self.x[off] = False
        self.x[on] = True
        for col in cols:
            gad, edge = int(self.v.edge_gadget[col]), int(self.v.edge_type[col])
            phase = self.pre if edge <= Edge.FETCH_INVAL else self.evict
            if self.x[col]:
                phase[gad] = edge
        return True

    def round(self) -> int:
        """Try every copy once, largest blocking cost first; return how many moved."""
        fetches = np.flatnonzero((self.pre == Edge.FETCH) | (self.pre == Edge.FETCH_INVAL))
        evicts = np.flatnonzero((self.evict == Edge.WRITE) | (self.evict == Edge.WRITE_DROP))
        ei = self.v.edge_index
        cost = np.concatenate(
            (self.model.sync_s[ei[fetches, self.pre[fetches]]],
             self.model.sync_s[ei[evicts, self.evict[evicts]]])
        )  # fmt: skip
        kinds = np.concatenate((np.zeros(fetches.size, bool), np.ones(evicts.size, bool)))
        gadgets = np.concatenate((fetches, evicts))
        moved = 0
        for i in np.argsort(-cost, kind="stable"):
            gad = int(gadgets[i])
            change = self._evict_change(gad) if kinds[i] else self._fetch_change(gad)
            if change is not None and self._try(*change):
                moved += 1
        return moved


def _column_sum(matrix: sp.csc_matrix, cols: list[int], signs: list[float]) -> dict[int, float]:
    """``matrix[:, cols] @ signs`` as {row: value}, reading the CSC arrays directly (a handful
    of columns; scipy's slicing costs more than the arithmetic)."""
    out: dict[int, float] = {}
    ptr, idx, val = matrix.indptr, matrix.indices, matrix.data
    for col, sign in zip(cols, signs, strict=True):
        lo, hi = ptr[col], ptr[col + 1]
        for k, w in zip(idx[lo:hi], val[lo:hi], strict=True):
            out[int(k)] = out.get(int(k), 0.0) + sign * float(w)
    return out
