"""``tmsim compare``: every strategy for one workload on one platform, in one table.

Exit codes: 0 when every row is a valid plan or an error the row reports, 1 when a plan the
validator refuses is in the table (reported in it and in one line on stderr), 2 for bad input.
The planners, the simulator and the results tables are imported when the command runs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any, TextIO

import tmsim
from tmsim import STRATEGIES, InterferenceLevel, TmsimError
from tmsim.cli.args import (
    add_interference_argument,
    add_plan_arguments,
    check_output,
    names_arg,
    settings_from_args,
    size_arg,
    text_arg,
    workers_arg,
)
from tmsim.cli.graph import add_graph_arguments, graph_from_args

#: ``tmsim compare``'s MILP time limit (seconds for the whole static -> sync -> async chain):
#: lower than ``tmsim plan``'s, so that a comparison finishes in minutes; the gap column says
#: how far from optimal a plan cut short is.
COMPARE_TIME_LIMIT_S = 60.0


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``compare`` on ``sub``."""
    p = sub.add_parser(
        "compare",
        help="plan and simulate every strategy (baselines, AutoTM's MILPs, 2LM or unified "
        "memory) and tabulate them",
    )
    add_graph_arguments(p)
    add_plan_arguments(p, time_limit_s=COMPARE_TIME_LIMIT_S)
    p.add_argument(
        "--strategies",
        type=names_arg,
        help=f"comma-separated subset of {','.join(STRATEGIES)} (default: all that apply "
        "but remat, static-rc, sync-rc and async-rc, whose solves take minutes; a name that "
        "is not a strategy, or does not apply to the platform, is refused)",
    )
    add_interference_argument(p)
    p.add_argument("--block-bytes", type=size_arg, help="2LM simulation block size in bytes")
    p.add_argument(
        "--workers",
        type=workers_arg,
        help="threads to run on: the MILP chain beside the other strategies, and its "
        "formulations that do not contain each other at once (default: tmsim.compare's, 2; "
        "1: one thing at a time; the table does not depend on it unless --time-limit stops a "
        "solve)",
    )
    p.add_argument(
        "--out", type=text_arg, metavar="PATH", help="also write the table (.csv or .parquet)"
    )
    p.add_argument(
        "--perfetto",
        type=text_arg,
        metavar="PATH",
        help="also write every replay as Chrome trace events (.json) for ui.perfetto.dev, "
        "one group of tracks per strategy",
    )
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    p.add_argument("--quiet", action="store_true", help="no progress display on stderr")
    p.set_defaults(func=_compare)


class _Progress:
    """One line on ``out`` per strategy as it starts, with the seconds since the start; on a
    terminal the line is rewritten in place."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.perf_counter()
        self.tty = out.isatty()

    def __call__(self, strategy: str, index: int, total: int) -> None:
        elapsed = time.perf_counter() - self.started
        line = f"[{index + 1}/{total}] {strategy:<17} ({elapsed:6.1f} s elapsed)"
        self.out.write(("\r" + line) if self.tty else line + "\n")
        self.out.flush()

    def done(self) -> None:
        elapsed = time.perf_counter() - self.started
        line = f"done in {elapsed:.1f} s"
        self.out.write(("\r" + line.ljust(50) + "\n") if self.tty else line + "\n")
        self.out.flush()


def _compare(args: argparse.Namespace) -> int:
    from tmsim.api.summaries import capacity_note
    from tmsim.api.tables import jsonable

    if args.perfetto is not None:
        if not args.perfetto.lower().endswith(".json"):
            raise TmsimError(f"--perfetto {args.perfetto}: a trace-event file is written as .json")
        check_output("--perfetto", args.perfetto)
    graph = graph_from_args(args)
    platform = tmsim.platform(args.platform, dict(args.platform_set))
    settings = settings_from_args(args)
    level: InterferenceLevel = args.interference
    progress = None if args.quiet else _Progress(sys.stderr)
    frame = tmsim.compare(
        graph,
        platform,
        args.strategies,
        interference=level,
        cache_block_bytes=args.block_bytes,
        settings=settings,
        progress=progress,
        perfetto=args.perfetto,
        **({} if args.workers is None else {"workers": args.workers}),
    )
    if progress is not None:
        progress.done()
    if args.out:
        tmsim.write_table(frame, args.out)
    rows = list(frame.itertuples(index=False))
    if args.json:
        print(json.dumps(jsonable(frame.to_dict("records")), indent=2))
    else:
        limit = tmsim.fast_limit(graph, platform, settings.capacity)
        _print_table(rows, graph.name, platform.name, limit)
        if platform.energy is not None:
            _print_energy(rows)
        note = capacity_note(graph, platform, settings.capacity)
        if note:
            print(f"note: {note}")
    invalid = [str(r.strategy) for r in rows if not (r.valid or r.error)]
    if invalid:
        print(f"tmsim: error: invalid plans: {', '.join(invalid)}", file=sys.stderr)
        return 1
    return 0


def _print_energy(rows: list[Any]) -> None:
    """The energy and wear of each row that ran (the platform has an energy model)."""
    ran = [r for r in rows if not r.error]
    if not ran:
        return
    name_w = max([15, *(len(str(r.strategy)) + 1 for r in ran)])
    head = f"{'strategy':<{name_w}}{'energy J':>12}{'rated device':>14}{'written GB':>12}"
    head += f"{'wears out in':>16}"
    print()
    print(head)
    print("-" * len(head))
    for r in ran:
        energy = "-" if math.isnan(r.energy_j) else f"{r.energy_j:.3f}"
        if not r.wear_tier:
            print(f"{r.strategy:<{name_w}}{energy:>12}{'-':>14}{'-':>12}{'-':>16}")
            continue
        years = "never" if math.isnan(r.wear_years) else f"{r.wear_years:.3g} years"
        print(
            f"{r.strategy:<{name_w}}{energy:>12}{r.wear_tier:>14}"
            f"{r.wear_written_bytes / 1e9:>12.3f}{years:>16}"
        )


def _print_table(rows: list[Any], graph: str, platform: str, limit_bytes: int) -> None:
    gb = 1e9
    fast = f"fast memory {limit_bytes / gb:.3f} GB (all-fast: as much as it needs)"
    print(f"{graph} on {platform}, {fast}")
    name_w = max([15, *(len(str(r.strategy)) + 1 for r in rows)])
    head = (
        f"{'strategy':<{name_w}}{'predicted s':>12}{'simulated s':>12}{'slowdown':>10}"
        f"{'moved GB':>10}{'fast peak GB':>13}{'solve s':>9}{'gap':>8}  status"
    )
    print(head)
    print("-" * len(head))

    def num(v: float, fmt: str) -> str:
        width = int(fmt.split(".")[0])
        return "-".rjust(width) if math.isnan(v) else format(v, fmt)

    for r in rows:
        if r.error:
            blank = " " * (12 + 12 + 10 + 10 + 13 + 9 + 8)
            print(f"{r.strategy:<{name_w}}{blank}  error: {r.error}")
            continue
        status = r.status if r.valid else f"{r.status}; INVALID PLAN"
        if not math.isnan(r.hit_rate):
            status += f"; hit rate {100 * r.hit_rate:.1f}%"
        gap = "-" if math.isnan(r.gap) else f"{100 * r.gap:.2f}%"
        print(
            f"{r.strategy:<{name_w}}{num(r.predicted_s, '12.4f')}{num(r.simulated_s, '12.4f')}"
            f"{num(r.slowdown, '10.3f')}{num(r.moved_bytes / gb, '10.2f')}"
            f"{num(r.fast_peak_bytes / gb, '13.3f')}{num(r.solve_s, '9.2f')}{gap:>8}  {status}"
        )
