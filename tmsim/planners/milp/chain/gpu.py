"""What a GPU's MILP knows before it solves: whether anything fits with nothing moving, and
the plan a solve stopped before its first solution falls back to.

On a GPU kernels reach only device memory, so a static plan exists only where every tensor
some kernel uses fits on the device at once (:func:`static_misfit`), and where it does not
the synchronous formulation has no static plan to start from: a solve stopped before its own
first solution returns :func:`offload_plan_start`'s plan instead.
"""

from __future__ import annotations

import numpy as np

from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError
from tmsim.intervals import occupancy
from tmsim.planners.milp.chain.starts import offload_start
from tmsim.planners.milp.formulation.model import Model
from tmsim.workload.graph import PERSISTENT_ROLES, Graph


def offload_plan_start(cost: CostModel, model: Model, gpu: bool) -> np.ndarray | None:
    """For a synchronous GPU model without a start (nothing fits statically), the plan in
    which every tensor visits the device only to be used (:func:`offload_start`): what a
    solve a limit stopped before its first solution returns. None elsewhere."""
    if not gpu:
        return None
    tiers = range(1, len(cost.platform.tiers))
    held = model.catalogue.states
    away = next(
        (
            i
            for i in tiers
            if cost.has_path(0, i) and cost.has_path(i, 0) and frozenset({i}) in held
        ),
        0,
    )
    roles = [t.role for t in cost.graph.tensors]
    persistent = np.array([r in PERSISTENT_ROLES for r in roles], dtype=bool)
    return offload_start(model, away, persistent) if away else None


def static_misfit(graph: Graph, limit: int) -> InfeasibleError | None:
    """The static formulation's error on a GPU with ``limit`` bytes of device memory, naming
    the kernel whose used tensors need the most (only tensors some kernel uses must be on the
    device; the rest may stay on the host), or None when they fit at every kernel."""
    _, tensor = graph.operand_csr
    used = np.zeros(len(graph.tensors), dtype=bool)
    used[tensor] = True
    live = occupancy(
        graph.live_first[used], graph.live_last[used], graph.sizes_bytes[used], len(graph.kernels)
    )
    k = int(np.argmax(live))
    need = int(live[k])
    if need <= limit:
        return None
    return InfeasibleError(
        f"milp-static: infeasible: kernel {k} ({graph.kernels[k].name!r}) has {need} bytes "
        f"live, {need - limit} bytes more than the limit of {limit} bytes, and nothing moves"
    )


__all__ = ["offload_plan_start", "static_misfit"]
