"""The ``tmsim`` command line.

Each group of subcommands lives in its own module of :mod:`tmsim.cli` exposing
``add_commands(subparsers)``; every subcommand sets ``func`` on its parser to a handler
``(args) -> int`` that returns the exit code. Errors caused by bad input
(:class:`~tmsim.errors.TmsimError`, :class:`hwmodels.HardwareModelError`, ``OSError``) are
printed as one line on stderr with exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hwmodels.errors import HardwareModelError
from tmsim import __version__
from tmsim.cli import compare as cli_compare
from tmsim.cli import graph as cli_graph
from tmsim.cli import plan as cli_plan
from tmsim.cli import platform as cli_platform
from tmsim.cli import reproduce as cli_reproduce
from tmsim.cli import simulate as cli_simulate
from tmsim.cli import sweep as cli_sweep
from tmsim.errors import TmsimError
from tmsim.figures import FigureRegistry

EXIT_BAD_INPUT = 2


def build_parser(figures: FigureRegistry | None = None) -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered; ``reproduce`` runs the
    figures of ``figures`` (None: those installed, see :func:`tmsim.figures.discover`)."""
    parser = argparse.ArgumentParser(
        prog="tmsim",
        description="Plan and simulate tensor placement and movement in heterogeneous memory.",
    )
    parser.add_argument("--version", action="version", version=f"tmsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cli_graph.add_commands(sub)
    cli_platform.add_commands(sub)
    cli_plan.add_commands(sub)
    cli_simulate.add_commands(sub)
    cli_compare.add_commands(sub)
    cli_reproduce.add_commands(sub, figures)
    cli_sweep.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None, figures: FigureRegistry | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``) and return the exit code;
    ``tmsim reproduce`` runs the figures of ``figures`` (None: those installed in the
    ``tmsim.figures`` entry-point group)."""
    parser = build_parser(figures)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        code: int = args.func(args)
    except (TmsimError, HardwareModelError) as exc:
        print(f"tmsim: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"tmsim: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
