"""Reading a plan back from a solved placement MILP
(:mod:`~tmsim.planners.milp.formulation.build`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel, IndexMove, IndexRecompute
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.milp.formulation.build import Model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.states import Kind
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
