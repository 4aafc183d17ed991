"""Which graph something was made for: the graph's name, how to build it again, and a
fingerprint of its content.

A :class:`GraphIdentity` is ``(name, sha256, source, args)``:

- ``sha256`` (:func:`graph_sha256`) is the SHA-256 of the canonical JSON of
  :func:`tmsim.workload.files.graph_to_dict` (sorted keys, no spaces): every tensor with its
  size, role, dtype and shape, every kernel with its operands, op, phase and FLOPs, in
  order, and the graph's name. Two graphs with the same fingerprint plan and simulate alike.
- ``source`` says how to build the graph again, ``args`` with what:

  - ``zoo``: ``{"model": str, "batch": int, ...}`` and every other argument of the zoo
    entry (:func:`tmsim.workload.zoo.entry`): a CNN's ``image_hw``, ``dtype``, ``classes``
    and its own (``batch_norm``, ``transition_channels``); a transformer's ``seq_len``,
    ``dtype``, ``attention`` and ``layers``; the graph is
    ``tmsim.workload.zoo.build(model, batch=..., ...)``.
  - ``file``: ``{"path": str}``, the graph file's path as it was given; a relative path is
    looked up beside the file that records the identity (a plan file), then as given.
  - ``unknown``: ``{}``, a graph built in memory by code that did not say how; it cannot be
    built again, only checked against a graph given explicitly.

:func:`identity_of` gives a graph's identity, recognizing an unmodified zoo build;
:func:`zoo_graph` and :func:`file_graph` build or load a graph together with its identity;
:func:`rebuild` builds the graph an identity names and :func:`check_graph` refuses a graph
whose fingerprint differs. Every problem is a one-line :class:`GraphIdentityError`.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from tmsim.errors import TmsimError
from tmsim.workload.files import graph_to_dict, load_graph
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import MODELS, NAMES, TRANSFORMERS, ModelFn, TransformerFn, build, entry
from tmsim.workload.zoo.transformer import arguments_of

#: Graphs whose fingerprint and identity are remembered (by content; see :func:`identity_of`).
CACHE_SIZE = 4
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ZOO_NAME = re.compile(r"(?P<model>[^-]+)(?:-[^-]+)*-b(?P<batch>[1-9][0-9]{0,17})")
#: Graph input tensor of every CNN of the zoo, shaped ``(batch, channels, height, width)``.
_ZOO_INPUT = "input"


class GraphIdentityError(TmsimError, ValueError):
    """An identity is malformed, names a graph that cannot be built, or does not match the
    graph at hand; the message is one line and names both fingerprints where two differ."""


class Source(StrEnum):
    """How a graph can be built again (see the module documentation)."""

    ZOO = "zoo"
    FILE = "file"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class GraphIdentity:
    """A graph's name, fingerprint and provenance; ``args`` holds JSON values only."""

    name: str
    sha256: str
    source: Source = Source.UNKNOWN
    args: Mapping[str, Any] = field(default_factory=dict)

    def how(self) -> str:
        """How the graph is built, for messages: ``zoo resnet50(batch=2, ...)``,
        ``file 'g.json'`` or ``built in memory``."""
        if self.source is Source.ZOO:
            rest = ", ".join(f"{k}={v!r}" for k, v in self.args.items() if k != "model")
            return f"zoo {self.args.get('model')}({rest})"
        if self.source is Source.FILE:
            return f"file {self.args.get('path')!r}"
        return "built in memory"


# ---------------------------------------------------------------------- fingerprints
@lru_cache(maxsize=CACHE_SIZE)
def graph_sha256(graph: Graph) -> str:
    """The SHA-256 (64 hex digits) of ``graph``'s canonical JSON (module documentation).

    Remembered for the last few graphs (equal graphs share it), so planners may ask often.
    """
    text = json.dumps(graph_to_dict(graph), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@lru_cache(maxsize=CACHE_SIZE)
def identity_of(graph: Graph) -> GraphIdentity:
    """``graph``'s identity when nothing says how it was built.

    A graph named ``MODEL-bN`` after a CNN of the zoo, equal to that model's build at batch
    ``N`` with the image size and dtype of its ``input`` tensor and every other argument at
    its default, is recorded as that zoo build (checked by building it and comparing
    fingerprints); so is a graph named ``MODEL-...-bN`` after a transformer of the zoo,
    equal to the build with the arguments its tensors and kernels show
    (:func:`tmsim.workload.zoo.transformer.arguments_of`). Any other graph gets source
    ``unknown``. Remembered for the last few graphs, like :func:`graph_sha256`.
    """
    sha = graph_sha256(graph)
    zoo = _recognize_zoo(graph)
    if zoo is not None and zoo.sha256 == sha:
        return zoo
    return GraphIdentity(graph.name, sha)


def _recognize_zoo(graph: Graph) -> GraphIdentity | None:
    m = _ZOO_NAME.fullmatch(graph.name)
    if m is None:
        return None
    if m["model"] in TRANSFORMERS:
        args = arguments_of(m["model"], graph)
        if args is None:
            return None
        try:
            _, identity = zoo_graph(m["model"], **args)
        except TmsimError:
            return None
        return identity
    if m["model"] not in MODELS or graph.name != f"{m['model']}-b{m['batch']}":
        return None
    try:
        x = graph.tensor(_ZOO_INPUT)
    except KeyError:
        return None
    if len(x.shape) != 4 or x.shape[0] != int(m["batch"]):
        return None
    try:
        _, identity = zoo_graph(
            m["model"], x.shape[0], dtype=x.dtype, image_hw=(x.shape[2], x.shape[3])
        )
    except TmsimError:
        return None
    return identity


def file_identity(graph: Graph, path: str | os.PathLike[str]) -> GraphIdentity:
    """The identity of ``graph`` as loaded from the graph file ``path`` (kept as given)."""
    return GraphIdentity(graph.name, graph_sha256(graph), Source.FILE, {"path": os.fspath(path)})


def check_graph(
    identity: GraphIdentity, graph: Graph, what: str, given: str = "the graph given"
) -> None:
    """Raise :class:`GraphIdentityError` (one line, both fingerprints) unless ``graph`` has
    ``identity``'s fingerprint; ``what`` names the thing made for ``identity`` (a plan file),
    ``given`` where ``graph`` came from."""
    sha = graph_sha256(graph)
    if sha != identity.sha256:
        raise GraphIdentityError(
            f"{what} is for graph {identity.name!r} with sha256 {identity.sha256}, but "
            f"{given} is {graph.name!r} with sha256 {sha}"
        )


# ---------------------------------------------------------------------- building again
def zoo_graph(model: str, batch: int, **options: Any) -> tuple[Graph, GraphIdentity]:
    """The training step of zoo model ``model`` at ``batch`` with the entry's keyword
    ``options`` (``dtype``, ``image_hw``, ``classes``, ``seq_len``, ``attention``, ...), and
    its identity listing every argument, defaults included.

    Raises :class:`GraphIdentityError` for an unknown model, an argument the entry does not
    take or of the wrong type, and a graph the arguments cannot build.
    """
    return _build_zoo(_zoo_args({**options, "model": model, "batch": batch}))


def _build_zoo(args: dict[str, Any]) -> tuple[Graph, GraphIdentity]:
    """Build from :func:`_zoo_args`' checked arguments."""
    model = args["model"]
    call: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}
    del call["model"]
    try:
        graph = build(model, **call)
    except TmsimError as exc:
        raise GraphIdentityError(f"zoo model {model!r} cannot be built: {exc}") from None
    except OverflowError:
        raise GraphIdentityError(
            f"zoo model {model!r} at batch {args['batch']}: a tensor is too large to describe"
        ) from None
    return graph, GraphIdentity(graph.name, graph_sha256(graph), Source.ZOO, args)


def file_graph(path: str | os.PathLike[str]) -> tuple[Graph, GraphIdentity]:
    """The graph in file ``path`` and its identity (source ``file``, the path as given).

    Raises what :func:`tmsim.workload.files.load_graph` raises.
    """
    graph = load_graph(path)
    return graph, file_identity(graph, path)


def rebuild(
    identity: GraphIdentity,
    base_dir: str | os.PathLike[str] | None = None,
    what: str = "the identity",
) -> Graph:
    """Build the graph ``identity`` names and check its fingerprint (messages call the thing
    made for it ``what``, a plan file).

    A ``file`` source's relative path is looked up in ``base_dir`` first, then as given.
    Raises :class:`GraphIdentityError` for source ``unknown``, a graph file found nowhere, a
    zoo build that fails, or a graph whose fingerprint differs from ``identity``'s; and
    what :func:`tmsim.workload.files.load_graph` raises for a file that is no graph file.
    """
    if identity.source is Source.ZOO:
        graph, _ = _build_zoo(_zoo_args(identity.args))
    elif identity.source is Source.FILE:
        graph = load_graph(_find_file(str(identity.args.get("path", "")), base_dir))
    else:
        raise GraphIdentityError(
            f"graph {identity.name!r} (sha256 {identity.sha256}) was built in memory, not from "
            "the zoo or a graph file, so it cannot be built again"
        )
    check_graph(identity, graph, what, f"the graph built from {identity.how()}")
    return graph


def _find_file(path: str, base_dir: str | os.PathLike[str] | None) -> Path:
    given = Path(path)
    tried = [Path(base_dir) / given] if base_dir is not None and not given.is_absolute() else []
    tried.append(given)
    for candidate in tried:
        if candidate.is_file():
            return candidate
    where = " or ".join(repr(str(p)) for p in dict.fromkeys(tried))
    raise GraphIdentityError(f"graph file {path!r} not found (looked for {where})")


# ---------------------------------------------------------------------- JSON
def identity_to_dict(identity: GraphIdentity) -> dict[str, Any]:
    """The JSON-ready document ``{"name", "sha256", "source", "args"}`` of ``identity``."""
    return {
        "name": identity.name,
        "sha256": identity.sha256,
        "source": identity.source.value,
        "args": copy.deepcopy(dict(identity.args)),
    }


def identity_from_dict(doc: object) -> GraphIdentity:
    """Read :func:`identity_to_dict`'s document, strictly: exactly its four fields, a name,
    64 lowercase hex digits, a known source and that source's arguments (zoo: every argument
    the entry takes, of its type; file: a path). Raises :class:`GraphIdentityError`."""
    if not isinstance(doc, dict):
        raise GraphIdentityError("must be a JSON object with name, sha256, source and args")
    keys = {"name", "sha256", "source", "args"}
    if set(doc) != keys:
        odd = sorted(set(doc) ^ keys)[0]
        raise GraphIdentityError(f"{'unknown' if odd in doc else 'missing'} field {odd!r}")
    name, sha, source, args = doc["name"], doc["sha256"], doc["source"], doc["args"]
    if not isinstance(name, str) or not name:
        raise GraphIdentityError("field 'name' must be a non-empty string")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        raise GraphIdentityError("field 'sha256' must be 64 lowercase hexadecimal digits")
    if source not in tuple(Source):
        raise GraphIdentityError(f"field 'source' must be one of {[s.value for s in Source]}")
    if not isinstance(args, dict):
        raise GraphIdentityError("field 'args' must be a JSON object")
    kind = Source(source)
    if kind is Source.ZOO:
        args = _zoo_args(args)
    elif kind is Source.FILE:
        path = args.get("path")
        if set(args) != {"path"} or not isinstance(path, str) or not path or "\0" in path:
            raise GraphIdentityError("a graph file's 'args' must be {\"path\": PATH}")
    elif args:
        raise GraphIdentityError("an unknown source takes no 'args'")
    return GraphIdentity(name, sha, kind, args)


def _zoo_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Every argument of the zoo entry ``args["model"]``, defaults filled in, as fresh JSON
    values (tuples as lists), in the entry's order after ``model``; raises
    :class:`GraphIdentityError` for an unknown model and unknown, missing or mistyped
    arguments."""
    model = args.get("model")
    if not isinstance(model, str) or model not in NAMES:
        raise GraphIdentityError(f"unknown model {model!r}; known models: {', '.join(NAMES)}")
    fn = entry(model)
    params = inspect.signature(fn).parameters
    unknown = sorted(set(args) - {"model", *params})
    if unknown:
        raise GraphIdentityError(f"zoo model {model!r} takes no argument {unknown[0]!r}")
    hints = _hints(fn)
    out: dict[str, Any] = {"model": model}
    for name, param in params.items():
        if name in args:
            value = args[name]
        elif param.default is not inspect.Parameter.empty:
            value = param.default
        else:
            raise GraphIdentityError(f"zoo model {model!r} needs argument {name!r}")
        value = list(value) if isinstance(value, (tuple, list)) else value
        if not _fits(value, hints.get(name, object)):
            raise GraphIdentityError(
                f"zoo model {model!r}: argument {name!r} must be {_type_name(hints[name])}, "
                f"got {value!r}"
            )
        out[name] = value
    return out


def _hints(fn: ModelFn | TransformerFn) -> dict[str, Any]:
    hints: dict[str, Any] = typing.get_type_hints(fn)
    return hints


def _fits(value: object, hint: Any) -> bool:
    """Whether JSON ``value`` is a ``hint`` (int, bool, str, None, unions, tuples of them);
    a bool is not an int here."""
    if hint is object:
        return True
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    origin, parts = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_fits(value, part) for part in parts)
    if origin is tuple:
        return (
            isinstance(value, list)
            and len(value) == len(parts)
            and all(_fits(v, p) for v, p in zip(value, parts, strict=True))
        )
    return False


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint)


__all__ = [
    "CACHE_SIZE",
    "GraphIdentity",
    "GraphIdentityError",
    "Source",
    "check_graph",
    "file_graph",
    "file_identity",
    "graph_sha256",
    "identity_from_dict",
    "identity_of",
    "identity_to_dict",
    "rebuild",
    "zoo_graph",
]
