"""Reading a plan back from a solved placement MILP (:mod:`~tmsim.planners.milp.build`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel, IndexMove, IndexRecompute
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.milp.build import Model
from tmsim.planners.milp.gadgets import Formulation
from tmsim.planners.milp.states import Kind
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
    tensor's life.
    """
    x = np.asarray(model.x.value) > 0.5
    cat, gad, var, copies = model.catalogue, model.gadgets, model.vars, model.copies
    n_edges = var.edge_gadget.size
    on = np.flatnonzero(x[:n_edges])
    codes = np.rint(np.asarray(model.op_state @ x.astype(np.float64)).ravel()).astype(np.int64)
    op_tiers = cat.access[codes - 1]
    moves: list[IndexMove] = []
    runs: list[IndexRecompute] = []
    drops: dict[tuple[int, int], list[int]] = {}
    producers, ptr = cost.graph.producers, cost.op_ptr
    for i in on:
        edge = cat.edges[int(var.edge_type[i])]
        g = int(var.edge_gadget[i])
        t = int(gad.tensor[g])
        if edge.add >= 0:
            mode = MoveMode.ASYNC if copies.asynchronous[i] else MoveMode.SYNC
            src = int(copies.source[i])
            moves.append(IndexMove(t, src, edge.add, int(copies.kernel[i]), mode))
        if edge.kind is Kind.RECOMPUTE:
            p = int(producers[t])
            runs.append(IndexRecompute(t, int(gad.kernel[g]), p, (0,) * int(ptr[p + 1] - ptr[p])))
        for tier in sorted(edge.frees):
            drops.setdefault((t, tier), []).append(int(gad.kernel[g]))
    # a network a support gadget extends past the tensor's last use ends at its last gadget
    live_last = cost.graph.live_last
    ends = np.flatnonzero(gad.last & (gad.kernel > live_last[gad.tensor]))
    for g in ends.tolist():
        for tier in range(len(cat.tier_names)):
            drops.setdefault((int(gad.tensor[g]), tier), []).append(int(gad.kernel[g]))
    runs.sort(key=lambda r: (r.kernel, r.producer))
    states = x[n_edges:]
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
    )


__all__ = ["extract_plan"]
