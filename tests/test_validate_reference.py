"""The validator against a brute-force reference: kernel by kernel, tensor by tensor.

The reference re-reads tmsim.plans.values's rules in the plainest form (a loop over kernels, dicts
of residency ranges, no sorting or binary search) and must agree with validate() on plans
that heuristics make and on random mutations of them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_heuristics import CPU, GPU, REGISTRY, training_graphs

from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.planners.settings import PlanSettings
from tmsim.plans.validate import validate
from tmsim.plans.values import Move, Plan
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES, Graph


def reference_ok(plan: Plan, g: Graph, platform: Platform) -> bool:
    """Every rule of tmsim.plans.values except the predicted time, by direct simulation."""
    n_k, names = len(g.kernels), platform.tier_names
    known = {t.name for t in g.tensors}
    ptr, ops = g.operand_csr
    if plan.graph != g.name or plan.platform != platform.name or len(plan.operand_tiers) != n_k:
        return False
    operands = []  # per kernel: (tensor, tier, kind) with kind in {"in", "out", "upd"}
    for k, kern in enumerate(g.kernels):
        row = plan.operand_tiers[k]
        if len(row) != ptr[k + 1] - ptr[k] or any(d not in names for d in row):
            return False
        kinds = [
            "upd"
            if g.tensors[t].name in kern.updates
            else "out"
            if g.tensors[t].name in kern.outputs
            else "in"
            for t in ops[ptr[k] : ptr[k + 1]]
        ]
        operands.append(
            [
                (g.tensors[t].name, d, kd)
                for t, d, kd in zip(ops[ptr[k] : ptr[k + 1]], row, kinds, strict=True)
            ]
        )
    pre = {t.name for t in g.tensors if t.role in PREEXISTING_ROLES}
    init = plan.initial_tiers
    if set(init) != pre:
        return False
    if any(not v or len(set(v)) != len(v) or set(v) - set(names) for v in init.values()):
        return False
    ranges: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for r in plan.residency:
        if r.tensor not in known or r.tier not in names or not 0 <= r.first <= r.last < n_k:
            return False
        ranges[(r.tensor, r.tier)].append((r.first, r.last))
    for rs in ranges.values():
        rs.sort()
        if any(b[0] <= a[1] for a, b in pairwise(rs)):
            return False

    def resident(t: str, d: str, k: int) -> bool:
        return any(a <= k <= b for a, b in ranges.get((t, d), ()))

    paths = {(p.src, p.dst) for p in platform.copy_paths}
    for m in plan.moves:
        top = n_k - 1 if m.mode is MoveMode.ASYNC else n_k
        if m.tensor not in known or (m.src, m.dst) not in paths or not 0 <= m.kernel <= top:
            return False
        at = min(m.kernel, n_k - 1)
        before = (
            m.mode is MoveMode.SYNC and m.kernel > 0 and resident(m.tensor, m.src, m.kernel - 1)
        )
        if not ((resident(m.tensor, m.src, at) and m.kernel < n_k) or before):
            return False
        if not resident(m.tensor, m.dst, at):
            return False
    # Recomputes: the producer again before the kernel, inputs resident and unchanged.
    producer = {name: k for k, kern in enumerate(g.kernels) for name in kern.outputs}
    updated_at = defaultdict(list)
    for k, kern in enumerate(g.kernels):
        for name in kern.updates:
            updated_at[name].append(k)
    rc_out = []  # per recompute: (its inputs as (tensor, tier), its tensor's tier)
    for rc in plan.recomputes:
        p = producer.get(rc.tensor)
        if p is None or g.kernels[p].updates or updated_at[rc.tensor]:
            return False
        if not p < rc.kernel < n_k or len(rc.tiers) != len(operands[p]):
            return False
        if any(d not in platform.kernel_tiers for d in rc.tiers):
            return False
        ins = [(t, d) for (t, _, kd), d in zip(operands[p], rc.tiers, strict=True) if kd == "in"]
        out = next(d for (t, _, _), d in zip(operands[p], rc.tiers, strict=True) if t == rc.tensor)
        if not all(resident(t, d, rc.kernel) for t, d in ins):
            return False
        if any(p < k < rc.kernel for t, _ in ins for k in updated_at[t]):
            return False
        if not any(a == rc.kernel for a, _ in ranges.get((rc.tensor, out), ())):
            return False
        rc_out.append((ins, out))
    # Where copies may appear: producers, initial tiers at 0, move destinations, recomputes.
    appear = {(t, d, 0) for t, ds in init.items() for d in ds}
    appear |= {(t, d, k) for k in range(n_k) for t, d, kd in operands[k] if kd == "out"}
    appear |= {(m.tensor, m.dst, min(m.kernel, n_k - 1)) for m in plan.moves}
    made = zip(plan.recomputes, rc_out, strict=True)
    appear |= {(rc.tensor, out, rc.kernel) for rc, (_, out) in made}
    if any((t, d, a) not in appear for (t, d), rs in ranges.items() for a, _ in rs):
        return False
    if any(
        not any(a == 0 for a, _ in ranges.get((t, d), ())) for t, ds in init.items() for d in ds
    ):
        return False
    size = {t.name: t.size_bytes for t in g.tensors}
    for k in range(n_k):
        if (
            sum(
                size[t]
                for (t, d), rs in ranges.items()
                if d == names[0]
                for a, b in rs
                if a <= k <= b
            )
            > plan.fast_limit_bytes
        ):
            return False
        for t, d, _ in operands[k]:
            if d not in platform.kernel_tiers or not resident(t, d, k):
                return False

    valid: dict[tuple[str, str], bool] = defaultdict(bool)
    for t, ds in init.items():
        for d in ds:
            valid[(t, d)] = True
    for k in range(n_k + 1):
        syncs = [m for m in plan.moves if m.kernel == k and m.mode is MoveMode.SYNC]
        if not all(valid[(m.tensor, m.src)] for m in syncs):
            return False
        if k < n_k:
            for (t, d), rs in ranges.items():
                if any(b == k - 1 for _, b in rs):
                    valid[(t, d)] = False
            for (t, d), rs in ranges.items():
                if any(a == k for a, _ in rs) and not (k == 0 and d in init.get(t, ())):
                    valid[(t, d)] = False
        for m in syncs:
            valid[(m.tensor, m.dst)] = True
        if k == n_k:
            break
        for rc, (ins, out) in zip(plan.recomputes, rc_out, strict=True):
            if rc.kernel == k:
                if not all(valid[x] for x in ins):
                    return False
                valid[(rc.tensor, out)] = True
        asyncs = [m for m in plan.moves if m.kernel == k and m.mode is MoveMode.ASYNC]
        for m in asyncs:
            valid[(m.tensor, m.dst)] = False
        if not all(valid[(m.tensor, m.src)] for m in asyncs):
            return False
        if not all(valid[(t, d)] for t, d, kd in operands[k] if kd != "out"):
            return False
        for m in asyncs:
            valid[(m.tensor, m.dst)] = True
        for t, d, kd in operands[k]:
            if kd == "upd":
                if any(m.tensor == t and m.dst == d for m in asyncs):
                    return False
                for other in names:
                    valid[(t, other)] = False
            if kd != "in":
                valid[(t, d)] = True
    return all(
        valid[(t.name, d)] for t in g.tensors if t.role in PERSISTENT_ROLES for d in init[t.name]
    )


def mutate(plan: Plan, g: Graph, platform: Platform, data: st.DataObject) -> Plan:
    """One random edit of the kind a buggy planner might make."""
    names = platform.tier_names
    kinds = ["limit", "operand", "initial"]
    kinds += ["drop", "first", "last"] if plan.residency else []
    kinds += ["kernel", "mode", "delete", "reverse"] if plan.moves else []
    kinds += ["rc-kernel", "rc-delete", "rc-tier", "rc-swap"] if plan.recomputes else []
    kind = data.draw(st.sampled_from(kinds))
    if kind.startswith("rc-"):
        i = data.draw(st.integers(0, len(plan.recomputes) - 1))
        rcs = list(plan.recomputes)
        rc = rcs[i]
        if kind == "rc-delete":
            del rcs[i]
        elif kind == "rc-kernel":
            rcs[i] = replace(rc, kernel=max(0, rc.kernel + data.draw(st.sampled_from([-1, 1]))))
        elif kind == "rc-swap" and i + 1 < len(rcs):
            rcs[i], rcs[i + 1] = rcs[i + 1], rcs[i]
        elif rc.tiers:
            j = data.draw(st.integers(0, len(rc.tiers) - 1))
            flipped = list(rc.tiers)
            flipped[j] = names[1 - names.index(flipped[j])]
            rcs[i] = replace(rc, tiers=tuple(flipped))
        return replace(plan, recomputes=tuple(rcs))
    if kind in ("drop", "first", "last"):
        i = data.draw(st.integers(0, len(plan.residency) - 1))
        r = plan.residency[i]
        step = data.draw(st.sampled_from([-1, 1]))
        res = list(plan.residency)
        if kind == "drop":
            del res[i]
        else:
            res[i] = (
                replace(r, first=r.first + step)
                if kind == "first"
                else replace(r, last=r.last + step)
            )
        return replace(plan, residency=tuple(res))
    if kind in ("kernel", "mode", "delete", "reverse"):
        i = data.draw(st.integers(0, len(plan.moves) - 1))
        m = plan.moves[i]
        moves = list(plan.moves)
        if kind == "delete":
            del moves[i]
        elif kind == "kernel":
            moves[i] = replace(m, kernel=max(0, m.kernel + data.draw(st.sampled_from([-1, 1]))))
        elif kind == "mode":
            flip = MoveMode.SYNC if m.mode is MoveMode.ASYNC else MoveMode.ASYNC
            moves[i] = replace(m, mode=flip)
        else:
            moves[i] = Move(m.tensor, m.dst, m.src, m.kernel, m.mode)
        return replace(plan, moves=tuple(moves))
    if kind == "operand":
        k = data.draw(st.integers(0, len(plan.operand_tiers) - 1))
        row = list(plan.operand_tiers[k])
        if not row:
            return plan
        j = data.draw(st.integers(0, len(row) - 1))
        row[j] = names[1 - names.index(row[j])]
        return replace(
            plan, operand_tiers=(*plan.operand_tiers[:k], tuple(row), *plan.operand_tiers[k + 1 :])
        )
    if kind == "initial":
        t = data.draw(st.sampled_from(sorted(plan.initial_tiers)))
        flipped = tuple(names[1 - names.index(d)] for d in plan.initial_tiers[t])
        return replace(plan, initial_tiers={**plan.initial_tiers, t: flipped})
    return replace(plan, fast_limit_bytes=plan.fast_limit_bytes - data.draw(st.integers(1, 64)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_graphs(), st.floats(0.05, 1.2), st.data())
def test_validator_agrees_with_the_reference(
    g: Graph, fraction: float, data: st.DataObject
) -> None:
    platform = data.draw(st.sampled_from([CPU, GPU]))
    # vdnn, the planner with moves, half of the time; vDNN-all makes moves without pressure.
    # ... and checkpoint, the planner with recomputes, a quarter of the time
    name = data.draw(st.sampled_from(["vdnn"] * 4 + ["checkpoint"] * 3 + sorted(REGISTRY)))
    opts = PlanSettings(
        capacity=None
        if max(1, int(g.peak_live_bytes * fraction)) is None
        else Capacity.of_bytes(max(1, int(g.peak_live_bytes * fraction))),
        offload_min_bytes=0,
        offload_all=data.draw(st.booleans()),
        prefetch_ahead=data.draw(st.integers(1, 3)),
    )
    try:
        plan = REGISTRY[name](g, platform, opts)
    except TmsimError:
        plan = REGISTRY["all-fast"](g, platform, opts)
    assert reference_ok(plan, g, platform)
    for _ in range(data.draw(st.integers(1, 2))):
        plan = mutate(plan, g, platform, data)
    v = validate(plan, g, platform)
    if v.recomputed_s == v.recomputed_s and v.recomputed_s != float("inf"):
        # Keep the time rule out of the comparison: the reference does not time plans.
        v = validate(replace(plan, predicted_s=v.recomputed_s), g, platform)
    assert v.ok == reference_ok(plan, g, platform), v.errors
