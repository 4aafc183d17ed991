"""Every strategy for one workload on one platform: planned, validated, simulated, tabulated.

:func:`compare` is what ``tmsim compare`` runs. Strategies (:data:`STRATEGIES`):

- ``all-fast`` (the oracle: as much fast memory as the step needs), ``all-slow`` and
  ``first-touch`` (the NUMA baseline): the heuristic planners;
- ``static``, ``sync``, ``async``: AutoTM's MILP formulations, solved once as a chain
  (:func:`tmsim.planners.milp.plan_milp_chain`);
- ``2lm``: the hardware DRAM cache (:func:`tmsim.sim.cache.replay_cache`), on a platform whose
  kernels reach both tiers (a CPU with PMM): the fast tier, at the compared capacity, caches
  the slow one;
- ``unified-memory``: CUDA managed memory (:func:`tmsim.sim.unified.replay_unified`, a
  steady-state step), on a platform whose kernels reach only the fast tier (a GPU).

Each planned strategy's plan is checked by :func:`tmsim.validate.validate` and replayed by
:func:`tmsim.sim.replay`; the slowdown of every row is its simulated time over the simulated
time of ``all-fast``. A strategy that cannot run (no plan fits, the solver found none, the
platform cannot do it) gives a row with its error and no times rather than stopping the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace

import pandas as pd

from hwmodels.cache import DramCache
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.graph import Graph
from tmsim.plan import Plan
from tmsim.planners import PlanSettings, plan
from tmsim.planners.common import FAST, SLOW, fast_limit_bytes
from tmsim.planners.milp import MilpOptions, plan_milp_chain
from tmsim.planners.milp_model import Formulation
from tmsim.sim import replay
from tmsim.validate import validate

#: Every strategy, in the order the table lists them.
STRATEGIES: tuple[str, ...] = (
    "all-fast",
    "all-slow",
    "first-touch",
    "static",
    "sync",
    "async",
    "2lm",
    "unified-memory",
)
_HEURISTICS = ("all-fast", "all-slow", "first-touch")
_MILP = ("static", "sync", "async")

#: The preset whose cache parameters (line, associativity, policies, miss latency) the ``2lm``
#: strategy uses, at the compared fast-tier capacity: Cascade Lake's Memory Mode.
MEMORY_MODE_PRESET = "cascadelake-2lm"

#: ``progress(strategy, index, total)`` is called as each strategy starts.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class CompareSettings:
    """What :func:`compare` runs, with its defaults.

    ``plan``: capacity and solver settings of every planner (capacity: ``ratio`` or
    ``fast_bytes``, default the platform's fast tier); ``contention``: simulate with shared
    bandwidth (False: every kernel and copy at its own rate); ``strategies``: which to run
    (default: all that apply to the platform, :func:`applicable`); ``cache_block_bytes``:
    the 2LM simulation's block size (default: :func:`tmsim.sim.cache.replay_cache`'s).
    """

    plan: PlanSettings = field(default_factory=PlanSettings)
    contention: bool = True
    strategies: tuple[str, ...] | None = None
    cache_block_bytes: int | None = None


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
    validator (simulations: True); ``hit_rate``: the 2LM cache's hit rate.
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


def applicable(platform: Platform) -> tuple[str, ...]:
    """The strategies that make sense on ``platform``: all but ``unified-memory`` where kernels
    reach the slow tier (a CPU with PMM), and all but ``all-slow``, ``first-touch`` and ``2lm``
    where they reach only the fast tier (a GPU)."""
    if platform.cache is not None or len(platform.addressable_tiers) < 2:
        raise TmsimError(
            f"platform {platform.name!r}: compare needs two addressable tiers (for a platform "
            "in memory mode, compare the flat one: the 2lm row simulates its cache)"
        )
    if platform.kernel_tier_mask()[SLOW]:
        return tuple(s for s in STRATEGIES if s != "unified-memory")
    return tuple(s for s in STRATEGIES if s not in ("all-slow", "first-touch", "2lm"))


def memory_mode_platform(platform: Platform, cache_bytes: int) -> Platform:
    """``platform`` in memory mode: its fast tier a hardware cache of ``cache_bytes`` (rounded
    down to whole sets) in front of its slow tier, which is all kernels see.

    The cache's line, associativity, policies and miss latency are those of
    :data:`MEMORY_MODE_PRESET`. Raises :class:`TmsimError` if the capacity is below one set.
    """
    proto = load_preset(MEMORY_MODE_PRESET).cache
    assert proto is not None, f"preset {MEMORY_MODE_PRESET} has a cache"
    set_bytes = proto.line_bytes * proto.associativity
    capacity = cache_bytes // set_bytes * set_bytes
    if capacity <= 0:
        raise TmsimError(f"a {cache_bytes}-byte cache is smaller than one set ({set_bytes} B)")
    fast, slow = platform.tiers[FAST].name, platform.tiers[SLOW].name
    cache = DramCache(
        cache_tier=fast,
        backing_tier=slow,
        capacity_bytes=capacity,
        line_bytes=proto.line_bytes,
        associativity=proto.associativity,
        write_back=proto.write_back,
        write_allocate=proto.write_allocate,
        miss_latency_s=proto.miss_latency_s,
        source=f"{MEMORY_MODE_PRESET} cache at {capacity} bytes: {proto.source}",
    )
    return replace(
        platform,
        name=f"{platform.name}-2lm",
        kernel_tiers=(slow,),
        copy_paths=(),
        cache=cache,
    )


def compare(
    graph: Graph,
    platform: Platform,
    settings: CompareSettings | None = None,
    progress: Progress | None = None,
) -> list[Row]:
    """Run every strategy of ``settings`` on ``graph`` and ``platform``; one :class:`Row` each,
    in :data:`STRATEGIES` order.

    Raises :class:`TmsimError` for an unknown strategy, one that does not apply to the
    platform, a platform :func:`applicable` refuses, or a bad capacity; failures of single
    strategies are reported in their rows.
    """
    s = settings or CompareSettings()
    allowed = applicable(platform)
    wanted = allowed if s.strategies is None else tuple(s.strategies)
    for name in wanted:
        if name not in STRATEGIES:
            raise TmsimError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
        if name not in allowed:
            raise TmsimError(f"strategy {name!r} does not apply to platform {platform.name!r}")
    order = [name for name in STRATEGIES if name in wanted]
    limit = fast_limit_bytes(graph, platform, s.plan.ratio, s.plan.fast_bytes)
    cost = CostModel(graph, platform)
    milp: dict[Formulation, Plan | TmsimError] = {}
    rows: list[Row] = []
    for i, name in enumerate(order):
        if progress is not None:
            progress(name, i, len(order))
        if name in _MILP and not milp:
            milp = _milp_plans(graph, platform, s.plan, [m for m in order if m in _MILP])
        try:
            rows.append(_run(name, graph, platform, s, cost, limit, milp))
        except (TmsimError, HardwareModelError) as exc:
            rows.append(Row(name, "", "error", error=str(exc), fast_limit_bytes=limit))
    base = next((r.simulated_s for r in rows if r.strategy == "all-fast"), math.nan)
    return [replace(r, slowdown=r.simulated_s / base) for r in rows]


def _milp_plans(
    graph: Graph, platform: Platform, ps: PlanSettings, names: Sequence[str]
) -> dict[Formulation, Plan | TmsimError]:
    top = max((Formulation(n) for n in names), key=list(Formulation).index)
    options = MilpOptions(
        formulation=top,
        ratio=ps.ratio,
        fast_bytes=ps.fast_bytes,
        solver=ps.solver,
        time_limit_s=ps.time_limit_s,
        gap=ps.gap,
        window=ps.window,
    )
    try:
        return plan_milp_chain(graph, platform, options)
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
) -> Row:
    if name == "2lm":
        return _run_2lm(graph, platform, s, limit)
    if name == "unified-memory":
        return _run_unified(graph, platform, s, limit)
    if name in _HEURISTICS:
        result = plan(name, graph, platform, s.plan)
    else:
        got = milp.get(Formulation(name))
        if got is None:
            raise TmsimError(f"the MILP chain did not reach {name}")
        if isinstance(got, TmsimError):
            raise got
        result = got
    return plan_row(name, result, graph, platform, s.contention, cost)


def plan_row(
    strategy: str,
    result: Plan,
    graph: Graph,
    platform: Platform,
    contention: bool = True,
    cost: CostModel | None = None,
) -> Row:
    """The row of a plan: validated, then replayed (with ``contention``)."""
    check = validate(result, graph, platform, cost)
    trace = replay(result, graph, platform, contention=contention, cost=cost)
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
    )


def _run_2lm(graph: Graph, platform: Platform, s: CompareSettings, limit: int) -> Row:
    from tmsim.sim.cache import replay_cache

    mm = memory_mode_platform(platform, limit)
    out = replay_cache(graph, mm, block_bytes=s.cache_block_bytes, contention=s.contention)
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
    )


def _run_unified(graph: Graph, platform: Platform, s: CompareSettings, limit: int) -> Row:
    from tmsim.sim.unified import replay_unified

    # A steady-state step: weights and optimizer state start where the last step left them,
    # as in the planned strategies, whose persistent tensors end where they start.
    out = replay_unified(graph, platform, device_bytes=limit, contention=s.contention, warm=True)
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
    )


def rows_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The rows as a DataFrame, one column per :class:`Row` field."""
    return pd.DataFrame([asdict(r) for r in rows], columns=[f.name for f in fields(Row)])


__all__ = [
    "MEMORY_MODE_PRESET",
    "STRATEGIES",
    "CompareSettings",
    "Progress",
    "Row",
    "applicable",
    "compare",
    "memory_mode_platform",
    "plan_row",
    "rows_frame",
]
