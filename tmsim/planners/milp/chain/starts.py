"""Warm starts of the placement MILP: solutions of one formulation expressed in another.

Each formulation contains the one before it (static < sync < async: more gadgets, more edges), so a
solution of the smaller problem *lifts* to the larger one: at every gadget the larger problem has
and the smaller lacks, the tensor stays in the state it was in. The static formulation starts from
the better of the greedy and first-touch heuristics, each tensor in its one tier. The asynchronous
start is improved further by :mod:`~tmsim.planners.milp.chain.overlap`."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tmsim.capacity import Capacity, tier_limits_bytes
from tmsim.cost import CostModel, step_time_s
from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.layout.addresses import fit_below
from tmsim.planners.heuristics.placement import first_touch_tiers, greedy_tiers, kernel_tiers
from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue, Kind
from tmsim.planners.settings import PlanSettings

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def _loops(cat: Catalogue, kind: Kind) -> IntArray:
    """Per state, the edge of ``kind`` (stay or keep) that leaves it unchanged."""
    return np.array([cat.edge(kind, s, s) for s in range(cat.n_states)], dtype=np.int64)


def lift(small: Model, x_small: BoolArray, large: Model) -> BoolArray | None:
    """Binaries of ``large`` equivalent to ``x_small``, or None if they cannot be expressed.

    Both models must come from one cost model (one catalogue of states and edges): at every
    gadget ``large`` has and ``small`` lacks, the tensor stays in the state it was in (an
    events-only gadget of the compact form runs no copy).
    """
    cat = large.catalogue
    gs, vs = small.gadgets, small.vars
    gl, vl = large.gadgets, large.vars
    n_k = int(max(gs.kernel.max(initial=0), gl.kernel.max(initial=0))) + 1
    key_s = gs.tensor * (n_k + 1) + gs.kernel
    key_l = gl.tensor * (n_k + 1) + gl.kernel
    if key_s.size:
        pos = np.minimum(np.searchsorted(key_s, key_l), key_s.size - 1)
        known = key_s[pos] == key_l
    else:
        pos = np.zeros(key_l.size, dtype=np.int64)
        known = np.zeros(key_l.size, dtype=bool)
    n_e = vs.edge_gadget.size
    chosen = np.zeros((gs.tensor.size, cat.n_edges), dtype=bool)
    chosen[vs.edge_gadget[x_small[:n_e]], vs.edge_type[x_small[:n_e]]] = True
    init_small = _init_states(vs, x_small)
    # state after each large gadget: copied where known, else carried forward
    after = np.full(gl.tensor.size, -1, dtype=np.int64)
    rows_known = np.flatnonzero(known)
    evict = cat.of_phase(False)
    g_on, e_on = np.nonzero(chosen[pos[rows_known]][:, evict])
    after[rows_known[g_on]] = cat.edge_dst[evict[e_on]]
    fill_first = gl.first & ~known
    after[fill_first] = init_small[gl.tensor[fill_first]]
    if np.any(after[gl.first] < 0):
        return None
    idx = np.where(after >= 0, np.arange(after.size), -1)
    idx = np.maximum.accumulate(idx)
    carried = after[idx]
    out = np.zeros(vl.count, dtype=bool)
    rows = np.flatnonzero(known)
    g_src, e_src = np.nonzero(chosen[pos[rows]])
    target = vl.edge_index[rows[g_src], e_src]
    unknown = np.flatnonzero(~known & large.gaps.core)
    stay = vl.edge_index[unknown, _loops(cat, Kind.STAY)[carried[unknown]]]
    keep = vl.edge_index[unknown, _loops(cat, Kind.KEEP)[carried[unknown]]]
    every = np.concatenate((target, stay, keep))
    if np.any(every < 0):
        return None
    out[every] = True
    pre = np.flatnonzero(vl.init_index.max(axis=1) >= 0)
    states = init_small[pre]
    if np.any(states < 0):
        return None
    cols = vl.init_index[pre, states]
    if np.any(cols < 0):
        return None
    out[cols] = True
    # the host runs in the larger problem what it ran in the smaller (a kernel it may not run
    # there: no lift)
    on_host = vs.host_kernel[x_small[vs.host_first : vs.count]]
    where = np.searchsorted(vl.host_kernel, on_host)
    if on_host.size:
        if np.any(where >= vl.host_kernel.size):
            return None  # also where the larger problem offers the host nothing
        if np.any(vl.host_kernel[where] != on_host):
            return None
    out[vl.host_first + where] = True
    return out


def best_heuristic_tiers(cost: CostModel, limit: int) -> IntArray | None:
    """The tier of every tensor in the better of the greedy and first-touch placements at a
    fastest-tier ``limit`` (both place each tensor in one tier for its whole life; the
    greedy one on a tie), each timed by ``cost`` as the plan of
    :func:`~tmsim.planners.heuristics.plan_greedy` or
    :func:`~tmsim.planners.heuristics.plan_first_touch` with the same profile would be, or
    None if neither finds a placement (e.g. a slower tier too small for what they leave
    to it)."""
    limits = tier_limits_bytes(cost.graph, cost.platform, Capacity.of_bytes(max(limit, 1)))
    best: tuple[float, IntArray] | None = None
    for heuristic in (greedy_tiers, first_touch_tiers):
        try:
            tier = heuristic(cost, limits)
        except TmsimError:
            continue
        seconds, _ = step_time_s(cost, tier[cost.op_tensor], ())
        if best is None or seconds < best[0]:
            best = (seconds, tier)
    return None if best is None else best[1]


def laid_out_tiers(
    cost: CostModel, tier: IntArray, limit: int
) -> tuple[IntArray, dict[tuple[int, int, int], int]] | None:
    """``tier`` (each tensor's one tier for its whole life) with the fastest tier's tensors
    laid out below ``limit`` by :func:`~tmsim.layout.addresses.fit_below`: those it leaves out
    move to the slowest tier kernels reach; and the offsets of those it keeps, keyed as
    :func:`~tmsim.layout.fast_tier.known_layout` reads them. None where that tier cannot take
    the tensors moved there, or nothing would be left on the fastest tier."""
    graph, platform = cost.graph, cost.platform
    fast = np.flatnonzero(tier == 0)
    if fast.size == 0:
        return None
    first, last = graph.live_first[fast], graph.live_last[fast]
    offsets = fit_below(graph.sizes_bytes[fast], first, last, limit)
    left = offsets < 0
    out = tier.copy()
    if left.any():
        slowest = kernel_tiers(platform)[-1]
        if slowest == 0:
            return None
        out[fast[left]] = slowest
        on = np.flatnonzero(out == slowest)
        n_k = len(graph.kernels)
        held = occupancy(graph.live_first[on], graph.live_last[on], graph.sizes_bytes[on], n_k)
        if int(held.max(initial=0)) > platform.tiers[slowest].capacity_bytes:
            return None
    keep = ~left
    known = {
        (int(t), int(a), int(b)): int(o)
        for t, a, b, o in zip(fast[keep], first[keep], last[keep], offsets[keep], strict=True)
    }
    return out, known


def static_tiers(
    cost: CostModel, formulation: Formulation, gpu: bool, limit: int, settings: PlanSettings
) -> tuple[IntArray | None, dict[tuple[int, int, int], int]]:
    """The tier of every tensor in the static start of ``formulation`` at a fastest-tier
    ``limit`` (None: no heuristic found one), and the fast-tier offsets of a layout of it
    where one is known (:func:`laid_out_tiers`, empty otherwise). On a GPU nothing moves in
    static: what kernels use stays on the device; in a fast-only formulation everything is on
    the fastest tier; otherwise the better heuristic's placement
    (:func:`best_heuristic_tiers`), laid out below ``limit`` where ``settings.layout`` asks
    for layouts (the heuristics fill the fast tier to the byte, and a search for their
    layout can cost seconds, or find none)."""
    n_t = len(cost.graph.tensors)
    if formulation.fast_only:  # every tensor in the fastest tier, none recomputed
        return np.zeros(n_t, dtype=np.int64), {}
    if gpu:
        used = np.zeros(n_t, dtype=np.int64)
        used[cost.op_tensor] = 1
        return 1 - used, {}
    tiers = best_heuristic_tiers(cost, limit)
    laid = laid_out_tiers(cost, tiers, limit) if tiers is not None and settings.layout else None
    return (tiers, {}) if laid is None else laid


def static_start(model: Model, tier: IntArray) -> BoolArray | None:
    """Binaries of a static model that keep tensor ``t`` on tier ``tier[t]`` alone, or None if
    the model cannot express that (e.g. a GPU kernel's operand off the device)."""
    cat, g, v = model.catalogue, model.gadgets, model.vars
    single = np.full(len(cat.tier_names), -1, dtype=np.int64)
    for s, tiers in enumerate(cat.states):
        if len(tiers) == 1:
            single[min(tiers)] = s
    state = single[tier]
    rows = np.arange(g.tensor.size)
    st = state[g.tensor]
    every = np.concatenate(
        (
            v.edge_index[rows, _loops(cat, Kind.STAY)[st]],
            v.edge_index[rows, _loops(cat, Kind.KEEP)[st]],
        )
    )
    pre = np.flatnonzero(v.init_index.max(axis=1) >= 0)
    every = np.concatenate((every, v.init_index[pre, state[pre]]))
    if np.any(every < 0):
        return None
    out = np.zeros(v.count, dtype=bool)
    out[every] = True
    return out


def offload_start(model: Model, away: int, persistent: BoolArray) -> BoolArray | None:
    """Binaries of a synchronous model in which every tensor lives on tier ``away`` and
    visits tier 0 for the kernels that use it: fetched before a use (an update keeps only the
    fetched copy), its tier-0 copy dropped after the use (written back first if the kernel
    produced or updated it) unless the next kernel uses it too, or it dies there
    (``persistent[t]``: tensor ``t`` lives on after the step, so it ends where it started);
    pre-existing tensors start on ``away``. Tier 0 then holds little beyond the operands of
    one kernel at a time (a GPU plan when nothing fits statically). None if the model lacks
    one of these edges (e.g. no copy path) or has asynchronous gadgets."""
    cat, g, v = model.catalogue, model.gadgets, model.vars
    if np.any(g.kind == GadgetKind.WINDOW):
        return None
    a, d = frozenset({away}), frozenset({0})
    picked: list[int] = []
    edges: dict[tuple[Kind, frozenset[int], frozenset[int]], int] = {}  # by catalogue

    def take(gadget: int, kind: Kind, src: frozenset[int], dst: frozenset[int]) -> bool:
        edge = edges.get((kind, src, dst))
        if edge is None:
            edge = edges[kind, src, dst] = cat.edge(
                kind, cat.state(sorted(src)), cat.state(sorted(dst))
            )
        column = int(v.edge_index[gadget, edge]) if edge >= 0 else -1
        picked.append(column)
        return column >= 0

    before: frozenset[int] | None = None
    for i in range(g.tensor.size):
        t = int(g.tensor[i])
        if g.first[i]:
            before = None if g.kind[i] == GadgetKind.CREATE else a
        if before is None:  # the producer writes it on tier 0
            during, kind, src = d, Kind.STAY, d
        elif 0 in before:
            during = d if g.updates[i] and len(before) > 1 else before
            kind, src = (Kind.INVAL if during != before else Kind.STAY), before
        else:
            during = d if g.updates[i] else before | d
            kind, src = (Kind.FETCH_INVAL if g.updates[i] else Kind.FETCH), before
        ok = take(i, kind, src, during)
        last = bool(g.last[i])
        if (not last and g.kernel[i + 1] == g.kernel[i] + 1) or (last and not persistent[t]):
            after = during
            ok = take(i, Kind.KEEP, during, after) and ok
        elif away in during:
            after = a
            ok = take(i, Kind.DROP, during, after) and ok
        else:
            after = a
            ok = take(i, Kind.WRITE_DROP, during, after) and ok
        if not ok:
            return None
        before = after
    starts = np.flatnonzero(v.init_index.max(axis=1) >= 0)
    init = v.init_index[starts, cat.state([away])]
    if np.any(init < 0):
        return None
    out = np.zeros(v.count, dtype=bool)
    out[np.asarray(picked, dtype=np.int64)] = True
    out[init] = True
    return out


def _init_states(v: Variables, x: BoolArray) -> npt.NDArray[np.int64]:
    """Initial state (a catalogue index) of every tensor, -1 where it has none."""
    n_t = v.init_index.shape[0]
    out = np.full(n_t, -1, dtype=np.int64)
    n_e = v.edge_gadget.size
    on = x[n_e : v.host_first]
    out[v.init_tensor[on]] = v.init_state[on]
    return out


__all__ = [
    "best_heuristic_tiers",
    "laid_out_tiers",
    "lift",
    "offload_start",
    "static_start",
    "static_tiers",
]
