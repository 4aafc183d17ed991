"""A sweep's workloads: zoo models at each batch and dtype, or graph files (a graph saved by
``tmsim graph --save`` or made by ``tmsim import``).

A ``model`` value ending in ``.json`` names a graph file, relative to the spec's folder. It is
read and validated as the spec is loaded (a file that cannot be read, or is not a graph,
fails the spec), and each of its points records the file's absolute path as its ``model``
and the SHA-256 of its bytes (``graph_sha256``), which alone, not the path, enters the
point's key: the same graph in another place is the same point. A graph file is its own
batch and dtype, so the ``batch`` and ``dtype`` axes do not multiply its points (they are
recorded as 0 and ``""``); ``batch`` is needed only where a zoo model is named. A worker reads
the file again and refuses it (the point fails) if its bytes changed since the spec was
loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from tmsim.errors import GraphFileError, TmsimError
from tmsim.sweeps.overrides import Fail
from tmsim.workload.files import load_graph
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

#: What names a graph file among a sweep's models.
GRAPH_FILE_SUFFIX = ".json"


@dataclass(frozen=True)
class Workload:
    """One workload of a sweep: a zoo ``model`` at ``batch`` in ``dtype``, or a graph file
    (``model`` its absolute path, ``graph_sha256`` its digest, batch 0 and dtype "")."""

    model: str
    batch: int
    dtype: str
    graph_sha256: str | None = None


def is_graph_file(model: str) -> bool:
    """Whether a sweep's ``model`` value names a graph file."""
    return model.lower().endswith(GRAPH_FILE_SUFFIX)


def workloads(
    models: list[str],
    batches: list[int] | None,
    dtypes: list[str],
    base_dir: Path,
    where: str,
    fail: Fail,
) -> list[Workload]:
    """The workloads of ``models`` (zoo names at every batch and dtype, each graph file
    once, in the order given). ``fail(where, message)`` reports a graph file that cannot be
    read or is not a graph, and a zoo model without a batch; it does not return."""
    out: list[Workload] = []
    for model in models:
        if is_graph_file(model):
            path = (base_dir / model).resolve()
            try:
                load_graph(path)
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except (GraphFileError, OSError) as exc:
                fail(f"{where}.model", f"{model}: {getattr(exc, 'strerror', None) or exc}")
            out.append(Workload(str(path), 0, "", digest))
            continue
        if batches is None:
            fail(where, "missing key 'batch' (a zoo model needs one)")
        out += [Workload(model, b, d) for b in batches or [] for d in dtypes]
    return out


def workload_graph(model: str, batch: int, dtype: str, graph_sha256: str | None) -> Graph:
    """The graph of a point's workload: the zoo model's training step, or the graph file,
    checked to hold the bytes the spec was loaded with. Raises :class:`TmsimError`."""
    if graph_sha256 is None:
        return training_graph_of(model, batch, dtype)
    path = Path(model)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise TmsimError(f"graph file {model}: {exc.strerror or exc}") from None
    if digest != graph_sha256:
        raise TmsimError(f"graph file {model} changed since the sweep was loaded")
    try:
        return load_graph(path)
    except GraphFileError as exc:
        raise TmsimError(str(exc)) from None


__all__ = ["GRAPH_FILE_SUFFIX", "Workload", "is_graph_file", "workload_graph", "workloads"]
