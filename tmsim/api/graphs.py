"""A plan's graph: building again the graph a plan names, checking that a graph is the one a
plan was made for, and a graph's headline numbers (a graph file is read by
:func:`~tmsim.api.inputs.load_graph`).

A plan records its graph's identity (its name, a SHA-256 fingerprint of its content, and how
it was built: a zoo model with its arguments, or a graph file); :func:`graph_of` builds that
graph again and :func:`match_graph` refuses another. Every problem is a one-line
:class:`~tmsim.errors.TmsimError`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tmsim.api.inputs import expect
from tmsim.errors import TmsimError
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph, Phase, Role
from tmsim.workload.identity import Source, check_graph, rebuild

#: The sources a plan's graph identity may name (``GraphIdentity.source``): a zoo build, a
#: graph file, or a graph built in memory, which cannot be built again.
SOURCES: tuple[str, ...] = tuple(s.value for s in Source)


def graph_of(
    plan: Plan, near: str | os.PathLike[str] | None = None, *, what: str = "the plan"
) -> Graph:
    """The graph ``plan`` was made for, built again from the identity it records: the zoo
    model with the plan's arguments, or the graph file it names (a relative path looked up in
    the folder ``near`` first, the plan file's, then as given). Raises :class:`TmsimError`
    for a plan without an identity or with a graph built in memory, a file not found, and a
    graph built again whose fingerprint is not the plan's; its messages call the plan
    ``what``.

    >>> import tmsim
    >>> g = tmsim.graph("vgg19", batch=2)
    >>> graph_of(tmsim.plan(g, tmsim.platform(), "all-slow")) == g
    True
    """
    expect(plan, Plan, "plan", "a Plan (from tmsim.plan or tmsim.load_plan)")
    identity = plan.graph_identity
    if identity is None:
        raise TmsimError(
            f"{what} is a version-1 plan, which does not say how its graph {plan.graph!r} was built"
        )
    if identity.source is Source.UNKNOWN:
        raise TmsimError(
            f"{what} is for graph {plan.graph!r} (sha256 {identity.sha256}), which was built "
            "in memory, not from the zoo or a graph file"
        )
    return rebuild(identity, near, what)


def match_graph(
    plan: Plan, graph: Graph, what: str = "the plan", given: str = "the graph given"
) -> None:
    """Raise :class:`TmsimError` unless ``graph`` is the one ``plan`` was made for: the same
    fingerprint, or (a version-1 plan, which records none) the same name. Messages call the
    plan ``what`` and the graph ``given``, and name both fingerprints."""
    expect(plan, Plan, "plan", "a Plan (from tmsim.plan or tmsim.load_plan)")
    expect(graph, Graph, "graph", "a Graph (from tmsim.graph)")
    if plan.graph_identity is not None:
        check_graph(plan.graph_identity, graph, what, given)
    elif graph.name != plan.graph:
        raise TmsimError(f"{what} is for graph {plan.graph!r}, but {given} is {graph.name!r}")


def graph_summary(graph: Graph) -> dict[str, Any]:
    """Headline numbers of ``graph`` as JSON-ready values: ``name``, ``kernels``, ``tensors``,
    ``peak_live_bytes`` and the ``peak_kernel`` where it is reached, ``flops``, ``params``,
    ``kernels_by_phase`` (forward, backward, update) and ``bytes_by_role`` (every role, in
    declaration order)."""
    expect(graph, Graph, "graph", "a Graph (from tmsim.graph)")
    peak_kernel = int(np.argmax(graph.live_bytes))
    by_phase = {p.value: 0 for p in Phase}
    for k in graph.kernels:
        by_phase[k.phase.value] += 1
    by_role = graph.bytes_by_role()
    return {
        "name": graph.name,
        "kernels": len(graph.kernels),
        "tensors": len(graph.tensors),
        "peak_live_bytes": graph.peak_live_bytes,
        "peak_kernel": graph.kernels[peak_kernel].name,
        "flops": graph.flops,
        "params": graph.params,
        "kernels_by_phase": by_phase,
        "bytes_by_role": {r.value: by_role.get(r, 0) for r in Role},
    }


__all__ = ["SOURCES", "graph_of", "graph_summary", "match_graph"]
