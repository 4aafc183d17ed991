"""A plan for a graph on a platform, and its replay: :func:`plan`, :func:`simulate`, :class:`Run`.

:func:`plan` runs one planner strategy (the names of ``tmsim plan --mode`` and
:data:`tmsim.strategies.STRATEGIES`) with the command line's settings as keywords;
:func:`simulate` checks the plan with the validator, replays it on the discrete-event model
and returns a :class:`Run`: its step time, its trace as DataFrames, its timeline.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hwmodels.display import SummaryRow, gigabytes, html_table, text_table
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from tmsim.api.inputs import FastCapacity, capacity, expect, load_graph
from tmsim.api.measured import ProfileLike, plan_costs, profile_of
from tmsim.api.traces import draw_timeline, trace_summary
from tmsim.capacity import fast_limit_bytes
from tmsim.cost import CostModel
from tmsim.energy import StepEnergy, step_energy
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel, parse_level
from tmsim.planners import plan as run_planner
from tmsim.planners.milp import Formulation, plan_milp_chain
from tmsim.planners.settings import PlanSettings
from tmsim.plans.validate import Validation
from tmsim.plans.validate import validate as validate_plan
from tmsim.plans.values import Plan
from tmsim.sim import Trace, replay
from tmsim.sim.beside import beside_for
from tmsim.strategies import check_applies
from tmsim.workload.graph import Graph
from tmsim.workload.identity import check_graph, file_identity

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The settings :func:`plan` takes as keywords: every field of :class:`PlanSettings` but the
#: capacity, which is ``fast``.
SETTING_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PlanSettings) if f.name != "capacity")
#: AutoTM's MILP formulations (and the interference-aware one), smallest first.
MILP_NAMES: tuple[str, ...] = tuple(f.value for f in Formulation)


def plan(
    graph: Graph,
    platform: Platform,
    strategy: str = "sync",
    *,
    fast: FastCapacity = None,
    settings: PlanSettings | None = None,
    graph_file: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Plan:
    """The plan of planner ``strategy`` (a heuristic or a MILP formulation: ``all-fast``,
        ``all-slow``, ``first-touch``, ``greedy``, ``vdnn``, ``static``, ``sync``, ``async``,
        ``async-aware``) for ``graph`` on ``platform`` with the fast tier at ``fast`` (see
        :func:`tmsim.api.inputs.capacity`) and the other :class:`PlanSettings` as keywords
        (``time_limit_s``, ``gap``, ``window``, ``node_limit``, ``solver``, ``profile``: a file
        of measured kernel times ...), or every setting at once as ``settings`` (its capacity
        included). ``graph_file``: the file ``graph`` was loaded from (as this process finds it:
    a relative path from the working directory), which must hold ``graph`` and the plan then names
        (with the graph's fingerprint) so that its graph can be loaded again from the plan alone
        (:func:`tmsim.api.graphs.graph_of`).

        Raises :class:`TmsimError` for an unknown strategy or setting, a setting out of range, a
        strategy that does not apply to ``platform``, a ``graph_file`` that cannot be read or
        holds another graph, and a plan that cannot be made (nothing fits, the solver found none).

        >>> import tmsim
        >>> p = tmsim.plan(tmsim.graph("vgg19", batch=16), tmsim.platform(), "greedy", fast="4:1")
        >>> p.planner, p.predicted_s > 0
        ('greedy', True)
        >>> tmsim.plan(tmsim.graph("vgg19", batch=16), tmsim.platform(), "sync", gapp=0.1)
        Traceback (most recent call last):
        tmsim.errors.TmsimError: unknown planner setting 'gapp'; settings: solver, ...
    """
    check_inputs(graph, platform)
    expect(strategy, str, "strategy", "a strategy's name")
    if graph_file is not None:
        expect(graph_file, (str, os.PathLike), "graph_file", "the graph's file path")
        # the file must hold this graph, or the plan would name a file it cannot be built from
        check_graph(
            file_identity(load_graph(graph_file), graph_file),
            graph,
            f"graph_file {os.fspath(graph_file)}",
        )
    check_applies(strategy, platform)  # as the command line and compare refuse it
    chosen = plan_settings(settings, fast, options)
    try:
        made = run_planner(strategy, graph, platform, chosen)
    except HardwareModelError as exc:
        raise TmsimError(str(exc)) from None
    return made if graph_file is None else made.with_identity(file_identity(graph, graph_file))


def plan_chain(
    graph: Graph,
    platform: Platform,
    last: str | Sequence[str] = "async",
    *,
    settings: PlanSettings | None = None,
    fast: FastCapacity = None,
    **options: Any,
) -> dict[str, Plan | TmsimError]:
    """AutoTM's MILP formulations solved as one chain, each from the plan of the one it
    contains (``static``, then ``sync``, then ``async`` or ``async-aware``), up to ``last``
    (a name, or several that share the chain's smaller formulations): each formulation solved
    by name, its plan or the error that stopped it. ``settings`` gives every setting at once
    (its capacity included); otherwise ``fast`` and the keywords, as :func:`plan` takes them.

    Raises :class:`TmsimError` for an unknown formulation or setting, both ``settings`` and
    keywords, and a platform the MILP cannot plan for; a formulation that finds no plan is
    reported by its error.

    >>> import tmsim
    >>> g, p = tmsim.graph("vgg19", batch=4), tmsim.platform()
    >>> chain = tmsim.plan_chain(g, p, "sync", fast="4:1", time_limit_s=None)
    >>> list(chain), chain["sync"].predicted_s <= chain["static"].predicted_s
    (['static', 'sync'], True)
    """
    check_inputs(graph, platform)
    wanted = [last] if isinstance(last, str) else list(last)
    for name in wanted:
        expect(name, str, "a formulation", f"one of {', '.join(MILP_NAMES)}")
        if name not in MILP_NAMES:
            raise TmsimError(
                f"unknown MILP formulation {name!r}; formulations: {', '.join(MILP_NAMES)}"
            )
    chosen = plan_settings(settings, fast, options)
    try:
        chain = plan_milp_chain(graph, platform, chosen, [Formulation(n) for n in wanted])
    except HardwareModelError as exc:
        raise TmsimError(str(exc)) from None
    return {f.value: chain[f] for f in Formulation if f in chain}


def fast_limit(graph: Graph, platform: Platform, fast: FastCapacity = None) -> int:
    """The fastest tier's capacity in bytes that plans of ``graph`` get at ``fast`` (see
    :func:`plan`; None: the tier's own capacity). Raises :class:`TmsimError` for a bad
    capacity.

    >>> import tmsim
    >>> g = tmsim.graph("vgg19", batch=4)
    >>> tmsim.fast_limit(g, tmsim.platform(), "1:1") == g.peak_live_bytes // 2
    True
    """
    check_inputs(graph, platform)
    return fast_limit_bytes(graph, platform, capacity(fast))


def plan_settings(
    settings: PlanSettings | None, fast: FastCapacity, options: dict[str, Any]
) -> PlanSettings:
    """``settings``, or the settings ``fast`` and ``options`` give (not both)."""
    if settings is not None:
        expect(settings, PlanSettings, "settings", "a PlanSettings")
        if fast is not None or options:
            raise TmsimError("give settings or fast and setting keywords, not both")
        return settings
    unknown = [k for k in options if k not in SETTING_NAMES]
    if unknown:
        raise TmsimError(
            f"unknown planner setting {unknown[0]!r}; settings: {', '.join(SETTING_NAMES)}"
        )
    if "profile" in options:
        options = {**options, "profile": profile_of(options["profile"])}
    try:
        return PlanSettings(capacity=capacity(fast), **options)
    except TmsimError as exc:
        raise TmsimError(f"bad planner setting: {exc}") from None
    except TypeError as exc:  # a value of a type the settings cannot compare or convert
        raise TmsimError(f"bad planner setting: {exc}") from None


def simulate(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    *,
    interference: InterferenceLevel | str = DEFAULT_LEVEL,
    check: bool = True,
    profile: ProfileLike = None,
    near: str | os.PathLike[str] | None = None,
) -> Run:
    """Replay ``plan`` for ``graph`` on ``platform`` at the ``interference`` level (``none``:
    the cost model's world; ``bandwidth``: tiers, links and copy engines shared; ``controller``,
    the default: the memory controller and copy threads as well) and return the :class:`Run`.

    The plan must be the one made for ``graph`` (its fingerprint, or its name for a plan that
    carries none) on ``platform`` (its name), and pass the validator (:func:`validate`; with
    ``check=False`` it is replayed as written, e.g. on a variant of the platform it was
    checked on). Kernels take the measured times of ``profile`` (a profile file), else of the
    one the plan was made with (:func:`tmsim.api.measured.plan_costs`; ``near``: the plan
    file's folder). Raises :class:`TmsimError` otherwise, naming the first problem.

    >>> import tmsim
    >>> g, p = tmsim.graph("vgg19", batch=16), tmsim.platform()
    >>> run = tmsim.simulate(tmsim.plan(g, p, "all-slow"), g, p)
    >>> run.step_time_s > 0, list(run.records.columns[:3])
    (True, ['kind', 'name', 'kernel'])
    """
    expect(plan, Plan, "plan", "a Plan (from tmsim.plan)")
    check_inputs(graph, platform)
    level = parse_level(interference)
    if plan.platform != platform.name:
        raise TmsimError(f"the plan is for platform {plan.platform!r}, not {platform.name!r}")
    if plan.graph_identity is not None:
        check_graph(plan.graph_identity, graph, "the plan")
    elif plan.graph != graph.name:
        raise TmsimError(f"the plan is for graph {plan.graph!r}, not {graph.name!r}")
    costs = plan_costs(plan, graph, platform, profile, near)
    if check:
        check_plan(plan, graph, platform, costs.checked).raise_if_invalid(shown=1)
    trace = replay(plan, graph, platform, cost=costs.replayed, level=level)
    energy = step_energy(trace, graph, platform) if platform.energy is not None else None
    return Run(plan, trace, energy)


def validate(
    plan: Plan,
    graph: Graph,
    platform: Platform,
    *,
    profile: ProfileLike = None,
    near: str | os.PathLike[str] | None = None,
) -> Validation:
    """Check ``plan`` against every rule a plan must keep for ``graph`` on ``platform`` (names,
    tiers kernels may reach, capacities at every kernel, copies along existing paths, its
    predicted time against the cost model it was made with, measured times included: of the
    profile it records, found beside ``near`` first, or given as ``profile``) with the
    independent validator; the result says ``ok``, lists the ``errors``, and counts
    ``moved_bytes`` and ``fast_peak_bytes``.

    >>> import tmsim
    >>> g, p = tmsim.graph("vgg19", batch=4), tmsim.platform()
    >>> tmsim.validate(tmsim.plan(g, p, "greedy", fast="4:1"), g, p).ok
    True
    """
    expect(plan, Plan, "plan", "a Plan (from tmsim.plan)")
    check_inputs(graph, platform)
    costs = plan_costs(plan, graph, platform, profile, near)
    return check_plan(plan, graph, platform, costs.checked)


def check_plan(plan: Plan, graph: Graph, platform: Platform, cost: CostModel) -> Validation:
    """The validator's verdict on ``plan``, charged with the costs it was planned with."""
    return validate_plan(plan, graph, platform, cost, beside_for(plan, cost))


def check_inputs(graph: object, platform: object) -> None:
    """Raise :class:`TmsimError` unless ``graph`` is a :class:`Graph` and ``platform`` a
    :class:`Platform` (from :func:`tmsim.graph` and :func:`tmsim.platform`)."""
    expect(graph, Graph, "graph", "a Graph (from tmsim.graph)")
    expect(platform, Platform, "platform", "a Platform (from tmsim.platform)")


@dataclass(frozen=True)
class Run:
    """One replayed step: the ``plan`` and its ``trace`` (:class:`tmsim.sim.Trace`).

    ``step_time_s`` is the simulated step, ``predicted_s`` what the planner predicted;
    ``records`` (one row per kernel and copy: start, end, tiers, bytes, time lost and why)
    and ``occupancy`` (fast-tier bytes over time) are the trace as DataFrames, the columns of
    ``tmsim simulate --trace``'s Parquet file; ``energy``: the step's energy and wear
    (:func:`tmsim.energy.step_energy`) where the platform has an energy model, else None.
    """

    plan: Plan
    trace: Trace
    energy: StepEnergy | None = None

    @property
    def step_time_s(self) -> float:
        """The simulated step time."""
        return self.trace.simulated_s

    @property
    def predicted_s(self) -> float:
        """The step time the plan's cost model predicted."""
        return self.trace.predicted_s

    @property
    def records(self) -> pd.DataFrame:
        """Every kernel and copy of the step, one row each (:meth:`Trace.to_frame`)."""
        return self.trace.to_frame().records

    @property
    def occupancy(self) -> pd.DataFrame:
        """Fast-tier bytes in use over the step (:meth:`Trace.to_frame`)."""
        return self.trace.to_frame().occupancy

    def summary(self) -> dict[str, Any]:
        """Headline numbers as JSON-ready values (what ``tmsim simulate --json`` prints),
        with the energy and wear where known (:func:`tmsim.api.traces.trace_summary`)."""
        return trace_summary(self.trace, self.energy)

    def timeline(
        self, path: str | os.PathLike[str] | None = None, *, title: str | None = None
    ) -> Figure:
        """The step as a Gantt chart with the fast tier's occupancy beneath; also saved to
        ``path`` (``.png``, ``.pdf`` or ``.svg``) when given. Raises :class:`TmsimError` for
        another suffix or a path that cannot be written."""
        return draw_timeline(self.trace, path, title)

    def perfetto(self, path: str | os.PathLike[str], graph: Graph | None = None) -> Path:
        """Write the step as a Chrome trace-event file for ui.perfetto.dev
        (:mod:`tmsim.sim.perfetto`): kernels, copies and links on their tracks and, given the
        plan's ``graph``, each tier's bytes in use and every tensor's residency. Returns the
        path; raises :class:`TmsimError` for a graph that is not the plan's or a path that
        cannot be written."""
        from tmsim.sim.perfetto import save_trace_events, trace_events

        plan = self.plan if graph is not None else None
        return save_trace_events(path, [trace_events(self.trace, plan, graph, self.plan.planner)])

    def summary_rows(self) -> list[SummaryRow]:
        """Headline numbers as ``(label, value)`` text."""
        s = self.summary()
        ratio = s["ratio"]
        return [
            ("graph", s["graph"]),
            ("platform", s["platform"]),
            ("interference", s["interference"]),
            ("simulated step", f"{s['simulated_s']:.6g} s"),
            (
                "predicted step",
                f"{s['predicted_s']:.6g} s"
                + (f" (simulated/predicted {ratio:.4f})" if ratio is not None else ""),
            ),
            (
                "moves",
                f"{s['moves']:,} ({s['sync_moves']:,} sync, {s['async_moves']:,} async), "
                f"{gigabytes(s['moved_bytes'])}",
            ),
            (
                "fast peak",
                f"{gigabytes(s['fast_peak_bytes'])} of {gigabytes(s['fast_limit_bytes'])}",
            ),
        ]

    def __repr__(self) -> str:
        return text_table(f"Run of plan {self.trace.planner!r}", self.summary_rows())

    def _repr_html_(self) -> str:
        return html_table(f"Run of plan {self.trace.planner}", self.summary_rows())


__all__ = [
    "MILP_NAMES",
    "SETTING_NAMES",
    "Run",
    "check_inputs",
    "fast_limit",
    "plan",
    "plan_chain",
    "plan_settings",
    "simulate",
    "validate",
]
