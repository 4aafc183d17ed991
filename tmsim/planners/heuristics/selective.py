"""Selective recomputation: drop what cheap kernels make, make it again for the backward pass.

Recomputing a convolution or a matrix product costs about what the layer cost; recomputing a
normalisation or an element-wise kernel (an activation, an addition, pooling) costs a pass over
memory. Frameworks recompute those first: PyTorch's selective activation checkpointing keeps
the outputs of matrix products, convolutions and attention and recomputes the rest, and
Korthikanti et al. ("Reducing Activation Recomputation in Large Transformer Models",
arXiv:2205.05198, 2022) recompute only the attention's softmax and dropout. This planner is
that policy on any graph, every tensor in the fastest tier, as in ``all-fast``:

1. A tensor is *cheap* when a forward kernel of class ``norm`` or ``elementwise``
   (:func:`hwmodels.compute.op_class`) that updates nothing produces it and no kernel updates
   it.
2. Each cheap tensor a kernel after the forward pass uses, not right after its last forward
   use (where dropping it frees nothing), is dropped after its last forward use and made
   again at ``make[t]``: its first use after the forward pass, or earlier where a
   cheap tensor made again reads it; a cheap tensor only such makings read (one the backward
   pass does not, e.g. a normalisation's output that an activation reads) is made again for
   them, just before the first (consumers are settled first, in reverse forward order). Each
   stays from its making to its last use, or to the last making that reads it.
3. Its producer's other inputs must still be live then in the step as it is (a convolution's
   output the backward pass reads, a weight, the step's input) and not updated in place since
   the producer read them; where one is not, the tensor is kept instead, and the others are
   settled again, until nothing changes.

The step then runs the cheap part of the forward pass a second time, spread over the backward
pass, and holds only the expensive kernels' outputs across the turn.
"""

from __future__ import annotations

from hwmodels.opclass import OpClass, op_class
from hwmodels.platform import Platform
from tmsim.planners.heuristics.dropping import fast_with_recomputes
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph, Phase

NAME = "selective"
#: The kernel classes whose outputs are recomputed.
CHEAP = frozenset({OpClass.NORM, OpClass.ELEMENTWISE})


def selective_decision(
    graph: Graph,
) -> tuple[list[tuple[int, int]], dict[int, int], dict[int, int]]:
    """What selective recomputation does on ``graph`` (see the module documentation), in
    indices: ``(runs, drop_after, keep_until)`` as :func:`fast_with_recomputes` takes them
    (``keep_until``: where a dropped tensor made again must stay past its last use, for a
    later making that reads it)."""
    kernels = graph.kernels
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    producers, live_last = graph.producers, graph.live_last
    updates_of: dict[int, list[int]] = {}
    for k, kern in enumerate(kernels):
        for name in kern.updates:
            updates_of.setdefault(index[name], []).append(k)
    updated = set(updates_of)
    uses: dict[int, list[int]] = {}
    for k, kern in enumerate(kernels):
        for name in dict.fromkeys(kern.inputs + kern.updates):
            uses.setdefault(index[name], []).append(k)
    forward = [k for k, kern in enumerate(kernels) if kern.phase is Phase.FORWARD]
    turn = max(forward, default=-1)
    cheap = [
        index[name]
        for k in forward
        if not kernels[k].updates and op_class(kernels[k].op) in CHEAP
        for name in kernels[k].outputs
        if index[name] not in updated
    ]
    inputs = {
        t: [index[n] for n in dict.fromkeys(kernels[int(producers[t])].inputs)] for t in cheap
    }
    never = len(kernels)

    def last_forward(t: int) -> int:
        return max((u for u in uses.get(t, ()) if u <= turn), default=int(producers[t]))

    def first_later(t: int) -> int:
        return min((u for u in uses.get(t, ()) if u > turn), default=never)

    # a tensor used again right after its last forward use is kept: dropping it frees nothing
    dropped = {t for t in cheap if not last_forward(t) + 1 >= first_later(t)}
    while True:
        # when each is needed again: its first use after the forward pass, or earlier where a
        # tensor made again reads it (consumers first: they come later in the forward pass)
        make = {t: first_later(t) for t in dropped}
        for t in reversed(cheap):
            if t in dropped and make[t] < never:
                for u in inputs[t]:
                    if u in dropped:
                        make[u] = min(make[u], make[t])
        stuck = {
            t
            for t in dropped
            if make[t] < never
            for u in inputs[t]
            if (u not in dropped and int(live_last[u]) < make[t])
            or any(int(producers[t]) < k < make[t] for k in updates_of.get(u, ()))
        }
        if not stuck:
            break
        dropped -= stuck
    again = {t for t in dropped if make[t] < never}
    runs = sorted(((t, make[t]) for t in again), key=lambda r: (r[1], int(producers[r[0]])))
    drop_after = {t: last_forward(t) for t in again}
    keep_until = {}
    for t in again:
        last = max((make[c] for c in again if t in inputs[c]), default=-1)
        if last > max(int(live_last[t]), make[t]):
            keep_until[t] = last
    return runs, drop_after, keep_until


def plan_selective(graph: Graph, platform: Platform, settings: PlanSettings | None = None) -> Plan:
    """Selective recomputation with every tensor in the fastest tier (module documentation).

    Raises :class:`~tmsim.errors.TmsimError` if kernels cannot access the fastest tier, and
    :class:`~tmsim.errors.NoPlanError` naming the bytes when the step still needs more of the
    fastest tier than the capacity asked for (or than the tier holds).
    """
    runs, drop_after, keep_until = selective_decision(graph)
    return fast_with_recomputes(graph, platform, settings, NAME, runs, drop_after, keep_until)


__all__ = ["CHEAP", "NAME", "plan_selective", "selective_decision"]
