"""The ``tmsim`` command line.

Each group of subcommands lives in its own module of :mod:`tmsim.cli` exposing
``add_commands(subparsers)``; every subcommand sets ``func`` on its parser to a handler
``(args) -> int`` that returns the exit code.

Errors are one line on stderr, never a traceback:

- a value an option refuses (each is range-checked by its argparse type, see
  :mod:`tmsim.cli.args`), an unknown option or a missing argument: ``tmsim CMD: error: ...``
  and :class:`SystemExit` with code 2, raised by :func:`main`;
- bad input found while a command runs (:class:`~tmsim.errors.TmsimError`,
  :class:`hwmodels.HardwareModelError`, ``OSError``): ``tmsim: error: ...``, exit code 2
  returned by :func:`main`;
- Ctrl-C: ``tmsim: interrupted``, exit code 130 (``sweep`` and ``reproduce`` say first how to
  resume).

Any other exception is a fault of tmsim and keeps its traceback.

Startup is fast: building the parser imports no numpy, cvxpy, pandas, SciPy, SimPy or
matplotlib; a command's library modules are imported when it runs. The parsers of the
commands in :data:`DEFERRED` (whose modules import the simulator) are built only when their
command is the one asked for; ``tmsim --help`` lists them from that table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NoReturn

from tmsim import TmsimError, __version__
from tmsim.cli import compare as cli_compare
from tmsim.cli import graph as cli_graph
from tmsim.cli import plan as cli_plan
from tmsim.cli import platform as cli_platform
from tmsim.cli import reproduce as cli_reproduce
from tmsim.cli import sweep as cli_sweep
from tmsim.cli import torchimport as cli_torchimport
from tmsim.cli.args import one_line
from tmsim.errors import shown_path

if TYPE_CHECKING:
    from tmsim.figures import FigureRegistry

EXIT_BAD_INPUT = 2
#: The exit code of a command interrupted by Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130

#: Commands whose parser is built only when they run, with the help ``tmsim --help`` shows
#: (the same as their own parser's).
DEFERRED: Mapping[str, str] = {
    "simulate": "replay a plan, or a model's step in 2LM memory mode, and report its time",
}


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, ``PROG: error: MESSAGE``, with
    exit code 2 (the usage is what ``PROG --help`` prints)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {one_line(message)}\n")


def build_parser(
    figures: FigureRegistry | None = None, deferred: bool = False
) -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered; ``reproduce`` runs the
    figures of ``figures`` (None: those installed, see :func:`tmsim.figures.discover`).

    With ``deferred`` the commands of :data:`DEFERRED` get their own parsers (importing their
    modules); without it they are listed by name and help only, and take no arguments.
    """
    parser = Parser(
        prog="tmsim",
        description="Plan and simulate tensor placement and movement in heterogeneous memory.",
    )
    parser.add_argument("--version", action="version", version=f"tmsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    cli_graph.add_commands(sub)
    cli_torchimport.add_commands(sub)
    cli_platform.add_commands(sub)
    cli_plan.add_commands(sub)
    if deferred:
        from tmsim.cli import simulate as cli_simulate

        cli_simulate.add_commands(sub)
    else:
        for name, text in DEFERRED.items():
            sub.add_parser(name, help=text, add_help=False)
    cli_compare.add_commands(sub)
    cli_reproduce.add_commands(sub, figures)
    cli_sweep.add_commands(sub)
    return parser


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top-level
    options take no values), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None, figures: FigureRegistry | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``) and return the exit code;
    ``tmsim reproduce`` runs the figures of ``figures`` (None: those installed in the
    ``tmsim.figures`` entry-point group). Usage errors raise :class:`SystemExit` (code 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(figures, deferred=command_in(argv) in DEFERRED)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.error(f"give a COMMAND: {', '.join(_commands(parser))} (tmsim --help)")
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("tmsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        message = _bad_input(exc)
        if message is None:
            raise
        print(f"tmsim: error: {one_line(message)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return code


def _bad_input(exc: Exception) -> str | None:
    """The message of ``exc`` if it is an error of the input (see the module documentation),
    else None (a fault of tmsim, whose traceback should be seen)."""
    if isinstance(exc, TmsimError):
        return str(exc)
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        if exc.filename is None:
            return reason
        return f"{shown_path(str(exc.filename))}: {reason}"
    from tmsim.api.inputs import INPUT_ERRORS  # imported on an error only

    return str(exc) if isinstance(exc, INPUT_ERRORS) else None


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommand names of ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


if __name__ == "__main__":
    sys.exit(main())
