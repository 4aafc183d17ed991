"""Headline numbers of a plan as JSON-ready values (``tmsim plan --json`` prints them), and
the note that says how a fast-tier capacity was capped.

A run's numbers are :meth:`tmsim.Run.summary`, a graph's :func:`tmsim.api.graphs.graph_summary`.
"""

from __future__ import annotations

import math
from typing import Any

from hwmodels.platform import Platform
from tmsim.api.inputs import FastCapacity, capacity, expect
from tmsim.api.measured import plan_costs, recorded_profile
from tmsim.api.runs import check_inputs
from tmsim.capacity import resolve_fast_limit
from tmsim.errors import TmsimError
from tmsim.layout.fast_tier import fast_layout
from tmsim.plans.validate import Validation
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph


def capacity_note(graph: Graph, platform: Platform, fast: FastCapacity = None) -> str | None:
    """How the fast tier's capacity at ``fast`` was capped for ``graph`` on ``platform`` (a
    ratio that asks for more than the tier holds gets the tier's capacity), or None when it
    was not. Raises :class:`TmsimError` for a bad capacity and a size above the tier's.

    >>> import tmsim
    >>> g = tmsim.graph("vgg19", batch=2)
    >>> capacity_note(g, tmsim.platform(), "4:1") is None
    True
    >>> small = tmsim.platform("cascadelake-optane", {"tiers.DRAM.capacity_GiB": 0.25})
    >>> print(capacity_note(g, small, "1:1"))  # doctest: +NORMALIZE_WHITESPACE
    capacity 1:1 asks for 920574064 bytes of fast memory;
    capped at the 268435456 bytes tier 'DRAM' holds
    """
    check_inputs(graph, platform)
    return resolve_fast_limit(graph, platform, capacity(fast))[1]


def plan_summary(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    validation: Validation,
    fast: FastCapacity = None,
) -> dict[str, Any]:
    """Headline numbers of ``plan`` for ``graph`` on ``platform`` with the validator's
    ``validation`` of it (:func:`tmsim.validate`): what was planned, the predicted step,
    the solver's status, gap (None when there is none), bound and times (a heuristic's
    status is ``heuristic``), the moves and moved bytes, the recomputes and the seconds they
    add (at the cost model's times, all operands where the plan reads them), the kernels the
    host compute runs (``host_kernels``, a count), the fast tier's
    peak, limit and the
    bytes its buffers take when laid out (``fast_pool_bytes``), and the ``capacity_note`` of
    ``fast`` (:func:`capacity_note`), and the measured kernel times it was made with
    (``profile``: path, sha256, entries; None for the roofline). Every ``nan`` is None.

    >>> import tmsim
    >>> g, p = tmsim.graph("vgg19", batch=2), tmsim.platform()
    >>> made = tmsim.plan(g, p, "greedy", fast="4:1")
    >>> s = plan_summary(made, g, p, tmsim.validate(made, g, p), "4:1")
    >>> s["status"], s["valid"], s["fast_peak_bytes"] <= s["fast_limit_bytes"]
    ('heuristic', True, True)
    """
    expect(plan, Plan, "plan", "a Plan (from tmsim.plan)")
    expect(validation, Validation, "validation", "a Validation (from tmsim.validate)")
    check_inputs(graph, platform)
    stats = plan.stats

    def num(v: float | None) -> float | None:
        return None if v is None or math.isnan(v) else v

    return {
        "graph": plan.graph,
        "platform": plan.platform,
        "planner": plan.planner,
        "predicted_s": plan.predicted_s,
        "status": stats.status if stats else "heuristic",
        "solver": stats.solver if stats else None,
        "gap": num(stats.gap) if stats else 0.0,
        "bound_s": num(stats.bound) if stats else None,
        "solve_s": num(stats.solve_s) if stats else 0.0,
        "build_s": num(stats.build_s) if stats else 0.0,
        "rounds": stats.rounds if stats else 1,
        "variables": stats.variables if stats else 0,
        "constraints": stats.constraints if stats else 0,
        "valid": validation.ok,
        "moved_bytes": validation.moved_bytes,
        "moves": len(plan.moves),
        "recomputes": len(plan.recomputes),
        "recompute_s": recompute_seconds(plan, graph, platform),
        "host_kernels": len(plan.host_kernels),
        "fast_peak_bytes": validation.fast_peak_bytes,
        "fast_limit_bytes": plan.fast_limit_bytes,
        "fast_pool_bytes": fast_layout(plan, graph, platform).pool_bytes,
        "capacity_note": capacity_note(graph, platform, fast),
        "profile": recorded_profile(plan),
    }


def recompute_seconds(plan: Plan, graph: Graph, platform: Platform) -> float:
    """The seconds ``plan``'s recomputes add to the step, each its producer's kernel time
    with its operands on the recompute's tiers (:meth:`tmsim.cost.CostModel.recompute_s`); 0
    without any. Raises :class:`TmsimError` for a recompute naming a tensor, tier or kernel
    the graph or platform lacks."""
    if not plan.recomputes:
        return 0.0
    cost = plan_costs(plan, graph, platform).checked  # measured times the plan was made with
    tiers = {name: i for i, name in enumerate(platform.tier_names)}
    total = 0.0
    for r in plan.recomputes:
        try:
            producer = int(graph.producers[graph.tensor_index(r.tensor)])
            at = [tiers[name] for name in r.tiers]
        except KeyError as exc:
            raise TmsimError(f"recompute of {r.tensor!r}: unknown name {exc}") from None
        total += cost.recompute_s(producer, at)
    return total


__all__ = ["capacity_note", "plan_summary", "recompute_seconds"]
