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
from tmsim.cli.args import batch_arg, text_arg, whole_number
from tmsim.cli.catalog import ATTENTIONS, DEFAULT_BATCH, DTYPES, TRANSFORMER_NAMES, ZOO_NAMES

if TYPE_CHECKING:
    from tmsim import Graph

DEFAULT_DTYPE = "fp32"
#: The transformers' element type when none is given (fp32 master weights beside it).
DEFAULT_TRANSFORMER_DTYPE = "fp16"
#: ``--seq-len`` and ``--layers`` of a transformer.
seq_len_arg = whole_number(1)
layers_arg = whole_number(1)
#: The options that shape a transformer only: (flag, argument of the zoo entry).
TRANSFORMER_OPTIONS = (
    ("--seq-len", "seq_len"),
    ("--attention", "attention"),
    ("--layers", "layers"),
)


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
    """The arguments that name a graph: a zoo model with batch and dtype (and a
    transformer's sequence length, attention and layers), or a file."""
    p.add_argument("model", nargs="?", help=f"zoo model: {', '.join(ZOO_NAMES)}")
    p.add_argument(
        "--batch",
        type=batch_arg,
        help=f"batch size of a zoo MODEL (a transformer's micro-batch), >= 1 ({DEFAULT_BATCH})",
    )
    p.add_argument(
        "--dtype",
        choices=DTYPES,
        help=f"element type of a zoo MODEL ({DEFAULT_DTYPE}; a transformer's 16-bit type, "
        f"{DEFAULT_TRANSFORMER_DTYPE}, beside fp32 master weights, or fp32)",
    )
    p.add_argument(
        "--seq-len",
        type=seq_len_arg,
        metavar="N",
        help="tokens per sequence of a transformer MODEL (its context: GPT-2 1024, LLaMA 2048)",
    )
    p.add_argument(
        "--attention",
        choices=ATTENTIONS,
        help="attention core of a transformer MODEL: s x s scores kept (materialized, GPT-2's "
        "default) or flash-style (fused, LLaMA's default)",
    )
    p.add_argument(
        "--layers",
        type=layers_arg,
        metavar="N",
        help="blocks of a transformer MODEL (default: the model's own)",
    )
    p.add_argument(
        "--file", type=text_arg, help="load the graph from this JSON file instead of the zoo"
    )


def graph_from_args(args: argparse.Namespace) -> Graph:
    """The graph named by ``args.model``/``args.batch``/``args.dtype`` or ``args.file``.

    Raises :class:`TmsimError` when both or neither of a model and a file are given, when
    ``--batch``, ``--dtype``, ``--seq-len``, ``--attention`` or ``--layers`` (which shape a
    zoo model) come with a file, when the last three come with a model that is not a
    transformer, and for values the model refuses (a sequence longer than GPT-2's 1024
    positions, a dtype a transformer is not trained in).
    """
    if (args.model is None) == (args.file is None):
        raise TmsimError("give either a zoo MODEL or --file PATH, not both or neither")
    shaping = {name: getattr(args, name) for _, name in TRANSFORMER_OPTIONS}
    given = {name: value for name, value in shaping.items() if value is not None}
    if args.file is not None:
        flags = (("--batch", args.batch), ("--dtype", args.dtype))
        for flag, value in flags + tuple((f, shaping[n]) for f, n in TRANSFORMER_OPTIONS):
            if value is not None:
                raise TmsimError(f"{flag} shapes a zoo MODEL; a graph --file has its own")
        return tmsim.load_graph(args.file)
    if args.model not in ZOO_NAMES:  # not a file of that name, as tmsim.graph would take
        raise TmsimError(f"unknown model {args.model!r}; known models: {', '.join(ZOO_NAMES)}")
    if given and args.model not in TRANSFORMER_NAMES:
        flag = next(f for f, n in TRANSFORMER_OPTIONS if n in given)
        raise TmsimError(
            f"{flag} shapes a transformer ({', '.join(TRANSFORMER_NAMES)}), not {args.model}"
        )
    batch = DEFAULT_BATCH if args.batch is None else args.batch
    return tmsim.graph(args.model, batch=batch, dtype=args.dtype, **given)


def _models(args: argparse.Namespace) -> int:
    for name, text in tmsim.MODELS.items():
        print(f"{name:14s} {text}")
    return 0


def _graph(args: argparse.Namespace) -> int:
    graph = graph_from_args(args)
    if args.save:
        tmsim.save(graph, args.save)
    print_summary(graph, args.save, args.json)
    return 0


def print_summary(graph: Graph, saved: str | None, as_json: bool) -> None:
    """Print ``graph``'s headline numbers (as JSON with ``as_json``), and the file it was
    saved to, if any."""
    from tmsim.api.graphs import graph_summary

    info = graph_summary(graph)
    if as_json:
        print(json.dumps(info, indent=2))
        return
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
    if saved:
        print(f"saved            {saved}")
