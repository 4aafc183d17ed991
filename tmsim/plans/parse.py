"""A plan's names turned into index arrays, for :func:`tmsim.plans.validate.validate`.

Parsing checks what can be checked entry by entry (known names, shapes, kernel bounds, copy
paths) and records every problem in an :class:`Errors`; entries that fail are kept but marked
(``rs_ok``, ``mv_ok``) so the later checks skip them. A malformed ``operand_tiers`` is
*fatal*: nothing about kernels can be checked without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.plans.values import Plan
from tmsim.workload.graph import PREEXISTING_ROLES, Graph

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Errors:
    """Error lines, keeping the first ``cap`` and counting all of them."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.count = 0
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.lines) < self.cap:
            self.lines.append(line)

    def result(self) -> tuple[str, ...]:
        """The kept lines, and one counting the rest if some were left out."""
        extra = self.count - len(self.lines)
        return tuple(self.lines) + ((f"... and {extra} more error(s)",) if extra else ())


@dataclass(frozen=True, eq=False)
class Parsed:
    """A plan in indices. Tiers are platform indices, tensors graph indices, kernels 0..K-1.

    Operands [n_ops] follow ``graph.operand_csr``; residency ranges [n_rs] and moves [n_mv]
    follow the plan's order. ``*_key`` is ``tensor * n_tiers + tier``.
    """

    fatal: bool
    n_tiers: int
    n_kernels: int
    op_kernel: IntArray
    op_tensor: IntArray
    op_tier: IntArray
    op_is_output: BoolArray
    op_is_update: BoolArray
    op_resident: BoolArray
    init_tensor: IntArray
    init_tier: IntArray
    rs_tensor: IntArray
    rs_tier: IntArray
    rs_first: IntArray
    rs_last: IntArray
    rs_key: IntArray
    rs_ok: BoolArray
    mv_tensor: IntArray
    mv_src: IntArray
    mv_dst: IntArray
    mv_kernel: IntArray
    mv_async: BoolArray
    mv_ok: BoolArray
    lookup_code: IntArray
    lookup_key: IntArray
    lookup_last: IntArray

    def resident(self, key: IntArray, kernel: IntArray) -> BoolArray:
        """Whether copy ``key`` (tensor * n_tiers + tier) is resident at ``kernel`` (arrays)."""
        return _resident(
            self.lookup_code, self.lookup_key, self.lookup_last, self.n_kernels, key, kernel
        )

    def move_name(self, i: int, graph: Graph, platform: Platform) -> str:
        names = platform.tier_names
        mode = "async" if self.mv_async[i] else "sync"
        return (
            f"move {i} ({graph.tensors[int(self.mv_tensor[i])].name!r} "
            f"{names[int(self.mv_src[i])]!r} -> {names[int(self.mv_dst[i])]!r}, {mode} at "
            f"kernel {int(self.mv_kernel[i])})"
        )


def _resident(
    code: IntArray, keys: IntArray, last: IntArray, n_k: int, key: IntArray, kernel: IntArray
) -> BoolArray:
    """Binary search of ``key * n_k + kernel`` among range starts sorted the same way."""
    if code.size == 0:
        return np.zeros(np.shape(key), dtype=bool)
    pos = np.searchsorted(code, key * n_k + kernel, side="right") - 1
    safe = np.maximum(pos, 0)
    found: BoolArray = (pos >= 0) & (keys[safe] == key) & (last[safe] >= kernel)
    return found


def _ints(values: list[int]) -> IntArray:
    return np.asarray(values, dtype=np.int64).reshape(-1)


def parse_plan(plan: Plan, graph: Graph, platform: Platform, errors: Errors) -> Parsed:
    """Turn ``plan`` into indices, recording unknown names and malformed entries in ``errors``."""
    n_k, n_t = len(graph.kernels), len(graph.tensors)
    names = platform.tier_names
    n_tiers = len(names)
    tier_of = {name: i for i, name in enumerate(names)}
    ptr, op_tensor = graph.operand_csr
    op_kernel = np.repeat(np.arange(n_k, dtype=np.int64), np.diff(ptr))

    # ---- operand tiers: shape, then names
    fatal = False
    rows = plan.operand_tiers
    op_tier = np.zeros(op_tensor.size, dtype=np.int64)
    if len(rows) != n_k:
        errors.add(f"operand_tiers has {len(rows)} rows for {n_k} kernels")
        fatal = True
    else:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n_k)
        for k in np.flatnonzero(lengths != np.diff(ptr))[: errors.cap]:
            errors.add(
                f"kernel {int(k)} ({graph.kernels[int(k)].name!r}): operand_tiers lists "
                f"{int(lengths[k])} tier(s) for {int(ptr[k + 1] - ptr[k])} distinct operand(s)"
            )
            fatal = True
        if not fatal:
            flat = [name for row in rows for name in row]
            op_tier = _ints([tier_of.get(name, -1) for name in flat])
            for j in np.flatnonzero(op_tier < 0)[: errors.cap]:
                k = int(op_kernel[j])
                errors.add(
                    f"kernel {k} ({graph.kernels[k].name!r}): operand "
                    f"{graph.tensors[int(op_tensor[j])].name!r} names unknown tier {flat[j]!r}"
                )
                fatal = True
            op_tier = np.maximum(op_tier, 0)
    op_is_output = graph.producers[op_tensor] == op_kernel
    update_codes = _ints(
        [
            k * n_t + graph.tensor_index(name)
            for k, kern in enumerate(graph.kernels)
            for name in kern.updates
        ]
    )
    op_is_update = np.isin(op_kernel * n_t + op_tensor, update_codes)

    # ---- initial tiers: exactly the pre-existing tensors, known tiers, no repeats
    init_t: list[int] = []
    init_d: list[int] = []
    for name, tiers in plan.initial_tiers.items():
        try:
            t = graph.tensor_index(name)
        except KeyError:
            errors.add(f"initial_tiers names unknown tensor {name!r}")
            continue
        if graph.tensors[t].role not in PREEXISTING_ROLES:
            errors.add(
                f"initial_tiers lists tensor {name!r}, but its role "
                f"{graph.tensors[t].role.value!r} does not exist before the step"
            )
            continue
        if not tiers:
            errors.add(f"tensor {name!r}: initial_tiers is empty")
        if len(set(tiers)) != len(tiers):
            errors.add(f"tensor {name!r}: initial_tiers lists a tier twice")
        for tier in dict.fromkeys(tiers):
            if tier not in tier_of:
                errors.add(f"tensor {name!r}: initial tier {tier!r} is not a tier of the platform")
                continue
            init_t.append(t)
            init_d.append(tier_of[tier])
    listed = set(plan.initial_tiers)
    for tensor in graph.tensors:
        if tensor.role in PREEXISTING_ROLES and tensor.name not in listed:
            errors.add(f"pre-existing tensor {tensor.name!r} has no initial tier")

    # ---- residency ranges
    rs = plan.residency
    rs_t = _ints([_tensor_or(graph, r.tensor) for r in rs])
    rs_d = _ints([tier_of.get(r.tier, -1) for r in rs])
    rs_first = _ints([r.first for r in rs])
    rs_last = _ints([r.last for r in rs])
    rs_ok = (rs_t >= 0) & (rs_d >= 0) & (rs_first >= 0) & (rs_first <= rs_last) & (rs_last < n_k)
    for i in np.flatnonzero(~rs_ok)[: errors.cap]:
        r = rs[int(i)]
        if rs_t[i] < 0:
            errors.add(f"residency {int(i)} names unknown tensor {r.tensor!r}")
        elif rs_d[i] < 0:
            errors.add(f"residency {int(i)} of {r.tensor!r} names unknown tier {r.tier!r}")
        else:
            errors.add(
                f"residency {int(i)} of {r.tensor!r} in {r.tier!r}: range [{r.first}, {r.last}] "
                f"is not inside [0, {n_k - 1}] or ends before it starts"
            )
    rs_t_safe, rs_d_safe = np.maximum(rs_t, 0), np.maximum(rs_d, 0)
    rs_key = rs_t_safe * n_tiers + rs_d_safe

    # ---- moves
    mv = plan.moves
    mv_t = _ints([_tensor_or(graph, m.tensor) for m in mv])
    mv_s = _ints([tier_of.get(m.src, -1) for m in mv])
    mv_d = _ints([tier_of.get(m.dst, -1) for m in mv])
    mv_k = _ints([m.kernel for m in mv])
    mv_a = np.asarray([m.mode is MoveMode.ASYNC for m in mv], dtype=bool).reshape(-1)
    mv_ok = np.ones(len(mv), dtype=bool)
    paths = {(p.src, p.dst) for p in platform.copy_paths}
    for i, m in enumerate(mv):
        mode = m.mode.value
        where = f"move {i} ({m.tensor!r} {m.src!r} -> {m.dst!r}, {mode} at kernel {m.kernel})"
        bad = ""
        if mv_t[i] < 0:
            bad = f"unknown tensor {m.tensor!r}"
        elif mv_s[i] < 0 or mv_d[i] < 0:
            bad = f"unknown tier {m.src if mv_s[i] < 0 else m.dst!r}"
        elif m.src == m.dst:
            bad = "source and destination are the same tier"
        elif not 0 <= m.kernel <= (n_k - 1 if mv_a[i] else n_k):
            top = n_k - 1 if mv_a[i] else n_k
            bad = f"kernel {m.kernel} outside [0, {top}] for a {m.mode.value} move"
        elif (m.src, m.dst) not in paths:
            bad = f"platform {platform.name!r} has no copy path from {m.src!r} to {m.dst!r}"
        if bad:
            errors.add(f"{where}: {bad}")
            mv_ok[i] = False

    # ---- residency look-up: ranges sorted by (copy, first kernel)
    ok = np.flatnonzero(rs_ok)
    order = ok[np.lexsort((rs_first[ok], rs_key[ok]))]
    lookup = (rs_key[order] * n_k + rs_first[order], rs_key[order], rs_last[order])
    return Parsed(
        fatal=fatal,
        n_tiers=n_tiers,
        n_kernels=n_k,
        op_kernel=op_kernel,
        op_tensor=op_tensor,
        op_tier=op_tier,
        op_is_output=op_is_output,
        op_is_update=op_is_update,
        op_resident=_resident(*lookup, n_k, op_tensor * n_tiers + op_tier, op_kernel),
        init_tensor=_ints(init_t),
        init_tier=_ints(init_d),
        rs_tensor=rs_t_safe,
        rs_tier=rs_d_safe,
        rs_first=rs_first,
        rs_last=rs_last,
        rs_key=rs_key,
        rs_ok=rs_ok,
        mv_tensor=np.maximum(mv_t, 0),
        mv_src=np.maximum(mv_s, 0),
        mv_dst=np.maximum(mv_d, 0),
        mv_kernel=mv_k,
        mv_async=mv_a,
        mv_ok=mv_ok,
        lookup_code=lookup[0],
        lookup_key=lookup[1],
        lookup_last=lookup[2],
    )


def _tensor_or(graph: Graph, name: str) -> int:
    try:
        return graph.tensor_index(name)
    except KeyError:
        return -1


def move_residency(p: Parsed) -> tuple[BoolArray, BoolArray, IntArray]:
    """For every move: source resident, destination resident, and the kernel checked.

    A synchronous move at ``k`` reads a copy resident at ``k - 1`` or ``k`` and writes one
    resident at ``k``; after the last kernel (``k == K``) both are checked at ``K - 1``. An
    asynchronous move at ``k`` needs both resident at ``k``. Moves that failed to parse get
    ``True`` (they are reported already).
    """
    n_k = p.n_kernels
    k = p.mv_kernel
    at = np.clip(k, 0, n_k - 1)
    src_key = p.mv_tensor * p.n_tiers + p.mv_src
    dst_key = p.mv_tensor * p.n_tiers + p.mv_dst
    src_now = p.resident(src_key, at)
    src_before = p.resident(src_key, np.maximum(k - 1, 0)) & (k > 0)
    src_ok = np.where(p.mv_async, src_now, src_now | src_before) | ~p.mv_ok
    dst_ok = p.resident(dst_key, at) | ~p.mv_ok
    return src_ok, dst_ok, at
