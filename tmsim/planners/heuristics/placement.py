"""Static placements: every tensor in one tier for its whole life, chosen by a simple rule.

The baselines the MILP is measured against, over any number of tiers. The tiers a static
placement may use are those kernels access (a kernel reads and writes its operands where they
are); tier 0, the fastest, holds at most the planned fast-tier capacity, every other tier its
platform capacity. The *slowest kernel tier* is the last of them in platform order.

- :func:`plan_all_fast`: everything in the fastest tier, with as much of it as that takes
  (the lower bound);
- :func:`plan_all_slow`: everything in the slowest kernel tier;
- :func:`plan_first_touch`: the NUMA baseline of the AutoTM paper: tensors in order of
  creation go to the fastest kernel tier where they fit over their live range;
- :func:`plan_greedy`: tensors by time saved per byte, fastest tiers first.

Each raises :class:`~tmsim.errors.NoPlanError` naming the tier and the bytes when the tensors
it must place somewhere do not fit, and :class:`~tmsim.errors.TmsimError` when kernels cannot
access the tiers it needs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from hwmodels.timing import Overlap
from tmsim.capacity import fast_limit_bytes, tier_limits_bytes
from tmsim.cost import CostModel
from tmsim.errors import NoPlanError, TmsimError
from tmsim.intervals import occupancy
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.workload.graph import PREEXISTING_ROLES, Graph

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def kernel_tiers(platform: Platform) -> list[int]:
    """Indices of the tiers kernels may access, fastest first."""
    return [i for i, ok in enumerate(platform.kernel_tier_mask()) if ok]


def require_fast_access(platform: Platform, planner: str) -> None:
    """Raise :class:`TmsimError` unless kernels may access the fastest tier."""
    if not platform.kernel_tier_mask()[0]:
        raise TmsimError(
            f"{planner}: kernels on platform {platform.name!r} cannot access tier "
            f"{platform.tiers[0].name!r} (kernel tiers: {', '.join(platform.kernel_tiers)}); "
            "its fastest tier is not directly addressable (a hardware cache in 2LM mode)"
        )


def _slower_kernel_tiers(platform: Platform, planner: str) -> list[int]:
    """The kernel tiers, fastest first; raises unless one is slower than the fastest tier."""
    tiers = kernel_tiers(platform)
    if tiers[-1] == 0:
        raise TmsimError(
            f"{planner}: kernels on platform {platform.name!r} reach only tier "
            f"{platform.tiers[0].name!r}, and this planner places operands in a slower tier; "
            "on a platform whose kernels reach only device memory (a GPU) use 'all-fast', "
            "'vdnn' or the MILP"
        )
    return tiers


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


class _Fill:
    """Tiers filling up: a running occupancy array over kernels per tier. Placing a tensor
    costs one max and one add over its live range (numpy slices)."""

    def __init__(self, graph: Graph, limits: list[int], home: int) -> None:
        self.graph = graph
        self.limits = limits
        self.occ = np.zeros((len(limits), len(graph.kernels)), dtype=np.int64)
        self.tier = np.full(len(graph.tensors), home, dtype=np.int64)
        self.placed = np.zeros(len(graph.tensors), dtype=bool)
        # plain ints: read once per placement, where numpy scalars and properties cost more
        self._lo = graph.live_first.tolist()
        self._end = (graph.live_last + 1).tolist()
        self._size = graph.sizes_bytes.tolist()

    def fits(self, t: int, tier: int) -> bool:
        held = int(self.occ[tier, self._lo[t] : self._end[t]].max())
        return bool(held + self._size[t] <= self.limits[tier])

    def put(self, t: int, tier: int) -> None:
        self.occ[tier, self._lo[t] : self._end[t]] += self._size[t]
        self.tier[t] = tier
        self.placed[t] = True

    def rest_to(self, tier: int, platform: Platform, planner: str) -> IntArray:
        """Every tensor not placed yet goes to ``tier``; raises :class:`NoPlanError` naming
        the tier, the kernel and the bytes if they do not fit there."""
        rest = np.flatnonzero(~self.placed)
        g = self.graph
        self.occ[tier] += occupancy(
            g.live_first[rest], g.live_last[rest], g.sizes_bytes[rest], len(g.kernels)
        )
        self.tier[rest] = tier
        self.placed[rest] = True
        over = np.flatnonzero(self.occ[tier] > self.limits[tier])
        if over.size:
            k = int(over[np.argmax(self.occ[tier, over])])
            need = int(self.occ[tier, k])
            raise NoPlanError(
                f"{planner}: tier {platform.tiers[tier].name!r} holds {self.limits[tier]} "
                f"bytes but the tensors left for it need {need} at kernel {k} "
                f"({self.graph.kernels[k].name!r}), {need - self.limits[tier]} bytes more"
            )
        return self.tier


def plan_all_fast(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Every tensor in the fastest tier: the lower bound of the step time.

    Its ``fast_limit_bytes`` is the larger of the requested limit and the peak live bytes, so
    the plan is valid whatever was asked, as long as the tier holds the step. Raises
    :class:`TmsimError` if kernels cannot access the fastest tier (a platform in 2LM cache
    mode), :class:`NoPlanError` if the step's peak live bytes exceed the tier's capacity.
    """
    opts = settings or PlanSettings()
    require_fast_access(platform, "all-fast")
    cost = cost_model(graph, platform, opts.profile)
    fast = platform.tiers[0]
    if graph.peak_live_bytes > fast.capacity_bytes:
        raise NoPlanError(
            f"all-fast: tier {fast.name!r} holds {fast.capacity_bytes} bytes but the step "
            f"needs {graph.peak_live_bytes} at its peak, "
            f"{graph.peak_live_bytes - fast.capacity_bytes} bytes more"
        )
    limit = max(graph.peak_live_bytes, fast_limit_bytes(graph, platform, opts.capacity))
    tier = np.zeros(len(graph.tensors), dtype=np.int64)
    return _static_plan(cost, "all-fast", limit, tier, opts)


def plan_all_slow(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Every tensor in the slowest tier kernels may access; no faster tier is used.

    Raises :class:`TmsimError` if kernels reach only the fastest tier (a GPU), and
    :class:`NoPlanError` if the step does not fit in that tier.
    """
    opts = settings or PlanSettings()
    slowest = _slower_kernel_tiers(platform, "all-slow")[-1]
    cost = cost_model(graph, platform, opts.profile)
    limits = tier_limits_bytes(graph, platform, opts.capacity)
    fill = _Fill(graph, limits, slowest)
    return _static_plan(
        cost, "all-slow", limits[0], fill.rest_to(slowest, platform, "all-slow"), opts
    )


def plan_first_touch(
    graph: Graph, platform: Platform, settings: PlanSettings | None = None
) -> Plan:
    """First-touch NUMA placement, the AutoTM paper's baseline; no moves.

    Tensors are considered in the order they come into existence (pre-existing tensors in
    graph order, then produced tensors by producer and output position); each goes to the
    fastest kernel tier where, added to those placed before it, the tier's resident bytes
    stay within its limit at every kernel of its live range, else to the slowest kernel tier.
    Because earlier tensors only die after a later one is created, this is the same as
    deciding at creation time with freed memory reused. Raises :class:`TmsimError` unless
    kernels reach a tier beyond the fastest, :class:`NoPlanError` if the slowest kernel tier
    overflows.
    """
    opts = settings or PlanSettings()
    cost = cost_model(graph, platform, opts.profile)
    limits = tier_limits_bytes(graph, platform, opts.capacity)
    return _static_plan(cost, "first-touch", limits[0], first_touch_tiers(cost, limits), opts)


def first_touch_tiers(cost: CostModel, limits: list[int]) -> IntArray:
    """The tier of every tensor in :func:`plan_first_touch`'s placement at tier limits
    ``limits`` (bytes, one per platform tier); raises as that function does."""
    graph, platform = cost.graph, cost.platform
    tiers = _slower_kernel_tiers(platform, "first-touch")
    pre = [t for t, x in enumerate(graph.tensors) if x.role in PREEXISTING_ROLES]
    made = [graph.tensor_index(name) for k in graph.kernels for name in k.outputs]
    fill = _Fill(graph, limits, tiers[-1])
    for t in pre + made:
        tier = next((i for i in tiers[:-1] if fill.fits(t, i)), None)
        if tier is not None:
            fill.put(t, tier)
    return fill.rest_to(tiers[-1], platform, "first-touch")


def tensor_benefit_s(cost: CostModel, tier: int = 0, base: int | None = None) -> FloatArray:
    """Seconds each tensor alone saves by moving from tier ``base`` (default: the slowest
    kernel tier) to tier ``tier``.

    From the placement with every operand on ``base``, for every operand: its kernel's time
    there minus that time with this operand on ``tier`` (the roofline makes the saving zero
    where a kernel stays compute-bound), summed per tensor. For a kernel with measured times
    both placements are timed as the cost model times them, measured where its profile lists
    them.
    """
    if base is None:
        base = kernel_tiers(cost.platform)[-1]
    k, n_k = cost.op_kernel, len(cost.graph.kernels)
    reads, writes = cost.op_read_bytes, cost.op_write_bytes
    slow = np.zeros(k.size)
    fast = np.zeros(k.size)
    for out, where in ((slow, base), (fast, tier)):
        r = np.zeros(k.size)
        np.multiply(reads, cost.read_s_per_byte[k, where], out=r, where=reads > 0)
        np.multiply(writes, cost.write_s_per_byte[k, where], out=out, where=writes > 0)
        out += r
    saving = slow - fast
    mem = np.bincount(k, weights=slow, minlength=n_k)[k]
    if cost.overlap is Overlap.MAX:
        compute = cost.compute_s[k]
        saving = np.maximum(compute, mem) - np.maximum(compute, mem - saving)
    for kern in sorted({kern for kern, _ in cost.measured}):
        lo, hi = int(cost.op_ptr[kern]), int(cost.op_ptr[kern + 1])
        on_base = np.full(hi - lo, base, dtype=np.int64)
        before_s = cost.recompute_s(kern, on_base)
        for j in range(hi - lo):
            moved = on_base.copy()
            moved[j] = tier
            saving[lo + j] = before_s - cost.recompute_s(kern, moved)
    per_tensor = np.bincount(cost.op_tensor, weights=saving, minlength=len(cost.graph.tensors))
    return np.asarray(per_tensor, dtype=np.float64)


def plan_greedy(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Static placement by benefit per byte; no moves.

    Starting from everything on the slowest kernel tier, each faster kernel tier in turn
    (fastest first) takes the tensors not yet placed in decreasing order of their
    :func:`tensor_benefit_s` there per byte (ties: smaller first), each if it fits at every
    kernel of its live range; tensors that save nothing stay behind. Because a ratio order
    packs badly when a few large tensors matter most (the knapsack problem's weakness), the
    same fill is also run in order of benefit alone, and the faster of the two placements is
    kept. Moving an operand to a faster tier never lengthens a kernel under the roofline, so
    the plan is never slower than all-slow. Raises :class:`TmsimError` unless kernels reach a
    tier beyond the fastest, :class:`NoPlanError` if the slowest kernel tier overflows.
    """
    opts = settings or PlanSettings()
    cost = cost_model(graph, platform, opts.profile)
    limits = tier_limits_bytes(graph, platform, opts.capacity)
    return _static_plan(cost, "greedy", limits[0], greedy_tiers(cost, limits), opts)


def greedy_tiers(cost: CostModel, limits: list[int]) -> IntArray:
    """The tier of every tensor in :func:`plan_greedy`'s placement at tier limits ``limits``
    (bytes, one per platform tier); raises as that function does."""
    graph, platform = cost.graph, cost.platform
    tiers = _slower_kernel_tiers(platform, "greedy")
    size = graph.sizes_bytes
    benefits = {i: tensor_benefit_s(cost, i, tiers[-1]) for i in tiers[:-1]}
    best: tuple[float, IntArray] | None = None
    for by_ratio in (True, False):
        fill = _Fill(graph, limits, tiers[-1])
        for i in tiers[:-1]:
            benefit = benefits[i]
            key = benefit / size if by_ratio else benefit
            useful = np.flatnonzero((benefit > 0) & ~fill.placed)
            for t in useful[np.lexsort((size[useful], -key[useful]))].tolist():
                if fill.fits(t, i):
                    fill.put(t, i)
        tier = fill.rest_to(tiers[-1], platform, "greedy")
        seconds = float(cost.kernel_times_s(tier[cost.op_tensor]).sum())
        if best is None or seconds < best[0]:
            best = (seconds, tier)
    assert best is not None
    return best[1]


__all__ = [
    "first_touch_tiers",
    "greedy_tiers",
    "kernel_tiers",
    "plan_all_fast",
    "plan_all_slow",
    "plan_first_touch",
    "plan_greedy",
    "require_fast_access",
    "tensor_benefit_s",
]
