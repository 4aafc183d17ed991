"""The order a chain solves its formulations in, and which of them run at once.

Every formulation is solved after those it contains
(:data:`~tmsim.planners.milp.chain.nesting.CONTAINS`), from what they gave. Formulations neither of
which contains the other (``async`` and ``async-aware``, both from ``sync``) are solved at once, on
up to ``workers`` threads: HiGHS releases Python's GIL while it solves, so one formulation's solve
runs beside the other's model building and layout search (on ``make demo``'s chain, measured in
``bench``'s notes of issue 13).

A formulation's solve sees only what the formulations it contains, directly or not, gave:
never a formulation solved beside it or after it in the order. So a chain's plans do not
depend on ``workers`` or on which of two solves ends first, unless a wall-clock time limit
stops a solve (two solves side by side each run slower than one alone).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from tmsim.errors import TmsimError
from tmsim.planners.milp.chain.nesting import CONTAINS, chain_of
from tmsim.planners.milp.chain.solution import Solved
from tmsim.planners.milp.formulation.gadgets import Formulation

#: Threads a chain solves its independent formulations on: the cores of the machine the
#: targets are measured on. Plans do not depend on it (module doc).
CHAIN_WORKERS = 2

Memo = dict[Formulation, Solved | TmsimError]
#: ``task(formulation, deadline, view)`` solves ``formulation`` with the wall-clock
#: ``deadline`` (``time.perf_counter`` seconds, None: none) and records its solution or
#: error in ``view``, which holds what the formulations it contains gave.
Task = Callable[[Formulation, float | None, Memo], None]


def contained(formulation: Formulation) -> set[Formulation]:
    """Every formulation ``formulation`` contains, directly or through another."""
    out: set[Formulation] = set()
    stack = list(CONTAINS.get(formulation, ()))
    while stack:
        f = stack.pop()
        if f not in out:
            out.add(f)
            stack.extend(CONTAINS.get(f, ()))
    return out


def solve_chains(
    tops: Sequence[Formulation],
    memo: Memo,
    task: Task,
    first_deadline: float | None,
    time_limit_s: float | None,
    workers: int = CHAIN_WORKERS,
    done: Callable[[Formulation, Solved | TmsimError], None] | None = None,
) -> None:
    """Solve, by ``task``, every formulation of the chains of ``tops`` (each top and all it
    contains, :func:`~tmsim.planners.milp.chain.nesting.chain_of`) that ``memo`` does not hold yet;
    ``memo`` receives each one's solution or error, and ``done`` is called with it as it comes (on
    the thread that called this).

    The formulations of the first top's chain have ``first_deadline``; those that a later
    top adds to the ones before have ``time_limit_s`` from when the first of them starts, or
    from when the last formulation of an earlier top that they contain has ended, whichever
    is later (on one worker: from when the earlier tops' chains have ended, as each top's
    chain its own cap). With ``workers`` > 1, formulations whose contained ones are all
    solved run at once, up to ``workers`` at a time; ``task`` must then be safe to run on
    several threads, and must record its formulation's error in its view rather than raise
    it: any exception ``task`` raises is raised here, after the solves already running have
    ended. Raises :class:`TmsimError` for ``workers`` < 1.
    """
    if workers < 1:
        raise TmsimError(f"a chain needs at least one worker, not {workers}")
    owner: dict[Formulation, int] = {}  # the first top whose chain holds each formulation
    for i, top in enumerate(tops):
        for f in chain_of(top):
            if f not in memo:
                owner.setdefault(f, i)
    clocks: dict[int, float] = {}  # when each later top's first formulation started
    ended: dict[Formulation, float] = {}

    def deadline_of(f: Formulation) -> float | None:
        i = owner[f]
        if i == 0 or time_limit_s is None:
            return first_deadline if i == 0 else None
        now = time.perf_counter()
        clocks.setdefault(i, now)
        # not before the formulations of earlier tops that f contains have ended
        earlier = [ended[g] for g in contained(f) if owner.get(g, i) < i]
        return max([clocks[i], *earlier]) + time_limit_s

    def view(f: Formulation) -> Memo:
        # in the order of f's own chain, the order one worker solves them in
        return {g: memo[g] for g in chain_of(f) if g != f and g in memo}

    def finish(f: Formulation, seen: Memo) -> None:
        memo[f], ended[f] = seen[f], time.perf_counter()
        if done is not None:
            done(f, memo[f])

    order = [*memo, *owner]  # memo's entries in chain order, however the solves end
    pending = list(owner)  # in chain order: each after those it contains
    if workers == 1:
        for f in pending:
            seen = view(f)
            task(f, deadline_of(f), seen)
            finish(f, seen)
        return
    running: dict[Future[None], tuple[Formulation, Memo]] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            for f in [f for f in pending if all(g in memo for g in contained(f))]:
                if len(running) < workers:
                    pending.remove(f)
                    seen = view(f)
                    running[pool.submit(task, f, deadline_of(f), seen)] = (f, seen)
            assert running, "a chain's order has every formulation after those it contains"
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                f, seen = running.pop(future)
                future.result()  # raises what the task raised
                finish(f, seen)
    ordered = {f: memo[f] for f in order}
    memo.clear()
    memo.update(ordered)
