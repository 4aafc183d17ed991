"""What every planner shares: turning a decision in indices into a plan, and the check that
a kernel's own operands fit.

Planners describe their decision in indices (tensor and tier indices, kernel numbers) and
:func:`assemble_plan` turns it into a :class:`~tmsim.plans.values.Plan` with names and residency
ranges, its predicted time by the cost model's step-time rule
(:func:`tmsim.cost.step_time_s`), which the MILP's objective encodes and the validator
recomputes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from hwmodels.platform import Platform
from tmsim.cost import BesideCosts, CostModel, IndexMove, IndexRecompute
from tmsim.errors import InfeasibleError, NoPlanError, TmsimError
from tmsim.plans.deps import lasting_copies
from tmsim.plans.streams import plan_step_time_s
from tmsim.plans.values import Move, Plan, Recompute, Residency, SolverStats
from tmsim.workload.graph import PERSISTENT_ROLES, PREEXISTING_ROLES, Graph
from tmsim.workload.identity import GraphIdentity, graph_sha256, identity_of

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def assemble_plan(
    cost: CostModel,
    planner: str,
    limit_bytes: int,
    op_tiers: npt.ArrayLike,
    initial: Mapping[int, tuple[int, ...]],
    moves: Iterable[IndexMove],
    drops: Mapping[tuple[int, int], Iterable[int]] | None = None,
    options: Mapping[str, Any] | None = None,
    stats: SolverStats | None = None,
    identity: GraphIdentity | None = None,
    beside: BesideCosts | None = None,
    recomputes: Iterable[IndexRecompute] = (),
    host_kernels: Sequence[int] = (),
) -> Plan:
    """Build a :class:`Plan` from a decision in indices.

    - ``op_tiers`` [n_ops]: the tier of every operand (cost-model operand order);
    - ``initial``: tiers of each pre-existing tensor at the start (every one must be listed);
    - ``moves``: the copies;
    - ``recomputes``: producers run again, in the order they run (a copy of the tensor appears
      at the recompute's kernel in the tier its tiers give the tensor);
    - ``host_kernels``: the kernels the host compute runs, in the order it runs them;
    - ``drops[(tensor, tier)]``: kernels after which that copy is freed (each ends the
      residency range that contains it); a copy not dropped stays until the tensor's last
      live kernel (the end of the step for weights and optimizer state).

    Residency ranges start where copies appear: at the producer in the tier it writes, at
    kernel 0 for ``initial`` tiers, at the kernel of a move into a tier the tensor is not
    resident in, at a recompute. A drop after the tensor's last live kernel extends its range
    (a copy a later recompute reads). The predicted time is
    :func:`~tmsim.plans.streams.plan_step_time_s` (with ``beside``, asynchronous copies at what
    interference makes them cost; with host kernels, the longest path through both streams).

    The plan records which graph it is for: ``identity`` when the caller knows how the graph
    was built, else :func:`tmsim.workload.identity.identity_of` (a recognized zoo build, or
    the graph's name and fingerprint alone). Raises :class:`TmsimError` if a pre-existing
    tensor has no initial tier, or ``identity`` is not ``cost.graph``'s (name or fingerprint).
    """
    graph, platform = cost.graph, cost.platform
    if identity is None:
        identity = identity_of(graph)
    elif identity.name != graph.name or identity.sha256 != graph_sha256(graph):
        raise TmsimError(
            f"{planner}: the identity given is for graph {identity.name!r} with sha256 "
            f"{identity.sha256}, not the graph planned, {graph.name!r} with sha256 "
            f"{graph_sha256(graph)}"
        )
    n_k = len(graph.kernels)
    tiers = np.asarray(op_tiers, dtype=np.int64)
    move_list = sorted(moves, key=lambda m: (m.kernel, m.tensor, m.mode.value, m.src, m.dst))
    names = platform.tier_names
    starts: dict[tuple[int, int], list[int]] = {}
    for t, tensor in enumerate(graph.tensors):
        if tensor.role in PREEXISTING_ROLES:
            if t not in initial or not initial[t]:
                raise TmsimError(f"tensor {tensor.name!r}: no initial tier")
            for tier in initial[t]:
                starts.setdefault((t, tier), []).append(0)
    producers = graph.producers
    for j in np.flatnonzero(producers[cost.op_tensor] == cost.op_kernel):
        starts.setdefault((int(cost.op_tensor[j]), int(tiers[j])), []).append(
            int(cost.op_kernel[j])
        )
    for m in move_list:
        starts.setdefault((m.tensor, m.dst), []).append(min(m.kernel, n_k - 1))
    reruns = list(recomputes)
    ptr = cost.op_ptr
    for r in reruns:
        ops = cost.op_tensor[int(ptr[r.producer]) : int(ptr[r.producer + 1])]
        out_tier = r.tiers[int(np.flatnonzero(ops == r.tensor)[0])]
        starts.setdefault((r.tensor, out_tier), []).append(r.kernel)
    drop_map = {key: sorted(set(v)) for key, v in (drops or {}).items()}
    residency: list[Residency] = []
    spans: list[tuple[int, int, int, int]] = []  # the same in indices
    for (t, tier), begin_list in sorted(starts.items()):
        end_of_life = (
            n_k - 1 if graph.tensors[t].role in PERSISTENT_ROLES else int(graph.live_last[t])
        )
        ends = drop_map.get((t, tier), [])
        cursor = -1
        for begin in sorted(set(begin_list)):
            if begin <= cursor:
                continue  # already resident: a refresh of an existing copy
            end = next((e for e in ends if e >= begin), max(end_of_life, begin))
            residency.append(Residency(graph.tensors[t].name, names[tier], begin, end))
            spans.append((t, tier, begin, end))
            cursor = end
    operand_tiers = tuple(
        tuple(names[int(x)] for x in tiers[ptr[k] : ptr[k + 1]]) for k in range(n_k)
    )
    order = tuple(int(h) for h in host_kernels)
    lasting = lasting_copies(spans, len(names), n_k)
    total, _ = plan_step_time_s(cost, tiers, move_list, beside, reruns, order, lasting)
    return Plan(
        graph=graph.name,
        platform=platform.name,
        planner=planner,
        fast_limit_bytes=int(limit_bytes),
        operand_tiers=operand_tiers,
        initial_tiers={
            graph.tensors[t].name: tuple(names[x] for x in tiers_) for t, tiers_ in initial.items()
        },
        residency=tuple(residency),
        moves=tuple(
            Move(graph.tensors[m.tensor].name, names[m.src], names[m.dst], m.kernel, m.mode)
            for m in move_list
        ),
        predicted_s=total,
        options=dict(options or {}),
        stats=stats,
        graph_identity=identity,
        recomputes=tuple(
            Recompute(graph.tensors[r.tensor].name, r.kernel, tuple(names[x] for x in r.tiers))
            for r in reruns
        ),
        host_kernels=order,
    )


def check_operands_fit(
    graph: Graph, platform: Platform, limit: int, planner: str, exempt: Sequence[int] = ()
) -> None:
    """Raise if some kernel's distinct operands together exceed ``limit`` bytes (kernels
    ``exempt``, which may run elsewhere, aside).

    When kernels can reach only the fast tier (a GPU) no plan exists then, and this raises
    :class:`InfeasibleError`; otherwise only plans that keep every operand in the fast tier are
    ruled out, and it raises :class:`NoPlanError`. Either message names the kernel with the
    most operand bytes and how many bytes are missing.
    """
    ptr, tensor = graph.operand_csr
    kernel = np.repeat(np.arange(len(graph.kernels)), np.diff(ptr))
    need = np.bincount(kernel, weights=graph.sizes_bytes[tensor], minlength=len(graph.kernels))
    need[np.asarray(exempt, dtype=np.int64)] = 0
    k = int(np.argmax(need))
    if need[k] <= limit:
        return
    fast = platform.tiers[0].name
    what = (
        f"kernel {k} ({graph.kernels[k].name!r}) needs {int(need[k])} bytes of operands in "
        f"tier {fast!r}, {int(need[k]) - limit} bytes more than the limit of {limit} bytes"
    )
    if platform.kernel_tiers == (fast,):
        raise InfeasibleError(f"{planner}: infeasible: {what}")
    raise NoPlanError(f"{planner}: no plan that keeps operands in tier {fast!r}: {what}")
