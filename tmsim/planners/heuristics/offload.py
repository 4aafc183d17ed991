"""Offloading idle tensors from the fastest tier to another and fetching them back: the core
of ``vdnn``. The fastest tier (platform index 0) is the *home* tier every operand is read
from; the tier offloaded to is the *away* tier, given by the caller."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim.cost import IndexMove
from tmsim.errors import NoPlanError
from tmsim.workload.graph import PERSISTENT_ROLES, Graph, Phase

IntArray = npt.NDArray[np.int64]

#: The home tier: every operand is read there.
HOME = 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """A tensor that can leave the home tier for kernels ``first..need - 1``.

    - A stretch between two accesses (``out_kernel >= 0``): the tensor is copied
      asynchronously to the away tier beside ``out_kernel`` (``first - 1``) unless the away
      copy is still current, its fast copy freed after that kernel, and fetched back for
      kernel ``need``.
    - The start of the step, for weights and optimizer state (``out_kernel == -1``): they
      start in the away tier only (``first == 0``), are fetched for kernel ``need`` (their
      first use), and after their last use leave the home tier again: written back at
      ``wb_kernel`` (``wb_mode``) if updated, their fast copy freed after ``drop_kernel``
      (``-1``: kept to the end), away again for ``tail_first..tail_last``.

    A tensor may have a candidate for each stretch between accesses, and a weight or optimizer
    state one of the second kind too. The fetch back starts at ``default_back`` (asynchronous,
    or synchronous when it equals ``need``). ``writes`` are the kernels that update the tensor
    in place. ``rank`` orders candidates: 0 a forward activation's stretch from its forward
    to its backward use, at least the size threshold, 1 a smaller one, 2 any other stretch of
    a non-persistent tensor, 3 a weight's or optimizer state's.
    """

    tensor: int
    size: int
    rank: int
    out_kernel: int
    first: int
    need: int
    default_back: int
    wb_kernel: int = -1
    wb_mode: MoveMode = MoveMode.ASYNC
    drop_kernel: int = -1
    tail_first: int = 0
    tail_last: int = -1
    writes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Offload:
    """A chosen candidate and the kernel its fetch back starts at (synchronous if ``need``)."""

    cand: Candidate
    back: int


def _back(first: int, need: int, ahead: int) -> int:
    """Fetch ``ahead`` kernels early, or later to stay away a kernel; else synchronously."""
    j = max(need - ahead, first + 1)
    return j if j <= need - 1 else need


def _leading(
    t: int, size: int, users: IntArray, writes: tuple[int, ...], n_k: int, ahead: int
) -> Candidate:
    """A weight or optimizer state kept in the away tier until its first use, freed after."""
    f, last = int(users[0]), int(users[-1])
    base = Candidate(t, size, 3, -1, 0, f, _back(0, f, ahead), writes=writes)
    if not writes:
        return replace(base, drop_kernel=last, tail_first=last + 1, tail_last=n_k - 1)
    if last + 1 < n_k:
        return replace(
            base, wb_kernel=last + 1, drop_kernel=last + 1, tail_first=last + 2, tail_last=n_k - 1
        )
    # Written back after the last kernel; nothing is freed early.
    return replace(base, wb_kernel=n_k, wb_mode=MoveMode.SYNC)


def offload_candidates(graph: Graph, min_bytes: int, ahead: int) -> list[Candidate]:
    """Every way a tensor can be away from the home tier for at least one kernel.

    A tensor may leave for any stretch between two accesses that is long enough. The stretch
    of a tensor produced in the forward phase from its last forward access to its first later
    one is vDNN's choice and ranks first (0 or 1 by size); other stretches rank 2, or 3 for a
    weight or optimizer state, which may also start the step in the away tier and leave again
    after its last use (see :class:`Candidate`).
    """
    n_k = len(graph.kernels)
    forward = np.array([k.phase is Phase.FORWARD for k in graph.kernels])
    writes: dict[int, list[int]] = {}
    for k, kern in enumerate(graph.kernels):
        for name in dict.fromkeys(kern.updates):
            writes.setdefault(graph.tensor_index(name), []).append(k)
    producers = graph.producers
    out: list[Candidate] = []
    for t, tensor in enumerate(graph.tensors):
        p, size = int(producers[t]), tensor.size_bytes
        acc = np.unique(graph.users(t) if p < 0 else np.append(graph.users(t), p)).tolist()
        if not acc:
            continue
        written = tuple(writes.get(t, ()))
        persistent = tensor.role in PERSISTENT_ROLES
        if persistent and acc[0] > 0:
            out.append(_leading(t, size, np.asarray(acc), written, n_k, ahead))
        vdnn = -1
        if p >= 0 and forward[p]:
            later = np.flatnonzero(~forward[acc])
            vdnn = int(later[0]) if later.size else -1
        for i in range(1, len(acc)):
            a, b = acc[i - 1], acc[i]
            # Kernel a's own writes land when it ends, so a copy made beside it would be stale.
            o = a + 1 if a == p or a in written else a
            if b < o + 2:
                continue
            rank = (0 if size >= min_bytes else 1) if i == vdnn else (3 if persistent else 2)
            out.append(
                Candidate(t, size, rank, o, o + 1, b, _back(o + 1, b, ahead), writes=written)
            )
    return out


def choose_offloads(
    graph: Graph, platform: Platform, limit: int, *, min_bytes: int, offload_all: bool, ahead: int
) -> list[Offload]:
    """The offloads that bring fast-tier bytes within ``limit`` at every kernel.

    Starts from everything resident over its live range. With ``offload_all`` every rank-0
    candidate is taken first. Then, at the first kernel ``k`` still over the limit, the best
    candidate (lowest rank, then largest) that can be away at ``k`` is taken (or, if taken
    already, its fetch back is delayed past ``k``), until ``k`` fits; then the next kernel
    over. Candidates enter a heap when ``k`` reaches them (a second time when it reaches the
    tail of a weight's or optimizer state's), each change costs one numpy slice update.
    Raises :class:`NoPlanError` naming the first kernel that cannot be brought within the
    limit.
    """
    cands = offload_candidates(graph, min_bytes, ahead)
    occ = graph.live_bytes.astype(np.int64).copy()
    back = [-1] * len(cands)
    delayable: list[tuple[int, int]] = []  # (current fetch kernel, candidate): can go later

    def take(i: int, new_back: int) -> None:
        c = cands[i]
        if back[i] < 0:
            occ[c.first : new_back] -= c.size
            occ[c.tail_first : c.tail_last + 1] -= c.size
        else:
            occ[back[i] : new_back] -= c.size
        back[i] = new_back
        if new_back < c.need:
            heapq.heappush(delayable, (new_back, i))

    def useful(i: int, k: int) -> bool:
        c = cands[i]
        if back[i] >= 0:
            return back[i] <= k < c.need  # taken: only a later fetch would help
        return c.first <= k < c.need or c.tail_first <= k <= c.tail_last

    # Entries (kernel from which the candidate can help, candidate), in kernel order.
    waiting: list[tuple[int, int]] = []
    for i, c in enumerate(cands):
        if offload_all and c.rank == 0:
            take(i, c.default_back)
            continue
        waiting.append((c.first, i))
        if c.tail_first <= c.tail_last:
            waiting.append((c.tail_first, i))
    waiting.sort()

    def next_over(start: int) -> int:
        over = np.flatnonzero(occ[start:] > limit)
        return start + int(over[0]) if over.size else -1

    ready: list[tuple[int, int, int]] = []
    nxt = 0
    k = next_over(0)
    while k >= 0:
        while nxt < len(waiting) and waiting[nxt][0] <= k:
            i = waiting[nxt][1]
            heapq.heappush(ready, (cands[i].rank, -cands[i].size, i))
            nxt += 1
        while delayable and delayable[0][0] <= k:
            i = heapq.heappop(delayable)[1]
            heapq.heappush(ready, (cands[i].rank, -cands[i].size, i))
        # Kernels over the limit are visited in order: an entry useless at k stays useless
        # (a tail enters anew when k reaches it).
        while ready and not useful(ready[0][2], k):
            heapq.heappop(ready)
        if not ready:
            fast = platform.tiers[HOME].name
            raise NoPlanError(
                f"vdnn: no plan within the limit of {limit} bytes of tier {fast!r}: at kernel "
                f"{k} ({graph.kernels[k].name!r}) {int(occ[k])} bytes stay there "
                f"({int(occ[k]) - limit} too many) with every tensor that is idle there "
                "offloaded (the MILP may still find a plan)"
            )
        i = heapq.heappop(ready)[2]
        c = cands[i]
        if back[i] < 0 and (c.default_back > k or k >= c.need):
            take(i, c.default_back)
        else:
            take(i, min(k + 1, c.need))
        if occ[k] <= limit:
            k = next_over(k + 1)
    return [Offload(cands[i], b) for i, b in enumerate(back) if b >= 0]


def offload_moves(
    chosen: list[Offload], away: int
) -> tuple[list[IndexMove], dict[tuple[int, int], list[int]], set[int]]:
    """Moves, copy drops (for :func:`~tmsim.planners.assemble.assemble_plan`) and the persistent
    tensors that start the step in the away tier (index ``away``), for the chosen offloads.

    A stretch away needs no copy out when the away copy is still current: made (or present
    from the start) with no in-place update since. Away copies of tensors that start there
    stay to the end (the step must end with them); others are freed after the last fetch.
    """
    moves: list[IndexMove] = []
    drops: dict[tuple[int, int], list[int]] = {}
    by_tensor: dict[int, list[Offload]] = {}
    for off in chosen:
        by_tensor.setdefault(off.cand.tensor, []).append(off)
    slow_start = {off.cand.tensor for off in chosen if off.cand.out_kernel < 0}
    for t, offs in by_tensor.items():
        for off in offs:
            mode = MoveMode.SYNC if off.back == off.cand.need else MoveMode.ASYNC
            moves.append(IndexMove(t, away, HOME, off.back, mode))
        gaps = sorted((o for o in offs if o.cand.out_kernel >= 0), key=lambda o: o.cand.first)
        current_from = 0 if t in slow_start else -1  # the slow copy holds the data as of here
        for off in gaps:
            o = off.cand.out_kernel
            drops.setdefault((t, HOME), []).append(o)
            if current_from < 0 or any(current_from <= w <= o for w in off.cand.writes):
                moves.append(IndexMove(t, HOME, away, o, MoveMode.ASYNC))
                current_from = o
        if gaps and t not in slow_start:
            drops[(t, away)] = [gaps[-1].back]
        for off in offs:
            c = off.cand
            if c.out_kernel >= 0:
                continue
            if c.wb_kernel >= 0:
                moves.append(IndexMove(t, HOME, away, c.wb_kernel, c.wb_mode))
            if c.drop_kernel >= 0:
                drops.setdefault((t, HOME), []).append(c.drop_kernel)
    return moves, drops, slow_start
