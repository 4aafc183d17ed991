"""Copy validity, for :func:`~tmsim.plans.validate.validate`: kernels and moves read only
valid copies.

One pass over per-tensor events in time order. Around kernel ``k`` the order is:

0. initial copies appear valid (``k == 0``);
1. synchronous moves at ``k`` read their sources (a copy still there after kernel ``k - 1``);
2. ranges that ended at ``k - 1`` are freed;  3. ranges starting at ``k`` appear, not yet valid;
4. synchronous moves at ``k`` make their destinations valid;
   recomputes at ``k``, in the plan's order, read their inputs and make their tensor's copy
   valid;
5. asynchronous moves at ``k`` start filling their destinations (not readable during ``k``);
6. kernel ``k`` reads its inputs and updates; asynchronous moves read their sources;
7. asynchronous destinations become valid;  8. kernel ``k``'s writes land: an output's copy
   becomes valid; an in-place update makes its tier valid and every other tier stale.

A move that reads an invalid copy is reported and its destination is still taken as valid,
so one mistake gives one error rather than one per later use.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.plans.parse import Errors, Parsed, move_residency
from tmsim.plans.recompute import ParsedRecomputes
from tmsim.workload.graph import PERSISTENT_ROLES, Graph

IntArray = npt.NDArray[np.int64]

# Event kinds, in the order they happen around one kernel (see the module documentation).
INIT, SYNC_SRC, FREE, START, SYNC_DST, ASYNC_BEGIN, READ, ASYNC_SRC, ASYNC_END, WRITE = range(10)
RC_READ, RC_WRITE = 10, 11
_SLOT = np.array([0, 1, 2, 3, 4, 6, 7, 7, 8, 9, 5, 5], dtype=np.int64)
# Why a copy is not valid.
ABSENT, FREED, UNWRITTEN, STALE, ARRIVING = range(5)


def _reason(code: int, k: int, tier: str) -> str:
    if code == FREED:
        return f"its range there ended at kernel {k}"
    if code == UNWRITTEN:
        return f"nothing has written it since it appeared at kernel {k}"
    if code == STALE:
        return f"stale since kernel {k} updated it in place in tier {tier!r}"
    if code == ARRIVING:
        return f"still arriving by an asynchronous move at kernel {k} (usable from kernel {k + 1})"
    return "no copy is there"


def check_validity(
    p: Parsed, graph: Graph, platform: Platform, errors: Errors, rc: ParsedRecomputes
) -> None:
    """Report reads of invalid copies (by kernels, moves and recomputes), update/move
    clashes, and persistent tensors ending stale."""
    n_k, n_tiers = p.n_kernels, p.n_tiers
    names = platform.tier_names
    parts: list[tuple[IntArray, IntArray, IntArray, IntArray, IntArray]] = []

    def add(t: IntArray, k: IntArray, kind: int | IntArray, tier: IntArray, aux: IntArray) -> None:
        parts.append((t, k, np.broadcast_to(np.asarray(kind, dtype=np.int64), t.shape), tier, aux))

    zeros = np.zeros(p.init_tensor.size, dtype=np.int64)
    add(p.init_tensor, zeros, INIT, p.init_tier, zeros)
    ok = np.flatnonzero(p.rs_ok)
    ends = ok[p.rs_last[ok] < n_k - 1]  # copies still there after the last kernel stay
    add(p.rs_tensor[ends], p.rs_last[ends] + 1, FREE, p.rs_tier[ends], ends)
    init_code = p.init_tensor * n_tiers + p.init_tier
    fresh = ok[~((p.rs_first[ok] == 0) & np.isin(p.rs_key[ok], init_code))]
    add(p.rs_tensor[fresh], p.rs_first[fresh], START, p.rs_tier[fresh], fresh)
    mv = np.flatnonzero(p.mv_ok)
    for kinds, mask in (
        ((SYNC_SRC, SYNC_DST), ~p.mv_async[mv]),
        ((ASYNC_BEGIN, ASYNC_SRC, ASYNC_END), p.mv_async[mv]),
    ):
        sel = mv[mask]
        for kind in kinds:
            add(p.mv_tensor[sel], p.mv_kernel[sel], kind, p.mv_dst[sel], sel)
    reads = np.flatnonzero(~p.op_is_output)
    add(p.op_tensor[reads], p.op_kernel[reads], READ, p.op_tier[reads], reads)
    writes = np.flatnonzero(p.op_is_output | p.op_is_update)
    add(p.op_tensor[writes], p.op_kernel[writes], WRITE, p.op_tier[writes], writes)
    # in recompute order, each one's reads before its write (a stable sort keeps it)
    used = np.flatnonzero(rc.op_is_input | rc.op_is_output)
    order_rc = used[np.lexsort((rc.op_is_output[used], rc.op_rc[used]))]
    rc_kinds = np.where(rc.op_is_output[order_rc], RC_WRITE, RC_READ)
    at = rc.kernel[rc.op_rc[order_rc]]
    add(rc.op_tensor[order_rc], at, rc_kinds, rc.op_tier[order_rc], order_rc)
    rc_resident = np.zeros(rc.op_rc.size, dtype=bool)  # unresident inputs: check_recomputes
    rc_resident[order_rc] = p.resident(rc.op_tensor[order_rc] * n_tiers + rc.op_tier[order_rc], at)

    ev_t = np.concatenate([x[0] for x in parts])
    ev_k = np.concatenate([x[1] for x in parts])
    ev_kind = np.concatenate([x[2] for x in parts])
    ev_tier = np.concatenate([x[3] for x in parts])
    ev_aux = np.concatenate([x[4] for x in parts])
    order = np.argsort((ev_t * (n_k + 2) + ev_k) * 10 + _SLOT[ev_kind], kind="stable")

    src_resident, _, _ = move_residency(p)
    async_dst = set(
        ((p.mv_tensor[mv] * n_tiers + p.mv_dst[mv]) * (n_k + 1) + p.mv_kernel[mv])[
            p.mv_async[mv]
        ].tolist()
    )
    n_copies = len(graph.tensors) * n_tiers
    valid = [False] * n_copies
    why = [ABSENT] * n_copies
    why_k = [0] * n_copies
    why_tier = [0] * n_copies
    mv_src = p.mv_src.tolist()
    is_update = p.op_is_update.tolist()
    resident = p.op_resident.tolist()
    tensors = graph.tensors
    kernels = graph.kernels

    def invalid(c: int) -> str:
        return _reason(why[c], why_k[c], names[why_tier[c]])

    for t, k, kind, tier, aux in zip(
        ev_t[order].tolist(),
        ev_k[order].tolist(),
        ev_kind[order].tolist(),
        ev_tier[order].tolist(),
        ev_aux[order].tolist(),
        strict=True,
    ):
        base = t * n_tiers
        c = base + tier
        if kind in (INIT, SYNC_DST, ASYNC_END, RC_WRITE):
            valid[c] = True
        elif kind == RC_READ:
            if not valid[c] and rc_resident[aux]:
                errors.add(
                    f"{rc.name(int(rc.op_rc[aux]), graph)}: reads {tensors[t].name!r} from "
                    f"tier {names[tier]!r}, where its copy is not valid: {invalid(c)}"
                )
        elif kind in (SYNC_SRC, ASYNC_SRC):
            s = base + mv_src[aux]
            if not valid[s] and src_resident[aux]:
                errors.add(
                    f"{p.move_name(aux, graph, platform)}: its source copy is not valid: "
                    f"{invalid(s)}"
                )
        elif kind == FREE:
            valid[c] = False
            why[c], why_k[c] = FREED, k - 1
        elif kind == START:
            valid[c] = False
            why[c], why_k[c] = UNWRITTEN, k
        elif kind == ASYNC_BEGIN:
            valid[c] = False
            why[c], why_k[c] = ARRIVING, k
        elif kind == READ:
            if not valid[c] and resident[aux]:
                errors.add(
                    f"kernel {k} ({kernels[k].name!r}): reads {tensors[t].name!r} from tier "
                    f"{names[tier]!r}, where its copy is not valid: {invalid(c)}"
                )
        elif is_update[aux]:
            if c * (n_k + 1) + k in async_dst:
                errors.add(
                    f"kernel {k} ({kernels[k].name!r}): updates {tensors[t].name!r} in tier "
                    f"{names[tier]!r} while an asynchronous move at the same kernel writes it "
                    "there"
                )
            for d in range(n_tiers):
                if d != tier and valid[base + d]:
                    valid[base + d] = False
                    why[base + d], why_k[base + d], why_tier[base + d] = STALE, k, tier
            valid[c] = True
        else:
            valid[c] = True

    for t, d in zip(p.init_tensor.tolist(), p.init_tier.tolist(), strict=True):
        c = t * n_tiers + d
        if tensors[t].role in PERSISTENT_ROLES and not valid[c]:
            errors.add(
                f"{tensors[t].role.value} {tensors[t].name!r} ends the step without a valid "
                f"copy in its initial tier {names[d]!r}: {invalid(c)}"
            )
