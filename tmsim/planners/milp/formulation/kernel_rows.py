"""The rows bounding each kernel's cost in the placement MILP: its roofline under the
tensors' states, and the asynchronous copies beside it (idle, or at what interference makes
them cost), with the cut that makes the LP pay for what a kernel cannot hide.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from hwmodels.timing import Overlap
from tmsim.cost import BesideCosts, CostModel
from tmsim.planners.heuristics.placement import kernel_tiers
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue

#: Most thresholds of :func:`threshold_rows` per kernel: on ResNet-200 b64's asynchronous LP
#: on the RTX 2080 Ti one lifted it from 1.1707 to 1.1887, three to 1.1890, six no further;
#: on DenseNet-264 b128's there (LP 4.3172 with none, 4.3172 with one or three) each block of
#: rows cost dual simplex iterations: 56.9k with none, 58.9k with one, 60.3k with three.
THRESHOLDS = 1
#: Lower bounds of the kernel costs ``c``: ``c >= const + matrix @ x`` for each pair (no
#: matrix: ``c >= const``).
Rows = list[tuple[np.ndarray, sp.csr_matrix | None]]


def beside_costs(
    cost: CostModel,
    cat: Catalogue,
    gad: Gadgets,
    var: Variables,
    copies: Copies,
    beside: BesideCosts,
) -> tuple[Copies, sp.csr_matrix, np.ndarray]:
    """The asynchronous copies at what ``beside`` says they cost: their seconds, the matrix
    of the delays they cause their kernels [n_kernels, n] and the copies that cannot run."""
    n, n_k = var.count, len(cost.graph.kernels)
    cols = np.flatnonzero(copies.asynchronous)
    seconds = copies.seconds.copy()
    forbidden = np.zeros(n, dtype=bool)
    if cols.size == 0:
        return copies, sp.csr_matrix((n_k, n)), forbidden
    src = copies.source[cols]
    dst = cat.edge_add[var.edge_type[cols]]
    k = copies.kernel[cols]
    nbytes = cost.graph.sizes_bytes[gad.tensor[var.edge_gadget[cols]]].astype(np.float64)
    names = cost.platform.tier_names
    pairs = list(zip(src.tolist(), dst.tolist(), strict=True))
    path = np.array([beside.path(s, d) for s, d in pairs], dtype=np.int64)
    latency = np.array([cost.platform.copy_latency_s(names[s], names[d]) for s, d in pairs])
    per_byte = beside.copy_s_per_byte[k, path]
    delay = beside.slow_s_per_byte[k, path]
    moving = nbytes > 0
    blocked = (~np.isfinite(per_byte) | ~np.isfinite(delay)) & moving
    usable = moving & ~blocked
    seconds[cols] = np.where(usable, latency + nbytes * np.where(usable, per_byte, 0.0), 0.0)
    forbidden[cols[blocked]] = True
    charge = np.where(usable, nbytes * np.where(usable, delay, 0.0), 0.0)
    keep = charge > 0
    slow = sp.csr_matrix((charge[keep], (k[keep], cols[keep])), shape=(n_k, n))
    return replace(copies, seconds=seconds), slow, forbidden


def copy_rows(copies: Copies, floor_s: np.ndarray, n: int) -> Rows:
    """The rows bounding ``c`` by the asynchronous copies beside each kernel.

    ``c_k >= sum_e s_e x_e`` (the copies take turns on the copy path) and the tighter-in-LP
    ``c_k >= L_k + sum_e max(0, s_e - L_k) x_e`` with ``L_k`` = ``floor_s``, the least time
    kernel ``k`` can take. The second is valid at every binary point: with copies ``S``
    beside ``k``, of which ``P`` are longer than ``L_k``, its right side is ``L_k`` when ``P``
    is empty and else ``s(P) - (|P| - 1) L_k <= s(S)``, so it never exceeds ``max(L_k,
    s(S)) <= c_k``. The LP relaxation, which spreads a fraction of a copy over every kernel
    of its window and so hides it, must now pay for the part of each long copy a kernel
    cannot hide (on ResNet-50 b8 at 4:1 with a window of 1 HiGHS proves 1% in 1.9 s with it
    against 28.7 s without).
    """
    n_k = floor_s.size
    is_async = copies.asynchronous
    cols = np.flatnonzero(is_async)
    k = copies.kernel[cols]
    beside = (copies.seconds[cols], (k, cols))
    out: Rows = [(np.zeros(n_k), sp.csr_matrix(beside, shape=(n_k, n)))]
    excess = np.maximum(copies.seconds[cols] - floor_s[k], 0.0)
    long = excess > 0
    if long.any():
        cut = (excess[long], (k[long], cols[long]))
        out.append((floor_s.copy(), sp.csr_matrix(cut, shape=(n_k, n))))
    return out + threshold_rows(copies.seconds[cols], k, cols, floor_s, n)


def threshold_rows(
    seconds: np.ndarray, kernel: np.ndarray, cols: np.ndarray, floor_s: np.ndarray, n: int
) -> Rows:
    """More cuts on ``c_k >= max(L_k, sum_e s_e x_e)`` (copies of ``seconds`` in columns
    ``cols`` beside ``kernel``; ``L_k`` = ``floor_s``), each at a threshold ``0 < t < L_k``::

        c_k >= t + sum_e max(0, s_e - b_e) x_e,   b_e = max(t - max(0, L_k - s_e), t / 2)

    Valid at every binary point: with no copy of positive term the right side is ``t <=
    L_k``; with one, at most ``t + s_e - (t - max(0, L_k - s_e)) = max(s_e, L_k)``; with
    ``m >= 2`` of positive term, at most ``t + sum s_e - m t / 2 <= sum s_e``. The copy rows
    above are the thresholds ``L_k`` and 0; in between, a copy shorter than the kernel pays
    for the part of it that, beside another copy, the kernel would not hide, which the LP
    relaxation otherwise spreads over fractions of long copies. HiGHS's cut pool after the
    root of the asynchronous model of ResNet-200 b64 on the RTX 2080 Ti (a root that took
    its branch and bound 68 s) held 136 cuts, each on one kernel's cost and the copies beside
    it; the eight read term by term were of this form (threshold ``2 (L_k - s)`` for a copy
    of ``s`` a little over half the kernel's least time). Made here, up to :data:`THRESHOLDS`
    per kernel (the largest of ``2 (L_k - s_e)`` for each copy with ``L_k / 2 < s_e < L_k``
    and of ``L_k / 2``, which wins where every such copy is over three quarters of the
    kernel), one lifts that model's LP from 1.1707 to 1.1887, within 0.8% of the best plan
    found before (1.1980), in about the same LP time, and no branch and bound is needed."""
    n_k = floor_s.size
    live = seconds > 0
    s, k, cols = seconds[live], kernel[live], cols[live]
    if s.size == 0:
        return []
    floor = floor_s[k]
    between = (s > floor / 2) & (s < floor)
    cand_k = np.concatenate([k[between], np.unique(k)])
    cand_t = np.concatenate([2 * (floor[between] - s[between]), floor_s[np.unique(k)] / 2])
    # per kernel its distinct thresholds, largest first; the first THRESHOLDS of them
    order = np.lexsort((-cand_t, cand_k))
    cand_k, cand_t = cand_k[order], cand_t[order]
    fresh = np.r_[True, (cand_k[1:] != cand_k[:-1]) | (cand_t[1:] != cand_t[:-1])]
    cand_k, cand_t = cand_k[fresh], cand_t[fresh]
    first = np.r_[True, cand_k[1:] != cand_k[:-1]]
    starts = np.flatnonzero(first)
    rank = np.arange(cand_k.size) - np.repeat(starts, np.diff(np.r_[starts, cand_k.size]))
    out: Rows = []
    for j in range(min(THRESHOLDS, int(rank.max()) + 1)):
        t = np.zeros(n_k)
        at = rank == j
        t[cand_k[at]] = cand_t[at]
        te = t[k]
        b = np.maximum(te - np.maximum(floor - s, 0.0), te / 2)
        alpha = np.where(te > 0, np.maximum(s - b, 0.0), 0.0)
        keep = alpha > 0
        matrix = sp.csr_matrix((alpha[keep], (k[keep], cols[keep])), shape=(n_k, n))
        out.append((t, matrix))
    return out


def time_rows(
    cost: CostModel, access: dict[int, sp.csr_matrix], op_seg: np.ndarray, floor_s: np.ndarray
) -> tuple[Rows, np.ndarray]:
    """The lower bounds of the kernel costs ``c`` from the roofline (see the module doc), and
    the least value they allow ``c`` whatever the binaries: ``floor_s`` (every operand on the
    kernel tier where it is accessed fastest), or, where kernels reach one tier only, the
    one row itself (measured times included)."""
    n_k = len(cost.graph.kernels)
    k = cost.op_kernel
    reach = kernel_tiers(cost.platform)

    def operand_s(tier: int) -> np.ndarray:
        return cost.operand_s(np.full(k.size, tier, dtype=np.int64))

    if len(reach) == 1:
        only = cost.kernel_times_s(np.full(k.size, reach[0], dtype=np.int64))
        return [(only, None)], only
    ref = reach[-1]
    ref_s = operand_s(ref)
    to_kernel = sp.csr_matrix((np.ones(k.size), (k, np.arange(k.size))), shape=(n_k, k.size))
    mem0 = to_kernel @ ref_s
    gains = [
        to_kernel @ sp.diags(operand_s(tier) - ref_s) @ access[tier][op_seg] for tier in reach[:-1]
    ]
    gain = sp.csr_matrix(gains[0] if len(gains) == 1 else sum(gains[1:], gains[0]))
    base_s = cost.compute_s + cost.launch_s
    if cost.overlap is Overlap.MAX:
        return [(base_s, None), (mem0 + cost.launch_s, gain)], floor_s
    return [(base_s + mem0, gain)], floor_s


def memory_cut_rows(
    cost: CostModel, access: dict[int, sp.csr_matrix], op_seg: np.ndarray, floor_s: np.ndarray
) -> Rows:
    """The roofline's cut: for each kernel ``k`` under the ``max`` overlap rule,

    ``c_k >= L_k + sum_j sum_t max(0, F_k + d_jt - L_k) z_jt``

    with ``L_k`` = ``floor_s`` (its least time), ``F_k`` its memory time with every operand
    on the tier it is accessed fastest plus the launch overhead, ``d_jt`` what operand ``j``
    adds to the memory time on tier ``t`` instead, and ``z_jt`` whether it is accessed there
    (the slowest kernel tier's ``z`` is one less the faster tiers'). Valid at every binary
    point: with ``P`` the operands whose term is positive, the right side is ``L_k`` when
    ``P`` is empty and else ``F_k + d(P) - (|P| - 1)(L_k - F_k) <= F_k + d(all)``, the
    memory row, as ``L_k >= F_k``. The LP relaxation, which holds a fraction of an operand on
    a slower tier for free while the kernel's compute hides it, must now pay for the part of
    each slow operand that the compute of an integer placement would not hide. Kernels with
    measured times keep ``c_k >= L_k`` (their time is not the roofline's); none where
    kernels reach one tier or the overlap rule adds compute and memory (then the memory row
    is exact in the LP already)."""
    n_k = len(cost.graph.kernels)
    reach = kernel_tiers(cost.platform)
    if len(reach) == 1 or cost.overlap is not Overlap.MAX:
        return []
    k = cost.op_kernel
    per_tier = np.stack([cost.operand_s(np.full(k.size, t, dtype=np.int64)) for t in reach])
    fastest = per_tier.min(axis=0)
    lead = np.bincount(k, weights=fastest, minlength=n_k) + cost.launch_s  # F_k
    excess = np.maximum(lead[k] + (per_tier - fastest) - floor_s[k], 0.0)  # [tiers, ops]
    measured = np.zeros(n_k, dtype=bool)
    measured[[kern for kern, _ in cost.measured]] = True
    excess[:, measured[k]] = 0.0
    ref = excess[-1]
    const = floor_s + np.bincount(k, weights=ref, minlength=n_k)
    to_kernel = sp.csr_matrix((np.ones(k.size), (k, np.arange(k.size))), shape=(n_k, k.size))
    parts = [
        to_kernel @ sp.diags(excess[i] - ref) @ access[tier][op_seg]
        for i, tier in enumerate(reach[:-1])
    ]
    matrix = sp.csr_matrix(parts[0] if len(parts) == 1 else sum(parts[1:], parts[0]))
    if not (ref.any() or matrix.nnz):
        return []
    return [(const, matrix)]


def time_row_values(cost: CostModel, kernel: int, tiers: tuple[int, ...]) -> list[float]:
    """The right sides of the rows :func:`time_rows` gives kernel ``kernel`` (where kernels
    reach more than one tier), in their order, with its ``j``-th operand on tier
    ``tiers[j]``: with the ``max`` overlap rule its compute time and its memory time, each
    plus the launch overhead; with ``sum``, their sum. The roofline's: measured times aside."""
    memory_s = cost.kernel_memory_s(kernel, tiers)
    compute_s = float(cost.compute_s[kernel])
    if cost.overlap is Overlap.MAX:
        return [compute_s + cost.launch_s, memory_s + cost.launch_s]
    return [compute_s + memory_s + cost.launch_s]


__all__ = [
    "Rows",
    "beside_costs",
    "copy_rows",
    "memory_cut_rows",
    "threshold_rows",
    "time_row_values",
    "time_rows",
]
