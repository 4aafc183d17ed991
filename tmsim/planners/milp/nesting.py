"""Which MILP formulation contains which: the order a chain solves them in, what each falls
back to, and what each starts from.

Every formulation's plans include those of the formulations it contains (more gadgets, more
edges; with recomputation, the ``gone`` state and its edges too), so each is solved after them
and returns the best of their plans where its own solve does worse (a time limit, layout
rounds). It starts from the best plan of those it can take a solution from index for index
(:func:`~tmsim.planners.milp.starts.lift`).
"""

from __future__ import annotations

from collections.abc import Sequence

from tmsim.planners.milp.gadgets import Formulation

F = Formulation
#: The formulations each one contains, solved before it: its plan is never worse than theirs
#: (it falls back to the best of them).
CONTAINS: dict[Formulation, tuple[Formulation, ...]] = {
    F.SYNC: (F.STATIC,),
    F.ASYNC: (F.SYNC,),
    F.ASYNC_AWARE: (F.SYNC,),
    F.STATIC_RC: (F.STATIC, F.REMAT),
    F.SYNC_RC: (F.SYNC, F.STATIC_RC),
    F.ASYNC_RC: (F.SYNC_RC, F.ASYNC),
}
#: Those a solution lifts from, index for index (:func:`~tmsim.planners.milp.starts.lift`):
#: the compact asynchronous form has no gadget where ``async-rc`` reads a tensor's state
#: beside a window kernel, so ``async-rc`` starts from ``sync-rc`` alone.
STARTS: dict[Formulation, tuple[Formulation, ...]] = {
    **CONTAINS,
    F.ASYNC_RC: (F.SYNC_RC,),
}


def chain_of(top: Formulation) -> list[Formulation]:
    """``top`` and every formulation it contains, each after those it contains."""
    out: list[Formulation] = []

    def visit(f: Formulation) -> None:
        for smaller in CONTAINS.get(f, ()):
            visit(smaller)
        if f not in out:
            out.append(f)

    visit(top)
    return out


def planners_of(formulations: Sequence[Formulation]) -> set[str]:
    """The planner names of the plans of ``formulations``."""
    return {f"milp-{f.value}" for f in formulations}


__all__ = ["CONTAINS", "STARTS", "chain_of", "planners_of"]
