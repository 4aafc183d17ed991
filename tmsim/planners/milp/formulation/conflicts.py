"""Clique rows from the fastest tier's capacity: tensors too large to share it.

The capacity row of kernel ``k`` is a knapsack, ``sum_t size_t y_tk <= L_k``, with ``y_tk``
(0 or 1 at every binary point) saying whether tensor ``t`` occupies the fastest tier there.
Two tensors whose sizes add up to more than ``L_k`` never occupy it together at ``k``, and
tensors that pairwise conflict form a clique: ``sum_{t in Q} y_tk <= 1``. The LP relaxation
does not see this: it keeps a fraction of a tensor that fills most of the tier at every
kernel of its life and the rest of the tier for others (VGG19 b8 at 4:1 on Optane: three
411 MB tensors, the first linear layer's weight, gradient and momentum, in 444 MB).

At each kernel the tensors larger than half the limit pairwise conflict (the *big* ones);
a tensor no larger than that joins them when it conflicts with the smallest of them. Each
such tensor gives one clique with the big ones (two mid-sized tensors may fit together, so
they do not share a clique); with none, the big ones alone form one where there are two.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.planners.milp.formulation.segments import Segments
from tmsim.planners.milp.formulation.windows import Changes

IntArray = npt.NDArray[np.int64]


def occupancy_rows(
    seg: Segments, tensors: IntArray, kernels: IntArray, n_k: int, n: int
) -> sp.csr_matrix:
    """[pairs, n]: row ``i`` is ``y`` of tensor ``tensors[i]`` at kernel ``kernels[i]`` on
    the fastest tier, as the capacity rows count it: the member row of the tensor's segment
    covering the kernel plus every change of the compact form covering it."""
    member = seg.member[0]
    which = seg.covering(tensors, kernels, n_k)
    own = (seg.tensor[which] == tensors) & (seg.start[which] <= kernels)
    own &= kernels <= seg.end[which]
    out = sp.csr_matrix(sp.diags(own.astype(np.float64)) @ member[which])
    changes: Changes = seg.changes
    if changes.tensor.size:
        pairs, picked = [], []
        for t in np.unique(tensors).tolist():
            mine = np.flatnonzero(changes.tensor == t)
            at = np.flatnonzero(tensors == t)
            hit = (changes.start[mine][None, :] <= kernels[at][:, None]) & (
                changes.end[mine][None, :] >= kernels[at][:, None]
            )
            p, c = np.nonzero(hit)
            pairs.append(at[p])
            picked.append(mine[c])
        pair, change = np.concatenate(pairs), np.concatenate(picked)
        pick = sp.csr_matrix(
            (np.ones(pair.size), (pair, change)), shape=(tensors.size, changes.tensor.size)
        )
        out = sp.csr_matrix(out + pick @ changes.member[0])
    return out


def conflict_rows(seg: Segments, sizes_bytes: IntArray, limits: IntArray, n: int) -> sp.csr_matrix:
    """The clique rows (each ``row @ x <= 1``) of the fastest tier's capacity at every kernel
    under ``limits`` (module doc), duplicates dropped; [0, n] where no two tensors conflict."""
    n_k = limits.size
    if n_k == 0 or sizes_bytes.size == 0:
        return sp.csr_matrix((0, n))
    start = np.full(sizes_bytes.size, n_k, dtype=np.int64)
    end = np.full(sizes_bytes.size, -1, dtype=np.int64)
    np.minimum.at(start, seg.tensor, seg.start)
    np.maximum.at(end, seg.tensor, seg.end)
    # only a tensor larger than some limit less the largest tensor that fits conflicts with
    # another, and only at kernels where one larger than half the limit is live
    fits = sizes_bytes[sizes_bytes <= int(limits.max())]
    largest = int(fits.max()) if fits.size else 0
    cand = np.flatnonzero(sizes_bytes > int(limits.min()) - largest)
    halves = cand[2 * sizes_bytes[cand] > int(limits.min())]
    marks = np.zeros(n_k + 1, dtype=np.int64)
    np.add.at(marks, start[halves], 1)
    np.add.at(marks, np.maximum(end[halves] + 1, start[halves]), -1)
    groups: list[list[int]] = []
    kernel_of: list[int] = []
    c_start, c_end = start[cand], end[cand]
    for k in np.flatnonzero(np.cumsum(marks[:-1]) > 0).tolist():
        live = cand[(c_start <= k) & (c_end >= k)]
        size = sizes_bytes[live]
        big = live[2 * size > limits[k]]
        if big.size == 0:
            continue
        least = int(sizes_bytes[big].min())
        mid = live[(2 * size <= limits[k]) & (size + least > limits[k])]
        if mid.size == 0 and big.size >= 2:
            groups.append(big.tolist())
            kernel_of.append(k)
        for m in mid.tolist():
            groups.append([*big.tolist(), m])
            kernel_of.append(k)
    if not groups:
        return sp.csr_matrix((0, n))
    tensors = np.concatenate([np.asarray(q, dtype=np.int64) for q in groups])
    kernels = np.repeat(np.asarray(kernel_of, dtype=np.int64), [len(q) for q in groups])
    group = np.repeat(np.arange(len(groups)), [len(q) for q in groups])
    y = occupancy_rows(seg, tensors, kernels, n_k, n)
    add = sp.csr_matrix((np.ones(group.size), (group, np.arange(group.size))))
    rows = sp.csr_matrix(add @ y)
    rows.sum_duplicates()
    rows.sort_indices()
    keys = {
        (rows.indices[a:b].tobytes(), rows.data[a:b].tobytes()): i
        for i, (a, b) in enumerate(zip(rows.indptr[:-1], rows.indptr[1:], strict=True))
    }
    return sp.csr_matrix(rows[sorted(keys.values())])


__all__ = ["conflict_rows", "occupancy_rows"]
