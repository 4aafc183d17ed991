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
- Validity: a copy is valid from the moment it appears with current data; a kernel that
  updates a tensor in place on one tier makes the copies on every other tier stale until a move
  refreshes them. Kernels and moves read only valid copies. Weights and optimizer state must
  end the step with a valid copy on every tier of their ``initial_tiers``.
- ``fast_limit_bytes``: the fast-tier capacity the plan was made for: at every kernel the
  bytes resident on the fastest tier must not exceed it.
- ``predicted_s``: the planner's predicted step time; ``stats`` the solver's statistics.

It holds no solver objects and round-trips through JSON exactly (:func:`plan_to_dict`,
:func:`plan_from_dict`, :func:`save_plan`, :func:`load_plan`). Whether a plan obeys the rules
above for its graph and platform is :func:`tmsim.plan.validate.validate`'s business.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hwmodels.timing import MoveMode
from tmsim.errors import TmsimError
from tmsim.jsonio import read_json, write_json_atomic

FORMAT = "tmsim-plan"
VERSION = 1


class PlanFileError(TmsimError, ValueError):
    """A plan file cannot be read; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Move:
    """Copy ``tensor`` from tier ``src`` to tier ``dst`` at kernel ``kernel`` (see module doc)."""

    tensor: str
    src: str
    dst: str
    kernel: int
    mode: MoveMode


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


@dataclass(frozen=True)
class Plan:
    """A placement-and-movement plan (see the module documentation for every field)."""

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


_STAT_FLOATS = frozenset(
    f for f, kind in SolverStats.__annotations__.items() if kind in ("float", float)
)


def _floats_out(value: float) -> float | str:
    """JSON has no NaN or infinity: write them as the strings ``nan``, ``inf``, ``-inf``."""
    return value if math.isfinite(value) else str(value)


def _floats_in(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The JSON-ready document of ``plan`` (non-finite floats as strings)."""
    stats = None
    if plan.stats is not None:
        stats = {
            k: _floats_out(v) if isinstance(v, float) else v for k, v in asdict(plan.stats).items()
        }
    return {
        "format": FORMAT,
        "version": VERSION,
        "graph": plan.graph,
        "platform": plan.platform,
        "planner": plan.planner,
        "fast_limit_bytes": plan.fast_limit_bytes,
        "predicted_s": _floats_out(plan.predicted_s),
        "options": dict(plan.options),
        "initial_tiers": {t: list(tiers) for t, tiers in plan.initial_tiers.items()},
        "operand_tiers": [list(t) for t in plan.operand_tiers],
        "residency": [[r.tensor, r.tier, r.first, r.last] for r in plan.residency],
        "moves": [[m.tensor, m.src, m.dst, m.kernel, m.mode.value] for m in plan.moves],
        "stats": stats,
    }


def plan_from_dict(doc: object, source: str = "<plan>") -> Plan:
    """Rebuild a plan from :func:`plan_to_dict`'s document.

    Raises :class:`PlanFileError` naming ``source`` and the field for anything malformed.
    """
    if not isinstance(doc, dict):
        raise PlanFileError(f"{source}: top level must be a JSON object")
    if doc.get("format") != FORMAT:
        raise PlanFileError(f"{source}: field 'format' must be {FORMAT!r}")
    if doc.get("version") != VERSION:
        raise PlanFileError(
            f"{source}: field 'version' is {doc.get('version')!r}; this tmsim reads {VERSION}"
        )
    try:
        stats_doc = doc["stats"]
        stats = None
        if stats_doc is not None:
            fields: dict[str, Any] = {
                k: _floats_in(v) if k in _STAT_FLOATS else v for k, v in stats_doc.items()
            }
            stats = SolverStats(**fields)
        return Plan(
            graph=_typed(doc, "graph", str, source),
            platform=_typed(doc, "platform", str, source),
            planner=_typed(doc, "planner", str, source),
            fast_limit_bytes=_typed(doc, "fast_limit_bytes", int, source),
            operand_tiers=tuple(tuple(str(t) for t in row) for row in doc["operand_tiers"]),
            initial_tiers={
                str(k): tuple(str(x) for x in v) for k, v in doc["initial_tiers"].items()
            },
            residency=tuple(
                Residency(str(t), str(tier), int(a), int(b)) for t, tier, a, b in doc["residency"]
            ),
            moves=tuple(
                Move(str(t), str(s), str(d), int(k), MoveMode(m)) for t, s, d, k, m in doc["moves"]
            ),
            predicted_s=_floats_in(doc["predicted_s"]),
            options=dict(doc["options"]),
            stats=stats,
        )
    except KeyError as exc:
        raise PlanFileError(f"{source}: missing field {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise PlanFileError(f"{source}: malformed plan ({exc})") from None


def _typed(doc: dict[str, Any], key: str, kind: type, source: str) -> Any:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise PlanFileError(f"{source}: field {key!r} must be {kind.__name__}")
    return value


def save_plan(plan: Plan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` to ``path`` as JSON, atomically (a temporary file, then a rename)."""
    write_json_atomic(plan_to_dict(plan), path)


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan file; raises :class:`PlanFileError` naming ``path`` when malformed."""
    doc = read_json(path, PlanFileError)
    return plan_from_dict(doc, source=str(path))
