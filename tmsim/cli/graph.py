"""``tmsim models`` and ``tmsim graph``: the model zoo and training-step summaries."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from tmsim.errors import TmsimError
from tmsim.workload.files import load_graph, save_graph
from tmsim.workload.graph import DTYPE_BYTES, Graph, Phase, Role
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import DESCRIPTIONS, MODELS, model

DEFAULT_BATCH = 32


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``models`` and ``graph`` on ``sub``."""
    p = sub.add_parser("models", help="list the model zoo")
    p.set_defaults(func=_models)

    p = sub.add_parser("graph", help="build or load a training-step graph and summarize it")
    add_graph_arguments(p)
    p.add_argument("--save", metavar="PATH", help="write the graph as JSON to PATH")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_graph)


def add_graph_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments that name a graph: a zoo model with batch and dtype, or a file."""
    p.add_argument("model", nargs="?", help=f"zoo model: {', '.join(MODELS)}")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="batch size (default 32)")
    p.add_argument("--dtype", default="fp32", choices=sorted(DTYPE_BYTES), help="element type")
    p.add_argument("--file", help="load the graph from this JSON file instead of the zoo")


def graph_from_args(args: argparse.Namespace) -> Graph:
    """The graph named by ``args.model``/``args.batch``/``args.dtype`` or ``args.file``.

    Raises :class:`TmsimError` when both or neither of a model and a file are given.
    """
    if (args.model is None) == (args.file is None):
        raise TmsimError("give either a zoo MODEL or --file PATH, not both or neither")
    if args.file is not None:
        return load_graph(args.file)
    return training_graph(model(args.model)(args.batch, dtype=args.dtype))


def summary(graph: Graph) -> dict[str, Any]:
    """Headline numbers of ``graph`` as plain JSON-ready values."""
    peak_kernel = int(np.argmax(graph.live_bytes))
    by_phase = {p.value: 0 for p in Phase}
    for k in graph.kernels:
        by_phase[k.phase.value] += 1
    return {
        "name": graph.name,
        "kernels": len(graph.kernels),
        "tensors": len(graph.tensors),
        "peak_live_bytes": graph.peak_live_bytes,
        "peak_kernel": graph.kernels[peak_kernel].name,
        "flops": graph.flops,
        "params": graph.params,
        "kernels_by_phase": by_phase,
        "bytes_by_role": {r.value: b for r, b in graph.bytes_by_role().items()},
    }


def _models(args: argparse.Namespace) -> int:
    for name in MODELS:
        print(f"{name:14s} {DESCRIPTIONS[name]}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    graph = graph_from_args(args)
    if args.save:
        save_graph(graph, args.save)
    info = summary(graph)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    gb = 1e9
    print(f"graph            {info['name']}")
    phases = ", ".join(f"{n} {p}" for p, n in info["kernels_by_phase"].items())
    print(f"kernels          {info['kernels']:,} ({phases})")
    print(f"tensors          {info['tensors']:,}")
    print(f"parameters       {info['params']:,}")
    print(f"FLOPs per step   {info['flops'] / 1e12:,.2f} TFLOP")
    print(
        f"peak live        {info['peak_live_bytes'] / gb:,.2f} GB at kernel {info['peak_kernel']}"
    )
    for role in Role:
        size = info["bytes_by_role"][role.value]
        if size:
            print(f"  {role.value:17s}{size / gb:,.2f} GB declared")
    if args.save:
        print(f"saved            {args.save}")
    return 0
