"""Plan files: a :class:`~tmsim.plans.values.Plan` as JSON and back, exactly
(:func:`plan_to_dict`, :func:`plan_from_dict`, :func:`save_plan`, :func:`load_plan`).

Plan files (version 4) are a JSON object with exactly these fields::

    {"format": "tmsim-plan", "version": 4,
     "graph": {"name": str, "sha256": str, "source": "zoo" | "file" | "unknown", "args": {...}},
     "platform": str, "planner": str, "fast_limit_bytes": int, "predicted_s": number,
     "options": {...}, "initial_tiers": {tensor: [tier, ...]},
     "operand_tiers": [[tier, ...], ...], "residency": [[tensor, tier, first, last], ...],
     "moves": [[tensor, src, dst, kernel, "sync" | "async"], ...],
     "recomputes": [[tensor, kernel, [tier, ...]], ...], "host_kernels": [kernel, ...],
     "stats": {...} | null}

Version 3 files have no ``"host_kernels"`` (their plans run every kernel on the compute
device); version 2 files no ``"recomputes"`` either (their plans recompute nothing); version 1
files, whose ``"graph"`` is also the graph's name alone, are still read (their plans have no
``graph_identity``). Integers are JSON integers in ``[0, 2**63)``, never booleans; numbers
that may be non-finite are written as the strings ``"nan"``, ``"inf"``, ``"-inf"``.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, fields
from typing import Any

from hwmodels.timing import MoveMode
from tmsim.jsonio import read_json, write_json_atomic
from tmsim.plans.values import (
    STOPS,
    Move,
    Plan,
    PlanFileError,
    Recompute,
    Residency,
    SolverStats,
)
from tmsim.workload.identity import (
    GraphIdentityError,
    identity_from_dict,
    identity_to_dict,
)

FORMAT = "tmsim-plan"
VERSION = 4
#: Plan file versions this tmsim reads.
READS = (1, 2, 3, 4)
#: Integers in plan files lie in ``[0, MAX_INT)``, so they fit the validator's int64 arrays.
MAX_INT = 2**63
_FIELDS = (
    "format",
    "version",
    "graph",
    "platform",
    "planner",
    "fast_limit_bytes",
    "predicted_s",
    "options",
    "initial_tiers",
    "operand_tiers",
    "residency",
    "moves",
    "recomputes",
    "host_kernels",
    "stats",
)
#: The first version with each field that older files do not have.
_SINCE = {"recomputes": 3, "host_kernels": 4}
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


#: SolverStats field -> its annotation ("str", "float" or "int").
_STAT_TYPES = {f.name: str(f.type) for f in fields(SolverStats)}


def _floats_out(value: float) -> float | str:
    """JSON has no NaN or infinity: write them as the strings ``nan``, ``inf``, ``-inf``."""
    return value if math.isfinite(value) else str(value)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The JSON-ready document of ``plan`` (non-finite floats as strings).

    Raises :class:`PlanFileError` if the plan has no graph identity or one for another graph
    name: every plan file says which graph it is for.
    """
    identity = plan.graph_identity
    if identity is None:
        raise PlanFileError(
            f"the plan for graph {plan.graph!r} does not say which graph it is for; "
            "give it one with Plan.with_identity (tmsim's planners always do)"
        )
    if identity.name != plan.graph:
        raise PlanFileError(
            f"the plan is for graph {plan.graph!r} but its identity names {identity.name!r}"
        )
    stats = None
    if plan.stats is not None:
        stats = {
            k: _floats_out(v) if isinstance(v, float) else v for k, v in asdict(plan.stats).items()
        }
        stats["trace"] = [[_floats_out(v) for v in point] for point in plan.stats.trace]
    return {
        "format": FORMAT,
        "version": VERSION,
        "graph": identity_to_dict(identity),
        "platform": plan.platform,
        "planner": plan.planner,
        "fast_limit_bytes": plan.fast_limit_bytes,
        "predicted_s": _floats_out(plan.predicted_s),
        "options": dict(plan.options),
        "initial_tiers": {t: list(tiers) for t, tiers in plan.initial_tiers.items()},
        "operand_tiers": [list(t) for t in plan.operand_tiers],
        "residency": [[r.tensor, r.tier, r.first, r.last] for r in plan.residency],
        "moves": [[m.tensor, m.src, m.dst, m.kernel, m.mode.value] for m in plan.moves],
        "recomputes": [[r.tensor, r.kernel, list(r.tiers)] for r in plan.recomputes],
        "host_kernels": list(plan.host_kernels),
        "stats": stats,
    }


class _Bad(Exception):
    """A malformed field: the message says where and what (turned into PlanFileError)."""


def plan_from_dict(doc: object, source: str = "<plan>") -> Plan:
    """Rebuild a plan from :func:`plan_to_dict`'s document (or an older version's).

    Strict: exactly the fields of the module documentation, each of its type (no booleans for
    integers, no strings for names' lists, integers in ``[0, 2**63)``), moves of a known
    mode, a well-formed graph identity. Raises :class:`PlanFileError` naming ``source`` and
    the field for anything malformed; whether the names and kernels fit a graph and
    platform is left to the validator.
    """
    if not isinstance(doc, dict):
        raise PlanFileError(f"{source}: top level must be a JSON object")
    if doc.get("format") != FORMAT:
        raise PlanFileError(f"{source}: field 'format' must be {FORMAT!r}")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in READS:
        raise PlanFileError(
            f"{source}: field 'version' is {version!r}; this tmsim reads "
            f"{', '.join(map(str, READS))}"
        )
    wanted = tuple(k for k in _FIELDS if version >= _SINCE.get(k, 1))
    missing = [k for k in wanted if k not in doc]
    if missing:
        raise PlanFileError(f"{source}: missing field {missing[0]!r}")
    unknown = sorted(set(doc) - set(wanted))
    if unknown:
        raise PlanFileError(f"{source}: unknown field {unknown[0]!r}")
    try:
        if version == 1:
            graph, identity = _name(doc["graph"], "graph"), None
        else:
            try:
                identity = identity_from_dict(doc["graph"])
            except GraphIdentityError as exc:
                raise _Bad(f"field 'graph': {exc}") from None
            graph = identity.name
        return Plan(
            graph=graph,
            platform=_name(doc["platform"], "platform"),
            planner=_name(doc["planner"], "planner"),
            fast_limit_bytes=_count(doc["fast_limit_bytes"], "fast_limit_bytes"),
            operand_tiers=tuple(
                _names(row, f"operand_tiers[{k}]")
                for k, row in enumerate(_list(doc["operand_tiers"], "operand_tiers"))
            ),
            initial_tiers={
                t: _names(tiers, f"initial_tiers[{t!r}]")
                for t, tiers in _object(doc["initial_tiers"], "initial_tiers").items()
            },
            residency=tuple(
                _residency(r, f"residency[{i}]")
                for i, r in enumerate(_list(doc["residency"], "residency"))
            ),
            moves=tuple(
                _move(m, f"moves[{i}]") for i, m in enumerate(_list(doc["moves"], "moves"))
            ),
            recomputes=tuple(
                _recompute(r, f"recomputes[{i}]")
                for i, r in enumerate(_list(doc.get("recomputes", []), "recomputes"))
            ),
            host_kernels=tuple(
                _count(k, f"host_kernels[{i}]")
                for i, k in enumerate(_list(doc.get("host_kernels", []), "host_kernels"))
            ),
            predicted_s=_number(doc["predicted_s"], "predicted_s"),
            options=_object(doc["options"], "options"),
            stats=None if doc["stats"] is None else _stats(doc["stats"]),
            graph_identity=identity,
        )
    except _Bad as exc:
        raise PlanFileError(f"{source}: {exc}") from None


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"field {where!r} must be a list")
    return value


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"field {where!r} must be a JSON object")
    return value


def _name(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _Bad(f"field {where!r} must be a string, got {value!r}")
    return value


def _names(value: object, where: str) -> tuple[str, ...]:
    return tuple(_name(v, where) for v in _list(value, where))


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_INT:
        raise _Bad(f"field {where!r} must be an integer in [0, 2**63), got {value!r}")
    return value


def _number(value: object, where: str) -> float:
    """A JSON number or one of the strings ``nan``, ``inf``, ``-inf``."""
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"field {where!r} must be a number, 'nan', 'inf' or '-inf', got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise _Bad(f"field {where!r} is too large for a float: {value!r}") from None


def _row(value: object, where: str, n: int) -> list[Any]:
    row = _list(value, where)
    if len(row) != n:
        raise _Bad(f"field {where!r} must list {n} values, got {len(row)}")
    return row


def _residency(value: object, where: str) -> Residency:
    t, tier, first, last = _row(value, where, 4)
    return Residency(_name(t, where), _name(tier, where), _count(first, where), _count(last, where))


def _move(value: object, where: str) -> Move:
    t, src, dst, kernel, mode = _row(value, where, 5)
    if mode not in tuple(MoveMode):
        raise _Bad(f"field {where!r}: mode must be 'sync' or 'async', got {mode!r}")
    return Move(
        _name(t, where), _name(src, where), _name(dst, where), _count(kernel, where), MoveMode(mode)
    )


def _recompute(value: object, where: str) -> Recompute:
    t, kernel, tiers = _row(value, where, 3)
    return Recompute(_name(t, where), _count(kernel, where), _names(tiers, where))


def _stats(value: object) -> SolverStats:
    doc = _object(value, "stats")
    unknown = sorted(set(doc) - set(_STAT_TYPES))
    if unknown:
        raise _Bad(f"field 'stats' has unknown field {unknown[0]!r}")
    out: dict[str, Any] = {}
    for key, item in doc.items():
        where = f"stats.{key}"
        kind = _STAT_TYPES[key]
        if kind == "float":
            out[key] = _number(item, where)
        elif kind == "int":
            out[key] = _count(item, where)
        elif key == "stopped_on":
            if item not in STOPS:
                raise _Bad(f"field {where!r} must be one of {', '.join(map(repr, STOPS))}")
            out[key] = item
        elif key == "trace":
            rows = [_row(p, f"{where}[{i}]", 3) for i, p in enumerate(_list(item, where))]
            out[key] = tuple(
                tuple(_number(v, f"{where}[{i}]") for v in row) for i, row in enumerate(rows)
            )
        else:
            out[key] = _name(item, where)
    try:
        return SolverStats(**out)
    except TypeError:
        raise _Bad("field 'stats' must name at least 'solver' and 'status'") from None


def save_plan(plan: Plan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` to ``path`` as JSON, atomically (a temporary file, then a rename).

    Raises :class:`PlanFileError` as :func:`plan_to_dict` does, ``OSError`` if it cannot write.
    """
    write_json_atomic(plan_to_dict(plan), path)


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan file; raises :class:`PlanFileError` naming ``path`` when it is not a
    well-formed plan file (not UTF-8, not JSON, nested too deeply, an integer of too many
    digits, or as :func:`plan_from_dict` says), and ``OSError`` when it cannot be read."""
    try:
        doc = read_json(path, PlanFileError)
    except PlanFileError:
        raise
    except UnicodeDecodeError:
        raise PlanFileError(f"{path}: not a plan file: not UTF-8 text") from None
    except RecursionError:
        raise PlanFileError(f"{path}: not a plan file: JSON nested too deeply") from None
    except ValueError as exc:  # a number JSON allows but Python will not convert
        raise PlanFileError(f"{path}: not a plan file: {exc}") from None
    return plan_from_dict(doc, source=str(path))
