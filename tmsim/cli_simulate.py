"""``tmsim simulate``: replay a saved plan on its platform, with or without contention."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from hwmodels.presets import load_platform
from tmsim.errors import TmsimError
from tmsim.graph import DTYPE_BYTES, Graph
from tmsim.graphio import load_graph
from tmsim.plan import Plan, load_plan
from tmsim.sim import Trace, replay, save_trace
from tmsim.sim.trace import ASYNC, SYNC
from tmsim.training import training_graph
from tmsim.validate import validate
from tmsim.zoo import MODELS, model

#: Batch size when neither ``--batch`` nor the plan's graph name (``MODEL-bN``) gives one.
DEFAULT_BATCH = 32


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``simulate`` on ``sub``."""
    p = sub.add_parser("simulate", help="replay a plan on the simulator and report its time")
    p.add_argument("plan", help="plan JSON file (from `tmsim plan --out`)")
    p.add_argument("--model", help=f"zoo model the plan is for: {', '.join(MODELS)}")
    p.add_argument(
        "--batch", type=int, help="batch size (default: from the plan's graph name, else 32)"
    )
    p.add_argument("--dtype", default="fp32", choices=sorted(DTYPE_BYTES), help="element type")
    p.add_argument("--file", help="load the plan's graph from this JSON file instead")
    p.add_argument("--platform", help="preset name or TOML file (default: the plan's platform)")
    p.add_argument(
        "--no-contention",
        dest="contention",
        action="store_false",
        help="run every kernel and copy at its own uncontended rate (the cost model's world)",
    )
    p.add_argument("--trace", metavar="PATH", help="write the trace as Parquet to PATH")
    p.add_argument("--timeline", metavar="PATH", help="draw the timeline to PATH (.png, .pdf)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_simulate)


def plan_graph(plan: Plan, args: argparse.Namespace) -> Graph:
    """The graph ``args`` name (``--model``/``--batch``/``--dtype`` or ``--file``).

    Raises :class:`TmsimError` if both or neither are given, or if the graph is not the one
    the plan was made for.
    """
    if (args.model is None) == (args.file is None):
        raise TmsimError(
            f"name the graph of plan {args.plan!r} ({plan.graph!r}): give --model MODEL "
            "[--batch N] or --file PATH, not both or neither"
        )
    if args.file is not None:
        graph = load_graph(args.file)
    else:
        batch = args.batch
        if batch is None:
            m = re.fullmatch(rf"{re.escape(args.model)}-b(\d+)", plan.graph)
            batch = int(m.group(1)) if m else DEFAULT_BATCH
        graph = training_graph(model(args.model)(batch, dtype=args.dtype))
    if graph.name != plan.graph:
        raise TmsimError(
            f"plan {args.plan!r} is for graph {plan.graph!r}, but the graph given is {graph.name!r}"
        )
    return graph


def trace_summary(trace: Trace) -> dict[str, Any]:
    """Headline numbers of a replay as JSON-ready values."""
    moves = trace.moves()
    return {
        "graph": trace.graph,
        "platform": trace.platform,
        "planner": trace.planner,
        "contention": trace.contention,
        "simulated_s": trace.simulated_s,
        "predicted_s": trace.predicted_s,
        "ratio": trace.simulated_s / trace.predicted_s if trace.predicted_s > 0 else None,
        "kernels": len(trace.records) - len(moves),
        "moves": len(moves),
        "sync_moves": sum(r.kind == SYNC for r in moves),
        "async_moves": sum(r.kind == ASYNC for r in moves),
        "moved_bytes": trace.moved_bytes,
        "fast_peak_bytes": trace.fast_peak_bytes,
        "fast_limit_bytes": trace.fast_limit_bytes,
        "events": trace.events,
    }


def _simulate(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    graph = plan_graph(plan, args)
    platform = load_platform(args.platform or plan.platform)
    if platform.name != plan.platform:
        raise TmsimError(
            f"plan {args.plan!r} is for platform {plan.platform!r}, not {platform.name!r}"
        )
    validate(plan, graph, platform).raise_if_invalid(shown=3)
    trace = replay(plan, graph, platform, contention=args.contention)
    if args.trace:
        save_trace(trace, args.trace)
    if args.timeline:
        # Imported here: the plotting stack is slow to import and only this option needs it.
        from tmsim.plots import timeline

        timeline(trace, args.timeline)
    info = trace_summary(trace)
    if args.json:
        info["trace"] = args.trace
        info["timeline"] = args.timeline
        print(json.dumps(info, indent=2))
        return 0
    gb = 1e9
    print(f"replay           {info['planner']} plan for {info['graph']} on {info['platform']}")
    print(f"contention       {'on' if trace.contention else 'off'}")
    print(f"simulated step   {info['simulated_s']:.6f} s")
    ratio = info["ratio"]
    rel = f" (simulated/predicted {ratio:.4f})" if ratio is not None else ""
    print(f"predicted step   {info['predicted_s']:.6f} s{rel}")
    print(
        f"moves            {info['moves']:,} ({info['sync_moves']:,} sync, "
        f"{info['async_moves']:,} async), {info['moved_bytes'] / gb:.3f} GB"
    )
    print(
        f"fast memory      peak {info['fast_peak_bytes'] / gb:.3f} GB of "
        f"{info['fast_limit_bytes'] / gb:.3f} GB"
    )
    for label, path in (("trace", args.trace), ("timeline", args.timeline)):
        if path:
            print(f"saved {label:10s} {path}")
    return 0
