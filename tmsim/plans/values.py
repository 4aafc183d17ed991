"""Plans: where every tensor lives and when it moves, as a plain, serializable value.

A :class:`Plan` is what a planner decided, for one graph on one platform. Tiers are named as
the platform names them; kernels are indices into ``graph.kernels`` (``K`` of them).

- ``operand_tiers[k][j]``: the tier kernel ``k`` uses for its ``j``-th distinct operand (the
  order of :attr:`tmsim.workload.graph.Graph.operand_csr`). It reads inputs from there and writes
  outputs and in-place updates there.
- ``initial_tiers[t]``: for every pre-existing tensor (inputs, weights, optimizer state), the
  tiers holding a valid copy when the step starts.
- ``residency``: per tensor and tier, inclusive kernel ranges during which the tensor occupies
  memory in that tier. A tensor may be in two tiers at once (a copy). Each range starts where
  the copy appears: at the producer (in the tier the producer writes), at kernel 0 (a tier of
  ``initial_tiers``), or at the kernel of a move into that tier.
- ``moves``: copies between tiers. A *synchronous* move at kernel ``k`` runs after kernel
  ``k - 1`` ends and before kernel ``k`` starts (``k == K`` means after the last kernel); its
  source copy must be resident at ``k - 1`` or ``k`` and its destination at ``k`` (at ``K - 1``
  when ``k == K``). An *asynchronous* move at kernel ``k`` runs beside kernel ``k``; its
  source and destination are resident during ``k`` and its data may be used from ``k + 1`` on.
- ``recomputes``: kernels run again to make a dropped tensor anew. A recompute of tensor ``t``
  at kernel ``k`` runs ``t``'s producer again after the synchronous moves at ``k`` and
  before kernel ``k`` (several at one kernel run in the order listed), with the producer's
  ``j``-th distinct operand on ``tiers[j]``: it reads the producer's inputs there and writes
  ``t`` into its own tier, where a residency range of ``t`` starts at ``k``; the producer's
  other outputs are not kept (the recompute costs the whole kernel's time all the same).
  Its inputs must be resident and valid there and hold the data the producer first read (no
  kernel updated one in place since the producer ran), ``k`` must come after the producer,
  and a producer that updates a tensor in place cannot be run again.
- ``host_kernels``: the kernels the platform's host compute runs
  (:class:`hwmodels.compute.HostCompute`), in the order it runs them (empty: every kernel runs
  on the compute device). A host kernel keeps its position in the rules above (its operands
  resident and valid there, on tiers the host reaches); in time it runs on a stream of its
  own, waiting for what comes before it in plan order and reads or writes what it writes
  (or writes what it reads), and what comes after it waits for it in the same way
  (:mod:`tmsim.plans.streams`). Host kernels that touch one copy, one of them writing, must
  run in plan order, and no recompute runs a host kernel again.
- Validity: a copy is valid from the moment it appears with current data; a kernel that
  updates a tensor in place on one tier makes the copies on every other tier stale until a move
  refreshes them. Kernels and moves read only valid copies. Weights and optimizer state must
  end the step with a valid copy on every tier of their ``initial_tiers``.
- ``fast_limit_bytes``: the fast-tier capacity the plan was made for: at every kernel the
  bytes resident on the fastest tier must not exceed it.
- ``predicted_s``: the planner's predicted step time; ``stats`` the solver's statistics.
- ``graph_identity``: which graph the plan is for (:class:`~tmsim.workload.identity.GraphIdentity`:
  its name, how to build it again and its content fingerprint); ``None`` only for plans made
  in memory without one and for plan files of version 1.

It holds no solver objects; :mod:`tmsim.plans.files` writes it to JSON and reads it back
exactly. Whether a plan obeys the rules above for its graph and platform is
:func:`tmsim.plans.validate.validate`'s business; whether a graph is the one a plan was made
for, :func:`tmsim.workload.identity.check_graph`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hwmodels.display import SummaryRow, gigabytes, html_table, text_table
from hwmodels.timing import MoveMode
from tmsim.errors import TmsimError
from tmsim.workload.identity import GraphIdentity


class PlanFileError(TmsimError, ValueError):
    """A plan file cannot be read or written; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Move:
    """Copy ``tensor`` from tier ``src`` to tier ``dst`` at kernel ``kernel`` (see module doc)."""

    tensor: str
    src: str
    dst: str
    kernel: int
    mode: MoveMode


@dataclass(frozen=True, slots=True)
class Recompute:
    """Run the producer of ``tensor`` again just before kernel ``kernel``, its ``j``-th
    distinct operand on tier ``tiers[j]`` (see the module documentation)."""

    tensor: str
    kernel: int
    tiers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Residency:
    """``tensor`` occupies memory in ``tier`` from kernel ``first`` to ``last`` inclusive."""

    tensor: str
    tier: str
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class SolverStats:
    """What a solver reported; ``nan`` where a figure does not apply or is unknown.

    ``gap`` is relative: ``|objective - bound| / |objective|``. Seconds are wall time;
    ``build_s`` covers building the model and its warm start, ``solve_s`` the solver.
    ``nodes`` counts branch-and-bound nodes; ``trace`` is the last solve's progress as
    (seconds since it began, primal bound, dual bound) points, in time order (empty where the
    solver reports none). Where layout rounds lowered the limits, ``bound`` is the first
    round's (every plan that lays out is a point of that problem) while the trace is the last
    round's, whose dual bounds hold for its lowered limits only. ``stopped_on``: the limit
    that stopped the solve behind the plan short of its gap, :data:`TIME_LIMIT` (wall-clock:
    where it stops depends on the machine's load) or :data:`NODE_LIMIT` (work: the same on
    any machine), or ``""`` where it ran to the gap or to a proof; for a formulation that fell
    back to a smaller one's plan, the wall-clock limit if either solve hit it, else the node
    limit if either did.
    """

    solver: str
    status: str
    objective: float = math.nan
    bound: float = math.nan
    gap: float = math.nan
    lp_bound: float = math.nan
    build_s: float = math.nan
    solve_s: float = math.nan
    variables: int = 0
    constraints: int = 0
    rounds: int = 1
    nodes: int = 0
    trace: tuple[tuple[float, float, float], ...] = ()
    stopped_on: str = ""


#: The limits that may stop a solve short (:attr:`SolverStats.stopped_on`).
TIME_LIMIT, NODE_LIMIT = "time_limit", "node_limit"
STOPS = ("", TIME_LIMIT, NODE_LIMIT)


def stop_of(status: str) -> str:
    """The ``stopped_on`` of a solve that ended with ``status``: the limit it names, if any."""
    return status if status in (TIME_LIMIT, NODE_LIMIT) else ""


def first_stop(*stops: str) -> str:
    """Of several solves' ``stopped_on``, the one a plan built on all of them has: the
    wall-clock limit before the node limit (a load-dependent result stays marked as such)."""
    return TIME_LIMIT if TIME_LIMIT in stops else NODE_LIMIT if NODE_LIMIT in stops else ""


@dataclass(frozen=True)
class Plan:
    """A placement-and-movement plan (see the module documentation for every field).

    Construction (also through :func:`dataclasses.replace`) checks each field's type and that
    each integer (a kernel index, a byte count) fits 64 bits, and raises
    :class:`TypeError` or :class:`ValueError` naming the field; whether the plan obeys the rules
    of the module documentation for its graph and platform is the validator's business.
    """

    graph: str
    platform: str
    planner: str
    fast_limit_bytes: int
    operand_tiers: tuple[tuple[str, ...], ...]
    initial_tiers: Mapping[str, tuple[str, ...]]
    residency: tuple[Residency, ...]
    moves: tuple[Move, ...]
    predicted_s: float
    options: Mapping[str, Any] = field(default_factory=dict)
    stats: SolverStats | None = None
    graph_identity: GraphIdentity | None = None
    recomputes: tuple[Recompute, ...] = ()
    host_kernels: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("graph", "platform", "planner"):
            _check(isinstance(getattr(self, name), str), name, "a string", getattr(self, name))
        _check_count(self.fast_limit_bytes, "fast_limit_bytes")
        p = self.predicted_s
        _check(isinstance(p, int | float) and not isinstance(p, bool), "predicted_s", "a number", p)
        _check_names(self.operand_tiers, "operand_tiers")
        _check(isinstance(self.initial_tiers, Mapping), "initial_tiers", "a mapping", None)
        for tensor, tiers in self.initial_tiers.items():
            _check(isinstance(tensor, str), "initial_tiers", "keyed by tensor names", tensor)
            _check_strings(tiers, f"initial_tiers[{tensor!r}]")
        _check_items(self.residency, Residency, "residency")
        for i, r in enumerate(self.residency):
            _check_strings((r.tensor, r.tier), f"residency[{i}]")
            _check_count(r.first, f"residency[{i}].first")
            _check_count(r.last, f"residency[{i}].last")
        _check_items(self.moves, Move, "moves")
        for i, m in enumerate(self.moves):
            _check_strings((m.tensor, m.src, m.dst), f"moves[{i}]")
            _check_count(m.kernel, f"moves[{i}].kernel")
            _check(isinstance(m.mode, MoveMode), f"moves[{i}].mode", "a MoveMode", m.mode)
        _check_items(self.recomputes, Recompute, "recomputes")
        for i, c in enumerate(self.recomputes):
            _check_strings((c.tensor,), f"recomputes[{i}]")
            _check_strings(c.tiers, f"recomputes[{i}].tiers")
            _check_count(c.kernel, f"recomputes[{i}].kernel")
        _check(isinstance(self.host_kernels, tuple), "host_kernels", "a tuple", self.host_kernels)
        for i, k in enumerate(self.host_kernels):
            _check_count(k, f"host_kernels[{i}]")
        _check(isinstance(self.options, Mapping), "options", "a mapping", self.options)
        stats = self.stats
        _check(stats is None or isinstance(stats, SolverStats), "stats", "SolverStats", stats)
        ident = self.graph_identity
        _check(
            ident is None or isinstance(ident, GraphIdentity),
            "graph_identity",
            "a GraphIdentity",
            ident,
        )

    def summary_rows(self) -> list[SummaryRow]:
        """Headline numbers as ``(label, value)`` text: the step time predicted, the fast
        tier's limit, the moves by mode and how the solver ended (for a MILP plan)."""
        asynchronous = sum(m.mode is MoveMode.ASYNC for m in self.moves)
        rows = [
            ("graph", self.graph),
            ("platform", self.platform),
            ("predicted step", f"{self.predicted_s:.6g} s"),
            ("fast limit", gigabytes(self.fast_limit_bytes)),
            (
                "moves",
                f"{len(self.moves):,} ({len(self.moves) - asynchronous:,} sync, "
                f"{asynchronous:,} async)",
            ),
        ]
        if self.recomputes:
            rows.append(("recomputes", f"{len(self.recomputes):,}"))
        if self.host_kernels:
            rows.append(("host kernels", f"{len(self.host_kernels):,}"))
        if self.stats is not None:
            s = self.stats
            gap = "n/a" if math.isnan(s.gap) else f"{100 * s.gap:.2f}%"
            rows.append(
                (
                    "solver",
                    f"{s.solver} {s.status}, gap {gap}, {s.build_s + s.solve_s:.2f} s, "
                    f"{s.variables:,} variables",
                )
            )
        return rows

    def __repr__(self) -> str:
        return text_table(f"Plan {self.planner!r}", self.summary_rows())

    def _repr_html_(self) -> str:
        return html_table(f"Plan {self.planner}", self.summary_rows())

    def with_identity(self, identity: GraphIdentity) -> Plan:
        """This plan recorded as made for ``identity`` (a caller that knows how the graph was
        built, say from a file, says so here).

        Raises :class:`PlanFileError` if ``identity`` names another graph than the plan, or
        has another fingerprint than the identity the plan carries already.
        """
        if identity.name != self.graph:
            raise PlanFileError(
                f"the plan is for graph {self.graph!r}, not {identity.name!r} of the identity"
            )
        old = self.graph_identity
        if old is not None and old.sha256 != identity.sha256:
            raise PlanFileError(
                f"the plan is for graph {self.graph!r} with sha256 {old.sha256}, not "
                f"{identity.sha256}"
            )
        return replace(self, graph_identity=identity)


#: The largest integer a plan holds: kernel indices and byte counts are 64-bit integers.
_INT64_MAX = 2**63 - 1


def _check(ok: bool, field_name: str, what: str, value: object) -> None:
    if not ok:
        raise TypeError(f"Plan.{field_name} must be {what}, got {value!r:.80}")


def _check_count(value: object, field_name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"Plan.{field_name} must be an int, got {value!r:.80}")
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise ValueError(f"Plan.{field_name} must fit a 64-bit integer, got {value}")


def _check_strings(values: object, field_name: str) -> None:
    ok = isinstance(values, tuple) and all(isinstance(v, str) for v in values)
    _check(ok, field_name, "a tuple of names", values)


def _check_names(rows: object, field_name: str) -> None:
    _check(isinstance(rows, tuple), field_name, "a tuple of tuples of names", rows)
    assert isinstance(rows, tuple)
    for k, row in enumerate(rows):
        _check_strings(row, f"{field_name}[{k}]")


def _check_items(items: object, kind: type, field_name: str) -> None:
    _check(isinstance(items, tuple), field_name, f"a tuple of {kind.__name__}", items)
    assert isinstance(items, tuple)
    for i, item in enumerate(items):
        _check(isinstance(item, kind), f"{field_name}[{i}]", f"a {kind.__name__}", item)
