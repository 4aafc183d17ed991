"""Which graph ``tmsim simulate`` replays a plan file on: the one the plan names, built again,
or the one ``--model`` or ``--file`` gives, checked against the plan's fingerprint."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import tmsim
from tmsim import Graph, Plan, TmsimError
from tmsim.api.graphs import graph_of, match_graph
from tmsim.cli.catalog import DEFAULT_BATCH, ZOO_NAMES


def plan_graph(plan: Plan, args: argparse.Namespace) -> Graph:
    """The graph ``plan`` was made for.

    Without ``--model`` or ``--file``, it is built again from the plan's graph identity: the
    zoo model with the plan's arguments, or the graph file the plan names (looked up beside
    the plan file first). ``--model`` (with ``--batch``/``--dtype``, the plan's other zoo
    arguments when it names the same model) or ``--file`` give the graph instead, which must
    have the plan's fingerprint; a version-1 plan file has none, and then its graph's name
    must match.

    Raises :class:`TmsimError` (one line) for both flags, ``--batch``/``--dtype`` without
    ``--model``, a plan whose graph cannot be built again when no flag names one, and a
    graph that is not the plan's (naming both fingerprints; by name for version 1, which
    the command then warns about).
    """
    what = f"plan {args.plan!r}"
    identity = plan.graph_identity
    if args.model is not None and args.file is not None:
        raise TmsimError(f"name the graph of {what} by --model or by --file, not both")
    if args.model is None:
        for flag, value in (("--batch", args.batch), ("--dtype", args.dtype)):
            if value is not None:
                raise TmsimError(f"{flag} goes with --model (or --cache-mode)")
    if args.model is None and args.file is None:
        ask = "give --model MODEL [--batch N] [--dtype D] or --file PATH"
        if identity is None:
            raise TmsimError(
                f"{what} is a version-1 plan file, which does not say how its graph "
                f"{plan.graph!r} was built; {ask}"
            )
        if identity.source == "unknown":
            raise TmsimError(
                f"{what} is for graph {plan.graph!r} (sha256 {identity.sha256}), which was "
                f"built in memory, not from the zoo or a graph file; {ask}"
            )
        return graph_of(plan, Path(args.plan).parent, what=what)
    if args.file is not None:
        graph, given = tmsim.load_graph(args.file), f"the graph of --file {args.file!r}"
    else:
        graph, given = _zoo_override(plan, args), f"the graph of --model {args.model}"
    match_graph(plan, graph, what, given)
    return graph


def _zoo_override(plan: Plan, args: argparse.Namespace) -> Graph:
    """``--model`` with ``--batch``/``--dtype``; the arguments not given come from the plan
    when it was made for the same zoo model, else from the graph name and the defaults."""
    identity = plan.graph_identity
    base: dict[str, Any] = {}
    if (
        identity is not None
        and identity.source == "zoo"
        and identity.args.get("model") == args.model
    ):
        base = {k: v for k, v in identity.args.items() if k != "model"}
    plan_batch = base.pop("batch", None)
    batch = args.batch if args.batch is not None else plan_batch
    if batch is None:
        m = re.fullmatch(rf"{re.escape(args.model)}(?:-[^-]+)*-b(\d+)", plan.graph)
        batch = int(m.group(1)) if m else DEFAULT_BATCH
    if args.dtype is not None:
        base["dtype"] = args.dtype
    if args.model not in ZOO_NAMES:  # not a graph file of that name, as tmsim.graph takes
        raise TmsimError(f"unknown model {args.model!r}; known models: {', '.join(ZOO_NAMES)}")
    return tmsim.graph(args.model, batch=batch, **base)


__all__ = ["plan_graph"]
