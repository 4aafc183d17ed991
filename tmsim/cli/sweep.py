"""``tmsim sweep SPEC.toml --out DIR``: run a declarative sweep (:mod:`tmsim.sweeps`),
resuming where an earlier run in ``DIR`` stopped, with a progress bar on stderr.

Exit codes: 0 when every point evaluated this run finished (also when ``--limit`` left points
pending: run again for the rest), 1 when some failed (recorded in ``DIR/failed/``, retried by
the next run; the last line on stderr is then a ``tmsim: error:`` line), 2 for bad input, 130
when interrupted (finished points are kept). The sweep engine (pandas, the planners) is
imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tmsim import TmsimError
from tmsim.cli.args import text_arg, whole_number, workers_arg
from tmsim.cli.catalog import TABLE_FORMATS

if TYPE_CHECKING:
    from tmsim.api.sweeps import Counts

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
#: Failures listed on stderr at the end; the rest are in ``DIR/failed/``.
SHOWN_FAILURES = 5


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``sweep`` on ``sub``."""
    p = sub.add_parser(
        "sweep",
        help="run a parameter sweep from a TOML spec, resumably, in a process pool or on Dask",
        description="Evaluate every point of SPEC (see experiments/sweeps/example.toml), one "
        "file per finished point in DIR/points/, then one table DIR/results.parquet. Finished "
        "points are never recomputed: run the same command again to resume.",
    )
    p.add_argument("spec", type=text_arg, help="sweep spec, a TOML file")
    p.add_argument(
        "--out", type=text_arg, required=True, metavar="DIR", help="output folder (created)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=workers_arg,
        metavar="N",
        help="local worker processes, >= 1 (default: the number of CPUs; 1: in this process)",
    )
    where.add_argument(
        "--dask",
        type=text_arg,
        metavar="ADDRESS",
        help="submit to the Dask scheduler at ADDRESS (e.g. tcp://host:8786) instead of a "
        "local pool; its workers need tmsim installed (pip install 'tmsim[dask]')",
    )
    p.add_argument(
        "--format", choices=TABLE_FORMATS, default="parquet", help="results table format"
    )
    p.add_argument(
        "--limit",
        type=whole_number(1),
        metavar="N",
        help="evaluate only about N >= 1 of the pending points now (whole tasks); run again "
        "for more",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="report the points, how many are finished and what would run; compute nothing",
    )
    p.set_defaults(func=_sweep)


class ProgressBar:
    """A one-line progress bar: done/total, failures, elapsed time and an ETA.

    On a terminal the line is redrawn in place; elsewhere (a log file) a line is written at
    the start, about every tenth of the work, and at the end. ``clock`` gives seconds.
    """

    def __init__(
        self,
        name: str,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
        width: int = 24,
    ) -> None:
        self.name, self.stream, self.clock, self.width = name, stream, clock, width
        self.start = clock()
        self.tty = stream.isatty()
        self.shown_tenths = -1

    def __call__(self, c: Counts) -> None:
        finished = c.total - c.pending
        tenth = 10 * finished // max(c.total, 1)
        if not self.tty and tenth == self.shown_tenths and c.pending:
            return
        self.shown_tenths = tenth
        line = self.render(c)
        if self.tty:
            self.stream.write(f"\r{line}\x1b[K" + ("" if c.pending else "\n"))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def render(self, c: Counts) -> str:
        """The bar for counts ``c``, e.g. ``sweep x [#####-----] 5/10 points, 0 failed, ...``."""
        finished = c.total - c.pending
        filled = self.width * finished // max(c.total, 1)
        elapsed = self.clock() - self.start
        ran = c.evaluated + c.failed
        eta = _clock(elapsed / ran * c.pending) if ran and c.pending else "--:--"
        reused = f" ({c.reused} reused)" if c.reused else ""
        return (
            f"sweep {self.name} [{'#' * filled}{'-' * (self.width - filled)}] "
            f"{finished}/{c.total} points{reused}, {c.failed} failed, "
            f"{_clock(elapsed)} elapsed, ETA {eta}"
        )


def _clock(seconds: float) -> str:
    s = round(seconds)
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


def _sweep(args: argparse.Namespace) -> int:
    from tmsim.api.sweeps import describe_sweep, expand_sweep, run_sweep_in

    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise TmsimError(f"--out {args.out}: not a folder")
    sweep = expand_sweep(args.spec)
    if sweep.skipped:
        shown = "; ".join(sweep.skipped[:3]) + ("; ..." if len(sweep.skipped) > 3 else "")
        print(f"tmsim: skipped {len(sweep.skipped)} grid points: {shown}", file=sys.stderr)
    if args.dry_run:
        print(describe_sweep(sweep, args.out))
        return 0
    bar = ProgressBar(sweep.name, sys.stderr)
    try:
        report = run_sweep_in(
            sweep,
            args.out,
            workers=args.workers,
            client=args.dask,
            table_format=args.format,
            limit=args.limit,
            progress=bar,
        )
    except KeyboardInterrupt:
        print(
            f"\ntmsim: interrupted; finished points are kept in {args.out}/points: run the "
            "same command to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    c = report.counts
    where = f"-> {report.table}" if report.table else f"{c.pending} pending: run again to finish"
    # points whose MILP stopped on its time limit are kept, marked, and computed again next run
    stopped = f", {report.stopped} stopped on the time limit (rerun next time)"
    print(
        f"{sweep.name}: {c.total} points: {c.evaluated} computed now, {c.reused} reused, "
        f"{c.failed} failed{stopped if report.stopped else ''}; {where}"
    )
    for line in report.failures[:SHOWN_FAILURES]:
        print(f"tmsim: failed: {line}", file=sys.stderr)
    if report.failures:
        more = len(report.failures) - SHOWN_FAILURES
        extra = f" ({more} not shown)" if more > 0 else ""
        print(
            f"tmsim: error: {len(report.failures)} points failed{extra}; tracebacks in "
            f"{args.out}/failed/",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return 0
