"""Exhaustive search over every plan of a tiny graph, its kernels timed by a cost model with
measured times: the oracle of the MILP with a profile (``tests/test_profiles.py``).

The rules of a plan are those of :mod:`milp_brute`, whose histories of each tensor it reuses;
only the kernel times differ. :mod:`milp_brute` adds up each tensor's share of a kernel's
memory time, which a measured time is not; here each tensor's histories are grouped by the
tier each of its operands is accessed on (which alone decides its kernels' times), each
group keeps the histories no other beats in bytes and copy time, and every combination is
scored at once: the roofline from the tensors' memory times (the ``max`` rule), replaced by
the measured time wherever a kernel's operands sit on a placement the cost model lists.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from milp_brute import (
    History,
    Machine,
    Step,
    _score,
    gadgets,
    initial_states,
    undominated,
    walks,
)

from tmsim.cost import CostModel
from tmsim.workload.graph import PERSISTENT_ROLES


def _access(machine: Machine, init: frozenset[int] | None, steps: list[Step], k: int) -> int:
    """The tier kernel ``k``, a user of the tensor, reads and writes it on in a history."""
    state = init
    for step in steps:
        if step.gadget.kernel == k:
            state = step.during
            break
        if step.gadget.kernel > k:
            break
        state = step.after
    assert state is not None
    return min(state & machine.kernel_tiers)


def exhaustive_s(cost: CostModel, limit_bytes: int, formulation: str, window: int = 1) -> float:
    """The least step time of any plan :mod:`milp_brute`'s rules allow, every kernel timed
    by ``cost`` (measured where its profile lists the placement), or ``inf``.

    Per tensor, its histories grouped by the tier each of its operands is accessed on (which
    alone decides its kernels' times), keeping in each group those no other beats in bytes
    and copy time; then every combination, scored at once."""
    machine = Machine.of(cost)
    limits = machine.limits(cost, limit_bytes)
    n_ops = cost.op_tensor.size
    options: list[list[tuple[npt.NDArray[np.int64], History]]] = []
    for t, tensor in enumerate(cost.graph.tensors):
        ops = np.flatnonzero(cost.op_tensor == t)
        groups: dict[tuple[int, ...], list[History]] = {}
        for init in initial_states(cost, t, formulation):
            for steps in walks(machine, t, gadgets(cost, t, formulation, window), init):
                end = steps[-1].after if steps else init
                if tensor.role in PERSISTENT_ROLES and end != init:
                    continue
                h = _score(cost, machine, t, init, steps)
                if h is None or not (h.bytes_by_tier <= limits[:, None]).all():
                    continue
                at = tuple(_access(machine, init, steps, int(cost.op_kernel[j])) for j in ops)
                groups.setdefault(at, []).append(h)
        rows = []
        for at, hs in groups.items():
            for h in undominated(hs):
                placed = np.zeros(n_ops, dtype=np.int64)
                placed[ops] = at
                rows.append((placed, h))
        options.append(rows)
    shape = tuple(len(o) for o in options)
    assert math.prod(shape) < 2_000_000, shape
    pick = np.unravel_index(np.arange(math.prod(shape)), shape)

    def combined(part: Callable[[tuple[npt.NDArray[np.int64], History]], Any]) -> Any:
        """Per combination, the sum over tensors of ``part`` of the option it picks."""
        chosen = [np.array([part(r) for r in o])[p] for o, p in zip(options, pick, strict=True)]
        return np.sum(chosen, axis=0)

    tiers = combined(lambda r: r[0])
    on = combined(lambda r: r[1].bytes_by_tier)
    beside = combined(lambda r: r[1].async_s)
    sync = combined(lambda r: r[1].sync_s)
    memory = combined(lambda r: r[1].memory_s)
    kernel = np.maximum(cost.compute_s, memory) + cost.launch_s  # the roofline (max rule)
    for (k, placement), seconds in cost.measured.items():
        lo, hi = int(cost.op_ptr[k]), int(cost.op_ptr[k + 1])
        kernel[(tiers[:, lo:hi] == placement).all(axis=1), k] = seconds
    total = np.maximum(kernel, beside).sum(axis=1) + sync
    ok = (on <= limits[None, :, None]).all(axis=(1, 2))
    return float(total[ok].min()) if ok.any() else math.inf


__all__ = ["exhaustive_s"]
