"""Exhaustive search over every placement and move of a tiny graph, for checking the MILP.

Each tensor's possible histories are enumerated one by one from the rules of a plan
(tmsim/plans/values.py) restricted to what a formulation allows; then every combination of histories
is scored at once with numpy broadcasting, and the cheapest one that fits is the optimum.
Nothing here uses the MILP's variables, matrices or gadget code.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from hwmodels.timing import MoveMode, Overlap
from tmsim.cost import CostModel
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES

F, FS, S = 0, 1, 2
FAST_TIER, SLOW_TIER = 0, 1


@dataclass(frozen=True)
class History:
    """One tensor's history: fast bytes per kernel, memory seconds per kernel, copy seconds."""

    fast_bytes: np.ndarray
    memory_s: np.ndarray
    sync_s: float
    async_s: np.ndarray


def _fast(state: int) -> bool:
    return state in (F, FS)


def histories(cost: CostModel, t: int, formulation: str, window: int, gpu: bool) -> list[History]:
    graph = cost.graph
    n_k = len(graph.kernels)
    tensor = graph.tensors[t]
    size = int(graph.sizes_bytes[t])
    ops = np.flatnonzero(cost.op_tensor == t)
    op_k = cost.op_kernel[ops]
    uses = sorted(set(op_k.tolist()))
    persistent = tensor.role in PERSISTENT_ROLES
    pre = tensor.role in PREEXISTING_ROLES
    lo, hi = (0, n_k - 1) if persistent else (int(graph.live_first[t]), int(graph.live_last[t]))
    producer = int(graph.producers[t])
    updated = {
        int(k)
        for k, j in zip(op_k, ops, strict=True)
        if cost.op_read_bytes[j] > 0 and cost.op_write_bytes[j] > 0
    }
    if formulation == "static":
        gadgets = [producer] if producer >= 0 else []
    else:
        gadgets = sorted(set(uses) | ({producer} if producer >= 0 else set()))
    fetch_at: set[int] = set()
    evict_at: set[int] = set()
    if formulation == "async":
        for u in uses:
            fetch_at |= {u - d for d in range(1, window + 1)}
            evict_at |= {u + d for d in range(1, window + 1)}
        windows = sorted(k for k in (fetch_at | evict_at) if lo <= k <= hi and k not in gadgets)
        gadgets = sorted(set(gadgets) | set(windows))
    move_s = {
        (src, dst, mode): cost.move_s(src, dst, mode)[t]
        for src, dst in ((SLOW_TIER, FAST_TIER), (FAST_TIER, SLOW_TIER))
        for mode in (MoveMode.SYNC, MoveMode.ASYNC)
    }
    # only weights and optimizer state may start with copies in both tiers
    inits = (
        [None] if not pre else ([F, FS, S] if persistent and formulation != "static" else [F, S])
    )
    out: list[History] = []
    for init in inits:
        for path in _paths(
            gadgets, uses, producer, updated, init, formulation, gpu, fetch_at, evict_at
        ):
            states = np.full(n_k, -1)
            if init is not None:
                states[lo : (gadgets[0] if gadgets else hi + 1)] = init
            sync_s = 0.0
            async_s = np.zeros(n_k)
            for i, (k, during, after, fetch, write) in enumerate(path):
                nxt = gadgets[i + 1] if i + 1 < len(gadgets) else hi + 1
                states[k] = during
                states[k + 1 : nxt] = after
                is_async = k not in uses and k != producer
                mode = MoveMode.ASYNC if is_async else MoveMode.SYNC
                for flag, key in (
                    (fetch, (SLOW_TIER, FAST_TIER, mode)),
                    (write, (FAST_TIER, SLOW_TIER, mode)),
                ):
                    if flag:
                        if is_async:
                            async_s[k] += move_s[key]
                        else:
                            sync_s += move_s[key]
            if persistent and init is not None:
                final = path[-1][2] if path else init
                if final != init:
                    continue
            live = np.zeros(n_k, dtype=bool)
            live[lo : hi + 1] = True
            fast = np.array([_fast(int(s)) for s in states]) & live
            memory = np.zeros(n_k)
            ok = True
            for j, k in zip(ops, op_k, strict=True):
                tier = FAST_TIER if _fast(int(states[k])) else SLOW_TIER
                if gpu and tier == SLOW_TIER:
                    ok = False
                    break
                memory[k] += (
                    cost.op_read_bytes[j] * cost.read_s_per_byte[k, tier]
                    + cost.op_write_bytes[j] * cost.write_s_per_byte[k, tier]
                )
            if ok:
                out.append(History(fast * size, memory, sync_s, async_s))
    return out


def _paths(gadgets, uses, producer, updated, init, formulation, gpu, fetch_at, evict_at):  # type: ignore[no-untyped-def]
    """Every sequence of (kernel, during, after, fetched, written) over the gadgets."""

    def step(i: int, before: int | None):  # type: ignore[no-untyped-def]
        if i == len(gadgets):
            yield []
            return
        k = gadgets[i]
        window = k not in uses and k != producer
        may_fetch = formulation != "static" and (not window or k in fetch_at)
        may_evict = formulation != "static" and (not window or k in evict_at)
        if k == producer:
            options = [(F, False), (S, False)]
        else:
            assert before is not None
            options = []
            if k in updated:  # the slow copy goes stale: no FS while updating
                options.append((F if before == FS else before, False))
                if before == S and may_fetch:
                    options.append((F, True))
            else:
                options.append((before, False))
                if before == S and may_fetch:
                    options.append((FS, True))
        for during, fetched in options:
            if gpu and k in [*uses, producer] and not _fast(during):
                continue
            afters = [(during, False)]
            if may_evict and during == F:
                afters += [(FS, True), (S, True)]
            if may_evict and during == FS:
                afters.append((S, False))
            for after, written in afters:
                for rest in step(i + 1, after):
                    yield [(k, during, after, fetched, written), *rest]

    yield from step(0, init)


def brute_force(cost: CostModel, limit_bytes: int, formulation: str, window: int = 1) -> float:
    """The optimal predicted step time, or ``inf`` if nothing fits."""
    gpu = not cost.tier_allowed[SLOW_TIER]
    n_k = len(cost.graph.kernels)
    per_tensor = [
        histories(cost, t, formulation, window, gpu) for t in range(len(cost.graph.tensors))
    ]
    combos = np.array(list(itertools.product(*[range(len(h)) for h in per_tensor])))
    fast = np.zeros((len(combos), n_k))
    memory = np.zeros((len(combos), n_k))
    async_s = np.zeros((len(combos), n_k))
    sync = np.zeros(len(combos))
    for t, hs in enumerate(per_tensor):
        pick = combos[:, t]
        fast += np.array([h.fast_bytes for h in hs])[pick]
        memory += np.array([h.memory_s for h in hs])[pick]
        async_s += np.array([h.async_s for h in hs])[pick]
        sync += np.array([h.sync_s for h in hs])[pick]
    if cost.overlap is Overlap.MAX:
        kernel = np.maximum(cost.compute_s, memory) + cost.launch_s
    else:
        kernel = cost.compute_s + memory + cost.launch_s
    total = np.maximum(kernel, async_s).sum(axis=1) + sync
    fits = (fast <= limit_bytes).all(axis=1)
    return float(total[fits].min()) if fits.any() else float("inf")
