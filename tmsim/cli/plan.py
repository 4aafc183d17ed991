"""``tmsim plan``: run a planner on a zoo model or graph file and report (and save) its plan.

Exit codes: 0 for a valid plan, 1 when the validator refuses the plan (reported on stdout and
in one line on stderr), 2 for bad input. The planners are imported when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import tmsim
from tmsim.cli.args import add_plan_arguments, settings_from_args, text_arg
from tmsim.cli.catalog import PLANNER_NAMES
from tmsim.cli.graph import add_graph_arguments, graph_from_args


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``plan`` on ``sub``."""
    p = sub.add_parser("plan", help="choose where tensors live and when they move")
    add_graph_arguments(p)
    add_plan_arguments(p)
    p.add_argument("--mode", default="sync", choices=PLANNER_NAMES, help="planner (default sync)")
    p.add_argument("--out", type=text_arg, metavar="PATH", help="write the plan as JSON to PATH")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from tmsim.api.summaries import plan_summary

    graph = graph_from_args(args)
    platform = tmsim.platform(args.platform, dict(args.platform_set))
    settings = settings_from_args(args)
    # the plan names its graph file, so `tmsim simulate` finds it alone
    result = tmsim.plan(graph, platform, args.mode, settings=settings, graph_file=args.file)
    check = tmsim.validate(result, graph, platform)
    if args.out:
        tmsim.save(result, args.out)
    info = plan_summary(result, graph, platform, check, settings.capacity)
    del info["solver"]
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        gb = 1e9
        print(f"plan             {info['planner']} for {info['graph']} on {info['platform']}")
        print(f"predicted step   {info['predicted_s']:.4f} s")
        if info["profile"]:
            made = info["profile"]
            print(f"kernel times     measured: {made['path']} ({made['entries']:,} entries)")
        if result.stats:
            gap = info["gap"]
            print(
                f"solver           {result.stats.solver} {info['status']}, gap "
                f"{'n/a' if gap is None else f'{100 * gap:.2f}%'}, build {info['build_s']:.2f} s, "
                f"solve {info['solve_s']:.2f} s, {info['rounds']} round(s), "
                f"{info['variables']:,} variables"
            )
        keys = ("fast_peak_bytes", "fast_limit_bytes", "fast_pool_bytes")
        peak, limit, pool = (info[k] / gb for k in keys)
        print(f"fast memory      peak {peak:.3f} GB of {limit:.3f} GB; laid out in {pool:.3f} GB")
        if info["capacity_note"]:
            print(f"                 {info['capacity_note']}")
        print(f"moves            {info['moves']:,}, {info['moved_bytes'] / gb:.3f} GB")
        if info["recomputes"]:
            print(f"recomputes       {info['recomputes']:,}, {info['recompute_s']:.4f} s")
        if info["host_kernels"]:
            print(f"host kernels     {info['host_kernels']:,} (run by the host CPU)")
        print(f"valid            {'yes' if check.ok else 'NO: ' + '; '.join(check.errors[:3])}")
        if args.out:
            print(f"saved            {args.out}")
    if not check.ok:
        first = " ".join(check.errors[0].split()) if check.errors else "no reason given"
        print(f"tmsim: error: the {result.planner} plan is invalid: {first}", file=sys.stderr)
        return 1
    return 0
