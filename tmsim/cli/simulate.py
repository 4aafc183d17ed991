"""``tmsim simulate``: replay a saved plan on its platform, with or without contention, or a
zoo model's step in 2LM (memory mode) with ``--cache-mode``."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from hwmodels.presets import load_platform
from tmsim.errors import TmsimError
from tmsim.plan.validate import validate
from tmsim.plan.values import Plan, load_plan
from tmsim.sim import CacheTrace, Trace, replay, replay_cache, save_trace
from tmsim.sim.cache.walk import DEFAULT_BLOCK_BYTES
from tmsim.sim.trace import ASYNC, SYNC
from tmsim.workload.files import load_graph
from tmsim.workload.graph import DTYPE_BYTES, Graph
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import MODELS, model

#: Batch size when neither ``--batch`` nor the plan's graph name (``MODEL-bN``) gives one.
DEFAULT_BATCH = 32
#: The platform of ``--cache-mode`` when ``--platform`` names none.
DEFAULT_CACHE_PLATFORM = "cascadelake-2lm"


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``simulate`` on ``sub``."""
    p = sub.add_parser(
        "simulate",
        help="replay a plan, or a model's step in 2LM memory mode, and report its time",
    )
    p.add_argument(
        "plan", nargs="?", help="plan JSON file (from `tmsim plan --out`); omit with --cache-mode"
    )
    p.add_argument(
        "--cache-mode",
        metavar="MODEL",
        help="instead of a plan, replay zoo model MODEL's step with DRAM as a hardware cache "
        f"of PMM (2LM); needs --batch; models: {', '.join(MODELS)}",
    )
    p.add_argument("--model", help=f"zoo model the plan is for: {', '.join(MODELS)}")
    p.add_argument(
        "--batch",
        type=int,
        help="batch size (a plan's default: from its graph name, else 32; needed with "
        "--cache-mode)",
    )
    p.add_argument("--dtype", default="fp32", choices=sorted(DTYPE_BYTES), help="element type")
    p.add_argument("--file", help="load the plan's graph from this JSON file instead")
    p.add_argument(
        "--platform",
        help="preset name or TOML file (default: the plan's platform; with --cache-mode "
        f"{DEFAULT_CACHE_PLATFORM})",
    )
    p.add_argument(
        "--block-bytes",
        type=int,
        metavar="B",
        help="--cache-mode: walk the cache in blocks of B bytes, a multiple of the cache line "
        f"(default: {DEFAULT_BLOCK_BYTES}, a page, less for a small cache; larger is faster and "
        "coarser)",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="--cache-mode: report the first step from an empty cache (default: the second, "
        "steady-state step)",
    )
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
    if (args.plan is None) == (args.cache_mode is None):
        raise TmsimError("give a plan file or --cache-mode MODEL, not both or neither")
    if args.cache_mode is not None:
        return _simulate_cache(args)
    if args.block_bytes is not None or args.cold:
        flag = "--block-bytes" if args.block_bytes is not None else "--cold"
        raise TmsimError(f"{flag} applies to --cache-mode only, not to a plan replay")
    plan = load_plan(args.plan)
    graph = plan_graph(plan, args)
    platform = load_platform(args.platform or plan.platform)
    if platform.name != plan.platform:
        raise TmsimError(
            f"plan {args.plan!r} is for platform {plan.platform!r}, not {platform.name!r}"
        )
    validate(plan, graph, platform).raise_if_invalid(shown=3)
    trace = replay(plan, graph, platform, contention=args.contention)
    _save(trace, args)
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


def _save(trace: Trace, args: argparse.Namespace) -> None:
    """Write the ``--trace`` and ``--timeline`` files ``args`` ask for."""
    if args.trace:
        save_trace(trace, args.trace)
    if args.timeline:
        # Imported here: the plotting stack is slow to import and only this option needs it.
        from tmsim.plots import timeline

        timeline(trace, args.timeline)


def _simulate_cache(args: argparse.Namespace) -> int:
    """``--cache-mode MODEL``: the 2LM replay of the model's step (:func:`replay_cache`)."""
    for flag, value in (("--model", args.model), ("--file", args.file)):
        if value is not None:
            raise TmsimError(f"{flag} names a plan's graph; with --cache-mode give the model only")
    if args.batch is None:
        raise TmsimError(f"--cache-mode {args.cache_mode} needs --batch N")
    if args.batch < 1:
        raise TmsimError(f"--batch must be a positive integer, got {args.batch}")
    graph = training_graph(model(args.cache_mode)(args.batch, dtype=args.dtype))
    platform = load_platform(args.platform or DEFAULT_CACHE_PLATFORM)
    result = replay_cache(
        graph,
        platform,
        block_bytes=args.block_bytes,
        contention=args.contention,
        warm=not args.cold,
    )
    _save(result.trace, args)
    info = result.totals()
    if args.json:
        info["trace"] = args.trace
        info["timeline"] = args.timeline
        print(json.dumps(info, indent=2))
        return 0
    _print_cache(result, info)
    for label, path in (("trace", args.trace), ("timeline", args.timeline)):
        if path:
            print(f"saved {label:10s} {path}")
    return 0


def _print_cache(result: CacheTrace, info: dict[str, Any]) -> None:
    gb = 1e9
    cache = result.cache
    near, far = cache.cache_tier, cache.backing_tier
    step = "first step, cold cache" if not result.warm else "second step, warm cache"
    ways = "direct-mapped" if cache.associativity == 1 else f"{cache.associativity}-way"
    sim = info["simulated_s"]
    print(f"2LM replay       {info['graph']} on {info['platform']} ({step})")
    print(
        f"cache            {cache.capacity_bytes / 2**30:g} GiB of {near} caching {far}, {ways}, "
        f"{cache.line_bytes} B lines, walked in {result.block_bytes} B blocks"
    )
    print(f"contention       {'on' if info['contention'] else 'off'}")
    print(f"simulated step   {sim:.6f} s")
    for key, tier in (("all_backing_s", far), ("all_cache_s", near)):
        other = info[key]
        print(
            f"{'all-' + tier + ' step':16s} {other:.6f} s (cost model, every operand in {tier}; "
            f"2LM/this = {sim / other:.3f})"
        )
    blocks = info["hits"] + info["misses"]
    print(f"hit rate         {info['hit_rate']:.4f} ({info['hits']:,} of {blocks:,} blocks)")
    print(
        f"misses           {info['misses']:,} blocks ({info['fills']:,} fills, "
        f"{info['writebacks']:,} dirty write-backs)"
    )
    for role, tier in (("backing", far), ("cache", near)):
        print(
            f"{tier + ' traffic':16s} read {info[role + '_read_bytes'] / gb:.3f} GB, "
            f"written {info[role + '_write_bytes'] / gb:.3f} GB"
        )
