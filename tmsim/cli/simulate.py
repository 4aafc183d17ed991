"""``tmsim simulate``: replay a saved plan on its platform, with or without contention, or a
zoo model's step in 2LM (memory mode) with ``--cache-mode``.

A plan file names its graph (:func:`tmsim.api.graphs.graph_of`): the replay builds it again from
the zoo or the graph file the plan names, and ``--model``/``--file`` replace that graph only
with one of the same fingerprint. Output paths are checked before any work is done.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import tmsim
from tmsim import Graph, InterferenceLevel, Plan, Platform, Run, TmsimError
from tmsim.api.cache import CacheRun
from tmsim.api.measured import PlanCosts, plan_costs, read_profile
from tmsim.api.runs import check_plan
from tmsim.cli.args import add_interference_argument, add_profile_argument, check_output
from tmsim.cli.catalog import DTYPES, ZOO_NAMES
from tmsim.cli.plangraph import plan_graph
from tmsim.errors import one_line

#: The platform of ``--cache-mode`` when ``--platform`` names none.
DEFAULT_CACHE_PLATFORM = "cascadelake-2lm"
#: File name endings ``--timeline`` draws (the formats :meth:`tmsim.Run.timeline` writes).
TIMELINE_SUFFIXES = (".png", ".pdf", ".svg")
#: File name ending of ``--trace`` (what :func:`tmsim.save` writes a run's trace as).
TRACE_SUFFIX = ".parquet"
#: Block of the cache walk of ``--cache-mode`` without ``--block-bytes``, for the help text (a
#: page; :func:`tmsim.api.cache.simulate_cache` takes less for a small cache).
DEFAULT_BLOCK_BYTES = 4096


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
        f"of PMM (2LM); needs --batch; models: {', '.join(ZOO_NAMES)}",
    )
    p.add_argument(
        "--model",
        help="build the plan's graph from this zoo model instead of the plan's own record "
        f"(it must have the plan's fingerprint): {', '.join(ZOO_NAMES)}",
    )
    p.add_argument(
        "--batch",
        type=int,
        help="batch size with --model (default: the plan's, else 32) or --cache-mode (needed)",
    )
    p.add_argument(
        "--dtype",
        choices=DTYPES,
        help="element type with --model (default: the plan's, else fp32) or --cache-mode (fp32)",
    )
    p.add_argument(
        "--file",
        help="load the plan's graph from this JSON file instead of the plan's own record (it "
        "must have the plan's fingerprint)",
    )
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
    add_interference_argument(p)
    add_profile_argument(p, replay=True)
    p.add_argument("--trace", metavar="PATH", help="write the trace as Parquet to PATH")
    p.add_argument(
        "--timeline",
        metavar="PATH",
        help=f"draw the timeline to PATH ({', '.join(TIMELINE_SUFFIXES)})",
    )
    p.add_argument(
        "--perfetto",
        metavar="PATH",
        help="write the step as a Chrome trace-event file (.json) for ui.perfetto.dev: "
        "kernels, copies and links on their tracks, each tier's bytes in use, tensor lifetimes",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_simulate)


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, path arguments that hold a NUL character and the output
    paths ``--trace`` and ``--timeline`` that cannot be written: an empty path, a directory, a
    missing or non-directory parent, a path or parent that is not writable, a timeline whose
    name ends in none of :data:`TIMELINE_SUFFIXES`, and one file named by both. Raises
    :class:`TmsimError`."""
    for flag in ("plan", "file", "platform", "profile", "trace", "timeline", "perfetto"):
        value = getattr(args, flag)
        if value is not None and "\0" in value:
            raise TmsimError(f"{'--' * (flag != 'plan')}{flag} {value!r} holds a NUL character")
    outputs = tuple((f"--{label}", path) for label, path in _outputs(args))
    given = [(f, p) for f, p in outputs if p]
    for flag, path in outputs:
        if path is not None and not path:
            raise TmsimError(f"{flag} needs a file name")
    for flag, path in given:
        check_output(flag, path)
    suffix = Path(args.timeline).suffix if args.timeline else TIMELINE_SUFFIXES[0]
    if suffix.lower() not in TIMELINE_SUFFIXES:
        kind = f"{suffix!r} files" if suffix else "a file name without an ending"
        raise TmsimError(
            f"--timeline {args.timeline}: cannot draw {kind}; name a file ending in "
            f"{', '.join(TIMELINE_SUFFIXES)}"
        )
    for (f1, p1), (f2, p2) in itertools.combinations(given, 2):
        if Path(p1).resolve() == Path(p2).resolve():
            raise TmsimError(f"{f1} and {f2} both name {p1}; give two files")
    if args.perfetto and not args.perfetto.lower().endswith(".json"):
        raise TmsimError(f"--perfetto {args.perfetto}: a trace-event file is written as .json")
    if args.trace and not args.trace.lower().endswith(TRACE_SUFFIX):
        raise TmsimError(f"--trace {args.trace}: a trace is written as a {TRACE_SUFFIX} file")


def _simulate(args: argparse.Namespace) -> int:
    if (args.plan is None) == (args.cache_mode is None):
        raise TmsimError("give a plan file or --cache-mode MODEL, not both or neither")
    check_outputs(args)
    if args.cache_mode is not None:
        return _simulate_cache(args)
    if args.block_bytes is not None or args.cold:
        flag = "--block-bytes" if args.block_bytes is not None else "--cold"
        raise TmsimError(f"{flag} applies to --cache-mode only, not to a plan replay")
    plan = tmsim.load_plan(args.plan)
    graph = plan_graph(plan, args)
    if plan.graph_identity is None:
        print(
            f"tmsim: warning: plan {args.plan!r} is a version-1 plan file without its graph's "
            "fingerprint, so the graph given is checked by its name only; plan again for a "
            "file that names its graph",
            file=sys.stderr,
        )
    name = args.platform or plan.platform
    if not name.isprintable():
        raise TmsimError(f"plan {args.plan!r}: platform {name!r} is no preset name or file path")
    platform = tmsim.platform(name)
    if platform.name != plan.platform:
        raise TmsimError(
            f"plan {args.plan!r} is for platform {plan.platform!r}, not {platform.name!r}"
        )
    costs = _plan_costs(plan, graph, platform, args)
    check_plan(plan, graph, platform, costs.checked).raise_if_invalid(shown=3)
    near = Path(args.plan).parent
    run = tmsim.simulate(
        plan,
        graph,
        platform,
        interference=_level(args),
        check=False,
        profile=costs.profile,
        near=near,
    )
    _save(run, args)
    if args.perfetto:
        run.perfetto(args.perfetto, graph)
    info = run.summary()
    info["profile"] = None if costs.profile is None else costs.profile.record()
    if args.json:
        info["trace"] = args.trace
        info["timeline"] = args.timeline
        info["perfetto"] = args.perfetto
        print(json.dumps(info, indent=2))
        return 0
    gb = 1e9
    print(f"replay           {info['planner']} plan for {info['graph']} on {info['platform']}")
    print(f"interference     {info['interference']}")
    if costs.profile is not None:
        print(f"kernel times     measured: {costs.profile.path}")
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
    for label, key in (("kernels lost", "kernels_lost_s"), ("copies lost", "copies_lost_s")):
        lost = ", ".join(f"{cause} {s:.6f} s" for cause, s in info[key].items())
        print(f"{label:16s} {lost}")
    print(f"copies past      their kernels' ends {info['copies_past_kernel_s']:.6f} s")
    _print_energy(info)
    for label, path in _outputs(args):
        if path:
            print(f"saved {label:10s} {path}")
    return 0


def _plan_costs(
    plan: Plan, graph: Graph, platform: Platform, args: argparse.Namespace
) -> PlanCosts:
    """The cost models the plan is checked and replayed with (``--profile``, else the one it
    records, found beside the plan file first); warns on stderr where they differ."""
    given = read_profile(args.profile) if args.profile is not None else None
    costs = plan_costs(plan, graph, platform, given, Path(args.plan).parent)
    if costs.note:
        print(f"tmsim: warning: {one_line(costs.note)}", file=sys.stderr)
    return costs


def _print_energy(info: dict[str, Any]) -> None:
    """The step's energy and the wear of its rated devices, where the platform prices them."""
    if "energy_j" not in info:
        return
    parts = ", ".join(f"{name} {j:.3g} J" for name, j in info["energy_parts_j"].items() if j)
    print(f"energy           {info['energy_j']:.4g} J ({parts})")
    for tier, years in info["wear_years"].items():
        written = info["written_bytes"][tier] / 1e9
        lasts = "never wears out" if years is None else f"wears out in {years:.3g} years"
        print(f"wear             {tier}: {written:.3f} GB written per step, {lasts}")


def _outputs(args: argparse.Namespace) -> tuple[tuple[str, str | None], ...]:
    """The files a replay writes, by label."""
    return (("trace", args.trace), ("timeline", args.timeline), ("perfetto", args.perfetto))


def _level(args: argparse.Namespace) -> InterferenceLevel:
    """The interference level ``--interference`` asks for."""
    level: InterferenceLevel = args.interference
    return level


def _save(run: Run | CacheRun, args: argparse.Namespace) -> None:
    """Write the ``--trace`` and ``--timeline`` files ``args`` ask for."""
    if args.trace:
        tmsim.save(run, args.trace)
    if args.timeline:
        run.timeline(args.timeline)


def _simulate_cache(args: argparse.Namespace) -> int:
    """``--cache-mode MODEL``: the 2LM replay of the model's step
    (:func:`tmsim.api.cache.simulate_cache`)."""
    from tmsim.api.cache import simulate_cache

    for flag, value in (("--model", args.model), ("--file", args.file)):
        if value is not None:
            raise TmsimError(f"{flag} names a plan's graph; with --cache-mode give the model only")
    if args.batch is None:
        raise TmsimError(f"--cache-mode {args.cache_mode} needs --batch N")
    if args.batch < 1:
        raise TmsimError(f"--batch must be a positive integer, got {args.batch}")
    if args.cache_mode not in ZOO_NAMES:
        raise TmsimError(f"unknown model {args.cache_mode!r}; known models: {', '.join(ZOO_NAMES)}")
    graph = tmsim.graph(args.cache_mode, batch=args.batch, dtype=args.dtype or "fp32")
    platform = tmsim.platform(args.platform or DEFAULT_CACHE_PLATFORM)
    result = simulate_cache(
        graph, platform, block_bytes=args.block_bytes, interference=_level(args), warm=not args.cold
    )
    _save(result, args)
    if args.perfetto:
        result.perfetto(args.perfetto)
    info = result.summary()
    if args.json:
        info["trace"] = args.trace
        info["timeline"] = args.timeline
        info["perfetto"] = args.perfetto
        print(json.dumps(info, indent=2))
        return 0
    _print_cache(result, info)
    for label, path in _outputs(args):
        if path:
            print(f"saved {label:10s} {path}")
    return 0


def _print_cache(result: CacheRun, info: dict[str, Any]) -> None:
    gb = 1e9
    details = result.details
    cache = details.cache
    near, far = cache.cache_tier, cache.backing_tier
    step = "first step, cold cache" if not details.warm else "second step, warm cache"
    ways = "direct-mapped" if cache.associativity == 1 else f"{cache.associativity}-way"
    sim = info["simulated_s"]
    print(f"2LM replay       {info['graph']} on {info['platform']} ({step})")
    print(
        f"cache            {cache.capacity_bytes / 2**30:g} GiB of {near} caching {far}, {ways}, "
        f"{cache.line_bytes} B lines, walked in {details.block_bytes} B blocks"
    )
    print(f"interference     {info['interference']}")
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
