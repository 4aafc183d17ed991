"""Every strategy for one workload on one platform: planned, validated, simulated, tabulated.

:func:`compare` is what ``tmsim compare`` runs, over the strategies of :mod:`tmsim.strategies`
that apply to the platform:

- the heuristic planners (``all-fast``, the oracle with as much fast memory as the step
  needs: where the fastest tier is smaller, on the same machine with that tier grown to the
  step's peak; ``all-slow``; ``first-touch``, the NUMA baseline; ``greedy``; ``vdnn``);
- ``static``, ``sync``, ``async``: AutoTM's MILP formulations, solved once as a chain
  (:func:`tmsim.planners.milp.plan_milp_chain`);
- ``first-touch-pages``: the NUMA baseline as the operating system runs it, the memory plan's
  pool given to the fast tier page by page in the order pages are first touched
  (:func:`tmsim.sim.firsttouch.replay_first_touch_pages`, at the compared capacity and
  interference level), on a platform whose kernels reach a slower tier;
- ``2lm``: the hardware DRAM cache (:func:`tmsim.sim.cache.replay_cache`), on a platform
  whose kernels reach a slower tier and that describes its memory mode: the fast tier, at the
  compared capacity, caches the next one (:meth:`hwmodels.Platform.in_memory_mode`);
- ``unified-memory``: CUDA managed memory (:func:`tmsim.sim.unified.replay_unified`, a
  steady-state step), on a platform whose kernels reach only the fast tier (a GPU).

Each planned strategy's plan is checked by :func:`tmsim.plans.validate.validate` and replayed by
:func:`tmsim.sim.replay`; the slowdown of every row is its simulated time over the simulated
time of ``all-fast``. A strategy that cannot run (no plan fits, the solver found none, the
platform cannot do it) gives a row with its error and no times rather than stopping the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import pandas as pd

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import BesideCosts, CostModel
from tmsim.energy import energy_fields
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.planners.milp.chain import plan_milp_chain
from tmsim.planners.milp.gadgets import Formulation
from tmsim.plans.validate import validate
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.sim import replay
from tmsim.sim.beside import beside_costs, beside_for
from tmsim.sim.firsttouch.pages import DEFAULT_PAGE_BYTES
from tmsim.sim.trace import Trace
from tmsim.strategies import STRATEGIES, Kind, applicable, compared_by_default, strategy
from tmsim.workload.graph import Graph

#: ``progress(strategy, index, total)`` is called as each strategy starts.
Progress = Callable[[str, int, int], None]
#: Each strategy's replayed trace and its plan (None for a simulation without one).
Replays = dict[str, tuple[Trace, Plan | None]]


@dataclass(frozen=True)
class CompareSettings:
    """What :func:`compare` runs, with its defaults.

    ``plan``: the capacity and settings of every planner (:class:`PlanSettings`; its
    profile's measured kernel times also time the plans' checks and replays);
    ``contention``: simulate with shared bandwidth (False: every kernel and copy at its own
    rate); ``level``: the interference level of the plans' replays when ``contention`` is on
    (:mod:`tmsim.levels`; the 2LM and unified-memory simulations share bandwidth as at
    ``bandwidth``); ``strategies``: which to run (default: all that apply to the platform
    but the formulations that recompute, :func:`tmsim.strategies.compared_by_default`);
    ``cache_block_bytes``: the 2LM simulation's block size (default:
    :func:`tmsim.sim.cache.replay_cache`'s); ``page_bytes``: the page of
    ``first-touch-pages`` (default 4 KiB, :data:`tmsim.sim.firsttouch.DEFAULT_PAGE_BYTES`).
    """

    plan: PlanSettings = field(default_factory=PlanSettings)
    contention: bool = True
    level: InterferenceLevel = DEFAULT_LEVEL
    strategies: tuple[str, ...] | None = None
    cache_block_bytes: int | None = None
    page_bytes: int = DEFAULT_PAGE_BYTES

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready data (the plan settings as :meth:`PlanSettings.to_dict`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["plan"] = self.plan.to_dict()
        out["strategies"] = None if self.strategies is None else list(self.strategies)
        out["level"] = InterferenceLevel(self.level).value
        return out


@dataclass(frozen=True)
class Row:
    """One strategy's result; ``nan`` where a figure does not apply or the strategy failed.

    ``planner``: the plan's planner label (e.g. ``milp-sync``) or the simulation's name;
    ``status``: the solver's status, ``heuristic``, ``simulated`` or ``error``; ``error``:
    why the strategy could not run (empty if it ran); ``predicted_s``: the plan's predicted
    step time; ``simulated_s``: the simulated step time; ``slowdown``: ``simulated_s`` over
    that of ``all-fast``; ``moved_bytes``: bytes copied between tiers (plans: the sizes of
    the moves; 2LM: fills and write-backs; unified memory: migrations); ``fast_peak_bytes``
    and ``fast_limit_bytes``: most fast-tier bytes in use and the capacity compared at;
    ``solve_s``/``gap``: MILP solve seconds and relative gap; ``valid``: the plan passed the
    validator (simulations: True); ``hit_rate``: the 2LM cache's hit rate; on a platform with
    an energy model (:mod:`tmsim.energy`), ``energy_j``: the step's energy,
    ``wear_tier``: the rated device that wears out first and ``wear_written_bytes`` /
    ``wear_years``: what the step writes on it and the years until steps back to back wear
    it out (``nan`` where the step writes nothing there: it does not wear). ``first-touch-pages``
    has a ``predicted_s`` (the cost model's time of its pages' placement), moves nothing, and
    its ``fast_peak_bytes`` are the pages the fast tier took.
    """

    strategy: str
    planner: str
    status: str
    error: str = ""
    predicted_s: float = math.nan
    simulated_s: float = math.nan
    slowdown: float = math.nan
    moved_bytes: float = math.nan
    fast_peak_bytes: float = math.nan
    fast_limit_bytes: float = math.nan
    solve_s: float = math.nan
    gap: float = math.nan
    valid: bool = False
    hit_rate: float = math.nan
    energy_j: float = math.nan
    wear_tier: str = ""
    wear_written_bytes: float = math.nan
    wear_years: float = math.nan


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
    strategy name, for those that ran.

    Raises :class:`TmsimError` for an unknown strategy, one that does not apply to the
    platform, a platform :func:`tmsim.strategies.applicable` refuses, or a bad capacity;
    failures of single strategies are reported in their rows.
    """
    s = settings or CompareSettings()
    allowed = applicable(platform)
    wanted = compared_by_default(platform) if s.strategies is None else tuple(s.strategies)
    for name in wanted:
        strategy(name)  # raises for an unknown name
        if name not in allowed:
            raise TmsimError(f"strategy {name!r} does not apply to platform {platform.name!r}")
    order = [name for name in STRATEGIES if name in wanted]
    limit = fast_limit_bytes(graph, platform, s.plan.capacity)
    cost = cost_model(graph, platform, s.plan.profile)  # the planners' and the replays' times
    milp: dict[Formulation, Plan | TmsimError] = {}
    aware: BesideCosts | None = None  # measured once, for the chain and the row's validation
    rows: list[Row] = []
    for i, name in enumerate(order):
        if progress is not None:
            progress(name, i, len(order))
        if STRATEGIES[name].kind is Kind.MILP and not milp:
            wanted_milp = [m for m in order if STRATEGIES[m].kind is Kind.MILP]
            if Formulation.ASYNC_AWARE.value in wanted_milp:
                aware = beside_costs(cost)
            milp = _milp_plans(graph, platform, s.plan, wanted_milp, aware)
        try:
            rows.append(_run(name, graph, platform, s, cost, limit, milp, replays, aware))
        except (TmsimError, HardwareModelError) as exc:
            rows.append(Row(name, "", "error", error=str(exc), fast_limit_bytes=limit))
    base = next((r.simulated_s for r in rows if r.strategy == "all-fast"), math.nan)
    return [replace(r, slowdown=r.simulated_s / base) for r in rows]


def _milp_plans(
    graph: Graph,
    platform: Platform,
    ps: PlanSettings,
    names: Sequence[str],
    aware: BesideCosts | None = None,
) -> dict[Formulation, Plan | TmsimError]:
    try:
        return plan_milp_chain(graph, platform, ps, [Formulation(n) for n in names], aware)
    except TmsimError as exc:
        return {f: exc for f in Formulation}


def _run(
    name: str,
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    cost: CostModel,
    limit: int,
    milp: dict[Formulation, Plan | TmsimError],
    replays: Replays | None = None,
    aware: BesideCosts | None = None,
) -> Row:
    if name == "2lm":
        return _run_2lm(graph, platform, s, limit, replays)
    if name == "first-touch-pages":
        return _run_first_touch_pages(graph, platform, s, cost, limit, replays)
    if name == "unified-memory":
        return _run_unified(graph, platform, s, limit, replays)
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
    return plan_row(name, result, graph, platform, s.contention, cost, s.level, replays, aware)


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
            s.contention,
            cost,
            s.level,
            replays,
        )
    ideal = platform.with_tier_capacity(fast.name, graph.peak_live_bytes)
    ideal_plan = plan("all-fast", graph, ideal, s.plan)
    cost = cost_model(graph, ideal, s.plan.profile)
    row = plan_row("all-fast", ideal_plan, graph, ideal, s.contention, cost, s.level, replays)
    grown = f"heuristic; tier {fast.name!r} grown to the step's peak, {graph.peak_live_bytes} B"
    return replace(row, status=grown)


def plan_row(
    strategy: str,
    result: Plan,
    graph: Graph,
    platform: Platform,
    contention: bool = True,
    cost: CostModel | None = None,
    level: InterferenceLevel = DEFAULT_LEVEL,
    replays: Replays | None = None,
    aware: BesideCosts | None = None,
) -> Row:
    """The row of a plan: validated, then replayed (with ``contention``, at ``level``); the
    trace and plan go into ``replays`` under ``strategy`` when it is given. ``aware``: the
    async-aware copy costs of ``cost`` where already measured (an async-aware plan is
    validated against them; measured again otherwise)."""
    cost = cost if cost is not None else CostModel(graph, platform)
    check = validate(result, graph, platform, cost, beside_for(result, cost, aware))
    trace = replay(result, graph, platform, contention=contention, cost=cost, level=level)
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
    )


def _run_2lm(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    limit: int,
    replays: Replays | None = None,
) -> Row:
    from tmsim.sim.cache.replay import replay_cache

    mm = platform.in_memory_mode(limit)
    out = replay_cache(graph, mm, block_bytes=s.cache_block_bytes, contention=s.contention)
    if replays is not None:
        replays["2lm"] = (out.trace, None)
    totals = out.totals()
    return Row(
        strategy="2lm",
        planner="2lm",
        status="simulated",
        simulated_s=out.simulated_s,
        moved_bytes=float(totals["backing_read_bytes"] + totals["backing_write_bytes"]),
        fast_peak_bytes=float(max((r.fast_resident_bytes for r in out.trace.records), default=0)),
        fast_limit_bytes=float(limit),
        valid=True,
        hit_rate=float(totals["hit_rate"]),
        **energy_fields(out.trace, graph, mm),
    )


def _run_first_touch_pages(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    cost: CostModel,
    limit: int,
    replays: Replays | None = None,
) -> Row:
    from tmsim.sim.firsttouch.replay import replay_first_touch_pages

    out = replay_first_touch_pages(
        graph,
        platform,
        fast_limit_bytes=limit,
        page_bytes=s.page_bytes,
        contention=s.contention,
        level=s.level,
        cost=cost,
    )
    if replays is not None:
        replays["first-touch-pages"] = (out.trace, None)
    return Row(
        strategy="first-touch-pages",
        planner="first-touch-pages",
        status="simulated",
        predicted_s=out.trace.predicted_s,
        simulated_s=out.simulated_s,
        moved_bytes=0.0,
        fast_peak_bytes=float(out.fast_bytes),
        fast_limit_bytes=float(limit),
        valid=True,
        **energy_fields(out.trace, graph, platform),
    )


def _run_unified(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    limit: int,
    replays: Replays | None = None,
) -> Row:
    from tmsim.sim.unified.replay import replay_unified

    # A steady-state step: weights and optimizer state start where the last step left them,
    # as in the planned strategies, whose persistent tensors end where they start.
    out = replay_unified(graph, platform, device_bytes=limit, contention=s.contention, warm=True)
    if replays is not None:
        replays["unified-memory"] = (out.trace, None)
    totals = out.totals()
    return Row(
        strategy="unified-memory",
        planner="unified-memory",
        status="simulated",
        simulated_s=out.simulated_s,
        moved_bytes=float(totals["migrated_in_bytes"] + totals["migrated_out_bytes"]),
        fast_peak_bytes=float(totals["device_peak_bytes"]),
        fast_limit_bytes=float(limit),
        valid=True,
        **energy_fields(out.trace, graph, platform),
    )


def rows_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The rows as a DataFrame, one column per :class:`Row` field."""
    return pd.DataFrame([asdict(r) for r in rows], columns=[f.name for f in fields(Row)])


__all__ = [
    "CompareSettings",
    "Progress",
    "Replays",
    "Row",
    "compare",
    "plan_row",
    "rows_frame",
]
