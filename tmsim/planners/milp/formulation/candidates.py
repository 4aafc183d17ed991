"""Where the placement MILP may recompute: which tensors may be dropped and made again, at
which kernels, and which tensors those recomputes read there (the rules are
:mod:`tmsim.planners.milp.formulation.recompute`'s documentation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel
from tmsim.planners.settings import DEFAULT_RECOMPUTE_DEPTH
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES, Phase

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Default depth of recomputation chains (see the module documentation), the planners'
#: setting's default.
DEFAULT_DEPTH = DEFAULT_RECOMPUTE_DEPTH


@dataclass(frozen=True)
class Recomputable:
    """Where recomputation may happen (see the module documentation).

    ``candidate`` [n_tensors]: the tensor may be dropped and made again; ``point_tensor`` /
    ``point_kernel``: the pairs (tensor, kernel) at which it may be made again, sorted;
    ``support_tensor`` / ``support_kernel``: the pairs at which a producer that may run again
    reads the tensor, sorted; ``discard_from`` [n_tensors]: the first kernel at which the
    tensor may be discarded (its producer for a candidate, its last use for a tensor whose
    network a support gadget extends past it, else ``n_kernels``: never); ``at_users``
    [n_tensors]: tensors every user of which is a gadget (those that may be discarded).
    """

    n_kernels: int
    candidate: BoolArray
    point_tensor: IntArray
    point_kernel: IntArray
    support_tensor: IntArray
    support_kernel: IntArray
    discard_from: IntArray

    @property
    def at_users(self) -> BoolArray:
        """[n_tensors]: whether every user of the tensor is a gadget (it may be discarded)."""
        return np.asarray(self.discard_from < self.n_kernels, dtype=bool)


def recomputable(cost: CostModel, depth: int = DEFAULT_DEPTH) -> Recomputable:
    """The candidates, points and support pairs of ``cost``'s graph with recompute chains of
    at most ``depth`` producers (>= 1; raises ``ValueError`` otherwise)."""
    if depth < 1:
        raise ValueError(f"recompute depth must be at least 1, got {depth}")
    graph = cost.graph
    n_t, n_k = len(graph.tensors), len(graph.kernels)
    producers = graph.producers
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    updates: dict[int, list[int]] = {}
    uses: dict[int, list[int]] = {}
    for k, kern in enumerate(graph.kernels):
        for name in kern.updates:
            updates.setdefault(index[name], []).append(k)
        for name in dict.fromkeys(kern.inputs + kern.updates):
            uses.setdefault(index[name], []).append(k)
    inputs = [[index[name] for name in dict.fromkeys(kern.inputs)] for kern in graph.kernels]
    roles = [t.role for t in graph.tensors]
    candidate = np.array(
        [
            producers[t] >= 0
            and graph.kernels[int(producers[t])].phase is Phase.FORWARD
            and not graph.kernels[int(producers[t])].updates
            and t not in updates
            and roles[t] not in PREEXISTING_ROLES
            for t in range(n_t)
        ],
        dtype=bool,
    )

    def unchanged(t: int, k: int) -> bool:
        """Whether every input of ``t``'s producer holds, before kernel ``k``, what the
        producer read."""
        p = int(producers[t])
        return not any(p < j < k for u in inputs[p] for j in updates.get(u, ()))

    points: set[tuple[int, int]] = set()
    level: list[tuple[int, int]] = []
    for t in np.flatnonzero(candidate).tolist():
        before = int(producers[t])
        for k in uses.get(t, ()):
            if k > before + 1 and unchanged(t, k):
                level.append((t, k))
            before = k
    support: set[tuple[int, int]] = set()
    for step in range(depth):
        points.update(level)
        following: list[tuple[int, int]] = []
        for t, k in level:
            for u in inputs[int(producers[t])]:
                support.add((u, k))
                more = step + 1 < depth and candidate[u] and (u, k) not in points
                if more and unchanged(u, k):
                    following.append((u, k))
        level = sorted(set(following))
    discard_from = np.full(n_t, n_k, dtype=np.int64)
    discard_from[candidate] = producers[candidate]
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    for u, k in support:
        if not candidate[u] and not persistent[u] and k > graph.live_last[u]:
            discard_from[u] = min(int(discard_from[u]), int(graph.live_last[u]))

    def pairs(found: set[tuple[int, int]]) -> tuple[IntArray, IntArray]:
        ordered = sorted(found)
        t = np.array([a for a, _ in ordered], dtype=np.int64)
        k = np.array([b for _, b in ordered], dtype=np.int64)
        return t, k

    point_t, point_k = pairs(points)
    support_t, support_k = pairs(support)
    return Recomputable(n_k, candidate, point_t, point_k, support_t, support_k, discard_from)


__all__ = ["DEFAULT_DEPTH", "Recomputable", "recomputable"]
