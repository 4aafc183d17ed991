"""Max-min fair rates of flows that share capacitated resources (progressive filling).

A pure function, independent of SimPy, so that the sharing rule can be checked by hand:
:func:`max_min_rates` raises every unfrozen flow's rate at the same pace until a resource is
full or a flow reaches its own cap, freezes the flows concerned, and repeats. The result is the
max-min fair allocation: no flow can get more without taking from a flow that has no more.
With ``weights`` the pace of flow ``f`` is ``weights[f]`` (weighted max-min fairness: on a full
resource the rates of the flows it freezes are in proportion to their weights).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: A flow's use of resources: ``(resource index, resource capacity used per unit of rate)``.
Uses = Sequence[tuple[int, float]]

#: A resource whose residual capacity falls below this fraction of its capacity is full.
#: (Residuals are differences of rounded products; an exact zero is not to be expected.)
FULL_REL = 1e-12


def max_min_rates(
    caps: Sequence[float],
    uses: Sequence[Uses],
    capacities: Sequence[float],
    weights: Sequence[float] | None = None,
) -> list[float]:
    """Max-min fair rates of ``n`` flows (weighted by ``weights``, all 1 when None).

    - ``caps[f]``: flow ``f``'s own rate limit (> 0; ``inf`` for none);
    - ``uses[f]``: the resources flow ``f`` crosses, each with the capacity one unit of its
      rate consumes there (> 0);
    - ``capacities[r]``: resource ``r``'s capacity (> 0).

    Every flow gets the same rate except those held lower by their own cap or by a full
    resource they cross (and those then leave more to the others). A flow that reaches its cap
    gets exactly its cap. A flow with no cap and no resource gets ``inf``. With ``weights``,
    flow ``f``'s rate is ``weights[f]`` times a common level until it is frozen, so flows
    frozen together have rates in proportion to their weights; all weights equal give the
    unweighted result exactly. Deterministic: the result depends only on the arguments, in
    their order. Raises ``ValueError`` for a cap, coefficient, capacity or weight that is not
    positive, or a weight that is not finite.
    """
    n = len(caps)
    if len(uses) != n:
        raise ValueError(f"caps has {n} flows, uses {len(uses)}")
    if any(not c > 0 for c in caps) or any(not c > 0 for c in capacities):
        raise ValueError("caps and capacities must be > 0")
    if any(not a > 0 for u in uses for _, a in u):
        raise ValueError("resource coefficients must be > 0")
    if weights is None:
        pace = [1.0] * n
    else:
        if len(weights) != n or any(not (0 < w < math.inf) for w in weights):
            raise ValueError("weights must be one finite number > 0 per flow")
        top = max(weights, default=1.0)
        pace = [w / top for w in weights]
    rate = [0.0] * n
    residual = list(capacities)
    level = 0.0
    active = list(range(n))
    while active:
        load: dict[int, float] = {}
        for f in active:
            for r, a in uses[f]:
                load[r] = load.get(r, 0.0) + a * pace[f]
        # The flows whose caps and the resources whose residuals set the step are frozen by
        # name: ``level + (cap / pace - level)`` need not give back ``cap / pace`` exactly, and
        # a test on the rounded level alone could miss them (or freeze every flow instead).
        to_cap = {f: caps[f] / pace[f] - level for f in active}
        to_full = {r: residual[r] / total for r, total in load.items()}
        step = min([*to_cap.values(), *to_full.values()])
        if math.isinf(step):
            for f in active:
                rate[f] = math.inf
            break
        level += max(step, 0.0)
        full: set[int] = set()
        for r, total in load.items():
            residual[r] -= max(step, 0.0) * total
            if to_full[r] <= step or residual[r] <= FULL_REL * capacities[r]:
                full.add(r)
        still: list[int] = []
        for f in active:
            if to_cap[f] <= step or caps[f] <= level * pace[f]:
                rate[f] = caps[f]
            elif any(r in full for r, _ in uses[f]):
                rate[f] = level * pace[f]
            else:
                still.append(f)
        active = still
    return rate
