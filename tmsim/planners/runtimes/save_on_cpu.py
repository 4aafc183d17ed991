"""Activation offload to the host as PyTorch's ``torch.autograd.graph.save_on_cpu`` does it,
as a plan.

``save_on_cpu`` is a pair of saved-tensor hooks (``torch/autograd/graph.py``): when autograd
saves a tensor for the backward pass, the pack hook copies it to host memory (``tensor.cpu()``,
or ``copy_`` into a pinned buffer: a blocking copy on the compute stream) and the device copy
is freed once nothing else holds it; when the backward pass needs it, the unpack hook copies
it back (``tensor.to(device, non_blocking=pin_memory)``, on the same stream, so the kernels
after it wait for it either way). The hooks run once per op that saves a tensor and once per
backward op that uses it: a tensor saved by two forward ops (a ReLU's output, saved by the
ReLU and by the convolution it feeds) is packed twice, and each backward op unpacks its own
device copy, freed after that op. In a plan: every tensor made in the forward phase and read
in the backward phase (a saved tensor) is copied to the host synchronously right after its
producer once per backward op that reads it, its device copy freed after its last forward
use; before each backward op that reads it, it is copied back synchronously, and that device
copy is freed after the op (the last stays to its last use); its host copy is freed after its
last backward use. A saved tensor whose first backward use is the kernel right after its
producer (the loss's output) is never idle on the device and stays there: a copy out and back
at that one point would read its host copy before it is written. Everything else, weights,
gradients and optimizer state included, stays on the device (PyTorch also packs the weights
an op saves: 0.14 GB each way of ResNet-50's 8.4 GB at batch 64, left out).

Measured on an H200 (``calibration/h200/results.json``): ResNet-50 fp32 b64 under
``save_on_cpu(pin_memory=True)`` takes 376 ms; this plan on ``h200-host-nvme`` predicts 337 ms
(one copy each way per tensor predicted 233 ms).
"""

from __future__ import annotations

import numpy as np

from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import IndexMove
from tmsim.errors import TmsimError
from tmsim.planners.assemble import assemble_plan, check_operands_fit
from tmsim.planners.heuristics.placement import require_fast_access
from tmsim.planners.runtimes.common import DEVICE, away_tier, check_fits
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.workload.graph import PREEXISTING_ROLES, Graph, Phase

SAVE_ON_CPU = "save-on-cpu"


def plan_save_on_cpu(
    graph: Graph, platform: Platform, settings: PlanSettings | None = None
) -> Plan:
    """PyTorch's ``save_on_cpu`` as a plan (see the module documentation).

    The host is the first tier with copy paths to and from the device. Raises
    :class:`TmsimError` (one line) for a platform without one, or a step with no tensor saved
    for the backward pass; :class:`InfeasibleError` if a kernel's own operands exceed the
    device's planned capacity; :class:`NoPlanError` naming the tier, kernel and bytes where
    the rest does not fit.
    """
    opts = settings or PlanSettings()
    require_fast_access(platform, SAVE_ON_CPU)
    cost = cost_model(graph, platform, opts.profile)
    host = away_tier(cost, SAVE_ON_CPU)
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    check_operands_fit(graph, platform, limit, SAVE_ON_CPU)
    phase = [k.phase for k in graph.kernels]
    moves: list[IndexMove] = []
    drops: dict[tuple[int, int], list[int]] = {}
    for t in range(len(graph.tensors)):
        p = int(graph.producers[t])
        if p < 0 or phase[p] is not Phase.FORWARD:
            continue
        users = graph.users(t)
        backward = [int(k) for k in users if phase[int(k)] is Phase.BACKWARD]
        if not backward:
            continue
        b = min(backward)
        if b == p + 1:
            continue
        last_forward = max([p, *(int(k) for k in users if int(k) < b)])
        # One pack per op that saves it (one per backward op that reads it), each a blocking
        # copy; one unpack per backward op, its device copy freed after that op.
        for _ in backward:
            moves.append(IndexMove(t, DEVICE, host, p + 1, MoveMode.SYNC))
        for r in sorted(backward):
            moves.append(IndexMove(t, host, DEVICE, r, MoveMode.SYNC))
        drops[(t, DEVICE)] = [last_forward, *sorted(backward)[:-1]]
        drops[(t, host)] = [max(backward)]
    if not moves:
        raise TmsimError(f"{SAVE_ON_CPU}: graph {graph.name!r} saves no tensor for its backward")
    initial = {
        t: (DEVICE,) for t, tensor in enumerate(graph.tensors) if tensor.role in PREEXISTING_ROLES
    }
    op_tiers = np.full(cost.op_tensor.size, DEVICE, dtype=np.int64)
    plan = assemble_plan(
        cost, SAVE_ON_CPU, limit, op_tiers, initial, moves, drops=drops, options=opts.to_dict()
    )
    check_fits(plan, graph, platform, limit, SAVE_ON_CPU)
    return plan


__all__ = ["SAVE_ON_CPU", "plan_save_on_cpu"]
