"""Reading a plan back from a solved placement MILP
(:mod:`~tmsim.planners.milp.formulation.build`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel, IndexMove, IndexRecompute
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.host import host_access, host_reach
from tmsim.planners.milp.formulation.host_time import refresh_position
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.states import Kind, is_prefetch
from tmsim.plans.values import Plan, SolverStats


def extract_plan(
    cost: CostModel,
    model: Model,
    formulation: Formulation,
    options: dict[str, Any],
    limit: int,
    stats: SolverStats,
) -> Plan:
    """The plan a solved ``model`` describes (binaries rounded), through ``assemble_plan``.

    Copies an edge frees (evictions, and the stale copies an in-place update leaves behind on
    modelled tiers) are freed after the gadget's kernel; other copies stay to the end of the
    tensor's life. The kernels the host runs read their operands on the fastest tier the host
    reaches, and each copy a host kernel refreshes after an in-place update is copied from
    there beside the next kernel (after the last, synchronously).
    """
    x = np.asarray(model.x.value) > 0.5
    cat, gad, var, copies = model.catalogue, model.gadgets, model.vars, model.copies
    n_edges = var.edge_gadget.size
    on = np.flatnonzero(x[:n_edges])
    codes = np.rint(np.asarray(model.op_state @ x.astype(np.float64)).ravel()).astype(np.int64)
    op_tiers = cat.access[codes - 1]
    host_order: tuple[int, ...] = ()
    refreshes: list[IndexMove] = []
    if model.host is not None:
        order = model.host.on_host(x)
        host_order = tuple(order.tolist())
        access_host = host_access(cat.states, host_reach(cost))
        ops = np.isin(cost.op_kernel, order)
        op_tiers = np.where(ops, access_host[codes - 1], op_tiers)
        refreshes = _refreshes(cost, model, x, order, access_host)
    producers, ptr = cost.graph.producers, cost.op_ptr
    types = var.edge_type[on]
    kernel = gad.kernel[var.edge_gadget[on]]
    tensor = gad.tensor[var.edge_gadget[on]]
    copying = cat.edge_add[types] >= 0
    moves = [
        IndexMove(t, src, dst, k, MoveMode.ASYNC if overlapped else MoveMode.SYNC)
        for t, src, dst, k, overlapped in zip(
            tensor[copying].tolist(),
            copies.source[on[copying]].tolist(),
            cat.edge_add[types[copying]].tolist(),
            copies.kernel[on[copying]].tolist(),
            copies.asynchronous[on[copying]].tolist(),
            strict=True,
        )
    ]
    moves += refreshes
    runs: list[IndexRecompute] = []
    rerun = cat.edge_kind[types] == int(Kind.RECOMPUTE)
    for t, k in zip(tensor[rerun].tolist(), kernel[rerun].tolist(), strict=True):
        p = int(producers[t])
        runs.append(IndexRecompute(t, k, p, (0,) * int(ptr[p + 1] - ptr[p])))
    drops: dict[tuple[int, int], list[int]] = {}
    frees = [sorted(e.frees) for e in cat.edges]
    freeing = np.array([bool(f) for f in frees], dtype=bool)[types]
    for e, t, k in zip(
        types[freeing].tolist(), tensor[freeing].tolist(), kernel[freeing].tolist(), strict=True
    ):
        for tier in frees[e]:
            drops.setdefault((t, tier), []).append(k)
    # a network a support gadget extends past the tensor's last use ends at its last gadget
    live_last = cost.graph.live_last
    ends = np.flatnonzero(gad.last & (gad.kernel > live_last[gad.tensor]))
    for g in ends.tolist():
        for tier in range(len(cat.tier_names)):
            drops.setdefault((int(gad.tensor[g]), tier), []).append(int(gad.kernel[g]))
    runs.sort(key=lambda r: (r.kernel, r.producer))
    states = x[n_edges : var.host_first]
    initial = {
        int(t): tuple(sorted(cat.states[int(s)]))
        for t, s in zip(var.init_tensor[states], var.init_state[states], strict=True)
    }
    return assemble_plan(
        cost,
        f"milp-{formulation.value}",
        limit,
        op_tiers,
        initial,
        moves,
        drops,
        options,
        stats,
        beside=model.beside,
        recomputes=runs,
        host_kernels=host_order,
    )


def _refreshes(
    cost: CostModel, model: Model, x: np.ndarray, order: np.ndarray, access_host: np.ndarray
) -> list[IndexMove]:
    """The copies refreshing what each host kernel of ``order`` updated in place while other
    tiers held the tensor: from the host's tier to each other tier the tensor keeps after the
    kernel, where :func:`refresh_position` puts them."""
    cat, gad, var = model.catalogue, model.gadgets, model.vars
    n_k = len(cost.graph.kernels)
    n_edges = var.edge_gadget.size
    on = np.flatnonzero(x[:n_edges])
    g, e = var.edge_gadget[on], var.edge_type[on]
    several = np.array([len(s) > 1 for s in cat.states], dtype=bool)
    pick = (
        gad.updates[g]
        & np.isin(gad.kernel[g], order)
        & (cat.edge_kind[e] == int(Kind.STAY))
        & several[cat.edge_src[e]]
    )
    evicting = ~is_prefetch(cat.edge_kind[e])
    after = dict(zip(g[evicting].tolist(), cat.edge_dst[e[evicting]].tolist(), strict=True))
    out = []
    for gi, ei in zip(g[pick].tolist(), e[pick].tolist(), strict=True):
        state = cat.states[int(cat.edge_src[ei])]
        src = int(access_host[int(cat.edge_src[ei])])
        t, k = int(gad.tensor[gi]), int(gad.kernel[gi])
        at = refresh_position(k)
        kept = cat.states[after[gi]]  # a copy freed after the kernel needs no refresh
        for dst in sorted((state & kept) - {src}):
            if at < n_k:
                out.append(IndexMove(t, src, dst, at, MoveMode.ASYNC))
            else:
                out.append(IndexMove(t, src, dst, n_k, MoveMode.SYNC))
    return out


__all__ = ["extract_plan"]
