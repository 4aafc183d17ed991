"""Heuristic planners: the baselines the MILP is measured against.

Every planner has the signature ``plan_<name>(graph, platform, options=None) -> Plan`` and
builds its plan with :class:`~tmsim.cost.CostModel` and
:func:`~tmsim.planners.assemble.assemble_plan`, so its predicted time follows the same
step-time rule as every other plan. Tier 0 of the platform is the fast tier, tier 1 the slow
one; tiers beyond the second are not used.

- :func:`plan_all_fast`: everything in the fast tier, with as much fast memory as that takes
  (the lower bound);
- :func:`plan_all_slow`: everything in the slow tier (kernels must be able to access it);
- :func:`plan_first_touch`: the NUMA baseline of the AutoTM paper: tensors in order of
  creation go to fast memory while they fit over their live range, the rest to slow;
- :func:`plan_greedy`: static placement by benefit per byte;
- :func:`plan_vdnn`: every operand in fast memory at its users, large activations offloaded
  to slow memory between their forward and backward uses (vDNN, Rhu et al., MICRO 2016).

:data:`REGISTRY` maps the names ``all-fast``, ``all-slow``, ``first-touch``, ``vdnn``,
``greedy`` to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from hwmodels.timing import Overlap
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.plan.values import Plan
from tmsim.planners.assemble import FAST, SLOW, assemble_plan, check_operands_fit
from tmsim.planners.offload import choose_offloads, offload_moves
from tmsim.planners.settings import PlanSettings
from tmsim.workload.graph import PREEXISTING_ROLES, Graph

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Planner(Protocol):
    """The signature every heuristic planner shares."""

    def __call__(
        self, graph: Graph, platform: Platform, settings: PlanSettings | None = None
    ) -> Plan: ...


# ---------------------------------------------------------------------- helpers
def _require_kernel_access(platform: Platform, planner: str, tiers: tuple[int, ...]) -> None:
    """Raise :class:`TmsimError` unless kernels may access every tier in ``tiers``."""
    mask = platform.kernel_tier_mask()
    for i in tiers:
        if i >= len(platform.tiers):
            raise TmsimError(
                f"{planner}: platform {platform.name!r} has {len(platform.tiers)} tier(s); "
                "this planner needs a fast and a slow tier"
            )
        if not mask[i]:
            hint = (
                "on a platform whose kernels reach only device memory (a GPU) use 'all-fast', "
                "'vdnn' or the MILP"
                if i == SLOW
                else "its fast tier is not directly addressable (a hardware cache in 2LM mode)"
            )
            raise TmsimError(
                f"{planner}: kernels on platform {platform.name!r} cannot access tier "
                f"{platform.tiers[i].name!r} (kernel tiers: {', '.join(platform.kernel_tiers)}), "
                f"and this planner places operands there; {hint}"
            )


def _static_plan(
    cost: CostModel, planner: str, limit: int, tensor_tier: IntArray, settings: PlanSettings
) -> Plan:
    """A plan with no moves: tensor ``t`` lives on ``tensor_tier[t]`` for its whole life."""
    graph = cost.graph
    initial = {
        t: (int(tensor_tier[t]),)
        for t, tensor in enumerate(graph.tensors)
        if tensor.role in PREEXISTING_ROLES
    }
    return assemble_plan(
        cost,
        planner,
        limit,
        tensor_tier[cost.op_tensor],
        initial,
        moves=(),
        options=settings.to_dict(),
    )


def _fill_fast(graph: Graph, order: IntArray, limit: int) -> IntArray:
    """Tensors in ``order`` go to the fast tier if they fit at every kernel they are live.

    A running occupancy array over kernels; each tensor costs one max and one add over its
    live range (numpy slices). Returns each tensor's tier.
    """
    tier = np.full(len(graph.tensors), SLOW, dtype=np.int64)
    occ = np.zeros(len(graph.kernels), dtype=np.int64)
    first, last, size = graph.live_first, graph.live_last, graph.sizes_bytes
    for t in order.tolist():
        a, b, s = int(first[t]), int(last[t]) + 1, int(size[t])
        if int(occ[a:b].max()) + s <= limit:
            occ[a:b] += s
            tier[t] = FAST
    return tier


# ---------------------------------------------------------------------- planners
def plan_all_fast(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Every tensor in the fast tier: the lower bound of the step time.

    Its ``fast_limit_bytes`` is the larger of the requested limit and the peak live bytes, so
    the plan is valid whatever was asked. Raises :class:`TmsimError` if kernels cannot access
    the fast tier (a platform in 2LM cache mode).
    """
    opts = settings or PlanSettings()
    _require_kernel_access(platform, "all-fast", (FAST,))
    cost = CostModel(graph, platform)
    limit = max(graph.peak_live_bytes, fast_limit_bytes(graph, platform, opts.capacity))
    tier = np.full(len(graph.tensors), FAST, dtype=np.int64)
    return _static_plan(cost, "all-fast", limit, tier, opts)


def plan_all_slow(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Every tensor in the slow tier (tier 1); no fast memory is used.

    Raises :class:`TmsimError` if the platform has one tier or kernels cannot access the slow
    tier (a GPU, whose kernels reach device memory only).
    """
    opts = settings or PlanSettings()
    _require_kernel_access(platform, "all-slow", (SLOW,))
    cost = CostModel(graph, platform)
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    tier = np.full(len(graph.tensors), SLOW, dtype=np.int64)
    return _static_plan(cost, "all-slow", limit, tier, opts)


def plan_first_touch(
    graph: Graph, platform: Platform, settings: PlanSettings | None = None
) -> Plan:
    """First-touch NUMA placement, the AutoTM paper's baseline; no moves.

    Tensors are considered in the order they come into existence (pre-existing tensors in
    graph order, then produced tensors by producer and output position); each goes to the fast
    tier if, added to those placed before it, the fast tier's resident bytes stay within the
    limit at every kernel of its live range, and to the slow tier otherwise. Because earlier
    tensors only die after a later one is created, this is the same as deciding at creation
    time with freed memory reused. Raises :class:`TmsimError` unless kernels may access both
    tiers.
    """
    opts = settings or PlanSettings()
    _require_kernel_access(platform, "first-touch", (FAST, SLOW))
    cost = CostModel(graph, platform)
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    pre = [t for t, x in enumerate(graph.tensors) if x.role in PREEXISTING_ROLES]
    made = [graph.tensor_index(name) for k in graph.kernels for name in k.outputs]
    order = np.asarray(pre + made, dtype=np.int64)
    return _static_plan(cost, "first-touch", limit, _fill_fast(graph, order, limit), opts)


def tensor_benefit_s(cost: CostModel) -> FloatArray:
    """Seconds each tensor alone saves by moving from the slow tier to the fast one.

    From the all-slow placement, for every operand: its kernel's time with every operand slow
    minus that time with this operand fast (the roofline makes the saving zero where a kernel
    stays compute-bound), summed per tensor. Measured tables are not consulted.
    """
    k, n_k = cost.op_kernel, len(cost.graph.kernels)
    reads, writes = cost.op_read_bytes, cost.op_write_bytes
    slow = np.zeros(k.size)
    fast = np.zeros(k.size)
    for out, tier in ((slow, SLOW), (fast, FAST)):
        r = np.zeros(k.size)
        np.multiply(reads, cost.read_s_per_byte[k, tier], out=r, where=reads > 0)
        np.multiply(writes, cost.write_s_per_byte[k, tier], out=out, where=writes > 0)
        out += r
    saving = slow - fast
    mem = np.bincount(k, weights=slow, minlength=n_k)[k]
    if cost.overlap is Overlap.MAX:
        compute = cost.compute_s[k]
        saving = np.maximum(compute, mem) - np.maximum(compute, mem - saving)
    per_tensor = np.bincount(cost.op_tensor, weights=saving, minlength=len(cost.graph.tensors))
    return np.asarray(per_tensor, dtype=np.float64)


def plan_greedy(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Static placement by benefit per byte; no moves.

    Starting from all-slow, tensors go to the fast tier in decreasing order of
    :func:`tensor_benefit_s` per byte (ties: smaller first), each if it fits at every kernel
    of its live range; tensors that save nothing stay slow. Because a ratio order packs badly
    when a few large tensors matter most (the knapsack problem's weakness), the same fill is
    also run in order of benefit alone, and the faster of the two placements is kept. Moving
    an operand to the faster tier never lengthens a kernel under the roofline, so the plan is
    never slower than all-slow. Raises :class:`TmsimError` unless kernels may access both
    tiers.
    """
    opts = settings or PlanSettings()
    _require_kernel_access(platform, "greedy", (FAST, SLOW))
    cost = CostModel(graph, platform)
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    benefit = tensor_benefit_s(cost)
    size = graph.sizes_bytes
    useful = np.flatnonzero(benefit > 0)
    best: tuple[float, IntArray] | None = None
    for key in (benefit / size, benefit):
        tier = _fill_fast(graph, useful[np.lexsort((size[useful], -key[useful]))], limit)
        seconds = float(cost.kernel_times_s(tier[cost.op_tensor]).sum())
        if best is None or seconds < best[0]:
            best = (seconds, tier)
    assert best is not None
    return _static_plan(cost, "greedy", limit, best[1], opts)


def plan_vdnn(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """vDNN-style movement: every operand in fast memory at its users, tensors offloaded.

    Everything starts in the fast tier. A forward activation used again in the backward pass
    is copied asynchronously to the slow tier beside its last forward use (beside the next
    kernel if that is its producer), its fast copy freed after that kernel, and fetched back
    asynchronously ``prefetch_ahead`` kernels before its first backward use (later if the
    stretch is short; synchronously just before the use when there is no room). Candidates in
    order of preference: those activations of at least ``offload_min_bytes``, then smaller
    ones, then other stretches between two uses of any tensor, then weights and optimizer
    state (which may also start the step in the slow tier and be written back after their
    last update); largest first. With ``offload_all`` every activation of the first kind is
    offloaded (vDNN-all); otherwise only what it takes to fit, kernel by kernel (vDNN-dyn),
    fetching later where that is what fits.

    Raises :class:`TmsimError` unless kernels may access the fast tier and copy paths join
    the first two tiers both ways; :class:`InfeasibleError` (naming the kernel and the bytes
    missing) if a kernel's own operands exceed the limit on a platform whose kernels reach
    only the fast tier, so that no plan exists (:class:`NoPlanError` on other platforms);
    :class:`NoPlanError` naming the kernel if offloading every candidate still does not fit.
    """
    opts = settings or PlanSettings()
    _require_kernel_access(platform, "vdnn", (FAST,))
    cost = CostModel(graph, platform)
    if len(platform.tiers) < 2 or not (cost.has_path(FAST, SLOW) and cost.has_path(SLOW, FAST)):
        raise TmsimError(
            f"vdnn: platform {platform.name!r} needs copy paths between its first two tiers, "
            "both ways"
        )
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    check_operands_fit(graph, platform, limit, "vdnn")
    chosen = choose_offloads(
        graph,
        platform,
        limit,
        min_bytes=opts.offload_min_bytes,
        offload_all=opts.offload_all,
        ahead=opts.prefetch_ahead,
    )
    moves, drops, slow_start = offload_moves(chosen)
    initial = {
        t: (SLOW,) if t in slow_start else (FAST,)
        for t, tensor in enumerate(graph.tensors)
        if tensor.role in PREEXISTING_ROLES
    }
    op_tiers = np.full(cost.op_tensor.size, FAST, dtype=np.int64)
    return assemble_plan(
        cost, "vdnn", limit, op_tiers, initial, moves, drops=drops, options=opts.to_dict()
    )


#: Heuristic planners by name (read-only).
REGISTRY: Mapping[str, Planner] = MappingProxyType(
    {
        "all-fast": plan_all_fast,
        "all-slow": plan_all_slow,
        "first-touch": plan_first_touch,
        "vdnn": plan_vdnn,
        "greedy": plan_greedy,
    }
)

__all__ = [
    "REGISTRY",
    "Planner",
    "plan_all_fast",
    "plan_all_slow",
    "plan_first_touch",
    "plan_greedy",
    "plan_vdnn",
    "tensor_benefit_s",
]
