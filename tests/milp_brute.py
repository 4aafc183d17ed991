"""Exhaustive search over every placement and move of a tiny graph, for checking the MILP.

Tiers are platform indices 0..K-1, fastest first; KT is the set of tiers kernels may access.
The rules of a plan, as this search reads them (restricted by the formulation, static, sync
or async, and the window):

- State: at every kernel where a tensor is live it is in a state, the non-empty set of tiers
  holding a valid copy. Weights and optimizer state are live over the whole step.
- Access: a kernel using the tensor (input, output or in-place update) reads and writes it on
  the fastest tier of its state that is in KT; a use whose state holds no KT tier is not
  allowed. Memory time per operand: read bytes x read_s_per_byte + written bytes x
  write_s_per_byte on that tier; kernel time = max(compute, memory) + launch (or their sum).
- Gadgets (kernels where the state may change): static, the producer only; sync, the producer
  and every kernel with the tensor as an operand; async, those plus kernels u - d (fetch
  window) and u + d (evict window), d = 1..window, around every such kernel u, inside the live
  range. Window gadgets fetch only in a fetch window and evict only in an evict window.
- Capacity: tier 0 holds at most ``limit_bytes``; tier i > 0 its ``capacity_bytes``, and it is
  constrained only if that is below the total bytes of the graph. At every kernel the live
  tensors whose state holds a constrained tier fit in it.
- Initial state: an input starts in one tier; weights and optimizer state in any non-empty
  set of tiers (one tier in static) and end the step in the state they started in.
- A produced tensor appears at its producer in one KT tier, with no copy.
- Each gadget has two phases. Prefetch, from state B to the state D during the kernel:
  D = B, or D = B + {d} for a tier d faster than all of B that some tier of B can copy to.
  A kernel updating the tensor in place leaves D = {the fastest KT tier of B} or, fetching,
  D = {d}; the other copies go stale and still hold their tiers during the kernel (they are
  freed after). Evict, after the kernel, from D to A: A = D, (D + {d}) - X or D - X, where d
  is a tier outside D, slower than min(D), that a tier of D can copy to, and X a set of
  constrained tiers of D; A is non-empty. A copy comes from the source tier whose copy of the tensor is fastest; at
  an asynchronous gadget that may fetch, an eviction from several tiers copies from the
  slower ones (the fastest, which a fetch adds, may still be arriving).
- Copies at the producer and users are synchronous and add to the step; copies at window
  gadgets are asynchronous and add up beside their kernel, which then costs
  max(kernel time, its asynchronous copies). An asynchronous copy's destination holds its
  tier during that kernel; a synchronous eviction's, from the next kernel on; after the
  last kernel, during it, besides any stale copy on the same tier (a conservative count: the
  stale copy is freed as the write lands).

Each tensor's histories are enumerated one by one; those that overflow a tier on their own or
are no better anywhere than another are dropped (exact: the step time never falls as a
history's bytes, memory time or copies grow); then every combination is scored at once with
numpy broadcasting, and the cheapest one that fits is the optimum. Nothing here uses the
MILP's variables, matrices or gadget code.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np
import numpy.typing as npt
import pytest

from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode, Overlap
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError
from tmsim.planners.milp.chain.plan import plan_milp
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES, Graph

FloatArray = npt.NDArray[np.float64]
State = frozenset[int]

#: Combinations scored per numpy batch.
BATCH = 1 << 16


@dataclass(frozen=True)
class History:
    """One tensor's history as the score sees it.

    ``bytes_by_tier`` [constrained tiers, kernels]: its bytes on each constrained tier at each
    kernel; ``memory_s`` [kernels]: its share of each kernel's memory time; ``async_s``
    [kernels]: its asynchronous copies beside each kernel; ``sync_s``: its synchronous copies.
    """

    bytes_by_tier: FloatArray
    memory_s: FloatArray
    async_s: FloatArray
    sync_s: float


@dataclass(frozen=True)
class Gadget:
    """A kernel where a tensor's state may change, and what may happen there."""

    kernel: int
    mode: MoveMode  # SYNC at the producer and users, ASYNC at window gadgets
    uses: bool  # the kernel has the tensor as an operand (the producer included)
    updates: bool  # the kernel reads and writes the tensor in place
    fetch: bool
    evict: bool


@dataclass(frozen=True)
class Step:
    """What a tensor did at one gadget: its state during the kernel and after, and copy time."""

    gadget: Gadget
    during: State
    after: State
    copy_s: float


@dataclass(frozen=True)
class Machine:
    """The tiers as the rules see them, and the seconds of every copy of every tensor."""

    n_tiers: int
    kernel_tiers: State
    constrained: tuple[int, ...]
    move_s: dict[tuple[int, int, MoveMode], FloatArray]

    @classmethod
    def of(cls, cost: CostModel) -> Machine:
        tiers = cost.platform.tiers
        total = int(cost.graph.sizes_bytes.sum())
        return cls(
            n_tiers=len(tiers),
            kernel_tiers=frozenset(i for i, ok in enumerate(cost.tier_allowed) if ok),
            constrained=(0, *(i for i in range(1, len(tiers)) if tiers[i].capacity_bytes < total)),
            move_s={
                (s, d, mode): cost.move_s(s, d, mode)
                for s, d in itertools.permutations(range(len(tiers)), 2)
                if cost.has_path(s, d)
                for mode in MoveMode
            },
        )

    def limits(self, cost: CostModel, limit_bytes: int) -> FloatArray:
        """Bytes each constrained tier holds: ``limit_bytes`` for tier 0, else its capacity."""
        tiers = cost.platform.tiers
        return np.array(
            [limit_bytes if i == 0 else tiers[i].capacity_bytes for i in self.constrained],
            dtype=np.float64,
        )

    def copy_s(self, t: int, sources: State, dst: int, mode: MoveMode) -> float | None:
        """Seconds of the fastest copy of tensor ``t`` from a tier of ``sources`` to ``dst``.

        ``None`` if no tier of ``sources`` has a copy path to ``dst``. (Among equally fast
        sources the rules take the faster tier; the time is the same.)
        """
        times = [
            self.move_s[s, dst, mode][t] for s in sorted(sources) if (s, dst, mode) in self.move_s
        ]
        return float(min(times)) if times else None


def gadgets(cost: CostModel, t: int, formulation: str, window: int) -> list[Gadget]:
    """Tensor ``t``'s gadgets under ``formulation``, in kernel order."""
    graph = cost.graph
    lo, hi = _live_range(cost, t)
    producer = int(graph.producers[t])
    ops = np.flatnonzero(cost.op_tensor == t)
    uses = {int(cost.op_kernel[j]) for j in ops}
    updates = {
        int(cost.op_kernel[j])
        for j in ops
        if cost.op_read_bytes[j] > 0 and cost.op_write_bytes[j] > 0
    }
    if formulation == "static":
        if producer < 0:
            return []
        return [Gadget(producer, MoveMode.SYNC, uses=True, updates=False, fetch=False, evict=False)]
    fetch_at: set[int] = set()
    evict_at: set[int] = set()
    if formulation == "async":
        for u, d in itertools.product(uses, range(1, window + 1)):
            fetch_at.add(u - d)
            evict_at.add(u + d)
    out = []
    for k in sorted(uses | fetch_at | evict_at):
        if k in uses:
            fetch = k != producer
            out.append(Gadget(k, MoveMode.SYNC, True, k in updates, fetch=fetch, evict=True))
        elif lo <= k <= hi:
            out.append(Gadget(k, MoveMode.ASYNC, False, False, k in fetch_at, k in evict_at))
    return out


def initial_states(cost: CostModel, t: int, formulation: str) -> list[State | None]:
    """The states tensor ``t`` may start the step in; ``[None]`` if a kernel produces it."""
    role = cost.graph.tensors[t].role
    n = len(cost.platform.tiers)
    if role not in PREEXISTING_ROLES:
        return [None]
    if role in PERSISTENT_ROLES and formulation != "static":
        return [frozenset(c) for r in range(1, n + 1) for c in itertools.combinations(range(n), r)]
    return [frozenset({i}) for i in range(n)]


def prefetches(
    machine: Machine, t: int, g: Gadget, before: State | None
) -> list[tuple[State, float]]:
    """Every state during gadget ``g``'s kernel reachable from ``before``, with its copy time."""
    if before is None:  # the producer writes the tensor into one kernel tier
        return [(frozenset({i}), 0.0) for i in sorted(machine.kernel_tiers)]
    fetched: list[tuple[int, float]] = []
    if g.fetch:
        for d in range(min(before)):
            seconds = machine.copy_s(t, before, d, g.mode)
            if seconds is not None:
                fetched.append((d, seconds))
    if g.updates:  # the copies the kernel does not write go stale
        kept = before & machine.kernel_tiers
        return [
            *([(frozenset({min(kept)}), 0.0)] if kept else []),
            *((frozenset({d}), s) for d, s in fetched),
        ]
    return [(before, 0.0), *((before | {d}, s) for d, s in fetched)]


def evictions(machine: Machine, t: int, g: Gadget, during: State) -> list[tuple[State, float]]:
    """Every state after gadget ``g``'s kernel reachable from ``during``, with its copy time."""
    if not g.evict:
        return [(during, 0.0)]
    freeable = [i for i in machine.constrained if i in during]
    drops = [
        frozenset(x) for r in range(len(freeable) + 1) for x in itertools.combinations(freeable, r)
    ]
    out = [(during - x, 0.0) for x in drops if during - x]
    sources = during
    if g.mode is MoveMode.ASYNC and g.fetch and len(during) > 1:
        sources = during - {min(during)}  # the fastest copy may still be arriving
    for d in range(min(during) + 1, machine.n_tiers):
        seconds = machine.copy_s(t, sources, d, g.mode) if d not in during else None
        if seconds is not None:
            out += [((during | {d}) - x, seconds) for x in drops]
    return out


def walks(
    machine: Machine, t: int, todo: Sequence[Gadget], before: State | None
) -> Iterator[list[Step]]:
    """Every sequence of steps over the gadgets ``todo``, starting in state ``before``."""
    if not todo:
        yield []
        return
    g = todo[0]
    for during, fetch_s in prefetches(machine, t, g, before):
        if g.uses and not during & machine.kernel_tiers:
            continue
        for after, evict_s in evictions(machine, t, g, during):
            step = Step(g, during, after, fetch_s + evict_s)
            for rest in walks(machine, t, todo[1:], after):
                yield [step, *rest]


def histories(
    cost: CostModel, t: int, formulation: str, window: int, machine: Machine | None = None
) -> list[History]:
    """Every history of tensor ``t`` the rules allow under ``formulation`` and ``window``."""
    machine = machine or Machine.of(cost)
    todo = gadgets(cost, t, formulation, window)
    persistent = cost.graph.tensors[t].role in PERSISTENT_ROLES
    out = []
    for init in initial_states(cost, t, formulation):
        for steps in walks(machine, t, todo, init):
            if persistent and (steps[-1].after if steps else init) != init:
                continue
            h = _score(cost, machine, t, init, steps)
            if h is not None:
                out.append(h)
    return out


def _live_range(cost: CostModel, t: int) -> tuple[int, int]:
    return int(cost.graph.live_first[t]), int(cost.graph.live_last[t])


def _score(
    cost: CostModel, machine: Machine, t: int, init: State | None, steps: list[Step]
) -> History | None:
    """The history of a walk, or ``None`` if a kernel uses the tensor on no kernel tier."""
    n_k = len(cost.graph.kernels)
    lo, hi = _live_range(cost, t)
    state: list[State | None] = [None] * n_k
    for k in range(lo, steps[0].gadget.kernel if steps else hi + 1):
        state[k] = init
    async_s = np.zeros(n_k)
    sync_s = 0.0
    extra: list[State] = [frozenset()] * n_k  # tiers held during a kernel beside its state
    last: State = frozenset()  # tiers a copy after the last kernel holds during it, besides
    before = init
    for i, step in enumerate(steps):
        k = step.gadget.kernel
        state[k] = step.during
        if step.gadget.updates and before is not None:
            extra[k] = extra[k] | (before - step.during)  # stale copies go after the kernel
        if step.gadget.mode is MoveMode.ASYNC:
            extra[k] = extra[k] | (step.after - step.during)  # an async copy's destination
        elif k == n_k - 1:
            last = step.after - step.during  # written after the last kernel
        before = step.after
        for j in range(k + 1, steps[i + 1].gadget.kernel if i + 1 < len(steps) else hi + 1):
            state[j] = step.after
        if step.gadget.mode is MoveMode.ASYNC:
            async_s[k] += step.copy_s
        else:
            sync_s += step.copy_s
    memory_s = np.zeros(n_k)
    for op in np.flatnonzero(cost.op_tensor == t):
        k = int(cost.op_kernel[op])
        usable = (state[k] or frozenset()) & machine.kernel_tiers
        if not usable:
            return None
        tier = min(usable)
        memory_s[k] += cost.op_read_bytes[op] * cost.read_s_per_byte[k, tier]
        memory_s[k] += cost.op_write_bytes[op] * cost.write_s_per_byte[k, tier]
    size = float(cost.graph.sizes_bytes[t])
    on = np.array(
        [
            [
                size * ((s is not None and (i in s or i in x)) + (k == n_k - 1 and i in last))
                for k, (s, x) in enumerate(zip(state, extra, strict=True))
            ]
            for i in machine.constrained
        ]
    )
    return History(on, memory_s, async_s, sync_s)


def undominated(hs: list[History]) -> list[History]:
    """The histories that no other one equals or beats in every byte and every second."""
    if not hs:
        return hs
    rows = np.array(
        [np.concatenate([h.bytes_by_tier.ravel(), h.memory_s, h.async_s, [h.sync_s]]) for h in hs]
    )
    kept: list[int] = []
    for i in np.lexsort(rows.T[::-1]):  # a history sorts after every one that dominates it
        if not kept or not (rows[kept] <= rows[i]).all(axis=1).any():
            kept.append(int(i))
    return [hs[i] for i in kept]


def best(cost: CostModel, per_tensor: Sequence[Sequence[History]], limits: FloatArray) -> float:
    """The least step time over every combination of one history per tensor that fits."""
    if any(not hs for hs in per_tensor):
        return math.inf
    bytes_ = [np.array([h.bytes_by_tier for h in hs]) for hs in per_tensor]
    memory = [np.array([h.memory_s for h in hs]) for hs in per_tensor]
    async_ = [np.array([h.async_s for h in hs]) for hs in per_tensor]
    sync = [np.array([h.sync_s for h in hs]) for hs in per_tensor]
    shape = tuple(len(hs) for hs in per_tensor)
    found = math.inf
    for start in range(0, math.prod(shape), BATCH):
        pick = np.unravel_index(np.arange(start, min(start + BATCH, math.prod(shape))), shape)
        on = sum(b[p] for b, p in zip(bytes_, pick, strict=True))
        mem = sum(m[p] for m, p in zip(memory, pick, strict=True))
        beside = sum(a[p] for a, p in zip(async_, pick, strict=True))
        blocking = sum(s[p] for s, p in zip(sync, pick, strict=True))
        if cost.overlap is Overlap.MAX:
            kernel = np.maximum(cost.compute_s, mem) + cost.launch_s
        else:
            kernel = cost.compute_s + mem + cost.launch_s
        total = np.maximum(kernel, beside).sum(axis=1) + blocking
        fits = (on <= limits[:, None]).all(axis=(1, 2))
        if fits.any():
            found = min(found, float(total[fits].min()))
    return found


def brute_force(cost: CostModel, limit_bytes: int, formulation: str, window: int = 1) -> float:
    """The optimal predicted step time, or ``inf`` if nothing fits."""
    machine = Machine.of(cost)
    limits = machine.limits(cost, limit_bytes)
    per_tensor = []
    for t in range(len(cost.graph.tensors)):
        hs = histories(cost, t, formulation, window, machine)
        per_tensor.append(
            undominated([h for h in hs if (h.bytes_by_tier <= limits[:, None]).all()])
        )
    return best(cost, per_tensor, limits)


def check_against_search(graph: Graph, platform: str, share: float, formulation: str) -> None:
    """Assert that the MILP of ``formulation`` (window 1, gap 1e-9, no layout) plans
    ``graph`` on preset ``platform`` with ``share`` of its peak on the fastest tier in the
    exhaustive search's optimum, its bound no higher, or refuses where the search finds
    nothing that fits."""
    plat = load_preset(platform)
    limit = max(1, int(graph.peak_live_bytes * share))
    best = brute_force(CostModel(graph, plat), limit, formulation)
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), gap=1e-9, layout=False, window=1)
    if best == math.inf:
        with pytest.raises(InfeasibleError):
            plan_milp(graph, plat, opts, formulation)
        return
    plan = plan_milp(graph, plat, opts, formulation)
    assert plan.predicted_s == pytest.approx(best, rel=1e-6)
    assert plan.stats is not None and plan.stats.bound <= best * (1 + 1e-6)


def check_path_to_optimum(
    graph: Graph, formulation: str, limit_bytes: int, spy: mock.Mock, patches: Sequence[Any]
) -> None:
    """Assert that the MILP of ``formulation`` (window 1, gap 1e-9) plans ``graph`` on the
    Optane preset at ``limit_bytes`` of the fastest tier in the exhaustive search's optimum
    under ``patches`` (context managers, such as ``mock.patch`` of a path's switch), and that
    it called ``spy`` (a wrapping mock the patches put on that path's function)."""
    plat = load_preset("cascadelake-optane")
    best = brute_force(CostModel(graph, plat), limit_bytes, formulation, window=1)
    opts = PlanSettings(capacity=Capacity.of_bytes(limit_bytes), gap=1e-9, window=1)
    with ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        plan = plan_milp(graph, plat, opts, formulation)
    assert spy.call_count >= 1
    assert plan.predicted_s == pytest.approx(best, rel=1e-6)
