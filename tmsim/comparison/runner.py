"""The comparison itself: every strategy's row, the MILP chain beside the others.

With more than one worker (:attr:`CompareSettings.workers`) the MILP chain runs on a thread
of its own while this one plans and replays the other strategies: HiGHS releases Python's GIL
while it solves, so the replays fill the solver's time on the second core. The rows are the
same as on one worker: each strategy's row depends on its own inputs only.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from tmsim.capacity import fast_limit_bytes
from tmsim.comparison.rows import CompareSettings, Progress, Replays, Row
from tmsim.comparison.simulated import row_2lm, row_first_touch_pages, row_unified
from tmsim.cost import BesideCosts, CostModel
from tmsim.energy import energy_fields
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.planners.milp import Formulation, plan_milp_chain
from tmsim.plans.validate import validate
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.sim import replay
from tmsim.sim.beside import beside_costs, beside_for
from tmsim.strategies import STRATEGIES, Kind, check_applies, compared_by_default
from tmsim.workload.graph import Graph

Milp = dict[Formulation, Plan | TmsimError]


class _Measured:
    """The async-aware copy costs of a cost model, measured once, on first use, by whichever
    thread asks first (the chain's async-aware solve, or the row's validation)."""

    def __init__(self, cost: CostModel) -> None:
        self._cost = cost
        self._lock = threading.Lock()
        self._value: BesideCosts | None = None

    def __call__(self) -> BesideCosts:
        with self._lock:
            if self._value is None:
                self._value = beside_costs(self._cost)
            return self._value


def compare(
    graph: Graph,
    platform: Platform,
    settings: CompareSettings | None = None,
    progress: Progress | None = None,
    replays: Replays | None = None,
) -> list[Row]:
    """Run every strategy of ``settings`` on ``graph`` and ``platform``; one :class:`Row` each,
    in :data:`tmsim.strategies.STRATEGIES` order. ``replays``, when given, receives each
    strategy's replayed trace with its plan (None for the simulations that have none), by
    strategy name, for those that ran. ``progress`` is called as each row starts: the MILP
    formulations' rows after the others, each as the chain hands its plan over (the chain
    runs beside the others; after an interrupt the process still waits, as it exits, for the
    formulations then being solved side by side to end).

    Raises :class:`TmsimError` for no strategy, an unknown one, one that does not apply to
    the platform, a platform :func:`tmsim.strategies.applicable` refuses, a bad capacity, a
    2LM block the cache cannot be walked in, or fewer than one worker; failures of single
    strategies are reported in their rows.
    """
    s = settings or CompareSettings()
    wanted = compared_by_default(platform) if s.strategies is None else tuple(s.strategies)
    for name in wanted:
        check_applies(name, platform)  # raises for an unknown name too
    if not wanted:
        raise TmsimError("strategies: name at least one strategy to compare")
    if s.workers < 1:
        raise TmsimError(f"a comparison needs at least one worker, not {s.workers}")
    order = [name for name in STRATEGIES if name in wanted]
    limit = fast_limit_bytes(graph, platform, s.plan.capacity)
    if "2lm" in wanted and s.cache_block_bytes is not None:
        # a block the cache cannot be walked in is bad input, refused before anything runs
        from tmsim.sim.cache.walk import simulated_cache

        simulated_cache(platform.in_memory_mode(limit), s.cache_block_bytes)
    cost = cost_model(graph, platform, s.plan.profile)  # the planners' and the replays' times
    formulations = [m for m in order if STRATEGIES[m].kind is Kind.MILP]
    # measured once, for the chain and the row's validation (of that plan alone)
    aware_name = Formulation.ASYNC_AWARE.value
    aware = _Measured(cost) if aware_name in formulations else None
    rows: dict[str, Row] = {}

    def run(names: list[str], milp: Milp) -> None:
        for name in [n for n in names if n not in rows]:
            if progress is not None:
                progress(name, len(rows), len(order))
            try:
                measured = aware() if aware is not None and name == aware_name else None
                rows[name] = _run(name, graph, platform, s, cost, limit, milp, replays, measured)
            except (TmsimError, HardwareModelError) as exc:
                stop = str(getattr(exc, "stopped_on", ""))  # a solve a limit stopped short
                rows[name] = Row(
                    name, "", "error", error=str(exc), fast_limit_bytes=limit, stopped_on=stop
                )

    others = [name for name in order if name not in formulations]
    if not formulations:
        run(others, {})
    elif s.workers == 1:
        run(others, {})
        run(formulations, _milp_plans(graph, platform, s.plan, formulations, aware, 1))
    else:
        _beside_the_chain(formulations, others, run, graph, platform, s, aware)
    base = rows["all-fast"].simulated_s if "all-fast" in rows else math.nan
    return [replace(rows[name], slowdown=rows[name].simulated_s / base) for name in order]


def _beside_the_chain(
    formulations: list[str],
    others: list[str],
    run: Callable[[list[str], Milp], None],
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    aware: Callable[[], BesideCosts] | None,
) -> None:
    """``run`` the rows of ``others`` while the MILP chain of ``formulations`` runs on a thread
    of its own, then each formulation's row as the chain hands its plan over (``run`` skips
    a row it has run). The chain's thread is a daemon: an exception here (an interrupt) does
    not wait for the chain, which is left to end on its own."""
    handed: queue.Queue[tuple[Formulation, Plan | TmsimError] | None] = queue.Queue()
    outcome: list[Milp | BaseException] = []

    def put(f: Formulation, got: Plan | TmsimError) -> None:
        handed.put((f, got))

    def chain() -> None:
        try:
            outcome.append(
                _milp_plans(graph, platform, s.plan, formulations, aware, s.workers, put)
            )
        except BaseException as exc:  # raised again on the caller's thread
            outcome.append(exc)
        finally:
            handed.put(None)  # the chain has ended, however

    threading.Thread(target=chain, name="tmsim-milp-chain", daemon=True).start()
    run(others, {})
    milp: Milp = {}
    while (item := handed.get()) is not None:
        milp[item[0]] = item[1]
        if item[0].value in formulations:
            run([item[0].value], milp)
    got = outcome[0]
    if isinstance(got, BaseException):
        raise got
    run(formulations, got)  # those the chain handed nothing for (it failed before them)


def _milp_plans(
    graph: Graph,
    platform: Platform,
    ps: PlanSettings,
    names: Sequence[str],
    aware: Callable[[], BesideCosts] | None,
    workers: int,
    solved: Callable[[Formulation, Plan | TmsimError], None] | None = None,
) -> Milp:
    try:
        return plan_milp_chain(
            graph, platform, ps, [Formulation(n) for n in names], aware, workers, solved
        )
    except TmsimError as exc:
        return {f: exc for f in Formulation}


def _run(
    name: str,
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    cost: CostModel,
    limit: int,
    milp: Milp,
    replays: Replays | None = None,
    aware: BesideCosts | None = None,
) -> Row:
    if name == "2lm":
        return row_2lm(graph, platform, s, limit, replays)
    if name == "first-touch-pages":
        return row_first_touch_pages(graph, platform, s, cost, limit, replays)
    if name == "unified-memory":
        return row_unified(graph, platform, s, limit, replays)
    if name == "all-fast":
        return _run_all_fast(graph, platform, s, cost, replays)
    if STRATEGIES[name].kind is Kind.HEURISTIC:
        result = plan(name, graph, platform, s.plan)
    else:
        got = milp.get(Formulation(name))
        if got is None:
            raise TmsimError(f"the MILP chain did not reach {name}")
        if isinstance(got, TmsimError):
            raise got
        result = got
    return plan_row(name, result, graph, platform, cost, s.level, replays, aware)


def _run_all_fast(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    cost: CostModel,
    replays: Replays | None = None,
) -> Row:
    """The all-fast row, the reference of every slowdown: on ``platform``, or, where the step
    does not fit its fastest tier, on the same machine with that tier as large as the step's
    peak (an oracle no real plan reaches; its status says so)."""
    fast = platform.tiers[0]
    if graph.peak_live_bytes <= fast.capacity_bytes:
        return plan_row(
            "all-fast",
            plan("all-fast", graph, platform, s.plan),
            graph,
            platform,
            cost,
            s.level,
            replays,
        )
    ideal = platform.with_tier_capacity(fast.name, graph.peak_live_bytes)
    ideal_plan = plan("all-fast", graph, ideal, s.plan)
    cost = cost_model(graph, ideal, s.plan.profile)
    row = plan_row("all-fast", ideal_plan, graph, ideal, cost, s.level, replays)
    grown = f"heuristic; tier {fast.name!r} grown to the step's peak, {graph.peak_live_bytes} B"
    return replace(row, status=grown)


def plan_row(
    strategy: str,
    result: Plan,
    graph: Graph,
    platform: Platform,
    cost: CostModel | None = None,
    level: InterferenceLevel = DEFAULT_LEVEL,
    replays: Replays | None = None,
    aware: BesideCosts | None = None,
) -> Row:
    """The row of a plan: validated, then replayed (at interference ``level``); the
    trace and plan go into ``replays`` under ``strategy`` when it is given. ``aware``: the
    async-aware copy costs of ``cost`` where already measured (an async-aware plan is
    validated against them; measured again otherwise)."""
    cost = cost if cost is not None else CostModel(graph, platform)
    check = validate(result, graph, platform, cost, beside_for(result, cost, aware))
    trace = replay(result, graph, platform, cost=cost, level=level)
    if replays is not None:
        replays[strategy] = (trace, result)
    stats = result.stats
    return Row(
        strategy=strategy,
        planner=result.planner,
        status=stats.status if stats else "heuristic",
        predicted_s=result.predicted_s,
        simulated_s=trace.simulated_s,
        moved_bytes=float(check.moved_bytes),
        fast_peak_bytes=float(check.fast_peak_bytes),
        fast_limit_bytes=float(result.fast_limit_bytes),
        solve_s=stats.solve_s if stats else math.nan,
        gap=stats.gap if stats else math.nan,
        valid=check.ok,
        **energy_fields(trace, graph, platform),
        stopped_on=stats.stopped_on if stats else "",
    )


__all__ = ["compare", "plan_row"]
