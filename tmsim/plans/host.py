"""A plan's host kernels and the rules they must keep, for :func:`tmsim.plans.validate.validate`
(the rules are those of :mod:`tmsim.plans.values`; what they mean in time,
:mod:`tmsim.plans.streams`).

A plan may run kernels on the host compute only where its platform has one; each host kernel
is listed once and is a kernel of the graph; its operands lie on tiers the host reaches
(:func:`operand_reach`, checked with every other operand); no recompute runs a host kernel
again; host kernels that touch one copy, one of them writing, run in plan order; and the host
order does not make a host kernel wait for itself through the device stream (a deadlock,
found when the step is timed).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.plans.deps import StreamDeps, host_order_clashes
from tmsim.plans.parse import Errors
from tmsim.plans.recompute import ParsedRecomputes
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def parse_host_kernels(
    plan: Plan, graph: Graph, platform: Platform, errors: Errors
) -> tuple[tuple[int, ...], bool]:
    """The plan's host order with the kernels that are not kernels of the graph or listed
    before left out, and whether it was well formed (recording what is wrong in
    ``errors``): a platform with a host compute where there are host kernels, indices in
    ``[0, K)``, none twice."""
    order = plan.host_kernels
    if not order:
        return (), True
    ok = True
    if platform.host_compute is None:
        errors.add(
            f"the plan runs {len(order)} kernel(s) on the host, but platform "
            f"{platform.name!r} has no host compute"
        )
        ok = False
    n_k = len(graph.kernels)
    seen: set[int] = set()
    kept: list[int] = []
    for i, k in enumerate(order):
        if not 0 <= k < n_k:
            errors.add(f"host_kernels[{i}]: kernel {k} outside [0, {n_k - 1}]")
            ok = False
        elif k in seen:
            errors.add(f"host_kernels[{i}]: kernel {k} ({graph.kernels[k].name!r}) listed twice")
            ok = False
        else:
            seen.add(k)
            kept.append(k)
    return tuple(kept), ok


def operand_reach(
    platform: Platform, op_kernel: IntArray, op_tier: IntArray, host: tuple[int, ...]
) -> BoolArray:
    """For every operand, whether what runs its kernel (the host compute for a host kernel,
    the compute device for the others) may access the tier it is on."""
    device = np.array(platform.kernel_tier_mask())
    reach = device[op_tier]
    if host:
        on_host = np.isin(op_kernel, np.asarray(host, dtype=np.int64))
        reach = np.where(on_host, np.array(platform.host_kernel_tier_mask())[op_tier], reach)
    out: BoolArray = reach
    return out


def check_host_recomputes(
    rc: ParsedRecomputes, host: tuple[int, ...], graph: Graph, errors: Errors
) -> bool:
    """Report recomputes that run a host kernel again; True if there is none."""
    bad = [i for i in np.flatnonzero(rc.ok) if int(rc.producer[i]) in set(host)]
    for i in bad:
        p = int(rc.producer[i])
        errors.add(
            f"{rc.name(int(i), graph)}: its producer, kernel {p} ({graph.kernels[p].name!r}), "
            "runs on the host, and only the compute device runs kernels again"
        )
    return not bad


def check_host_order(deps: StreamDeps, host: tuple[int, ...], graph: Graph, errors: Errors) -> bool:
    """Report pairs of host kernels in conflict that the host order runs out of plan order;
    True if there is none."""
    wrong = host_order_clashes(deps, host)
    for a, b in wrong:
        errors.add(
            f"host kernels {a} ({graph.kernels[a].name!r}) and {b} ({graph.kernels[b].name!r}) "
            "touch one copy, one of them writing, but the host order runs the later first"
        )
    return not wrong


__all__ = ["check_host_order", "check_host_recomputes", "operand_reach", "parse_host_kernels"]
