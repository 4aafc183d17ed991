"""Who waits for whom across a plan's two streams (the rules: :mod:`tmsim.plans.streams`): the
accesses to one copy that must keep their plan order across the device and host streams, the
host kernels' order among themselves, and the moves that hold nothing but the step's end
(detached)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel, IndexMove, IndexRecompute


@dataclass(frozen=True)
class StreamDeps:
    """Who waits for whom across the streams (the rules: :mod:`tmsim.plans.streams`).

    Device-side actions are numbered: kernel ``k`` is ``k``, move ``i`` is ``K + i``,
    recompute ``i`` is ``K + M + i``. ``host_waits[h]``: the device-side actions host kernel
    ``h`` waits for; ``device_waits[a]``: the host kernels device-side action ``a`` waits
    for; ``clashes``: pairs of host kernels ``(earlier, later)`` in plan order whose accesses
    conflict, which the host order must keep; ``detached``: the moves (indices into the
    plan's moves) that hold nothing but the end of the step.
    """

    host_waits: Mapping[int, tuple[int, ...]]
    device_waits: Mapping[int, tuple[int, ...]]
    clashes: tuple[tuple[int, int], ...]
    detached: frozenset[int] = frozenset()


def lasting_copies(
    residency: Iterable[tuple[int, int, int, int]], n_tiers: int, n_kernels: int
) -> dict[int, int]:
    """From residency ranges ``(tensor, tier, first, last)`` in indices: for every copy
    resident at the step's last kernel, keyed ``tensor * n_tiers + tier``, the first kernel
    of the range that reaches it."""
    out: dict[int, int] = {}
    for t, tier, first, last in residency:
        if last >= n_kernels - 1:
            key = t * n_tiers + tier
            out[key] = min(first, out.get(key, first))
    return out


def stream_deps(
    cost: CostModel,
    op_tiers: npt.ArrayLike,
    moves: Sequence[IndexMove],
    recomputes: Sequence[IndexRecompute],
    host_kernels: Sequence[int],
    lasting: Mapping[int, int] | None = None,
) -> StreamDeps:
    """The waits across the streams of a plan (see the module documentation): for every
    copy a host kernel reads or writes, its conflicting accesses on the device side and by
    other host kernels. Accesses of no bytes conflict with nothing. ``lasting``
    (:func:`lasting_copies` of the plan's residency): the copies resident to the end of the
    step, from the kernel given; without it no move is detached."""
    graph = cost.graph
    n_k, n_t, n_m = len(graph.kernels), len(cost.platform.tiers), len(moves)
    host = set(int(h) for h in host_kernels)
    tiers = np.asarray(op_tiers, dtype=np.int64)
    sizes = graph.sizes_bytes
    # accesses: (copy key, position, action, writes, by a host kernel)
    acc: list[tuple[int, int, int, bool, bool]] = []
    for j in range(cost.op_kernel.size):
        rd, wr = cost.op_read_bytes[j] > 0, cost.op_write_bytes[j] > 0
        if rd or wr:
            k = int(cost.op_kernel[j])
            key = int(cost.op_tensor[j]) * n_t + int(tiers[j])
            acc.append((key, k, k, bool(wr), k in host))
    for i, m in enumerate(moves):
        if sizes[m.tensor] > 0:
            acc.append((m.tensor * n_t + m.src, m.kernel, n_k + i, False, False))
            acc.append((m.tensor * n_t + m.dst, m.kernel, n_k + i, True, False))
    for i, r in enumerate(recomputes):
        lo = int(cost.op_ptr[r.producer])
        for j, tier in enumerate(r.tiers):
            t = int(cost.op_tensor[lo + j])
            if t == r.tensor and sizes[t] > 0:
                acc.append((t * n_t + tier, r.kernel, n_k + n_m + i, True, False))
            elif cost.op_read_bytes[lo + j] > 0 and cost.op_write_bytes[lo + j] == 0:
                acc.append((t * n_t + tier, r.kernel, n_k + n_m + i, False, False))
    touched = {a[0] for a in acc if a[4]}
    by_key: dict[int, list[tuple[int, int, int, bool, bool]]] = {}
    for a in acc:
        if a[0] in touched:
            by_key.setdefault(a[0], []).append(a)
    host_waits: dict[int, set[int]] = {}
    device_waits: dict[int, set[int]] = {}
    clashes: set[tuple[int, int]] = set()
    for group in by_key.values():
        on_host = [a for a in group if a[4]]
        for _, h, _, h_writes, _ in on_host:
            for _, pos, action, writes, by_host in group:
                if not (h_writes or writes) or action == h:
                    continue
                if by_host:
                    clashes.add((min(h, pos), max(h, pos)))
                elif pos <= h:
                    host_waits.setdefault(h, set()).add(action)
                else:
                    device_waits.setdefault(action, set()).add(h)
    detached: set[int] = set()
    if lasting is not None:
        last_touch: dict[int, int] = {}  # copy key -> the last position of a device-side access
        for key, pos, _, _, by_host in acc:
            if not by_host:
                last_touch[key] = max(pos, last_touch.get(key, -1))
        for i, m in enumerate(moves):
            if m.mode is not MoveMode.ASYNC or not device_waits.get(n_k + i):
                continue
            keys = (m.tensor * n_t + m.src, m.tensor * n_t + m.dst)
            if all(
                lasting.get(key, n_k) <= m.kernel and last_touch.get(key, -1) <= m.kernel
                for key in keys
            ):
                detached.add(i)
    return StreamDeps(
        {h: tuple(sorted(v)) for h, v in host_waits.items()},
        {a: tuple(sorted(v)) for a, v in device_waits.items()},
        tuple(sorted(clashes)),
        frozenset(detached),
    )


def host_order_clashes(deps: StreamDeps, host_order: Sequence[int]) -> list[tuple[int, int]]:
    """The pairs of :attr:`StreamDeps.clashes` the host order runs the wrong way round."""
    rank = {h: i for i, h in enumerate(host_order)}
    return [(a, b) for a, b in deps.clashes if rank[a] > rank[b]]


__all__ = ["StreamDeps", "host_order_clashes", "lasting_copies", "stream_deps"]
