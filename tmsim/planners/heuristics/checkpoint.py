"""Segment checkpointing (Chen, Xu, Zhang and Guestrin, "Training Deep Nets with Sublinear
Memory Cost", arXiv:1604.06174, 2016): keep the activations at the ends of about sqrt(n)
segments of the forward pass, drop the others after their last forward use, and run each
segment's forward again just before its backward needs it.

Every tensor lives in the fastest tier, as in ``all-fast``; what saves memory is dropping.
Forward kernels are numbered in step order and cut into ``segments`` runs of about equal
length (default ``round(sqrt(n))``). A tensor is *dropped* when it is made by a forward kernel
of segment ``s`` that updates nothing in place, no kernel updates it, it is used by the
backward pass, and no forward kernel outside segment ``s`` reads it (a skip connection across a
cut is kept, since the segment that reads it is run again before this one). The last kernel's
outputs of every segment are its checkpoints and kept. Segment ``s`` runs again just before the
first backward use of any tensor it dropped: its dropped tensors are recomputed there in
forward order, each from its producer's inputs, and then live until their last backward use.
An input not resident there (an intermediate the backward pass does not read, freed after
its forward use) is recomputed there too when its producer is a forward kernel of the
segment, and is otherwise (a checkpoint, the step's input) kept resident until then.

With one segment per forward kernel nothing is dropped (every output ends a segment); with one
segment the whole forward pass runs twice. Peak memory on a chain of ``n`` layers is about
``n / s + s`` activations, least near ``s = sqrt(n)``, at the cost of one more forward pass.
"""

from __future__ import annotations

import math

from hwmodels.platform import Platform
from tmsim.errors import TmsimError
from tmsim.planners.heuristics.dropping import fast_with_recomputes
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph, Phase

NAME = "checkpoint"


def segments_of(n_forward: int, segments: int | None) -> list[int]:
    """The segment (0-based) of each of ``n_forward`` forward kernels, cut into ``segments``
    runs of about equal length (default ``round(sqrt(n_forward))``, at least 1).

    >>> segments_of(9, None)
    [0, 0, 0, 1, 1, 1, 2, 2, 2]
    """
    if n_forward == 0:
        return []
    count = max(1, round(math.sqrt(n_forward))) if segments is None else segments
    if not count >= 1:
        raise TmsimError(f"{NAME}: segments must be at least 1, got {count}")
    count = min(count, n_forward)
    return [i * count // n_forward for i in range(n_forward)]


def checkpoint_decision(
    graph: Graph, segments: int | None = None
) -> tuple[list[tuple[int, int]], dict[int, int], dict[int, int]]:
    """What segment checkpointing does on ``graph`` (see the module documentation), in
    indices: ``(runs, drop_after, keep_until)``. ``runs`` lists ``(tensor, kernel)``, the
    recomputes in the order they run; ``drop_after[t]`` is the kernel after which dropped
    tensor ``t``'s first copy is freed; ``keep_until[t]`` the kernel until which a tensor a
    recompute reads must stay, where that is past its own last use."""
    kernels = graph.kernels
    forward = [k for k, kern in enumerate(kernels) if kern.phase is Phase.FORWARD]
    segment = dict(zip(forward, segments_of(len(forward), segments), strict=True))
    backward_start = min(
        (k for k, kern in enumerate(kernels) if kern.phase is not Phase.FORWARD), default=None
    )
    if backward_start is None:
        return [], {}, {}
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    users: dict[int, list[int]] = {}
    for k, kern in enumerate(kernels):
        for name in dict.fromkeys(kern.inputs + kern.updates):
            users.setdefault(index[name], []).append(k)
    updated = {index[name] for kern in kernels for name in kern.updates}
    last_of_segment = {s: k for k, s in segment.items()}  # forward order: the last one wins
    dropped: list[int] = []
    for k in forward:
        kern = kernels[k]
        if kern.updates or k == last_of_segment[segment[k]]:
            continue
        for name in kern.outputs:
            t = index[name]
            uses = users.get(t, [])
            late = [u for u in uses if u >= backward_start]
            early = [u for u in uses if u < backward_start]
            if t in updated or not late or any(segment.get(u) != segment[k] for u in early):
                continue
            dropped.append(t)
    producers = graph.producers
    by_segment: dict[int, list[int]] = {}
    for t in dropped:
        by_segment.setdefault(segment[int(producers[t])], []).append(t)
    runs: list[tuple[int, int]] = []
    drop_after: dict[int, int] = {}
    keep_until: dict[int, int] = {}
    for s, tensors in by_segment.items():
        at = min(u for t in tensors for u in users[t] if u >= backward_start)
        for t in tensors:
            early = [u for u in users[t] if u < backward_start]
            drop_after[t] = max(early, default=int(producers[t]))
        # the segment's forward again: what the dropped tensors need, made anew where it is
        # not resident then (intermediates the backward pass does not read)
        needed, stack = set(tensors), list(tensors)
        while stack:
            for name in kernels[int(producers[stack.pop()])].inputs:
                u = index[name]
                p = int(producers[u])
                if u in needed or int(graph.live_last[u]) >= at:
                    continue
                if p >= 0 and segment.get(p) == s and not kernels[p].updates and u not in updated:
                    needed.add(u)
                    stack.append(u)
                else:
                    keep_until[u] = max(keep_until.get(u, at), at)
        runs.extend((t, at) for t in needed)
    runs.sort(key=lambda r: (r[1], int(producers[r[0]])))
    return runs, drop_after, keep_until


def plan_checkpoint(
    graph: Graph,
    platform: Platform,
    settings: PlanSettings | None = None,
    segments: int | None = None,
) -> Plan:
    """Segment checkpointing with every tensor in the fastest tier (module documentation).

    Raises :class:`TmsimError` if kernels cannot access the fastest tier, and
    :class:`NoPlanError` naming the bytes when the step with checkpointing still needs more of
    the fastest tier than the capacity asked for (or than the tier holds).
    """
    runs, drop_after, keep_until = checkpoint_decision(graph, segments)
    return fast_with_recomputes(
        graph, platform, settings, NAME, runs, drop_after, keep_until, {"segments": segments}
    )


__all__ = ["NAME", "checkpoint_decision", "plan_checkpoint", "segments_of"]
