"""A plan's recomputes in indices, and the rules each must keep, for
:func:`tmsim.plans.validate.validate` (the rules are those of :mod:`tmsim.plans.values`).

A recompute of tensor ``t`` at kernel ``k`` runs ``t``'s producer ``p`` again just before ``k``
with ``p``'s operands on the recompute's tiers. It is *well formed* (``ok``) when its names
are known, ``t`` has a producer that updates nothing in place and that no kernel updates
``t``, ``p < k < K``, and it gives one kernel tier per operand of ``p``; only well-formed
recomputes are checked further and timed. Then its inputs must be resident in their tiers at
``k`` and hold the data ``p`` first read (no kernel in ``(p, k)`` updated one in place), and a
residency range of ``t`` must start at ``k`` in its tier. Whether the inputs' copies are
*valid* there is checked with every other copy (:func:`tmsim.plans.copies.check_validity`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.plans.parse import Errors, Parsed
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class ParsedRecomputes:
    """The recomputes of a plan in indices, in the plan's order.

    Per recompute [R]: ``tensor``, ``kernel`` (where it runs), ``producer``, ``tier`` (where it
    writes the tensor), ``ok`` (well formed, see the module documentation). Per operand of
    every well-formed recompute [n], in recompute order and then the producer's operand order:
    ``op_rc`` (its recompute), ``op_tensor``, ``op_tier``, ``op_is_output`` (the tensor the
    recompute makes anew), ``op_is_input`` (an input of the producer, read again); the
    producer's other outputs are neither, written but not kept.
    ``tiers`` holds each well-formed recompute's operand tiers (empty for the others).
    """

    tensor: IntArray
    kernel: IntArray
    producer: IntArray
    tier: IntArray
    ok: BoolArray
    op_rc: IntArray
    op_tensor: IntArray
    op_tier: IntArray
    op_is_output: BoolArray
    op_is_input: BoolArray
    tiers: tuple[IntArray, ...]

    def name(self, i: int, graph: Graph) -> str:
        """``recompute i ('t' at kernel k)``, for messages."""
        t = int(self.tensor[i])
        what = repr(graph.tensors[t].name) if t >= 0 else "?"
        return f"recompute {i} ({what} at kernel {int(self.kernel[i])})"


def parse_recomputes(
    plan: Plan, graph: Graph, platform: Platform, errors: Errors
) -> ParsedRecomputes:
    """The recomputes of ``plan`` in indices, with what makes one malformed in ``errors``."""
    n_k = len(graph.kernels)
    tier_of = {name: i for i, name in enumerate(platform.tier_names)}
    kernel_tier = platform.kernel_tier_mask()
    ptr, operands = graph.operand_csr
    producers = graph.producers
    updated = _updated(graph)
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    rows: list[tuple[int, int, int, int, bool]] = []
    tiers: list[IntArray] = []
    for i, rc in enumerate(plan.recomputes):
        where = f"recompute {i} ({rc.tensor!r} at kernel {rc.kernel})"
        t = index.get(rc.tensor, -1)
        p = int(producers[t]) if t >= 0 else -1
        problem = ""
        if t < 0:
            problem = f"{where}: unknown tensor"
        elif p < 0:
            problem = (
                f"{where}: the tensor has no producer to run again (it exists before the step)"
            )
        elif graph.kernels[p].updates:
            problem = (
                f"{where}: its producer {graph.kernels[p].name!r} updates "
                f"{graph.kernels[p].updates[0]!r} in place, so it cannot run again"
            )
        elif t in updated:
            problem = f"{where}: the tensor is updated in place, so its value is not its producer's"
        elif not p < rc.kernel < n_k:
            problem = (
                f"{where}: must run after its producer (kernel {p}) and before the last "
                f"kernel ends (kernel {n_k - 1})"
            )
        ops = operands[int(ptr[p]) : int(ptr[p + 1])] if p >= 0 else operands[:0]
        if not problem and len(rc.tiers) != ops.size:
            problem = (
                f"{where}: lists {len(rc.tiers)} tiers; its producer "
                f"{graph.kernels[p].name!r} has {ops.size} operands"
            )
        unknown = [name for name in rc.tiers if name not in tier_of]
        if not problem and unknown:
            problem = f"{where}: unknown tier {unknown[0]!r}"
        if not problem:
            found = np.array([tier_of[name] for name in rc.tiers], dtype=np.int64)
            off = [int(j) for j in range(ops.size) if not kernel_tier[int(found[j])]]
            if off:
                problem = (
                    f"{where}: operand {graph.tensors[int(ops[off[0]])].name!r} is on tier "
                    f"{rc.tiers[off[0]]!r}, which kernels cannot access"
                )
        if problem:
            errors.add(problem)
            rows.append((t, rc.kernel, p, -1, False))
            tiers.append(np.zeros(0, dtype=np.int64))
            continue
        out_at = int(np.flatnonzero(ops == t)[0])
        rows.append((t, rc.kernel, p, int(found[out_at]), True))
        tiers.append(found)
    return _arrays(rows, tiers, graph)


def _updated(graph: Graph) -> set[int]:
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    return {index[name] for k in graph.kernels for name in k.updates}


def _arrays(
    rows: list[tuple[int, int, int, int, bool]], tiers: list[IntArray], graph: Graph
) -> ParsedRecomputes:
    ptr, operands = graph.operand_csr
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    tensor, kernel, producer, tier = (np.asarray(c, dtype=np.int64) for c in cols[:4])
    ok = np.asarray(cols[4], dtype=bool)
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    op_rc, op_tensor, op_tier, op_input = [], [], [], []
    for i in np.flatnonzero(ok):
        p = int(producer[i])
        ops = operands[int(ptr[p]) : int(ptr[p + 1])]
        read = {index[name] for name in graph.kernels[p].inputs}
        op_rc.append(np.full(ops.size, i, dtype=np.int64))
        op_tensor.append(ops.astype(np.int64))
        op_tier.append(tiers[int(i)])
        op_input.append(np.array([int(t) in read for t in ops], dtype=bool))
    empty = np.zeros(0, dtype=np.int64)
    rc_of = np.concatenate(op_rc) if op_rc else empty
    t_of = np.concatenate(op_tensor) if op_tensor else empty
    return ParsedRecomputes(
        tensor=tensor,
        kernel=kernel,
        producer=producer,
        tier=tier,
        ok=ok,
        op_rc=rc_of,
        op_tensor=t_of,
        op_tier=np.concatenate(op_tier) if op_tier else empty,
        op_is_output=t_of == tensor[rc_of] if rc_of.size else np.zeros(0, dtype=bool),
        op_is_input=np.concatenate(op_input) if op_input else np.zeros(0, dtype=bool),
        tiers=tuple(tiers),
    )


def recompute_starts(rc: ParsedRecomputes, n_tiers: int, n_k: int) -> IntArray:
    """Codes ``(tensor * n_tiers + tier) * n_k + kernel`` where a well-formed recompute makes a
    copy appear (a residency range may start there)."""
    ok = rc.ok
    return (rc.tensor[ok] * n_tiers + rc.tier[ok]) * n_k + rc.kernel[ok]


def check_recomputes(
    rc: ParsedRecomputes, p: Parsed, graph: Graph, platform: Platform, errors: Errors
) -> None:
    """Inputs resident at the recompute and unchanged since the producer ran; a range of the
    tensor starting in its tier at the recompute (see the module documentation)."""
    names = platform.tier_names
    n_k = p.n_kernels
    inputs = np.flatnonzero(rc.op_is_input)
    at = rc.kernel[rc.op_rc[inputs]]
    here = p.resident(rc.op_tensor[inputs] * p.n_tiers + rc.op_tier[inputs], at)
    for j in inputs[~here].tolist():
        i = int(rc.op_rc[j])
        errors.add(
            f"{rc.name(i, graph)}: input {graph.tensors[int(rc.op_tensor[j])].name!r} is not "
            f"resident in tier {names[int(rc.op_tier[j])]!r} there"
        )
    updates = _update_kernels(graph)
    for j in inputs.tolist():
        i, u = int(rc.op_rc[j]), int(rc.op_tensor[j])
        changed = [k for k in updates.get(u, ()) if rc.producer[i] < k < rc.kernel[i]]
        if changed:
            errors.add(
                f"{rc.name(i, graph)}: input {graph.tensors[u].name!r} was updated in place at "
                f"kernel {changed[0]} ({graph.kernels[changed[0]].name!r}) after its producer "
                "read it, so running the producer again would not give the same tensor"
            )
    starts = set((p.rs_key[p.rs_ok] * n_k + p.rs_first[p.rs_ok]).tolist())
    for i in np.flatnonzero(rc.ok).tolist():
        key = int(rc.tensor[i]) * p.n_tiers + int(rc.tier[i])
        if key * n_k + int(rc.kernel[i]) not in starts:
            errors.add(
                f"{rc.name(i, graph)}: no residency range of the tensor starts in tier "
                f"{names[int(rc.tier[i])]!r} at that kernel"
            )


def _update_kernels(graph: Graph) -> dict[int, list[int]]:
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    out: dict[int, list[int]] = {}
    for k, kern in enumerate(graph.kernels):
        for name in kern.updates:
            out.setdefault(index[name], []).append(k)
    return out


__all__ = ["ParsedRecomputes", "check_recomputes", "parse_recomputes", "recompute_starts"]
