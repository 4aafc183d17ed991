"""Graph files: a versioned JSON schema, with an exact round trip.

Schema (version 1)::

    {"format": "tmsim-graph", "version": 1, "name": "...",
     "tensors": [{"name": str, "size_bytes": int, "role": str,
                  "dtype": str = "fp32", "shape": [int, ...] = []}, ...],
     "kernels": [{"name": str, "op": str, "phase": str, "inputs": [str, ...],
                  "outputs": [str, ...], "updates": [str, ...] = [], "flops": int = 0}, ...],
     "math": {"conv_fp32" | "matmul_fp32": "fp32" | "tf32"} = {}}

Fields with ``=`` are optional and take that default; unknown fields are rejected so a typo
is never silently ignored. Integers are JSON integers, never ``true`` or ``false`` (Python
counts a bool as an int; this reader does not), and the file is strict JSON
(:func:`tmsim.jsonio.read_json`). Sizes and FLOPs must keep under the bound of
:data:`~tmsim.workload.tensors.MAX_GRAPH_BYTES` (2**62 bytes and 2**62 FLOPs in all), as
every :class:`~tmsim.workload.graph.Graph` must. Every problem raises
:class:`~tmsim.errors.GraphFileError` with a one-line message naming the file and the field
or tensor.
"""

from __future__ import annotations

import os
from typing import Any

from tmsim.errors import GraphError, GraphFileError
from tmsim.jsonio import read_json, write_json_atomic
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

FORMAT = "tmsim-graph"
VERSION = 1

_TENSOR_FIELDS = {"name": str, "size_bytes": int, "role": str, "dtype": str, "shape": list}
_TENSOR_REQUIRED = ("name", "size_bytes", "role")
_KERNEL_FIELDS = {
    "name": str,
    "op": str,
    "phase": str,
    "inputs": list,
    "outputs": list,
    "updates": list,
    "flops": int,
}
_KERNEL_REQUIRED = ("name", "op", "phase", "inputs", "outputs")


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The JSON-ready document of ``graph`` (schema above; defaults omitted)."""
    tensors = []
    for t in graph.tensors:
        doc: dict[str, Any] = {"name": t.name, "size_bytes": t.size_bytes, "role": t.role.value}
        if t.dtype != "fp32":
            doc["dtype"] = t.dtype
        if t.shape:
            doc["shape"] = list(t.shape)
        tensors.append(doc)
    kernels = []
    for k in graph.kernels:
        kdoc: dict[str, Any] = {
            "name": k.name,
            "op": k.op,
            "phase": k.phase.value,
            "inputs": list(k.inputs),
            "outputs": list(k.outputs),
        }
        if k.updates:
            kdoc["updates"] = list(k.updates)
        if k.flops:
            kdoc["flops"] = k.flops
        kernels.append(kdoc)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "name": graph.name,
        "tensors": tensors,
        "kernels": kernels,
    }
    if graph.math:
        doc["math"] = dict(graph.math)
    return doc


def save_graph(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` to ``path`` as JSON, atomically (a temporary file, then a rename).

    Raises ``OSError`` if the file cannot be written."""
    write_json_atomic(graph_to_dict(graph), path, GraphFileError)


def load_graph(path: str | os.PathLike[str]) -> Graph:
    """Read and validate a graph file.

    Raises :class:`GraphFileError` naming ``path`` when the file is not JSON, is not a tmsim
    graph of a supported version, has a missing, unknown or mistyped field, or describes an
    invalid graph; ``OSError`` when it cannot be read at all.
    """
    doc = read_json(path, GraphFileError)
    return graph_from_dict(doc, source=str(path))


def graph_from_dict(doc: object, source: str = "<graph>") -> Graph:
    """Build a graph from a parsed document; errors name ``source`` (see :func:`load_graph`)."""
    if not isinstance(doc, dict):
        raise GraphFileError(f"{source}: top level must be a JSON object")
    if doc.get("format") != FORMAT:
        raise GraphFileError(f"{source}: field 'format' must be {FORMAT!r}")
    version = doc.get("version")
    if type(version) is not int or version != VERSION:  # true == 1 in Python, not in JSON
        raise GraphFileError(
            f"{source}: field 'version' is {version!r}; this tmsim reads version {VERSION}"
        )
    unknown = set(doc) - {"format", "version", "name", "tensors", "kernels", "math"}
    if unknown:
        raise GraphFileError(f"{source}: unknown field {sorted(unknown)[0]!r}")
    name = doc.get("name")
    if not isinstance(name, str):
        raise GraphFileError(f"{source}: field 'name' must be a string")
    tensors = [_tensor(t, i, source) for i, t in enumerate(_list(doc, "tensors", source))]
    kernels = [_kernel(k, i, source) for i, k in enumerate(_list(doc, "kernels", source))]
    math = doc.get("math", {})
    if not isinstance(math, dict) or not all(isinstance(v, str) for v in math.values()):
        raise GraphFileError(f"{source}: field 'math' must map math-mode names to strings")
    try:
        return Graph(name, tensors, kernels, math)
    except GraphError as exc:
        raise GraphFileError(f"{source}: {exc}") from None


def _list(doc: dict[str, Any], key: str, source: str) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise GraphFileError(f"{source}: field {key!r} must be a list")
    return value


def _fields(
    entry: object,
    where: str,
    types: dict[str, type],
    required: tuple[str, ...],
) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise GraphFileError(f"{where}: must be a JSON object")
    for key in required:
        if key not in entry:
            raise GraphFileError(f"{where}: missing field {key!r}")
    for key, value in entry.items():
        if key not in types:
            raise GraphFileError(f"{where}: unknown field {key!r}")
        expected = types[key]
        if isinstance(value, bool) or not isinstance(value, expected):
            raise GraphFileError(
                f"{where}: field {key!r} must be {expected.__name__}, got {type(value).__name__}"
            )
    return entry


def _strings(values: list[Any], where: str, key: str) -> tuple[str, ...]:
    if not all(isinstance(v, str) for v in values):
        raise GraphFileError(f"{where}: field {key!r} must list strings")
    return tuple(values)


def _tensor(entry: object, i: int, source: str) -> Tensor:
    label = entry.get("name") if isinstance(entry, dict) else None
    where = f"{source}: tensors[{i}]" + (f" ({label!r})" if isinstance(label, str) else "")
    f = _fields(entry, where, _TENSOR_FIELDS, _TENSOR_REQUIRED)
    try:
        role = Role(f["role"])
    except ValueError:
        roles = [r.value for r in Role]
        raise GraphFileError(
            f"{where}: unknown role {f['role']!r}; expected one of {roles}"
        ) from None
    shape = f.get("shape", [])
    if any(isinstance(d, bool) or not isinstance(d, int) for d in shape):
        raise GraphFileError(f"{where}: field 'shape' must list integers")
    return Tensor(f["name"], f["size_bytes"], role, f.get("dtype", "fp32"), tuple(shape))


def _kernel(entry: object, i: int, source: str) -> Kernel:
    label = entry.get("name") if isinstance(entry, dict) else None
    where = f"{source}: kernels[{i}]" + (f" ({label!r})" if isinstance(label, str) else "")
    f = _fields(entry, where, _KERNEL_FIELDS, _KERNEL_REQUIRED)
    try:
        phase = Phase(f["phase"])
    except ValueError:
        phases = [p.value for p in Phase]
        raise GraphFileError(
            f"{where}: unknown phase {f['phase']!r}; expected one of {phases}"
        ) from None
    return Kernel(
        f["name"],
        f["op"],
        _strings(f["inputs"], where, "inputs"),
        _strings(f["outputs"], where, "outputs"),
        phase,
        f.get("flops", 0),
        _strings(f.get("updates", []), where, "updates"),
    )
