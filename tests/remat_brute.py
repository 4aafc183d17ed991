"""Exhaustive search over recomputation on tiny graphs, for checking the MILP: recomputation
alone (``remat``, every tensor in the fastest tier) and with a static placement (``static-rc``,
every tensor in one tier kernels reach for its whole life, nothing moves).

The rules, as this search reads them:

- A tensor may be made again when a forward kernel that updates nothing produces it and no
  kernel updates it (a *candidate*). It is made again at a *point* ``(t, k)``: before kernel
  ``k``, by running its producer ``p`` again, provided no input of ``p`` is updated in place
  between ``p`` and ``k``. The points: level 1, each kernel ``k`` that uses ``t`` where ``t``
  was neither used nor made at ``k - 1``; level ``l + 1`` up to ``depth``, ``(u, k)`` for each
  candidate input ``u`` of the producer of a level-``l`` point ``(t, k)``.
- A set of points is a schedule. A tensor is *needed* at each kernel that uses it and at each
  point of the schedule whose producer reads it. It is made at its producer (or exists from
  the start) and at each of its points in the schedule; each need is served by the latest
  making at or before it (inputs of a producer run again at ``k`` are made before it at
  ``k`` when they are made there too: producers run in step order).
- Placement (``static-rc``): each tensor lives in one tier for the whole step; only a tensor
  in the fastest tier is made again, and only from inputs there (a producer run again reads
  and writes the fastest tier).
- Memory: a candidate occupies the fastest tier from each making to the last need it serves
  (its making kernel alone if none); any other tensor from its first live kernel to its last
  live kernel or its last need, whichever is later (weights and optimizer state: the whole
  step); a tensor in another tier occupies none of it. At every kernel the sum is at most the
  limit; the other tiers' capacity is not modelled.
- Time: the step with every operand in its tensor's tier, plus, for each point of the
  schedule, its producer's time with every operand on the fastest tier.

Every placement and every subset of its points is scored; the cheapest that fits is the
optimum. Nothing here uses the MILP's gadgets, variables or matrices.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tmsim.cost import CostModel
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES, Graph, Phase

#: Most points the search enumerates (2 ** MAX_POINTS schedules).
MAX_POINTS = 16
#: Most tensors ``static-rc``'s search places (tiers ** MAX_TENSORS placements).
MAX_TENSORS = 14


def points(cost: CostModel, depth: int) -> list[tuple[int, int]]:
    """The points of ``cost``'s graph (see the module documentation), sorted."""
    graph = cost.graph
    names = {t.name: i for i, t in enumerate(graph.tensors)}
    kernels = graph.kernels
    producer = {names[o]: k for k, kern in enumerate(kernels) for o in kern.outputs}
    updated_at: dict[int, list[int]] = {}
    used_at: dict[int, list[int]] = {}
    for k, kern in enumerate(kernels):
        for name in kern.updates:
            updated_at.setdefault(names[name], []).append(k)
        for name in set(kern.inputs) | set(kern.updates):
            used_at.setdefault(names[name], []).append(k)

    def candidate(t: int) -> bool:
        p = producer.get(t)
        if p is None or graph.tensors[t].role in PREEXISTING_ROLES:
            return False
        return kernels[p].phase is Phase.FORWARD and not kernels[p].updates and t not in updated_at

    def intact(t: int, k: int) -> bool:
        p = producer[t]
        ins = {names[n] for n in kernels[p].inputs}
        return all(not p < j < k for u in ins for j in updated_at.get(u, []))

    found: set[tuple[int, int]] = set()
    frontier = []
    for t in range(len(graph.tensors)):
        if not candidate(t):
            continue
        previous = producer[t]
        for k in sorted(used_at.get(t, [])):
            if k - 1 > previous and intact(t, k):
                frontier.append((t, k))
            previous = k
    for level in range(depth):
        found |= set(frontier)
        nxt = []
        for t, k in frontier:
            for name in kernels[producer[t]].inputs:
                u = names[name]
                if level + 1 < depth and candidate(u) and (u, k) not in found and intact(u, k):
                    nxt.append((u, k))
        frontier = sorted(set(nxt))
    return sorted(found)


def remat_brute(cost: CostModel, limit_bytes: int, depth: int) -> float | None:
    """The least step time of recomputation alone within ``limit_bytes`` of the fastest tier
    (None if no schedule fits); raises ``ValueError`` above :data:`MAX_POINTS` points."""
    return rc_brute(cost, limit_bytes, depth, placements=False)


def rc_brute(cost: CostModel, limit_bytes: int, depth: int, placements: bool) -> float | None:
    """The least step time within ``limit_bytes`` of the fastest tier of recomputation with
    every tensor in the fastest tier (``placements`` False) or in any one tier kernels reach
    (True: ``static-rc``); None if nothing fits. Raises ``ValueError`` above
    :data:`MAX_POINTS` points or :data:`MAX_TENSORS` tensors to place."""
    graph = cost.graph
    n_t = len(graph.tensors)
    names = {t.name: i for i, t in enumerate(graph.tensors)}
    producer = {names[o]: k for k, kern in enumerate(graph.kernels) for o in kern.outputs}
    uses: dict[int, set[int]] = {}
    for k, kern in enumerate(graph.kernels):
        for name in set(kern.inputs) | set(kern.updates):
            uses.setdefault(names[name], set()).add(k)
    found = points(cost, depth)
    if len(found) > MAX_POINTS:
        raise ValueError(f"{len(found)} points: too many to enumerate")
    reach = [i for i, ok in enumerate(cost.platform.kernel_tier_mask()) if ok]
    if placements and n_t > MAX_TENSORS:
        raise ValueError(f"{n_t} tensors: too many to place")
    ptr = cost.op_ptr
    rerun_s = {
        p: cost.recompute_s(p, np.zeros(int(ptr[p + 1] - ptr[p]), dtype=np.int64))
        for p in {producer[t] for t, _ in found}
    }
    candidates = {t for t, _ in found}
    best: float | None = None
    choices = itertools.product(reach, repeat=n_t) if placements else [(0,) * n_t]
    for tiers in choices:
        base_s = float(cost.kernel_times_s(np.asarray(tiers, dtype=np.int64)[cost.op_tensor]).sum())
        if best is not None and base_s >= best:
            continue  # recomputes only add
        ins = {t: [names[n] for n in graph.kernels[producer[t]].inputs] for t in candidates}
        usable = [(t, k) for t, k in found if tiers[t] == 0 and all(tiers[u] == 0 for u in ins[t])]
        for chosen in itertools.product((False, True), repeat=len(usable)):
            schedule = [pt for pt, on in zip(usable, chosen, strict=True) if on]
            total = base_s + sum(rerun_s[producer[t]] for t, _ in schedule)
            if best is not None and total >= best:
                continue
            if _fits(graph, tiers, schedule, uses, producer, names, candidates, limit_bytes):
                best = total
    return best


def _fits(
    graph: Graph,
    tiers: tuple[int, ...],
    schedule: list[tuple[int, int]],
    uses: dict[int, set[int]],
    producer: dict[int, int],
    names: dict[str, int],
    candidates: set[int],
    limit_bytes: int,
) -> bool:
    """Whether ``schedule`` with every tensor in ``tiers`` fits the fastest tier's limit."""
    n_k = len(graph.kernels)
    needs = {t: set(u) for t, u in uses.items()}
    for t, k in schedule:
        for name in graph.kernels[producer[t]].inputs:
            needs.setdefault(names[name], set()).add(k)
    occupied = np.zeros(n_k, dtype=np.int64)
    for t, tensor in enumerate(graph.tensors):
        if tiers[t] != 0:
            continue
        size = tensor.size_bytes
        mine = needs.get(t, set())
        if tensor.role in PERSISTENT_ROLES:
            occupied += size
        elif t in candidates:
            made = sorted({producer[t], *(k for u, k in schedule if u == t)})
            for i, m in enumerate(made):
                until = made[i + 1] if i + 1 < len(made) else n_k
                served = [j for j in mine if m <= j < until]
                occupied[m : max(served, default=m) + 1] += size
        else:
            first = int(graph.live_first[t])
            last = max(int(graph.live_last[t]), max(mine, default=first))
            occupied[first : last + 1] += size
    return bool(occupied.max() <= limit_bytes)


def isclose(a: float | None, b: float | None) -> bool:
    """Both None, or both numbers within a relative millionth."""
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-6)
