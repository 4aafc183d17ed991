"""A smaller formulation's solution handed to a larger one as its warm start: lifted index for
index (:func:`~tmsim.planners.milp.chain.starts.lift`), the networks a larger model that recomputes
extends ended as the smaller one ended them, copies moved beside kernels where that helps; and,
in a layout round whose lowered limits the smaller plan breaks, that formulation solved again
under them first.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.planners.milp.chain.overlap import overlap_copies
from tmsim.planners.milp.chain.solution import Solved
from tmsim.planners.milp.chain.solve import fits, solve_within
from tmsim.planners.milp.chain.starts import lift
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.states import Kind, is_prefetch
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import PERSISTENT_ROLES

BoolArray = npt.NDArray[np.bool_]


def lifted_start(
    cost: CostModel,
    opts: PlanSettings,
    source: Model,
    x: np.ndarray,
    model: Model,
    formulation: Formulation,
) -> np.ndarray | None:
    """``source``'s binaries ``x`` as a start of ``model`` (``formulation``'s): lifted, the
    networks support gadgets extend ended where ``source`` does not recompute, and, in an
    asynchronous formulation, copies moved beside kernels where that helps; None if ``model``
    cannot express them."""
    start = lift(source, x, model)
    if start is not None and source.catalogue.gone < 0 < model.catalogue.gone:
        start = retire_extended(cost, model, start)
    if start is not None and formulation.asynchronous:
        start = overlap_copies(model, start, max(opts.window, 1))
    return start


def lowered_start(
    cost: CostModel,
    opts: PlanSettings,
    start_from: Solved,
    model: Model,
    formulation: Formulation,
    limits: np.ndarray,
    deadline: float | None,
) -> np.ndarray | None:
    """A start of ``model`` (``formulation``'s) under lowered ``limits``: the formulation
    ``start_from``'s plan
    came from, solved again under them from no start (its LP from ``start_from``'s basis,
    where it kept one), lifted; None where that solve finds no plan in time or its plan does
    not keep ``model``'s rows."""
    smaller = Formulation(start_from.plan.planner.removeprefix("milp-"))
    small = build_model(
        cost,
        opts.window,
        smaller,
        limits,
        relax=False,
        depth=opts.recompute_depth,
        energy_weight_s_per_j=opts.energy_weight_s_per_j,
        host_kernels=opts.host_kernels,
    )
    try:
        # from its LP's basis: the same model under other limits
        solve_within(small, opts, smaller.value, limits, deadline, None, start_from.lp_basis)
    except TmsimError:
        return None
    if small.x.value is None:
        return None
    start = lifted_start(cost, opts, small, np.asarray(small.x.value) > 0.5, model, formulation)
    return start if start is not None and fits(model, start) else None


def retire_extended(cost: CostModel, model: Model, x: BoolArray) -> BoolArray | None:
    """``x`` (binaries of a model that recomputes, lifted from one that does not) with every
    network a support gadget extends past its tensor's last use ended at that use, as the
    smaller model ended it: after the last use the tensor keeps only its copies on tiers whose
    capacity is not modelled (``gone`` if none), by a discard or a drop in place of the
    eviction there, and stays so across the support gadgets after it. None if an edge this
    needs does not exist (e.g. a drop where nothing may move)."""
    cat, g, v = model.catalogue, model.gadgets, model.vars
    live_last = cost.graph.live_last
    roles = [t.role for t in cost.graph.tensors]
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    past = (g.kernel > live_last[g.tensor]) & ~persistent[g.tensor]
    if not past.any():
        return x
    out = x.copy()
    n_e = v.edge_gadget.size
    on = np.flatnonzero(out[:n_e])
    prefetch = is_prefetch(cat.edge_kind)
    chosen_pre = np.full(g.tensor.size, -1, dtype=np.int64)
    chosen_evict = np.full(g.tensor.size, -1, dtype=np.int64)
    et, eg = v.edge_type[on], v.edge_gadget[on]
    chosen_pre[eg[prefetch[et]]] = et[prefetch[et]]
    chosen_evict[eg[~prefetch[et]]] = et[~prefetch[et]]
    kept = frozenset(i for i, c in enumerate(cat.constrained) if not c)
    for t in np.unique(g.tensor[past]).tolist():
        mine = np.flatnonzero(g.tensor == t)
        real = mine[g.kernel[mine] <= live_last[t]]
        if real.size == 0 or chosen_pre[real[-1]] < 0:
            return None
        last = int(real[-1])
        during = cat.states[int(cat.edge_dst[chosen_pre[last]])]
        after = during & kept
        if not after:
            edge = cat.edge(Kind.DISCARD, cat.state(sorted(during)), cat.gone)
        elif after == during:
            edge = cat.edge(Kind.KEEP, cat.state(sorted(during)), cat.state(sorted(during)))
        else:
            edge = cat.edge(Kind.DROP, cat.state(sorted(during)), cat.state(sorted(after)))
        end = cat.gone if not after else cat.state(sorted(after))
        picks = [(last, edge)]
        for gadget in mine[g.kernel[mine] > live_last[t]].tolist():
            picks += [
                (gadget, cat.edge(Kind.STAY, end, end)),
                (gadget, cat.edge(Kind.KEEP, end, end)),
            ]
        for gadget, e in picks:
            column = int(v.edge_index[gadget, e]) if e >= 0 else -1
            if column < 0:
                return None
            for old in (chosen_pre[gadget], chosen_evict[gadget]):
                phase_matches = old >= 0 and bool(prefetch[old]) == bool(prefetch[e])
                if phase_matches and v.edge_index[gadget, old] >= 0:
                    out[int(v.edge_index[gadget, old])] = False
            out[column] = True
    return out


__all__ = ["lifted_start", "lowered_start", "retire_extended"]
