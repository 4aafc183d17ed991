"""A plan made elsewhere as binaries of the placement MILP: the inverse of
:mod:`~tmsim.planners.milp.formulation.readback`, so that another planner's plan (ZeRO-Offload's,
a heuristic's) can be a point of a formulation and its warm start.

Per tensor, the plan's changes of state are read in the order they happen and given to the
model's gadgets (:mod:`~tmsim.planners.milp.formulation.gadgets`):

- what the prefetch phase does (a copy towards a faster tier than the one it is copied from, a
  recompute) goes to the first gadget at or after the kernel it happens at: a copy made
  between two gadgets of the tensor is made at the next one, before the kernel (where no
  kernel uses the tensor in between, the later copy holds memory no longer);
- what the evict phase does (a copy towards a slower tier, a copy freed) goes to the last
  gadget at or before the kernel it happens after: made sooner, freed sooner (nothing uses the
  tensor in between, and a slower copy stays valid until the next in-place update, a gadget);
  in the compact form (:mod:`~tmsim.planners.milp.formulation.windows`) a gadget of events
  only frees nothing but what its write-drop frees, so a free goes back to the gadget before
  it with layers or a write;
- an in-place update on the device keeps only the copy it updates (``inval``); on the host, the
  copies from the host's tier to tiers the tensor holds, where :func:`refresh_position` puts
  them, are left to the model, which makes those refreshes itself;
- a copy freed on a tier whose capacity cannot bind is kept (the model never frees those); a
  weight's or optimizer state's copy on a tier it did not start on, kept to the end of the
  step, is freed after the last kernel (the model's persistent tensors end as they began);
- a tier the model leaves out (dominated, :mod:`~tmsim.planners.milp.formulation.dominance`)
  is read as the tier that dominates it: the plan's twin.

A copy keeps the model's source tier and the mode of its gadget (synchronous at users and
producers, asynchronous beside window kernels), and the host the kernels the plan gives it in
the model's order: where a plan's copy lands on a gadget that makes it otherwise, the point
is the plan's nearest one, not the plan itself. :func:`project` says which: it raises
:class:`NotAPoint` (one line: the tensor, the kernel and why) where the plan cannot be
expressed at all (a recompute onto another tier than the fastest, or deeper than the model's
chains; a kernel on the host the model keeps on the device), and the caller checks that the
point fits the model's limits.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.planners.milp.formulation.dominance import twin_tiers
from tmsim.planners.milp.formulation.gadgets import GadgetKind
from tmsim.planners.milp.formulation.host_time import refresh_position
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.states import Catalogue, Kind, is_prefetch
from tmsim.plans.parse import Errors, Parsed, parse_plan
from tmsim.plans.values import Plan, Recompute
from tmsim.workload.graph import PERSISTENT_ROLES

BoolArray = npt.NDArray[np.bool_]


class NotAPoint(TmsimError):
    """A plan that no binaries of the model express (the message says where and why)."""


@dataclass
class _Changes:
    """One tensor's changes per gadget (indices into its gadgets): tiers fetched, whether it
    is recomputed (prefetch phase); tiers written and freed (evict phase); the copies that may
    refresh what the host updated (the model's own where they go to a tier the tensor holds)."""

    fetch: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    recompute: set[int] = field(default_factory=set)
    write: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    free: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    #: at a host kernel's in-place update, the copies from the host's tier where
    #: :func:`refresh_position` puts them: (destination, the gadget a write to it goes to, the
    #: gadget a fetch of it goes to, -1 for none)
    refresh: dict[int, set[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(set))


def project(cost: CostModel, model: Model, plan: Plan) -> BoolArray:
    """Binaries of ``model`` (built from ``cost``) that make ``plan``'s placement, or its
    nearest one as the module documentation says. Raises :class:`NotAPoint` where none does:
    a plan that does not parse, a state the model's catalogue lacks, a change at a gadget
    whose edges cannot make it, a kernel run on the host that the model keeps on the device.
    Whether the binaries fit the model's limits is the caller's to check."""
    graph = cost.graph
    errors = Errors(1)
    parsed = parse_plan(plan, graph, cost.platform, errors)
    if errors.count or not bool(parsed.rs_ok.all()) or not bool(parsed.mv_ok.all()):
        raise NotAPoint(f"{plan.planner}'s plan does not parse: {'; '.join(errors.result())}")
    gad, var = model.gadgets, model.vars
    parsed = _twinned(cost, model.catalogue, parsed)
    x = np.zeros(var.count, dtype=bool)
    host = frozenset(plan.host_kernels)
    strange = sorted(k for k in host if not 0 <= k < len(graph.kernels))
    if strange:
        raise NotAPoint(
            f"{plan.planner}'s plan runs kernel {strange[0]} on the host: no such kernel"
        )
    on_host = np.array(sorted(host), dtype=np.int64)
    where = np.minimum(np.searchsorted(var.host_kernel, on_host), max(var.host_kernel.size - 1, 0))
    offered = var.host_kernel[where] == on_host if var.host_kernel.size else on_host < 0
    if not offered.all():
        k = int(on_host[~offered][0])
        raise NotAPoint(
            f"kernel {k} ({graph.kernels[k].name!r}) runs on the host, which the model does "
            "not offer it"
        )
    x[var.host_first + where[offered]] = True
    initial: dict[int, frozenset[int]] = defaultdict(frozenset)
    for t, tier in zip(parsed.init_tensor.tolist(), parsed.init_tier.tolist(), strict=True):
        initial[t] = initial[t] | {tier}
    changes = _changes(cost, model, plan, parsed, initial)
    uses = _uses(cost, parsed)
    for t in np.flatnonzero(var.init_index.max(axis=1) >= 0).tolist():
        x[_start(model, initial[t], t, graph.tensors[t].name)] = True
    firsts = np.flatnonzero(gad.first).tolist()
    for lo, hi in zip(firsts, [*firsts[1:], gad.tensor.size], strict=True):
        t = int(gad.tensor[lo])
        _tensor(cost, model, initial[t], t, range(lo, hi), changes.get(t), uses[t], host, x)
    return x


def _twinned(cost: CostModel, cat: Catalogue, p: Parsed) -> Parsed:
    """``p`` with every tier the catalogue leaves out replaced by the tier that dominates it
    (:func:`~tmsim.planners.milp.formulation.dominance.twin_tiers`): the plan's twin."""
    held = frozenset().union(*cat.states)
    if len(held) == len(cat.tier_names):
        return p
    twin = np.array(
        [a if b not in held else b for b, a in enumerate(twin_tiers(cost))], dtype=np.int64
    )
    return replace(
        p,
        op_tier=twin[p.op_tier],
        init_tier=twin[p.init_tier],
        rs_tier=twin[p.rs_tier],
        mv_src=twin[p.mv_src],
        mv_dst=twin[p.mv_dst],
    )


def _uses(cost: CostModel, p: Parsed) -> dict[int, dict[int, int]]:
    """tensor -> kernel -> the tier the plan has the kernel use the tensor on."""
    out: dict[int, dict[int, int]] = defaultdict(dict)
    for t, k, tier in zip(
        cost.op_tensor.tolist(), cost.op_kernel.tolist(), p.op_tier.tolist(), strict=True
    ):
        out[t][k] = tier
    return out


def _changes(
    cost: CostModel,
    model: Model,
    plan: Plan,
    p: Parsed,
    initial: Mapping[int, frozenset[int]],
) -> dict[int, _Changes]:
    """Each tensor's changes given to its gadgets (see the module documentation;
    ``initial``: the tiers each tensor starts on)."""
    graph, gad = cost.graph, model.gadgets
    n_k = len(graph.kernels)
    constrained = model.catalogue.constrained
    kernels: dict[int, list[int]] = defaultdict(list)  # tensor -> its gadgets' kernels
    core: dict[int, list[bool]] = defaultdict(list)  # tensor -> whether each has layers
    for t, k, c in zip(
        gad.tensor.tolist(), gad.kernel.tolist(), model.gaps.core.tolist(), strict=True
    ):
        kernels[t].append(k)
        core[t].append(c)
    out: dict[int, _Changes] = defaultdict(_Changes)
    refreshing = _refreshing(cost, plan, p)

    def name(t: int) -> str:
        return graph.tensors[t].name

    def at_or_after(t: int, k: int, what: str) -> int:
        i = bisect_left(kernels[t], k)
        if i == len(kernels[t]):
            raise NotAPoint(f"tensor {name(t)!r}: {what} at kernel {k}, after its last gadget")
        return i

    def at_or_before(t: int, k: int) -> int:
        i = bisect_right(kernels[t], k) - 1
        if i < 0:
            raise NotAPoint(f"tensor {name(t)!r}: a change after kernel {k}, before its gadgets")
        return i

    for i in range(p.mv_tensor.size):
        t, src, dst = int(p.mv_tensor[i]), int(p.mv_src[i]), int(p.mv_dst[i])
        k, asynchronous = int(p.mv_kernel[i]), bool(p.mv_async[i])
        if src == dst or t not in kernels:
            continue
        if dst < src and (t, src, k) not in refreshing:
            # towards a faster tier: the prefetch phase at or after its kernel
            out[t].fetch[at_or_after(t, k, "a copy")].add(dst)
            continue
        # beside kernel k, or (synchronous) after kernel k - 1
        j = at_or_before(t, k if asynchronous else k - 1)
        if (t, src, k) in refreshing:
            later = bisect_left(kernels[t], k)
            fetch = later if later < len(kernels[t]) else -1
            out[t].refresh[at_or_after(t, refreshing[t, src, k], "a refresh")].add((dst, j, fetch))
        else:
            out[t].write[j].add(dst)
    for i in range(p.rs_tensor.size):
        t, tier, last = int(p.rs_tensor[i]), int(p.rs_tier[i]), int(p.rs_last[i])
        if t not in kernels or not constrained[tier]:
            continue
        # a copy lasts to the end of the step (where a weight or optimizer state ends as it
        # began: a copy elsewhere is freed after the last kernel), or of the tensor's life, or
        # of a network that support gadgets extend past it
        persistent = graph.tensors[t].role in PERSISTENT_ROLES
        end = n_k - 1 if persistent else max(int(graph.live_last[t]), kernels[t][-1])
        if last < end or (persistent and tier not in initial.get(t, ())):
            j = at_or_before(t, last)
            # an events-only gadget frees nothing but the copy its write-drop makes
            while j > 0 and not core[t][j] and not out[t].write.get(j):
                j -= 1
            out[t].free[j].add(tier)
    for r in plan.recomputes:
        t = _remade(cost, r)
        out[t].recompute.add(at_or_after(t, r.kernel, "a recompute"))
    return out


def _remade(cost: CostModel, r: Recompute) -> int:
    """The tensor recompute ``r`` makes again, which the model makes on the fastest tier only
    (raises :class:`NotAPoint` for a tensor it does not know or another tier)."""
    graph = cost.graph
    try:
        t = graph.tensor_index(r.tensor)
    except KeyError:
        raise NotAPoint(
            f"a recompute of tensor {r.tensor!r}, which the graph does not hold"
        ) from None
    p = int(graph.producers[t])
    if p < 0:
        raise NotAPoint(
            f"tensor {r.tensor!r}: a recompute at kernel {r.kernel}; no kernel makes it"
        )
    ops = cost.op_tensor[int(cost.op_ptr[p]) : int(cost.op_ptr[p + 1])]
    if len(r.tiers) != ops.size:
        raise NotAPoint(
            f"tensor {r.tensor!r}: a recompute at kernel {r.kernel} with {len(r.tiers)} tiers "
            f"for its producer's {ops.size} operands"
        )
    tier = r.tiers[int(np.flatnonzero(ops == t)[0])]
    if tier != cost.platform.tier_names[0]:
        raise NotAPoint(
            f"tensor {r.tensor!r}: a recompute at kernel {r.kernel} onto {tier!r}; the model "
            "makes it again on the fastest tier only"
        )
    return t


def _refreshing(cost: CostModel, plan: Plan, p: Parsed) -> dict[tuple[int, int, int], int]:
    """(tensor, source tier, kernel) of each copy that may refresh what a host kernel updated
    in place: from the tier the host updated it on, where :func:`refresh_position` puts it;
    to the kernel that updated it."""
    n_k = len(cost.graph.kernels)
    ptr = cost.op_ptr
    out: dict[tuple[int, int, int], int] = {}
    for k in plan.host_kernels:
        at = min(refresh_position(k), n_k)
        for j in range(int(ptr[k]), int(ptr[k + 1])):
            if cost.op_read_bytes[j] > 0 and cost.op_write_bytes[j] > 0:
                out[int(cost.op_tensor[j]), int(p.op_tier[j]), at] = k
    return out


def _tensor(
    cost: CostModel,
    model: Model,
    start: frozenset[int],
    t: int,
    gadgets: range,
    ch: _Changes | None,
    uses: dict[int, int],
    host: frozenset[int],
    x: BoolArray,
) -> None:
    """Set ``x`` for tensor ``t``'s ``gadgets``, from the tiers ``start`` it begins the step
    on (none for a tensor a kernel makes; raises :class:`NotAPoint`)."""
    gad = model.gadgets
    ch = ch or _Changes()
    name = cost.graph.tensors[t].name
    state = start
    for i, g in enumerate(gadgets):
        k = int(gad.kernel[g])
        created = int(gad.kind[g]) == GadgetKind.CREATE
        # the producer writes the tensor on its operand's tier; an update on the device keeps
        # only the copy it updates
        during = {uses[k]} if created or (gad.updates[g] and k not in host) else set(state)
        during |= ch.fetch.get(i, set())
        recomputed = i in ch.recompute
        if recomputed:
            during.add(0)
        for dst, j, later in ch.refresh.get(i, set()):
            if dst in during:
                continue  # the model refreshes the copy itself
            # a copy to a tier the tensor did not hold: a write, or a fetch at the next gadget
            if during and dst > min(during):
                ch.write[j].add(dst)
            elif later >= 0:
                ch.fetch[later].add(dst)
            else:
                raise NotAPoint(f"tensor {name!r}: a copy after kernel {k}, after its last gadget")
        after = (during | ch.write.get(i, set())) - ch.free.get(i, set())
        before = frozenset(during) if created else state
        kind = Kind.RECOMPUTE if recomputed else None
        _edge(model, g, (before, frozenset(during)), True, kind, f"{name!r} at kernel {k}", x)
        _edge(
            model,
            g,
            (frozenset(during), frozenset(after)),
            False,
            None,
            f"{name!r} at kernel {k}",
            x,
        )
        state = frozenset(after)


def _start(model: Model, tiers: frozenset[int], t: int, name: str) -> int:
    """The variable of pre-existing tensor ``t``'s state at the start (on ``tiers``)."""
    cat = model.catalogue
    col = int(model.vars.init_index[t, _state(cat, tiers, f"{name!r} at the start")])
    if col < 0:
        raise NotAPoint(f"tensor {name!r}: the model cannot start it on {_names(cat, tiers)}")
    return col


def _state(cat: Catalogue, tiers: frozenset[int], where: str) -> int:
    """The index of the state holding ``tiers`` (none: ``gone``); ``where``: the tensor's
    name and the point, for the message."""
    if not tiers:
        if cat.gone < 0:
            raise NotAPoint(f"tensor {where}: no copy is left")
        return cat.gone
    try:
        return cat.state(sorted(tiers))
    except KeyError:
        raise NotAPoint(f"tensor {where}: the model has no state {_names(cat, tiers)}") from None


def _names(cat: Catalogue, tiers: frozenset[int]) -> str:
    return "+".join(cat.tier_names[i] for i in sorted(tiers)) or "no tier"


def _edge(
    model: Model,
    g: int,
    states: tuple[frozenset[int], frozenset[int]],
    prefetch: bool,
    kind: Kind | None,
    where: str,
    x: BoolArray,
) -> None:
    """Set the variable of gadget ``g``'s edge of one phase between ``states`` (of kind
    ``kind`` where given; not a recompute otherwise)."""
    cat = model.catalogue
    src, dst = states
    if src == dst and kind is None and not model.gaps.core[g]:
        return  # an events-only gadget (the compact form) where nothing happens
    a, b = _state(cat, src, where), _state(cat, dst, where)
    row = model.vars.edge_index[g]
    phase = is_prefetch(cat.edge_kind) == prefetch
    hit = np.flatnonzero(phase & (cat.edge_src == a) & (cat.edge_dst == b) & (row >= 0))
    hit = hit[(cat.edge_kind[hit] == int(Kind.RECOMPUTE)) == (kind is Kind.RECOMPUTE)]
    if hit.size == 0:
        raise NotAPoint(
            f"tensor {where}: the model cannot go from {_names(cat, src)} to "
            f"{_names(cat, dst)} {'before' if prefetch else 'after'} the kernel"
        )
    x[int(row[hit[0]])] = True


__all__ = ["NotAPoint", "project"]
