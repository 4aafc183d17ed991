"""A better first incumbent for the asynchronous MILP: the sync plan with its copies overlapped.

The sync solution, lifted into the asynchronous model
(:func:`~tmsim.planners.milp.chain.starts.lift`), blocks on every copy. Beside each user the
asynchronous model has window gadgets where the same copy may run during a neighbouring kernel
instead. This module walks the lifted solution and moves copies into those windows one gadget at a
time, a fetch to the gadget before, an eviction to the gadget after, and keeps a move only when the
model's own objective (``sum(c) + sync_s @ x``) falls and fast memory stays within every kernel's
limit. Each move is evaluated exactly and incrementally: it changes at most six binaries, so the
occupancy and the per-kernel time rows change only at a few kernels.

HiGHS alone rarely finds these moves on large graphs (the lifted sync solution is a deep local
optimum for its heuristics); handed this incumbent it starts from a plan that already overlaps
what fits and searches from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.planners.milp.formulation.gadgets import GadgetKind
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.states import Kind, is_prefetch

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: A move must lower the objective by more than this share of it to be kept (rounding noise).
MIN_GAIN = 1e-12
#: Occupancy changes below this (in units of the largest limit) are rounding, not a tensor.
LEVEL_EPS = 1e-12


def overlap_copies(model: Model, x: BoolArray, rounds: int) -> BoolArray:
    """Binaries of ``model`` at least as good as ``x``: ``x`` with copies moved into
    asynchronous window gadgets while that lowers the objective and fits fast memory.

    ``x`` must satisfy the model's flow (``a_eq @ x == b_eq``, ``a_ub @ x <= b_ub``);
    ``rounds`` bounds how many gadgets a copy moves (one per round; in the compact form,
    where each slot of a window is one event, any ``rounds`` above 0 tries every slot once).
    The result satisfies the flow, keeps the occupancy of every kernel within ``max(capacity,
    occupancy under x)`` and has an objective no higher than that of ``x``; where a final
    check finds otherwise, ``x`` is returned.
    """
    search = _Search(model, x)
    if model.gaps.compact:  # every slot of a gap is one event away: one pass tries them all
        if rounds > 0:
            search.events_round()
    else:
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
    if model.a_ub.shape[0] and np.any(model.a_ub @ xf > model.b_ub + 1e-9):
        return False
    u_after, _ = model.complete(xf)
    u_before, _ = model.complete(before.astype(np.float64))
    bound = np.maximum(model.capacity, u_before) + 1e-9
    if np.any(u_after > bound):
        return False
    return model.objective(after) <= model.objective(before) + 1e-12


@dataclass
class _Change:
    """What an evaluated change does: the occupancy steps, the time rows' changes per kernel
    and the new ``c`` of the kernels it touches."""

    ranges: list[tuple[int, int, float]]
    rows: list[dict[int, float]]
    c: dict[int, float]


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
        # A measured kernel's terms are held where they are: a copy moved into a window
        # leaves every operand where the kernels access it (the final check is exact).
        self.rows = [
            _Rows(value, sp.csc_matrix(matrix) if matrix is not None else None)
            for value, (_, matrix) in zip(model.row_values(xf), model.rows, strict=True)
        ]
        n_g = self.g.tensor.size
        self.cat = model.catalogue
        self.kind = self.cat.edge_kind
        self.pre = np.full(n_g, -1, dtype=np.int64)
        self.evict = np.full(n_g, -1, dtype=np.int64)
        n_e = self.v.edge_gadget.size
        on = np.flatnonzero(x[:n_e])
        et, eg = self.v.edge_type[on], self.v.edge_gadget[on]
        prefetch = is_prefetch(self.kind[et])
        self.pre[eg[prefetch]] = et[prefetch]
        self.evict[eg[~prefetch]] = et[~prefetch]
        self.scale = max(abs(float(self.c.sum() + model.sync_s @ xf)), 1e-30)
        self.n_k = model.n_kernels
        self.ub = sp.csc_matrix(model.a_ub) if model.a_ub.shape[0] else None
        self.ub_value = model.a_ub @ xf if self.ub is not None else np.zeros(0)

    # -- candidates ------------------------------------------------------------------------

    def _loop(self, kind: Kind, state: int) -> int:
        return self.cat.edge(kind, state, state)

    def _fetch_change(self, b: int) -> tuple[list[int], list[int]] | None:
        """Columns (off, on) that move the fetch at gadget ``b`` to the gadget before it."""
        g, ei, cat = self.g, self.v.edge_index, self.cat
        a = b - 1
        if a < 0 or g.first[b] or g.tensor[a] != g.tensor[b] or g.kind[a] != GadgetKind.WINDOW:
            return None
        fetch = int(self.pre[b])
        if fetch < 0 or self.kind[fetch] not in (Kind.FETCH, Kind.FETCH_INVAL):
            return None
        before, tier = int(cat.edge_src[fetch]), int(cat.edge_add[fetch])
        if self.pre[a] != self._loop(Kind.STAY, before):
            return None
        if self.evict[a] != self._loop(Kind.KEEP, before):
            return None
        early = cat.edge(Kind.FETCH, before, cat.state(sorted(cat.states[before] | {tier})))
        if early < 0:
            return None
        fetched = int(cat.edge_dst[early])
        if self.kind[fetch] == Kind.FETCH:
            b_new = self._loop(Kind.STAY, fetched)
        else:  # the fetched tier is the fastest: keep only it
            b_new = cat.edge(Kind.INVAL, fetched, int(cat.edge_dst[fetch]))
        if b_new < 0:
            return None
        on = [int(ei[a, early]), int(ei[a, self._loop(Kind.KEEP, fetched)]), int(ei[b, b_new])]
        off = [int(ei[a, self.pre[a]]), int(ei[a, self.evict[a]]), int(ei[b, fetch])]
        return None if min(on) < 0 else (off, on)

    def _evict_change(self, a: int) -> tuple[list[int], list[int]] | None:
        """Columns (off, on) that move the eviction at gadget ``a`` to the gadget after it."""
        g, ei, cat = self.g, self.v.edge_index, self.cat
        b = a + 1
        if b >= g.tensor.size or g.last[a] or g.tensor[b] != g.tensor[a]:
            return None
        if g.kind[b] != GadgetKind.WINDOW:
            return None
        write = int(self.evict[a])
        if write < 0 or self.kind[write] not in (Kind.WRITE, Kind.WRITE_DROP):
            return None
        during, after = int(cat.edge_src[write]), int(cat.edge_dst[write])
        if self.pre[b] != self._loop(Kind.STAY, after):
            return None
        if self.evict[b] != self._loop(Kind.KEEP, after):
            return None
        on = [
            int(ei[a, self._loop(Kind.KEEP, during)]),
            int(ei[b, self._loop(Kind.STAY, during)]),
            int(ei[b, write]),
        ]
        off = [int(ei[a, write]), int(ei[b, self.pre[b]]), int(ei[b, self.evict[b]])]
        return None if min(on) < 0 else (off, on)

    # -- evaluation ------------------------------------------------------------------------

    def _try(self, off: list[int], on: list[int]) -> bool:
        """Apply the change if it lowers the objective and fits; return whether it did."""
        found = self._evaluate(off, on)
        if found is None:
            return False
        self._commit(off, on, found[1])
        return True

    def _evaluate(self, off: list[int], on: list[int]) -> tuple[float, _Change] | None:
        """What the change gains and does, if it lowers the objective and fits (None else)."""
        forbidden = self.model.forbidden
        if forbidden is not None and forbidden[on].any():
            return None  # a copy that cannot run beside that kernel
        cols = off + on
        signs = [-1.0] * len(off) + [1.0] * len(on)
        if self.ub is not None:
            rows = _column_sum(self.ub, cols, signs)
            if any(self.ub_value[r] + w > self.model.b_ub[r] + 1e-9 for r, w in rows.items()):
                return None  # an event before what makes the copy it reads
        gain = -float(self.model.sync_s[on].sum() - self.model.sync_s[off].sum())
        ranges = _step_ranges(_column_sum(self.delta, cols, signs), self.n_k)
        for lo, hi, lvl in ranges:
            if lvl > 0 and np.any(
                self.u[lo:hi] + lvl > np.maximum(self.model.capacity[lo:hi], self.u[lo:hi])
            ):
                return None
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
            return None
        return gain, _Change(ranges, changes, new_c)

    def _commit(self, off: list[int], on: list[int], change: _Change) -> None:
        for lo, hi, lvl in change.ranges:
            self.u[lo:hi] += lvl
        for r, ch in zip(self.rows, change.rows, strict=True):
            for k, w in ch.items():
                r.value[k] += w
        for k, value in change.c.items():
            self.c[k] = value
        if self.ub is not None:
            signs = [-1.0] * len(off) + [1.0] * len(on)
            for row, w in _column_sum(self.ub, off + on, signs).items():
                self.ub_value[row] += w
        self.x[off] = False
        self.x[on] = True
        for col in off + on:
            if col >= self.v.edge_gadget.size:
                continue
            gad, edge = int(self.v.edge_gadget[col]), int(self.v.edge_type[col])
            phase = self.pre if is_prefetch(self.kind[edge]) else self.evict
            if self.x[col]:
                phase[gad] = edge

    def events_round(self) -> int:
        """The compact form: move each copy at a user (largest blocking cost first) to the
        event in its gap that gains most; return how many moved."""
        gaps, g, ei, cat = self.model.gaps, self.g, self.v.edge_index, self.cat
        moved = 0
        for gad, kind in self._copies():
            phase = self.evict if kind else self.pre
            edge = int(phase[gad])
            if kind:  # a write after the user: keep the fast copy, write beside a kernel
                during = int(cat.edge_src[edge])
                stay = cat.edge(Kind.KEEP, during, during)
                lo, hi = gad + 1, gaps.next_core[gad]
                event = edge
            else:  # a fetch before the user: fetch beside a kernel, arrive in both tiers
                before = int(cat.edge_src[edge])
                both = cat.state(sorted(cat.states[before] | {int(cat.edge_add[edge])}))
                event = cat.edge(Kind.FETCH, before, both)
                if self.kind[edge] == Kind.FETCH:
                    stay = cat.edge(Kind.STAY, both, both)
                else:  # the fetched tier is the fastest: keep only it
                    stay = cat.edge(Kind.INVAL, both, int(cat.edge_dst[edge]))
                lo, hi = gaps.prev_core[gad] + 1, gad
                if gaps.prev_core[gad] < 0:
                    first = np.flatnonzero(g.tensor == g.tensor[gad])[0]
                    lo = int(first)
            if stay < 0 or event < 0 or hi <= lo:
                continue
            keep = int(ei[gad, stay])
            slots = [int(ei[j, event]) for j in range(lo, hi) if ei[j, event] >= 0]
            if keep < 0 or not slots:
                continue
            off, best = [int(ei[gad, edge])], None
            for col in slots:
                found = self._evaluate(off, [col, keep])
                if found is not None and (best is None or found[0] > best[0]):
                    best = (found[0], found[1], col)
            if best is not None:
                self._commit(off, [best[2], keep], best[1])
                moved += 1
        return moved

    def _copies(self) -> list[tuple[int, bool]]:
        """(gadget, is an eviction) of every copy at a core gadget, largest blocking cost
        first."""
        core = self.model.gaps.core
        on = self.pre >= 0
        fetches = np.flatnonzero(
            core
            & on
            & np.isin(self.kind[np.where(on, self.pre, 0)], (Kind.FETCH, Kind.FETCH_INVAL))
        )
        on = self.evict >= 0
        evicts = np.flatnonzero(
            core
            & on
            & np.isin(self.kind[np.where(on, self.evict, 0)], (Kind.WRITE, Kind.WRITE_DROP))
        )
        ei, sync_s = self.v.edge_index, self.model.sync_s
        cost = np.concatenate(
            (sync_s[ei[fetches, self.pre[fetches]]], sync_s[ei[evicts, self.evict[evicts]]])
        )
        kinds = np.concatenate((np.zeros(fetches.size, bool), np.ones(evicts.size, bool)))
        gadgets = np.concatenate((fetches, evicts))
        order = np.argsort(-cost, kind="stable")
        return [(int(gadgets[i]), bool(kinds[i])) for i in order]

    def round(self) -> int:
        """Try every copy once, largest blocking cost first; return how many moved."""

        def taken(phase: IntArray, kinds: tuple[Kind, ...]) -> IntArray:
            on = phase >= 0
            return np.flatnonzero(on & np.isin(self.kind[np.where(on, phase, 0)], kinds))

        fetches = taken(self.pre, (Kind.FETCH, Kind.FETCH_INVAL))
        evicts = taken(self.evict, (Kind.WRITE, Kind.WRITE_DROP))
        ei, sync_s = self.v.edge_index, self.model.sync_s
        cost = np.concatenate(
            (sync_s[ei[fetches, self.pre[fetches]]], sync_s[ei[evicts, self.evict[evicts]]])
        )
        kinds = np.concatenate((np.zeros(fetches.size, bool), np.ones(evicts.size, bool)))
        gadgets = np.concatenate((fetches, evicts))
        moved = 0
        for i in np.argsort(-cost, kind="stable"):
            gad = int(gadgets[i])
            change = self._evict_change(gad) if kinds[i] else self._fetch_change(gad)
            if change is not None and self._try(*change):
                moved += 1
        return moved


def _step_ranges(steps: dict[int, float], n_k: int) -> list[tuple[int, int, float]]:
    """The change of ``u`` a change of ``delta @ x`` by ``steps`` ({row: value}) makes: ``u`` is
    the running sum of ``delta @ x`` within each tier's block of ``n_k`` rows, so the change
    is a step function; returns ``(first row, end row, level)`` of each non-zero step."""
    ranges: list[tuple[int, int, float]] = []
    ordered = sorted(steps.items())
    level, block = 0.0, -1
    for i, (row, w) in enumerate(ordered):
        if row // n_k != block:
            level, block = 0.0, row // n_k
        level += w
        block_end = (block + 1) * n_k
        nxt = ordered[i + 1][0] if i + 1 < len(ordered) else block_end
        end = min(nxt, block_end)
        if abs(level) > LEVEL_EPS and end > row:
            ranges.append((row, end, level))
    return ranges


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
