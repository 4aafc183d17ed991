"""``tmsim models`` and ``tmsim graph``: the model zoo and training-step summaries.

The parsers are built from :mod:`tmsim.cli.catalog`; the workload modules (numpy) are imported
when a command runs.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

import tmsim
from tmsim import TmsimError
from tmsim.cli.args import batch_arg, text_arg
from tmsim.cli.catalog import DTYPES, MODEL_NAMES

if TYPE_CHECKING:
    from tmsim import Graph

DEFAULT_BATCH = 32
DEFAULT_DTYPE = "fp32"


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``models`` and ``graph`` on ``sub``."""
    p = sub.add_parser("models", help="list the model zoo")
    p.set_defaults(func=_models)

    p = sub.add_parser("graph", help="build or load a training-step graph and summarize it")
    add_graph_arguments(p)
    p.add_argument("--save", type=text_arg, metavar="PATH", help="write the graph as JSON to PATH")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_graph)


def add_graph_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments that name a graph: a zoo model with batch and dtype, or a file."""
    p.add_argument("model", nargs="?", help=f"zoo model: {', '.join(MODEL_NAMES)}")
    p.add_argument(
        "--batch", type=batch_arg, help=f"batch size of a zoo MODEL, >= 1 ({DEFAULT_BATCH})"
    )
    p.add_argument("--dtype", choices=DTYPES, help=f"element type of a zoo MODEL ({DEFAULT_DTYPE})")
    p.add_argument(
        "--file", type=text_arg, help="load the graph from this JSON file instead of the zoo"
    )


def graph_from_args(args: argparse.Namespace) -> Graph:
    """The graph named by ``args.model``/``args.batch``/``args.dtype`` or ``args.file``.

    Raises :class:`TmsimError` when both or neither of a model and a file are given, or when
    ``--batch`` or ``--dtype`` (which shape a zoo model) come with a file.
    """
    if (args.model is None) == (args.file is None):
        raise TmsimError("give either a zoo MODEL or --file PATH, not both or neither")
    if args.file is not None:
        for flag, value in (("--batch", args.batch), ("--dtype", args.dtype)):
            if value is not None:
                raise TmsimError(f"{flag} shapes a zoo MODEL; a graph --file has its own")
        return tmsim.load_graph(args.file)
    if args.model not in MODEL_NAMES:  # not a file of that name, as tmsim.graph would take
        raise TmsimError(f"unknown model {args.model!r}; known models: {', '.join(MODEL_NAMES)}")
    batch = DEFAULT_BATCH if args.batch is None else args.batch
    dtype = DEFAULT_DTYPE if args.dtype is None else args.dtype
    return tmsim.graph(args.model, batch=batch, dtype=dtype)


def _models(args: argparse.Namespace) -> int:
    for name, text in tmsim.MODELS.items():
        print(f"{name:14s} {text}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    from tmsim.api.graphs import graph_summary

    graph = graph_from_args(args)
    if args.save:
        tmsim.save(graph, args.save)
    info = graph_summary(graph)
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
    for role, size in info["bytes_by_role"].items():
        if size:
            print(f"  {role:17s}{size / gb:,.2f} GB declared")
    if args.save:
        print(f"saved            {args.save}")
    return 0
