"""What a MILP solve knows before it builds anything: the formulation asked for, the fast
tier's limit, whether kernels reach only the fast tier (a GPU), the deadline, and the errors
already certain: nothing fits statically on a GPU; or the slower tiers cannot hold what the
fast tier's limit leaves them, for every formulation that keeps each tensor somewhere
(:func:`slow_misfit`, which names those tiers and their bytes)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from hwmodels.platform import Platform
from tmsim.capacity import fast_limit_bytes
from tmsim.errors import InfeasibleError, TmsimError
from tmsim.intervals import occupancy
from tmsim.planners.assemble import check_operands_fit
from tmsim.planners.milp.chain.gpu import static_misfit
from tmsim.planners.milp.chain.nesting import chain_of
from tmsim.planners.milp.chain.solution import Solved
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.states import MAX_TIERS
from tmsim.planners.settings import PlanSettings
from tmsim.strategies import kernels_reach_slow
from tmsim.workload.graph import PERSISTENT_ROLES, Graph, Phase


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
        # a kernel the host may run need not fit on the device
        hosted = opts.host_kernels and platform.host_compute is not None
        hosted = hosted and formulation not in (Formulation.STATIC, Formulation.ASYNC_AWARE)
        hosted = hosted and not opts.energy_weight_s_per_j
        exempt = [
            k for k, kern in enumerate(graph.kernels) if hosted and kern.phase is Phase.UPDATE
        ]
        check_operands_fit(graph, platform, limit, f"milp-{formulation.value}", exempt)
    deadline = None if opts.time_limit_s is None else time.perf_counter() + opts.time_limit_s
    return limit, gpu, deadline


def first_memo(
    graph: Graph,
    limit: int,
    gpu: bool,
    platform: Platform | None = None,
    tops: Sequence[Formulation] = (),
) -> dict[Formulation, Solved | TmsimError]:
    """What a solve knows before it starts: on a GPU where nothing fits statically, the static
    formulation's error (:func:`~tmsim.planners.milp.chain.gpu.static_misfit`), so that the static
    formulation raises it at once and no other warms up from a static solve, whose start
    would overflow every layout round (ten rounds of DenseNet-264 b64 took 11 s); and, given
    the ``platform`` and the formulations asked for (``tops``), where its slower tiers cannot
    hold what the fast tier's ``limit`` leaves them (:func:`slow_misfit`), that error for
    every formulation of their chains that does not recompute (one that does may drop a
    tensor instead, and is solved)."""
    memo: dict[Formulation, Solved | TmsimError] = {}
    misfit = slow_misfit(graph, platform, limit) if platform is not None and tops else None
    if misfit is not None:
        for f in dict.fromkeys(f for top in tops for f in chain_of(top)):
            if not f.recomputes:
                memo[f] = InfeasibleError(f"milp-{f.value}: infeasible: {misfit}")
    static = static_misfit(graph, limit) if gpu else None
    if static is not None:  # nothing moves: the fast tier alone binds
        memo[Formulation.STATIC] = static
    return memo


def slow_misfit(graph: Graph, platform: Platform, limit: int) -> str | None:
    """Why no formulation that keeps every tensor somewhere has a plan within ``limit`` bytes
    of the fastest tier, where the slower tiers are what is too small: the tier(s) and their
    bytes, the kernel and the bytes at stake; None where this proves nothing (the solver
    may still). Counted at each kernel on the tensors some kernel uses, live from their
    first to their last kernel (as the capacity rows of the MILP hold them):

    - together, the live tensors need more than the fast tier's limit and every slower tier's
      capacity;
    - the tensors kernels produced that can reach no slower tier (a tensor moves between
      tiers whole, so each tier on its way must hold it: the first ones it could go to are
      all smaller) must stay in the fastest tier, and there they, with the kernel's own
      operands on a GPU, need more than its limit.
    """
    _, tensor = graph.operand_csr
    used = np.zeros(len(graph.tensors), dtype=bool)
    used[tensor] = True
    if not used.any():
        return None
    n_k = len(graph.kernels)
    sizes = graph.sizes_bytes
    first, last = graph.live_first, graph.live_last
    tiers = platform.tiers
    slower = ", ".join(f"tier {t.name!r} ({t.capacity_bytes} bytes)" for t in tiers[1:])
    live = occupancy(first[used], last[used], sizes[used], n_k)
    room = limit + sum(int(t.capacity_bytes) for t in tiers[1:])
    k = int(np.argmax(live))
    if int(live[k]) > room:
        return (
            f"kernel {k} ({graph.kernels[k].name!r}) has {int(live[k])} bytes live, "
            f"{int(live[k]) - room} bytes more than the fast tier {tiers[0].name!r} may hold "
            f"(its limit of {limit} bytes) with the slower tiers together: {slower}"
        )
    persistent = np.array([t.role in PERSISTENT_ROLES for t in graph.tensors], dtype=bool)
    made = used & (graph.producers >= 0) & ~persistent
    stuck = made & ~_escapes(platform, limit, sizes)
    if not stuck.any():
        return None
    must = occupancy(first[stuck], last[stuck], sizes[stuck], n_k)
    if not kernels_reach_slow(platform):  # a GPU's kernel reads its operands on the device
        ptr, _ = graph.operand_csr
        op_kernel = np.repeat(np.arange(n_k), np.diff(ptr))
        np.add.at(must, op_kernel, np.where(stuck[tensor], 0, sizes[tensor]))
    k = int(np.argmax(must))
    held = stuck & (first <= k) & (last >= k)
    if int(must[k]) <= limit or not held.any():
        return None
    smallest = int(sizes[held].min())
    small = [t for t in tiers[1:] if t.capacity_bytes < smallest]
    others = [repr(t.name) for t in tiers[1:] if t.capacity_bytes >= smallest]
    why = []
    if small:
        named = ", ".join(f"tier {t.name!r} ({t.capacity_bytes} bytes)" for t in small)
        why.append(f"{named} {'is' if len(small) == 1 else 'are'} smaller than each")
    if others:
        why.append(f"copies reach {', '.join(others)} only through tiers too small for them")
    return (
        f"kernel {k} ({graph.kernels[k].name!r}) needs {int(must[k])} bytes in the fast tier "
        f"{tiers[0].name!r}, {int(must[k]) - limit} bytes more than its limit of {limit} "
        f"bytes: the tensors kernels made that it holds there, of {smallest} bytes or more, "
        f"can go to no slower tier ({'; '.join(why)})"
    )


def _escapes(platform: Platform, limit: int, sizes: np.ndarray) -> np.ndarray:
    """Whether a tensor of each of ``sizes`` bytes can reach a slower tier: from a tier kernels
    write that holds it, along copy paths into tiers that hold it (the fastest tier holding
    ``limit`` bytes)."""
    names = platform.tier_names
    caps = [limit, *(int(t.capacity_bytes) for t in platform.tiers[1:])]
    sources = {names.index(t) for t in platform.kernel_tiers}
    if platform.host_compute is not None:
        sources |= {names.index(t) for t in platform.host_compute.kernel_tiers}
    paths = [(names.index(p.src), names.index(p.dst)) for p in platform.copy_paths]
    known: dict[tuple[bool, ...], bool] = {}
    out = np.zeros(len(sizes), dtype=bool)
    for i, size in enumerate(sizes.tolist()):
        fits = tuple(c >= size for c in caps)
        if fits not in known:
            reach = {j for j in sources if fits[j]}
            grew = True
            while grew:
                new = {b for a, b in paths if a in reach and fits[b]} - reach
                reach |= new
                grew = bool(new)
            known[fits] = any(j > 0 for j in reach)
        out[i] = known[fits]
    return out


__all__ = ["first_memo", "formulation_of", "setup", "slow_misfit"]
