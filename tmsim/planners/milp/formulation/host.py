"""Kernels the host compute may run instead of the compute device, as decisions of the
placement MILP (:mod:`~tmsim.planners.milp.formulation.build`).

On a platform with a host compute (:class:`hwmodels.compute.HostCompute`) every *candidate*
kernel gets one binary ``h`` (1: the host runs it), placed after the edge and initial-state
binaries. A candidate is a kernel of the update phase that makes no tensor, that the host
has a peak for, and whose operands no device kernel uses after it (its result is for the
next step: ZeRO-Offload's split, :mod:`tmsim.planners.runtimes.zero`, is the plan with every
update kernel on the host). The rules, all linear in the binaries:

- *where operands are*: at a candidate's gadget of each operand the during state must hold
  a tier the device reaches when ``h = 0`` and one the host reaches when ``h = 1`` (a
  state with both serves either). At an in-place update the host may also keep the other
  copies of the tensor (a during state of several tiers, which a device kernel may not
  have): it updates its own and then *refreshes* the others, copying the new value from its
  tier after the kernel (the updated weights ZeRO-Offload copies back to the device);
- *release*: an operand some device kernel uses before the candidate (a gradient the
  backward pass made, a weight it read) must be on a host tier once the copies after its
  last device use have had their chance: at the start of kernel ``release``, the one after
  the last device use and the window of kernels beside which copies may run after it (none
  for ``sync``, whose copies run before the next kernel), or the candidate itself if that
  comes first;
- *device time*: each row bounding a candidate's device time ``c_k`` (its roofline, the
  roofline's cut) loses ``M_k h`` (``M_k``: the most the kernel can take), so a host kernel
  costs the device stream nothing but the copies beside it;
- *step time*: with ``P_j`` the device stream's time at the end of kernel ``j`` (its kernels'
  ``c`` and the synchronous copies and recomputes before each) and ``S_j = P_j - c_j`` the
  time kernel ``j`` starts, the host stream's time ``F_i`` at the end of each candidate in
  host order (by release, then plan order) is at least ``F_{i-1}`` and ``S_{release_i}``, plus
  its host seconds if the host runs it (one host kernel at a time, each after its inputs:
  exact at binary points), and the step takes ``T >= P_last``, ``T >= F_i + the refresh
  seconds of candidate i``, and, as the copy path takes the refreshes in turn after the
  device stream reaches them (a plan issues them after the last kernel the device runs,
  :func:`refresh_position`), ``T >=`` the device's time at each candidate, and at each
  later device kernel, plus the refreshes that wait for it. The objective is ``T`` instead
  of ``sum(c) + sync``, which it equals without host kernels.

A host kernel's seconds are its roofline on the host with every operand on the slowest tier
the host reaches (exact where it reaches one tier, as in every preset), plus its launch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from hwmodels.errors import HardwareModelError
from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue, Kind
from tmsim.plans.streams import host_times
from tmsim.workload.graph import Phase

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class HostCandidates:
    """The kernels the host may run (ascending ``kernel``), each one's ``release`` (the
    kernel at whose start its inputs from the device are on a host tier; -1: none come from
    the device), ``seconds`` on the host, and ``waits``: per candidate, the operand tensors
    some device kernel uses before it (those the release applies to)."""

    kernel: IntArray
    release: IntArray
    seconds: FloatArray
    waits: tuple[tuple[int, ...], ...]

    @property
    def count(self) -> int:
        return int(self.kernel.size)


def host_reach(cost: CostModel) -> BoolArray:
    """[n_tiers]: the tiers the host compute reads and writes (none without one)."""
    platform = cost.platform
    if platform.host_compute is None:
        return np.zeros(len(platform.tiers), dtype=bool)
    return np.array(platform.host_kernel_tier_mask(), dtype=bool)


def host_access(states: tuple[frozenset[int], ...], reach: BoolArray) -> IntArray:
    """Per state, the fastest of its tiers the host reaches (-1: none)."""
    return np.array([min((t for t in s if reach[t]), default=-1) for s in states], dtype=np.int64)


def find_candidates(cost: CostModel, window: int) -> HostCandidates | None:
    """The candidate kernels of ``cost`` (see the module documentation), with releases for a
    window of ``window`` kernels (0 for a formulation without windows); None if there is
    none (no host compute, no update phase, or no update kernel the host can run)."""
    graph, platform = cost.graph, cost.platform
    if platform.host_compute is None:
        return None
    ptr, op_t = cost.op_ptr, cost.op_tensor
    producers = graph.producers
    n_k = len(graph.kernels)

    def operands(k: int) -> list[int]:
        return sorted(set(op_t[int(ptr[k]) : int(ptr[k + 1])].tolist()))

    slowest = np.full(op_t.size, int(np.flatnonzero(host_reach(cost))[-1]), dtype=np.int64)
    chosen: dict[int, float] = {}
    for k, kern in enumerate(graph.kernels):
        if kern.phase is not Phase.UPDATE:
            continue
        ops = operands(k)
        if not ops or any(int(producers[t]) == k for t in ops):
            continue
        try:
            times = host_times(cost, (k,), slowest)
        except HardwareModelError:
            continue  # the host has no peak for its dtype
        seconds = float(times.time_s[0]) + times.launch_s
        if np.isfinite(seconds):
            chosen[k] = seconds
    users: dict[int, list[int]] = {}
    for k in range(n_k):
        for t in operands(k):
            users.setdefault(t, []).append(k)
    while True:  # a device kernel after a candidate must not need what it updates
        drop = [
            k
            for k in chosen
            if any(j > k and j not in chosen for t in operands(k) for j in users[t])
        ]
        if not drop:
            break
        for k in drop:
            del chosen[k]
    if not chosen:
        return None
    kernels = np.array(sorted(chosen), dtype=np.int64)
    release, waits = [], []
    for k in kernels.tolist():
        before = {
            t: max(j for j in users[t] if j < k and j not in chosen)
            for t in operands(k)
            if any(j < k and j not in chosen for j in users[t])
        }
        waits.append(tuple(sorted(before)))
        last = max(before.values(), default=-1)
        release.append(min(last + max(window, 0) + 1, k) if last >= 0 else -1)
    return HostCandidates(
        kernels,
        np.array(release, dtype=np.int64),
        np.array([chosen[k] for k in kernels.tolist()]),
        tuple(waits),
    )


def refresh_seconds(cost: CostModel, tensor: int, state: frozenset[int], reach: BoolArray) -> float:
    """Seconds to copy ``tensor``, updated on the fastest tier of ``state`` the host reaches,
    to every other tier of ``state`` (the copies taking turns); inf where a copy path is
    missing."""
    src = min(t for t in state if reach[t])
    total = 0.0
    for dst in sorted(state - {src}):
        if not cost.has_path(src, dst):
            return float("inf")
        total += float(cost.move_s(src, dst, MoveMode.ASYNC)[tensor])
    return total


def link_rows(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    cand: HostCandidates,
    access_host: IntArray,
    host_member: sp.csr_matrix,
    seg_index: Callable[[IntArray, IntArray], IntArray],
) -> tuple[sp.csr_matrix, FloatArray]:
    """``A x <= b``: the rules tying each candidate's binary to where its operands are (see
    the module documentation). ``host_member @ x`` [segments]: 1 (or more) where the tensor
    is on a tier the host reaches over a segment; ``seg_index(tensors, kernels)``: the
    segment of each tensor covering each kernel (-1: none)."""
    n_k, n = len(cost.graph.kernels), var.count
    key = gad.tensor * (n_k + 1) + gad.kernel
    prefetch = cat.of_phase(True)
    dst = cat.edge_dst[prefetch]
    several = np.array([len(cat.states[s]) > 1 for s in cat.edge_src[prefetch]], dtype=bool)
    stays = (cat.edge_kind[prefetch] == Kind.STAY) & several
    no_device = cat.access[dst] < 0
    no_host = access_host[dst] < 0
    rows: list[sp.csr_matrix] = []
    bounds: list[float] = []

    def edge_row(gadget: int, mask: BoolArray, col: int, sign: float) -> sp.csr_matrix:
        cols = var.edge_index[gadget, prefetch[mask]]
        cols = cols[cols >= 0]
        data = np.concatenate((np.ones(cols.size), [sign]))
        return sp.csr_matrix(
            (data, (np.zeros(cols.size + 1, dtype=np.int64), np.append(cols, col))),
            shape=(1, n),
        )

    for i, k in enumerate(cand.kernel.tolist()):
        col = var.host_first + i
        lo, hi = int(cost.op_ptr[k]), int(cost.op_ptr[k + 1])
        for t in sorted(set(cost.op_tensor[lo:hi].tolist())):
            g = int(np.searchsorted(key, t * (n_k + 1) + k))
            rows += [edge_row(g, no_device, col, -1.0), edge_row(g, no_host, col, 1.0)]
            bounds += [0.0, 1.0]
            if gad.updates[g]:
                rows.append(edge_row(g, stays, col, -1.0))
                bounds.append(0.0)
        waits = np.asarray(cand.waits[i], dtype=np.int64)
        if waits.size:
            r = int(cand.release[i])
            seg = seg_index(waits, np.full(waits.size, r, dtype=np.int64))
            for s in seg.tolist():
                on = -host_member[s] if s >= 0 else sp.csr_matrix((1, n))
                rows.append(sp.csr_matrix(on + sp.csr_matrix(([1.0], ([0], [col])), shape=(1, n))))
                bounds.append(0.0)
    if not rows:
        return sp.csr_matrix((0, n)), np.zeros(0)
    return sp.csr_matrix(sp.vstack(rows)), np.asarray(bounds)


def refresh_matrix(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    cand: HostCandidates,
    reach: BoolArray,
) -> tuple[sp.csr_matrix, BoolArray]:
    """[n_candidates, n]: the refresh seconds of each candidate's several-tier during states
    at its in-place updates, and the variables whose refresh cannot run (a copy path
    missing: to be fixed at 0)."""
    n = var.count
    index = {int(k): i for i, k in enumerate(cand.kernel.tolist())}
    forbidden = np.zeros(n, dtype=bool)
    rows, cols, data = [], [], []
    prefetch = cat.of_phase(True)
    stays = [
        int(e)
        for e in prefetch
        if cat.edge_kind[e] == Kind.STAY and len(cat.states[int(cat.edge_src[e])]) > 1
    ]
    for g in np.flatnonzero(gad.updates & np.isin(gad.kernel, cand.kernel)).tolist():
        i, t = index[int(gad.kernel[g])], int(gad.tensor[g])
        for e in stays:
            v = int(var.edge_index[g, e])
            if v < 0:
                continue
            seconds = refresh_seconds(cost, t, cat.states[int(cat.edge_src[e])], reach)
            if np.isfinite(seconds):
                rows.append(i)
                cols.append(v)
                data.append(seconds)
            else:
                forbidden[v] = True
    return sp.csr_matrix((data, (rows, cols)), shape=(cand.count, n)), forbidden


@dataclass(frozen=True)
class HostValues:
    """The values of :class:`HostTerms`' variables at some binaries."""

    p: FloatArray
    f: FloatArray
    r: FloatArray
    t: float


@dataclass(frozen=True)
class HostTerms:
    """The host decisions of a model and the step time they make (see the module
    documentation).

    ``columns`` [n_candidates]: each candidate's binary in ``x``; ``sync_at`` [n_kernels, n]:
    the synchronous seconds of each variable at the kernel it runs before (or, after the last
    kernel, at the last); ``refresh`` [n_candidates, n]: the refresh seconds of each
    candidate's edges; ``p``, ``f``, ``r`` and ``t`` (cvxpy variables): the device stream's
    time at the end of each kernel, the host stream's at the end of each candidate in host
    order (:meth:`order`; a candidate the device runs adds nothing), the refresh seconds of
    the candidates before each (plan order; ``r[-1]`` all of them) and the step's time."""

    candidates: HostCandidates
    columns: IntArray
    sync_at: sp.csr_matrix
    refresh: sp.csr_matrix
    p: cp.Variable
    f: cp.Variable
    r: cp.Variable
    t: cp.Variable

    def order(self) -> IntArray:
        """The candidates (indices) in the order the host runs them: by release, then plan
        order."""
        cand = self.candidates
        return np.asarray(np.lexsort((cand.kernel, cand.release)), dtype=np.int64)

    def _picks(self) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
        """[n_candidates, n_kernels], in host order: the kernel each candidate is released
        at (a row of zeros for none) and the candidate's own kernel; [n_candidates, n]: its
        host seconds at its binary."""
        cand, n_k, n = self.candidates, self.sync_at.shape[0], self.sync_at.shape[1]
        order = self.order()
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
        """The rows defining ``p`` and ``r`` and bounding ``f`` and ``t``."""
        n_k, m = self.sync_at.shape[0], self.candidates.count
        step = sp.csr_matrix(sp.eye(n_k) - sp.eye(n_k, k=-1))
        release, _, work = self._picks()
        chain = sp.csr_matrix(sp.eye(m) - sp.eye(m, k=-1))
        refresh = self.refresh[self.order()]
        out: list[cp.Constraint] = [
            step @ self.p == c + self.sync_at @ x,
            self.t >= self.p[-1],
            chain @ self.f >= work @ x,  # one host kernel at a time
            self.f >= release @ (self.p - c) + work @ x,  # after its inputs arrive
            self.t >= self.f + refresh @ x,  # then its refreshes
        ]
        if self.refresh.nnz:
            at, big, device, counted = self._deferred()
            out += [
                self.r[0] == 0,
                self.r[1:] - self.r[:-1] == self.refresh @ x,
                # from a candidate's own kernel on, the refreshes of it and those after it
                self.t >= at @ self.p + self.r[m] - self.r[:m],
                # a candidate the device runs holds back the refreshes of those before it
                self.t >= at @ self.p + self.r[:m] - big @ x,
            ]
            if device.size:  # as does every later kernel that is no candidate
                pick = sp.csr_matrix(
                    (np.ones(device.size), (np.arange(device.size), device)),
                    shape=(device.size, n_k),
                )
                out.append(self.t >= pick @ self.p + self.r[counted])
        return out

    def _deferred(self) -> tuple[sp.csr_matrix, sp.csr_matrix, IntArray, IntArray]:
        """What the refreshes wait for (a plan issues them after the last kernel the device
        runs, :func:`refresh_position`): [n_candidates, n_kernels] each candidate's kernel
        (plan order); [n_candidates, n] the most the refreshes of the candidates before it
        take, at its binary (so that ``h = 1`` takes them off its row); the kernels after the
        first candidate that are no candidates (``device``), and how many candidates come
        before each (``counted``)."""
        cand = self.candidates
        m, n_k, n = cand.count, self.sync_at.shape[0], self.sync_at.shape[1]
        at = sp.csr_matrix((np.ones(m), (np.arange(m), cand.kernel)), shape=(m, n_k))
        most = np.concatenate(([0.0], np.cumsum(np.asarray(self.refresh.sum(axis=1)).ravel())))
        big = sp.csr_matrix((most[:m], (np.arange(m), self.columns)), shape=(m, n))
        device = np.setdiff1d(np.arange(int(cand.kernel[0]) + 1, n_k), cand.kernel)
        counted = np.searchsorted(cand.kernel, device).astype(np.int64)
        return at, big, device, counted

    def values(self, c: FloatArray, x: FloatArray) -> HostValues:
        """``p``, ``f``, ``r`` and ``t`` at kernel costs ``c`` and binaries ``x`` (their least
        values)."""
        p = np.cumsum(c + self.sync_at @ x)
        release, _, work = self._picks()
        start = release @ (p - c)
        each = work @ x
        f = np.zeros(self.candidates.count)
        done = 0.0
        for j in range(f.size):
            done = max(done, float(start[j])) + float(each[j])
            f[j] = done
        t = max(float(p[-1]), float(np.max(f + self.refresh[self.order()] @ x, initial=0.0)))
        r = np.concatenate(([0.0], np.cumsum(self.refresh @ x)))
        if self.refresh.nnz:
            at, big, device, counted = self._deferred()
            m = self.candidates.count
            t = max(
                t, float(np.max(at @ p + r[m] - r[:m])), float(np.max(at @ p + r[:m] - big @ x))
            )
            if device.size:
                t = max(t, float(np.max(p[device] + r[counted])))
        return HostValues(p, f, r, t)

    def on_host(self, x: npt.ArrayLike) -> IntArray:
        """The candidates ``x`` runs on the host, in the order the host runs them."""
        xv = np.asarray(x, dtype=np.float64)
        order = self.order()
        on = order[xv[self.columns[order]] > 0.5]
        return np.asarray(self.candidates.kernel[on], dtype=np.int64)


def refresh_position(kernel: int, hosted: npt.ArrayLike, n_k: int) -> int:
    """Where a plan issues the refreshes of host kernel ``kernel`` when the host runs the
    kernels ``hosted``: beside the kernel after it, or after the last kernel the device runs
    if that comes later (a copy waiting for the host beside a device kernel would hold the
    device stream, :mod:`tmsim.plans.streams`); ``n_k``: after the step's last kernel."""
    on = np.zeros(n_k, dtype=bool)
    on[np.asarray(hosted, dtype=np.int64)] = True
    device = np.flatnonzero(~on)
    last = int(device[-1]) if device.size else -1
    return max(kernel + 1, last + 1)


__all__ = [
    "HostCandidates",
    "HostTerms",
    "HostValues",
    "find_candidates",
    "host_access",
    "host_reach",
    "link_rows",
    "refresh_matrix",
    "refresh_position",
    "refresh_seconds",
]
