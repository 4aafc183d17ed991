"""An independent check that a plan obeys the rules of :mod:`tmsim.plans.values` for its graph and
platform.

:func:`validate` re-derives everything from the plan itself (residency ranges, moves, operand
tiers, initial tiers) and shares nothing with any planner except the cost model's step-time
rule (:func:`tmsim.cost.step_time_s`, or for a plan with host kernels
:func:`tmsim.plans.streams.plan_step_time_s`). It never raises for a bad plan: it returns a
:class:`Validation` listing what is wrong; :meth:`Validation.raise_if_invalid` turns that into
a :class:`PlanError`.

The work is near-linear in the plan: residency look-ups are binary searches over sorted range
starts, capacity is a difference array, and copy validity is one pass over per-tensor events
(operand accesses, range starts and ends, moves) in time order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.cost import BesideCosts, CostModel, IndexMove, IndexRecompute
from tmsim.errors import PlanError, TmsimError
from tmsim.intervals import occupancy
from tmsim.plans.copies import check_validity
from tmsim.plans.deps import lasting_copies, stream_deps
from tmsim.plans.host import (
    check_host_order,
    check_host_recomputes,
    operand_reach,
    parse_host_kernels,
)
from tmsim.plans.parse import Errors, Parsed, move_residency, parse_plan
from tmsim.plans.recompute import (
    ParsedRecomputes,
    check_recomputes,
    parse_recomputes,
    recompute_starts,
)
from tmsim.plans.streams import plan_step_time_s
from tmsim.plans.values import Plan
from tmsim.workload.graph import PERSISTENT_ROLES, Graph

#: Most errors a :class:`Validation` lists; one more line says how many were left out.
MAX_ERRORS = 50
#: Relative tolerance between a plan's predicted time and the recomputed one.
TIME_RTOL = 1e-6


@dataclass(frozen=True)
class Validation:
    """What :func:`validate` found.

    - ``ok``: the plan obeys every rule (then ``errors`` is empty);
    - ``errors``: one line per broken rule instance, naming the kernel, tensor, tier or move
      (at most :data:`MAX_ERRORS`, then a line counting the rest);
    - ``recomputed_s``: the step time recomputed from the plan (seconds; ``nan`` when the plan
      is too malformed to time, ``inf`` when an operand sits on a tier kernels cannot access);
    - ``fast_peak_bytes``: the most bytes resident on the fastest tier at any kernel;
    - ``moved_bytes``: the sum of the sizes of the tensors of all moves.
    """

    ok: bool
    errors: tuple[str, ...]
    recomputed_s: float
    fast_peak_bytes: int
    moved_bytes: int

    def raise_if_invalid(self, shown: int = 5) -> None:
        """Raise :class:`PlanError` with the first ``shown`` errors if the plan is invalid."""
        if not self.ok:
            head = "; ".join(self.errors[:shown])
            more = len(self.errors) - shown
            tail = f" (and {more} more)" if more > 0 else ""
            raise PlanError(f"invalid plan: {head}{tail}")


def validate(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    cost: CostModel | None = None,
    beside: BesideCosts | None = None,
) -> Validation:
    """Check ``plan`` against every rule of :mod:`tmsim.plans.values` for ``graph`` on ``platform``.

    ``cost`` is the cost model the plan's time was predicted with (default: the roofline
    ``CostModel(graph, platform)``); it must be built for this graph and platform. Checks: names;
    the shape of ``operand_tiers`` and known tensor and tier names everywhere; initial tiers
    (exactly the pre-existing tensors, an input in one tier); operands on tiers kernels may access;
    residency ranges inside ``[0, K - 1]``, not overlapping, each start justified (producer, initial
    tier at kernel 0, or a move into the tier there) and no produced tensor before its producer;
    host kernels (:mod:`tmsim.plans.host`: a host compute, known kernels listed once, operands on
    tiers the host reaches, not run again by a recompute, conflicting ones in plan order, no
    deadlock);
    every operand resident in its tier at its kernel; moves (path, kernel, source and destination
    resident when the move runs); copy validity (kernels and moves read only valid copies;
    asynchronous data usable from the next kernel; in-place updates make other copies stale);
    weights and optimizer state ending valid on each initial tier; every tier's capacity at every
    kernel (the fastest tier's: also the plan's ``fast_limit_bytes``); the predicted time (relative
    :data:`TIME_RTOL`), with ``beside`` charging asynchronous copies what interference makes
    them cost, as an ``async-aware`` plan was predicted (:func:`tmsim.sim.beside.beside_for`).

    Never raises for a bad plan (see :meth:`Validation.raise_if_invalid`); raises
    :class:`TmsimError` if ``cost`` was built for another graph or platform, and, when it
    builds the cost model itself, :class:`hwmodels.errors.HardwareModelError` if the platform
    cannot compute in a dtype the graph uses.
    """
    if cost is None:
        cost = CostModel(graph, platform)
    elif cost.graph is not graph or cost.platform != platform:
        raise TmsimError("validate: the cost model was built for another graph or platform")
    errors = Errors(MAX_ERRORS)
    if plan.graph != graph.name:
        errors.add(f"plan is for graph {plan.graph!r}, not {graph.name!r}")
    if plan.platform != platform.name:
        errors.add(f"plan is for platform {plan.platform!r}, not {platform.name!r}")
    parsed = parse_plan(plan, graph, platform, errors)
    rc = parse_recomputes(plan, graph, platform, errors)
    host, host_ok = parse_host_kernels(plan, graph, platform, errors)
    _check_inputs(plan, graph, errors)
    peak = _capacity(parsed, graph, plan.fast_limit_bytes, platform, errors)
    moved = int(graph.sizes_bytes[parsed.mv_tensor[parsed.mv_ok]].sum())
    if parsed.fatal:
        return Validation(False, errors.result(), math.nan, peak, moved)

    _check_access(parsed, graph, platform, errors, host if platform.host_compute else ())
    _check_ranges(parsed, rc, graph, platform, errors)
    _check_operand_residency(parsed, graph, platform, errors)
    _check_moves(parsed, graph, platform, errors)
    check_recomputes(rc, parsed, graph, platform, errors)
    check_validity(parsed, graph, platform, errors, rc)
    host_ok = check_host_recomputes(rc, host, graph, errors) and host_ok

    recomputed = math.nan
    if bool(parsed.mv_ok.all()) and bool(rc.ok.all()) and host_ok:
        moves = [
            IndexMove(int(t), int(s), int(d), int(k), MoveMode.ASYNC if a else MoveMode.SYNC)
            for t, s, d, k, a in zip(
                parsed.mv_tensor,
                parsed.mv_src,
                parsed.mv_dst,
                parsed.mv_kernel,
                parsed.mv_async,
                strict=True,
            )
        ]
        runs = [
            IndexRecompute(int(rc.tensor[i]), int(rc.kernel[i]), int(rc.producer[i]), tiers)
            for i, tiers in enumerate(tuple(int(x) for x in t) for t in rc.tiers)
        ]
        ok = parsed.rs_ok
        lasting = lasting_copies(
            zip(
                parsed.rs_tensor[ok].tolist(),
                parsed.rs_tier[ok].tolist(),
                parsed.rs_first[ok].tolist(),
                parsed.rs_last[ok].tolist(),
                strict=True,
            ),
            len(platform.tiers),
            len(graph.kernels),
        )
        if host and not check_host_order(
            stream_deps(cost, parsed.op_tier, moves, runs, host, lasting), host, graph, errors
        ):
            return Validation(False, errors.result(), math.nan, peak, moved)
        try:
            recomputed, _ = plan_step_time_s(
                cost, parsed.op_tier, moves, beside, runs, host, lasting
            )
        except (TmsimError, HardwareModelError) as exc:  # a deadlock, a dtype the host lacks
            errors.add(f"the step cannot be timed: {exc}")
            return Validation(False, errors.result(), math.nan, peak, moved)
        predicted = plan.predicted_s
        if math.isfinite(recomputed) and not math.isclose(
            recomputed, predicted, rel_tol=TIME_RTOL, abs_tol=0.0
        ):
            how = "with" if beside is not None else "without"
            errors.add(
                f"predicted step time {predicted!r} s differs from the recomputed "
                f"{recomputed!r} s {how} interference costs (relative tolerance {TIME_RTOL:g})"
            )
    return Validation(errors.count == 0, errors.result(), recomputed, peak, moved)


# ---------------------------------------------------------------------- checks
def _kname(graph: Graph, k: int) -> str:
    n_k = len(graph.kernels)
    return f"kernel {k} ({graph.kernels[k].name!r})" if 0 <= k < n_k else f"kernel {k}"


def _capacity(p: Parsed, graph: Graph, limit: int, platform: Platform, errors: Errors) -> int:
    """Resident bytes of every tier at every kernel, by a difference array over its ranges,
    against the tier's limit: the smaller of ``limit`` and its capacity for the fastest tier,
    the capacity for the others. Returns the fastest tier's peak."""
    n_k = len(graph.kernels)
    fast_peak = 0
    for i, tier in enumerate(platform.tiers):
        on = p.rs_ok & (p.rs_tier == i)
        occ = occupancy(p.rs_first[on], p.rs_last[on], graph.sizes_bytes[p.rs_tensor[on]], n_k)
        cap = min(limit, tier.capacity_bytes) if i == 0 else tier.capacity_bytes
        over = np.flatnonzero(occ > cap)
        if over.size:
            k = int(over[0])
            worst = int(over[np.argmax(occ[over])])
            what = "limit" if cap < tier.capacity_bytes else "capacity"
            errors.add(
                f"tier {tier.name!r} over its {what} of {cap} bytes at {over.size} kernel(s): "
                f"first at {_kname(graph, k)} with {int(occ[k])} bytes ({int(occ[k]) - cap} "
                f"over), worst at {_kname(graph, worst)} with {int(occ[worst])} bytes"
            )
        if i == 0 and n_k:
            fast_peak = int(occ.max())
    return fast_peak


def _check_inputs(plan: Plan, graph: Graph, errors: Errors) -> None:
    """An input starts in one tier: a second copy would be a move nobody paid for (weights and
    optimizer state may start in several, as the step leaves them where it found them)."""
    for name, tiers in plan.initial_tiers.items():
        if len(tiers) > 1:
            try:
                role = graph.tensor(name).role
            except KeyError:
                continue  # parse_plan names the unknown tensor
            if role not in PERSISTENT_ROLES:
                listed = ", ".join(map(repr, tiers))
                errors.add(
                    f"input {name!r} starts in {len(tiers)} tiers ({listed}); an input "
                    "starts in one, and a copy in another is a move of the plan"
                )


def _check_access(
    p: Parsed, graph: Graph, platform: Platform, errors: Errors, host: tuple[int, ...]
) -> None:
    names = platform.tier_names
    reach = operand_reach(platform, p.op_kernel, p.op_tier, host)
    on_host = set(host)
    for j in np.flatnonzero(~reach)[: MAX_ERRORS + 1]:
        k, t = int(p.op_kernel[j]), int(p.op_tensor[j])
        who, tiers = "kernels", platform.kernel_tiers
        if k in on_host and platform.host_compute is not None:
            who, tiers = "the host compute", platform.host_compute.kernel_tiers
        errors.add(
            f"{_kname(graph, k)}: operand {graph.tensors[t].name!r} is on tier "
            f"{names[int(p.op_tier[j])]!r}, which {who} cannot access "
            f"(kernel tiers: {', '.join(tiers)})"
        )


def _check_ranges(
    p: Parsed, rc: ParsedRecomputes, graph: Graph, platform: Platform, errors: Errors
) -> None:
    """Ranges of one (tensor, tier) do not overlap, and each start is justified."""
    names = platform.tier_names
    n_k = len(graph.kernels)
    ok = np.flatnonzero(p.rs_ok)
    order = ok[np.lexsort((p.rs_first[ok], p.rs_key[ok]))]
    key, first, last = p.rs_key[order], p.rs_first[order], p.rs_last[order]
    clash = np.flatnonzero((key[1:] == key[:-1]) & (first[1:] <= last[:-1]))
    for i in clash[: MAX_ERRORS + 1]:
        r = int(order[i + 1])
        errors.add(
            f"tensor {graph.tensors[int(p.rs_tensor[r])].name!r}: residency ranges in tier "
            f"{names[int(p.rs_tier[r])]!r} overlap ([{int(last[i])} ends after "
            f"{int(first[i + 1])} starts])"
        )

    # Codes (tensor, tier, kernel) at which a copy may appear.
    n_tiers = len(names)
    producer = graph.producers
    out = p.op_is_output
    just = [(p.op_tensor[out] * n_tiers + p.op_tier[out]) * n_k + p.op_kernel[out]]
    init_key = p.init_tensor * n_tiers + p.init_tier
    just.append(init_key * n_k)
    mv = p.mv_ok
    mk = np.minimum(p.mv_kernel[mv], n_k - 1)  # a sync move after the last kernel lands at K-1
    just.append((p.mv_tensor[mv] * n_tiers + p.mv_dst[mv]) * n_k + mk)
    just.append(recompute_starts(rc, n_tiers, n_k))
    justified = np.concatenate(just)
    codes = p.rs_key[ok] * n_k + p.rs_first[ok]
    good = np.isin(codes, justified)
    for r in ok[~good][: MAX_ERRORS + 1]:
        t, a = int(p.rs_tensor[r]), int(p.rs_first[r])
        tier = names[int(p.rs_tier[r])]
        where = f"tensor {graph.tensors[t].name!r} appears in tier {tier!r} at {_kname(graph, a)}"
        if producer[t] >= 0 and a < producer[t]:
            errors.add(f"{where}, before its producer {_kname(graph, int(producer[t]))}")
        else:
            errors.add(
                f"{where} with no producer writing it there, no initial copy there, "
                "no move into it there and no recompute of it there"
            )
    starts = np.isin(init_key * n_k, codes)
    for i in np.flatnonzero(~starts)[: MAX_ERRORS + 1]:
        t, d = int(p.init_tensor[i]), int(p.init_tier[i])
        errors.add(
            f"tensor {graph.tensors[t].name!r}: initial tier {names[d]!r} has no residency "
            "range starting at kernel 0"
        )


def _check_operand_residency(p: Parsed, graph: Graph, platform: Platform, errors: Errors) -> None:
    names = platform.tier_names
    for j in np.flatnonzero(~p.op_resident)[: MAX_ERRORS + 1]:
        k, t = int(p.op_kernel[j]), int(p.op_tensor[j])
        errors.add(
            f"{_kname(graph, k)}: operand {graph.tensors[t].name!r} is not resident in tier "
            f"{names[int(p.op_tier[j])]!r} there"
        )


def _check_moves(p: Parsed, graph: Graph, platform: Platform, errors: Errors) -> None:
    """Source and destination resident when each move runs (see :mod:`tmsim.plans.values`)."""
    src_ok, dst_ok, at = move_residency(p)
    for i in np.flatnonzero(~src_ok)[: MAX_ERRORS + 1]:
        when = "at" if p.mv_async[i] else "at or just before"
        errors.add(
            f"{p.move_name(int(i), graph, platform)}: source copy is not resident {when} "
            f"{_kname(graph, int(at[i]))}"
        )
    for i in np.flatnonzero(~dst_ok)[: MAX_ERRORS + 1]:
        errors.add(
            f"{p.move_name(int(i), graph, platform)}: destination is not resident at "
            f"{_kname(graph, int(at[i]))}"
        )


__all__ = ["MAX_ERRORS", "TIME_RTOL", "PlanError", "Validation", "validate"]
