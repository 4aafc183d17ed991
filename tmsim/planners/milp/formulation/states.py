"""Where a tensor can be, and how it may move at a gadget: named states and edges over K tiers.

A tensor's *state* is the non-empty set of tiers holding a valid copy of it (tiers are platform
indices, 0 the fastest). A kernel that uses the tensor reads and writes it on its *access
tier*: the fastest tier of the state that kernels may access; a use needs one. A gadget (a
kernel at which the tensor may change location) has two phases of edges, one binary variable
each, with at most one copy per phase:

- *prefetch* (before the kernel), from state B to the *during* state D:

  - ``stay``: D = B;
  - ``fetch``: D = B + {d}, d faster than every tier of B, copied from a tier of B;
  - at a kernel that updates the tensor in place, D must be one tier: ``inval`` keeps only
    B's access tier (the copy the kernel updates), ``fetch-inval`` fetches d as above and
    keeps only d. The copies dropped go stale; they are freed after the kernel.

- *evict* (after the kernel), from D to the *after* state A:

  - ``keep``: A = D;
  - ``write``: A = D + {d}, d slower than the fastest tier of D, copied from a tier of D;
    ``write-drop`` also frees some tiers X of D; ``drop`` frees X without a copy. Only
    *constrained* tiers (those whose capacity can bind) are ever freed: a copy that costs
    nothing to keep is kept, and a slower copy, once written, stays valid (tensors are
    immutable between in-place updates), so a later eviction to it is free.

A copy into d comes from the tier of the state whose copy of the tensor is fastest (the planner
picks it per tensor, :mod:`tmsim.planners.milp.formulation.network`). With two tiers, fast (0) and
slow (1), and only the fast one constrained, the states are F = {0}, FS = {0, 1}, S = {1} and the
edges are AutoTM's twelve, in AutoTM's order: stay F, stay FS, stay S, fetch S->FS, inval FS->F,
fetch-inval S->F; keep F, keep FS, keep S, write F->FS, write-drop F->S, drop FS->S.

States are ordered by their fastest tier, then by their tiers; edges by phase and kind as
above, then by source state, then by the tier they add, then by what they free.

With recomputation (the ``-rc`` formulations, :mod:`tmsim.planners.milp.formulation.recompute`) one
more state, ``gone`` (no copy anywhere), and three more kinds of edge follow all of these, so that
the catalogue without them is a prefix of the one with them (a solution of a formulation without
recomputation lifts to one with it index for index):

- ``stay gone`` and ``keep gone``: the tensor stays dropped;
- ``recompute`` (prefetch): from a state B without the fastest tier to B + {0}, the copy on
  tier 0 made by running the tensor's producer again just before the kernel (no copy path
  needed: nothing is copied);
- ``discard`` (evict): from a state D of constrained tiers only to ``gone``, freeing them all
  without a copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Most tiers the MILP plans over: states are subsets, so their number doubles with each tier.
MAX_TIERS = 6


class Kind(IntEnum):
    """What an edge does; the first four are the prefetch phase, the others the evict phase."""

    STAY = 0
    FETCH = 1
    INVAL = 2
    FETCH_INVAL = 3
    KEEP = 4
    WRITE = 5
    WRITE_DROP = 6
    DROP = 7
    RECOMPUTE = 8
    DISCARD = 9

    @property
    def prefetch(self) -> bool:
        """Whether edges of this kind belong to the prefetch phase."""
        return self in PREFETCH_KINDS


#: The kinds of the prefetch phase (before the kernel); the others are the evict phase.
PREFETCH_KINDS = frozenset({Kind.STAY, Kind.FETCH, Kind.INVAL, Kind.FETCH_INVAL, Kind.RECOMPUTE})
_PREFETCH = np.array(sorted(PREFETCH_KINDS), dtype=np.int64)


def is_prefetch(kind: npt.ArrayLike) -> BoolArray:
    """Elementwise: whether edge kinds ``kind`` belong to the prefetch phase."""
    return np.isin(kind, _PREFETCH)


@dataclass(frozen=True)
class Edge:
    """One edge type: ``kind``, the states it joins (indices into :attr:`Catalogue.states`),
    the tier it copies into (``add``, -1 for none), the tiers it frees (``frees``, a set of
    tier indices; for the update kinds, the constrained tiers that go stale) and ``name``."""

    kind: Kind
    src: int
    dst: int
    add: int
    frees: frozenset[int]
    name: str


@dataclass(frozen=True)
class Catalogue:
    """Every state and edge type for one platform (see the module documentation).

    ``states``: tier sets in order; ``access``: each state's access tier (-1 if it holds no
    tier kernels may access); ``edges``: every edge type, in order. Array views for the
    vectorized model: ``edge_kind``, ``edge_src``, ``edge_dst``, ``edge_add`` [n_edges];
    ``member`` [n_states, n_tiers] (state holds tier). ``gone``: the index of the state
    with no copy (the last one), or -1 in a catalogue without recomputation.
    """

    tier_names: tuple[str, ...]
    constrained: tuple[bool, ...]
    states: tuple[frozenset[int], ...]
    access: IntArray
    edges: tuple[Edge, ...]
    edge_kind: IntArray
    edge_src: IntArray
    edge_dst: IntArray
    edge_add: IntArray
    member: BoolArray
    gone: int = -1

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    def state(self, tiers: Sequence[int]) -> int:
        """Index of the state holding exactly ``tiers``; raises ``KeyError`` if there is none."""
        try:
            return self.states.index(frozenset(tiers))
        except ValueError:
            raise KeyError(f"no state holds exactly tiers {sorted(tiers)}") from None

    def edge(self, kind: Kind, src: int, dst: int) -> int:
        """Index of the edge of ``kind`` from state ``src`` to ``dst``, or -1 if there is none
        (for copies, at most one edge joins two states)."""
        for i, e in enumerate(self.edges):
            if e.kind is kind and e.src == src and e.dst == dst:
                return i
        return -1

    def state_name(self, s: int) -> str:
        """``DRAM+PMM`` style name of state ``s`` (``gone`` for the state with no copy)."""
        return "+".join(self.tier_names[t] for t in sorted(self.states[s])) or "gone"

    def of_phase(self, prefetch: bool) -> IntArray:
        """Indices of the edges of one phase."""
        mask = is_prefetch(self.edge_kind)
        return np.flatnonzero(mask if prefetch else ~mask)


def build_catalogue(
    tier_names: Sequence[str],
    kernel_tiers: Sequence[bool],
    constrained: Sequence[bool],
    has_path: Callable[[int, int], bool],
    recompute: bool = False,
    usable: Sequence[bool] | None = None,
) -> Catalogue:
    """The states and edges over tiers ``tier_names`` (fastest first).

    ``kernel_tiers[i]``: kernels may access tier i; ``constrained[i]``: tier i's capacity can
    bind (only such tiers are ever freed); ``has_path(s, d)``: a copy path joins tier s to d;
    ``recompute``: add the ``gone`` state and its edges after the others (see the module
    documentation; tier 0 must then be a kernel tier); ``usable[i]`` (default every tier):
    states may hold tier i (tier indices stay the platform's). Raises ``ValueError`` for fewer
    than 2 or more than :data:`MAX_TIERS` tiers, mismatched lengths, fewer than 2 usable
    tiers or tier 0 unusable, or recomputation onto a fastest tier kernels cannot access.
    """
    k = len(tier_names)
    if not 2 <= k <= MAX_TIERS or len(kernel_tiers) != k or len(constrained) != k:
        raise ValueError(f"the MILP plans over 2 to {MAX_TIERS} tiers with one flag each")
    use = [True] * k if usable is None else [bool(u) for u in usable]
    if len(use) != k or not use[0] or sum(use) < 2:
        raise ValueError("the MILP plans over tier 0 and at least one more usable tier")
    pool = [i for i in range(k) if use[i]]
    subsets = [frozenset(c) for r in range(1, k + 1) for c in itertools.combinations(pool, r)]
    states = tuple(sorted(subsets, key=lambda s: (min(s), sorted(s))))
    index = {s: i for i, s in enumerate(states)}
    names = ["+".join(tier_names[t] for t in sorted(s)) for s in states]
    free_able = frozenset(i for i in range(k) if constrained[i])

    def reach(src: frozenset[int], d: int) -> bool:
        return any(has_path(s, d) for s in src)

    def frees(tiers: frozenset[int]) -> list[frozenset[int]]:
        """Every non-empty set of constrained tiers of ``tiers``, smallest tiers first."""
        pool = sorted(tiers & free_able)
        sets = itertools.chain.from_iterable(
            itertools.combinations(pool, r) for r in range(1, len(pool) + 1)
        )
        return sorted((frozenset(c) for c in sets), key=sorted)

    edges: list[Edge] = []

    def add(kind: Kind, b: frozenset[int], d: frozenset[int], tier: int, x: frozenset[int]) -> None:
        label = f"{kind.name.lower().replace('_', '-')} {names[index[b]]}->{names[index[d]]}"
        edges.append(Edge(kind, index[b], index[d], tier, x, label))

    for b in states:
        add(Kind.STAY, b, b, -1, frozenset())
    for b in states:
        for d in range(min(b)):
            if use[d] and reach(b, d):
                add(Kind.FETCH, b, b | {d}, d, frozenset())
    for b in states:
        kept = min((t for t in b if kernel_tiers[t]), default=-1)  # the updated copy
        if len(b) > 1 and kept >= 0:
            add(Kind.INVAL, b, frozenset({kept}), -1, (b - {kept}) & free_able)
    for b in states:
        for d in range(min(b)):
            if use[d] and reach(b, d):
                add(Kind.FETCH_INVAL, b, frozenset({d}), d, b & free_able)
    for dd in states:
        add(Kind.KEEP, dd, dd, -1, frozenset())
    for dd in states:
        for d in range(min(dd) + 1, k):
            if d in dd or not use[d] or not reach(dd, d):
                continue
            add(Kind.WRITE, dd, dd | {d}, d, frozenset())
            for x in frees(dd):
                add(Kind.WRITE_DROP, dd, (dd | {d}) - x, d, x)
    for dd in states:
        for x in frees(dd):
            if dd - x:
                add(Kind.DROP, dd, dd - x, -1, x)

    gone = -1
    if recompute:
        if not kernel_tiers[0]:
            raise ValueError("recomputation writes the fastest tier, which kernels must access")
        none: frozenset[int] = frozenset()
        gone = len(states)
        states = (*states, none)
        index[none] = gone
        names.append("gone")
        add(Kind.STAY, none, none, -1, frozenset())
        for b in states:
            if 0 not in b:
                add(Kind.RECOMPUTE, b, b | {0}, -1, frozenset())
        add(Kind.KEEP, none, none, -1, frozenset())
        for dd in states:
            if dd and dd <= free_able:
                add(Kind.DISCARD, dd, none, -1, dd)
    access = np.array(
        [min((t for t in s if kernel_tiers[t]), default=-1) for s in states], dtype=np.int64
    )
    member = np.array([[t in s for t in range(k)] for s in states], dtype=bool)
    return Catalogue(
        tier_names=tuple(tier_names),
        constrained=tuple(bool(c) for c in constrained),
        states=states,
        access=access,
        edges=tuple(edges),
        edge_kind=np.array([int(e.kind) for e in edges], dtype=np.int64),
        edge_src=np.array([e.src for e in edges], dtype=np.int64),
        edge_dst=np.array([e.dst for e in edges], dtype=np.int64),
        edge_add=np.array([e.add for e in edges], dtype=np.int64),
        member=member,
        gone=gone,
    )


__all__ = [
    "MAX_TIERS",
    "PREFETCH_KINDS",
    "Catalogue",
    "Edge",
    "Kind",
    "build_catalogue",
    "is_prefetch",
]
