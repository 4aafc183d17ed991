"""The step time of a placement MILP whose host may run kernels: the device stream, the host
stream and the copies back, as rows over the kernels' costs and the binaries (the rules:
:mod:`~tmsim.planners.milp.formulation.host`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cvxpy as cp
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.planners.milp.formulation.host import HostCandidates

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class HostValues:
    """The values of :class:`HostTerms`' variables at some binaries."""

    p: FloatArray
    f: FloatArray
    r: FloatArray
    t: float
    s: tuple[FloatArray, ...] = ()


@dataclass(frozen=True)
class HostTerms:
    """The host decisions of a model and the step time they make (see the module
    documentation).

    ``columns`` [n_candidates]: each candidate's binary in ``x``; ``sync_at`` [n_kernels, n]:
    the synchronous seconds of each variable at the kernel it runs before (or, after the last
    kernel, at the last); ``refresh`` [n_candidates, n]: the refresh seconds of each
    candidate's edges; ``p``, ``f``, ``r`` and ``t`` (cvxpy variables): the device stream's
    time at the end of each kernel, the host stream's at the end of each candidate in host
    order (:attr:`order`; a candidate the device runs adds nothing), the refresh seconds of
    the candidates before each (plan order; ``r[-1]`` all of them) and the step's time;
    ``floor_at`` and ``s``: per tier the host reaches, the host memory's floor
    (:mod:`~tmsim.planners.milp.formulation.host_memory`: its matrix and suffix variable)."""

    candidates: HostCandidates
    columns: IntArray
    sync_at: sp.csr_matrix
    refresh: sp.csr_matrix
    p: cp.Variable
    f: cp.Variable
    r: cp.Variable
    t: cp.Variable
    floor_at: tuple[sp.csr_matrix, ...] = ()
    s: tuple[cp.Variable, ...] = ()

    @cached_property
    def order(self) -> IntArray:
        """The candidates (indices) in the order the host runs them: by release, then plan
        order."""
        cand = self.candidates
        return np.asarray(np.lexsort((cand.kernel, cand.release)), dtype=np.int64)

    @cached_property
    def _picks(self) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
        """[n_candidates, n_kernels], in host order: the kernel each candidate is released
        at (a row of zeros for none) and the candidate's own kernel; [n_candidates, n]: its
        host seconds at its binary."""
        cand, n_k, n = self.candidates, self.sync_at.shape[0], self.sync_at.shape[1]
        order = self.order
        m = cand.count
        rel = cand.release[order]
        ok = np.flatnonzero(rel >= 0)
        release = sp.csr_matrix((np.ones(ok.size), (ok, rel[ok])), shape=(m, n_k))
        own = sp.csr_matrix((np.ones(m), (np.arange(m), cand.kernel[order])), shape=(m, n_k))
        work = sp.csr_matrix(
            (cand.seconds[order], (np.arange(m), self.columns[order])), shape=(m, n)
        )
        return release, own, work

    def constraints(self, c: cp.Variable, x: cp.Variable) -> list[cp.Constraint]:
        """The rows defining ``p``, ``r`` and the floor's suffixes ``s`` and bounding ``f``
        and ``t``."""
        n_k, m = self.sync_at.shape[0], self.candidates.count
        step = sp.csr_matrix(sp.eye(n_k) - sp.eye(n_k, k=-1))
        release, _, work = self._picks
        chain = sp.csr_matrix(sp.eye(m) - sp.eye(m, k=-1))
        refresh = self.refresh[self.order]
        out: list[cp.Constraint] = [
            step @ self.p == c + self.sync_at @ x,
            self.t >= self.p[-1],
            chain @ self.f >= work @ x,  # one host kernel at a time
            self.f >= release @ (self.p - c) + work @ x,  # after its inputs arrive
            self.t >= self.f + refresh @ x,  # then its refreshes
        ]
        if self.refresh.nnz:
            out += [
                self.r[0] == 0,
                self.r[1:] - self.r[:-1] == self.refresh @ x,
                # the copy path takes the refreshes of a candidate and of those after it
                # once the device reaches the candidate
                self.t >= self._at @ self.p + self.r[m] - self.r[:m],
            ]
        for at, s in zip(self.floor_at, self.s, strict=True):  # the host memory's floor
            suffix = sp.csr_matrix(sp.eye(n_k + 1, n_k + 2) - sp.eye(n_k + 1, n_k + 2, k=1))
            out += [
                suffix @ s == at @ x,
                s[n_k + 1] == 0,
                self.t >= s[0],
                self.t >= self.p - c + s[1 : n_k + 1],
            ]
        return out

    @cached_property
    def _at(self) -> sp.csr_matrix:
        """[n_candidates, n_kernels]: each candidate's kernel (plan order), where the device
        stream reaches its refreshes (:func:`refresh_position`: the next position)."""
        cand = self.candidates
        m, n_k = cand.count, self.sync_at.shape[0]
        return sp.csr_matrix((np.ones(m), (np.arange(m), cand.kernel)), shape=(m, n_k))

    def values(self, c: FloatArray, x: FloatArray) -> HostValues:
        """``p``, ``f``, ``r``, ``t`` and the floor's suffixes ``s`` at kernel costs ``c`` and
        binaries ``x`` (their least values)."""
        p = np.cumsum(c + self.sync_at @ x)
        release, _, work = self._picks
        start = release @ (p - c)
        each = work @ x
        f = np.zeros(self.candidates.count)
        done = 0.0
        for j in range(f.size):
            done = max(done, float(start[j])) + float(each[j])
            f[j] = done
        t = max(float(p[-1]), float(np.max(f + self.refresh[self.order] @ x, initial=0.0)))
        r = np.concatenate(([0.0], np.cumsum(self.refresh @ x)))
        if self.refresh.nnz:
            m = self.candidates.count
            t = max(t, float(np.max(self._at @ p + r[m] - r[:m])))
        suffixes = []
        for at in self.floor_at:
            s = np.concatenate((np.cumsum((at @ x)[::-1])[::-1], [0.0]))
            t = max(t, float(s[0]), float(np.max(p - c + s[1:-1], initial=0.0)))
            suffixes.append(s)
        return HostValues(p, f, r, t, tuple(suffixes))

    def on_host(self, x: npt.ArrayLike) -> IntArray:
        """The candidates ``x`` runs on the host, in the order the host runs them."""
        xv = np.asarray(x, dtype=np.float64)
        order = self.order
        on = order[xv[self.columns[order]] > 0.5]
        return np.asarray(self.candidates.kernel[on], dtype=np.int64)


def refresh_position(kernel: int) -> int:
    """Where a plan issues the refreshes of host kernel ``kernel``: at the next position, as
    asynchronous copies the device stream does not wait for (detached,
    :mod:`tmsim.plans.streams`); after the step's last kernel, synchronously."""
    return kernel + 1


def sync_at_kernels(sync_s: np.ndarray, kernel: np.ndarray, n_k: int) -> sp.csr_matrix:
    """[n_k, n]: each variable's synchronous seconds at the kernel it runs before (after the
    last kernel: at the last)."""
    cols = np.flatnonzero(sync_s)
    at = np.minimum(kernel[cols], n_k - 1)
    return sp.csr_matrix((sync_s[cols], (at, cols)), shape=(n_k, sync_s.size))


__all__ = ["HostTerms", "HostValues", "refresh_position", "sync_at_kernels"]
