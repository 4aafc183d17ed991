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
- *clashes*: a copy of an operand that the host would wait for after the release, or that
  would wait for the host kernel, and the host running the kernel exclude each other
  (:mod:`~tmsim.planners.milp.formulation.host_clash`);
- *device time*: each row bounding a candidate's device time ``c_k`` (its roofline, the
  roofline's cut) loses ``M_k h`` (``M_k``: the most the kernel can take), so a host kernel
  costs the device stream nothing but the copies beside it;
- *step time*: with ``P_j`` the device stream's time at the end of kernel ``j`` (its kernels'
  ``c`` and the synchronous copies and recomputes before each) and ``S_j = P_j - c_j`` the
  time kernel ``j`` starts, the host stream's time ``F_i`` at the end of each candidate in
  host order (by release, then plan order) is at least ``F_{i-1}`` and ``S_{release_i}``, plus
  its host seconds if the host runs it (one host kernel at a time, each after its inputs:
  exact at binary points), and the step takes ``T >= P_last``, ``T >= F_i + the refresh
  seconds of candidate i``, and, as the copy path takes the refreshes in turn once the
  device stream reaches them (a plan issues them at the next position as copies the device
  does not wait for,
  :func:`~tmsim.planners.milp.formulation.host_time.refresh_position`), ``T >=`` the
  device's time at each candidate plus the refreshes of it and of every candidate after it
  (the link takes them one at a time, :mod:`tmsim.plans.streams`: these rows are lower
  bounds on the plan's step, tight where the refreshes queue in plan order), and ``T`` is at
  least the host memory's floor (:mod:`tmsim.plans.hostmem`, rows of
  :mod:`~tmsim.planners.milp.formulation.host_memory`). The objective is ``T`` instead of
  ``sum(c) + sync``, which it equals without host kernels
  (:mod:`~tmsim.planners.milp.formulation.host_time` writes these rows).

A host kernel's seconds are its roofline on the host with every operand on the slowest tier
the host reaches (exact where it reaches one tier, as in every preset), its launch included,
as the plan's timeline takes it (:func:`~tmsim.plans.streams.host_times`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from hwmodels.errors import HardwareModelError
from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.measured import MeasuredTerms
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.segments import Segments
from tmsim.planners.milp.formulation.states import Catalogue, Kind
from tmsim.plans.hostmem import ready_positions
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
    some device kernel uses before it (those the release applies to); ``ready``: the kernel
    after whose end it may start at the earliest
    (:func:`~tmsim.plans.hostmem.ready_positions`), and ``tier_s`` [n, tiers]: the
    device-seconds it costs each tier on the host (:attr:`~tmsim.plans.streams.HostTimes.tier_s`),
    which the host memory's floor counts (:mod:`~tmsim.planners.milp.formulation.host_memory`).
    """

    kernel: IntArray
    release: IntArray
    seconds: FloatArray
    waits: tuple[tuple[int, ...], ...]
    ready: IntArray
    tier_s: FloatArray

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
    tier_s: dict[int, FloatArray] = {}  # device-seconds on each tier
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
        seconds = float(times.time_s[0])  # the roofline holds the launch
        if np.isfinite(seconds):
            chosen[k] = seconds
            tier_s[k] = times.tier_s[0]
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
        ready_positions(cost, kernels.tolist()),
        np.array([tier_s[k] for k in kernels.tolist()]),
    )


def link_rows(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    cand: HostCandidates,
    access_host: IntArray,
    host_member: sp.csr_matrix,
    seg: Segments,
    host_events: sp.csr_matrix,
) -> tuple[sp.csr_matrix, FloatArray]:
    """``A x <= b``: the rules tying each candidate's binary to where its operands are (see
    the module documentation). ``host_member @ x`` [segments]: 1 (or more) where the tensor
    is on a tier the host reaches over each segment of ``seg``; ``host_events @ x`` [rows of
    ``seg.changes``]: the copies the compact form's events add there over each row's range
    (a release kernel inside a gap sees its segment's state and the events before it)."""
    n_k, n = len(cost.graph.kernels), var.count
    changes = seg.changes
    by_tensor = np.argsort(changes.tensor, kind="stable")
    ranked = changes.tensor[by_tensor]
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
            at = seg.covering_or_none(waits, np.full(waits.size, r, dtype=np.int64), n_k)
            for t, s in zip(waits.tolist(), at.tolist(), strict=True):
                on = -host_member[s] if s >= 0 else sp.csr_matrix((1, n))
                lo_t, hi_t = np.searchsorted(ranked, [t, t + 1])
                near = by_tensor[lo_t:hi_t]
                near = near[(changes.start[near] <= r) & (changes.end[near] >= r)]
                if near.size:
                    on = on - sp.csr_matrix(host_events[near].sum(axis=0))
                rows.append(sp.csr_matrix(on + sp.csr_matrix(([1.0], ([0], [col])), shape=(1, n))))
                bounds.append(0.0)
    if not rows:
        return sp.csr_matrix((0, n)), np.zeros(0)
    return sp.csr_matrix(sp.vstack(rows)), np.asarray(bounds)


def host_free(
    rows: list[tuple[np.ndarray, sp.csr_matrix | None]],
    floor_s: np.ndarray,
    host: HostCandidates,
    columns: IntArray,
    n: int,
    measured: MeasuredTerms | None = None,
) -> tuple[list[tuple[np.ndarray, sp.csr_matrix | None]], np.ndarray]:
    """``rows`` (each bounding the kernels' own time) less ``M h_k`` at each candidate ``k``,
    with ``M`` the most the row can reach there (its constant and every positive coefficient
    of its binaries and, for the rows the measured terms shift, of ``z``: the least ``M``
    that keeps the row valid, so the LP relaxation gains no more than it must), and
    ``floor_s`` with the candidates' least time 0 (the host may take them off the device)."""
    k = host.kernel
    out = []
    for i, (const, m) in enumerate(rows):
        most = np.asarray(const, dtype=np.float64)[k].copy()
        if m is not None:
            most += np.asarray(sp.csr_matrix(m)[k].maximum(0).sum(axis=1)).ravel()
        if measured is not None and i < len(measured.shifts):
            most += np.asarray(measured.shifts[i][k].maximum(0).sum(axis=1)).ravel()
        most = np.maximum(most, 0.0)
        drop = sp.csr_matrix((-most, (k, columns)), shape=(floor_s.size, n))
        out.append((const, drop if m is None else sp.csr_matrix(m + drop)))
    floor = floor_s.copy()
    floor[k] = 0.0
    return out, floor


def host_floor(
    floor_s: np.ndarray, host: HostCandidates, columns: IntArray
) -> tuple[IntArray, np.ndarray, IntArray]:
    """The rows ``c_k >= L_k (1 - h_k)`` at each candidate ``k`` that has a device floor
    ``L_k`` (``floor_s`` before :func:`host_free`: its least device time), as (kernels,
    ``L_k``, the columns of their ``h_k``). Valid at both values of ``h_k`` (the device runs it
    in at least ``L_k``, or the host runs it) and implied at every binary point by the rows
    :func:`host_free` weakens; in the LP relaxation it keeps what those lose at a small
    fractional ``h_k``, which takes ``M h_k`` off a row whose ``M`` may be many times ``L_k``."""
    keep = floor_s[host.kernel] > 0
    return host.kernel[keep], np.asarray(floor_s[host.kernel][keep]), columns[keep]


__all__ = [
    "HostCandidates",
    "find_candidates",
    "host_access",
    "host_floor",
    "host_free",
    "host_reach",
    "link_rows",
]
