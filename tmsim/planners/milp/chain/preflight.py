"""What a MILP solve knows before it builds anything: the formulation asked for, the fast
tier's limit, whether kernels reach only the fast tier (a GPU), the deadline, and an error
already certain (nothing fits statically on a GPU)."""

from __future__ import annotations

import time

from hwmodels.platform import Platform
from tmsim.capacity import fast_limit_bytes
from tmsim.errors import TmsimError
from tmsim.planners.assemble import check_operands_fit
from tmsim.planners.milp.chain.gpu import static_misfit
from tmsim.planners.milp.chain.solution import Solved
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.states import MAX_TIERS
from tmsim.planners.settings import PlanSettings
from tmsim.strategies import kernels_reach_slow
from tmsim.workload.graph import Graph


def formulation_of(value: Formulation | str) -> Formulation:
    """The formulation named ``value``; raises :class:`TmsimError` naming the known ones."""
    try:
        return Formulation(value)
    except ValueError:
        known = ", ".join(f.value for f in Formulation)
        raise TmsimError(f"unknown MILP formulation {value!r}; known: {known}") from None


def setup(
    graph: Graph, platform: Platform, opts: PlanSettings, formulation: Formulation
) -> tuple[int, bool, float | None]:
    """The capacity, whether kernels reach only the fast tier (a GPU), and the solve
    deadline. Raises :class:`TmsimError` for a platform the MILP cannot plan for and
    :class:`InfeasibleError` when a kernel's own operands do not fit on a GPU."""
    if len(platform.addressable_tiers) < 2 or platform.cache is not None:
        raise TmsimError(f"platform {platform.name!r}: the MILP needs two addressable tiers")
    if len(platform.tiers) > MAX_TIERS:
        raise TmsimError(
            f"platform {platform.name!r}: the MILP plans over at most {MAX_TIERS} tiers "
            f"(its states are sets of tiers), not {len(platform.tiers)}"
        )
    limit = fast_limit_bytes(graph, platform, opts.capacity)
    gpu = not kernels_reach_slow(platform)
    if gpu:
        check_operands_fit(graph, platform, limit, f"milp-{formulation.value}")
    deadline = None if opts.time_limit_s is None else time.perf_counter() + opts.time_limit_s
    return limit, gpu, deadline


def first_memo(graph: Graph, limit: int, gpu: bool) -> dict[Formulation, Solved | TmsimError]:
    """What a solve knows before it starts: on a GPU where nothing fits statically, the static
    formulation's error (:func:`~tmsim.planners.milp.chain.gpu.static_misfit`), so that the static
    formulation raises it at once and no other warms up from a static solve, whose start
    would overflow every layout round (ten rounds of DenseNet-264 b64 took 11 s)."""
    misfit = static_misfit(graph, limit) if gpu else None
    return {} if misfit is None else {Formulation.STATIC: misfit}


__all__ = ["first_memo", "formulation_of", "setup"]
