"""Arguments several commands share, each parsed once into its value at the edge.

Capacities become :class:`~tmsim.capacity.Capacity` values, sizes whole byte counts, solver
settings one :class:`~tmsim.planners.PlanSettings`; a value argparse cannot convert is
reported by argparse as a usage error naming the option (exit code 2).
"""

from __future__ import annotations

import argparse
import math

from tmsim.capacity import Capacity, CapacityError, parse_bytes
from tmsim.errors import TmsimError
from tmsim.planners.settings import PlanSettings

DEFAULT_PLATFORM = "cascadelake-optane"


def ratio_arg(text: str) -> Capacity:
    """An argparse type: a capacity ratio ``S:F`` (slow to fast)."""
    if ":" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a ratio such as '4:1'")
    try:
        return Capacity.parse(text)
    except CapacityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def size_arg(text: str) -> int:
    """An argparse type: a size in bytes (``"1000000"``, ``"3e9"``, ``"24GiB"``, ``"96GB"``)."""
    try:
        return parse_bytes(text)
    except CapacityError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds_arg(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"seconds must be a finite number > 0, got {text!r}")
    return value


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    """Platform, capacity and solver arguments shared by ``plan`` and ``compare``."""
    p.add_argument("--platform", default=DEFAULT_PLATFORM, help="preset name or TOML file")
    cap = p.add_mutually_exclusive_group()
    cap.add_argument(
        "--ratio", type=ratio_arg, help="slow:fast capacity ratio, e.g. 4:1 (fast = peak / 5)"
    )
    cap.add_argument(
        "--fast-bytes", type=size_arg, help="fast-tier capacity, e.g. 3e9, 96GB or 24GiB"
    )
    d = PlanSettings()
    p.add_argument("--solver", default=d.solver, help=f"cvxpy MILP solver ({d.solver})")
    p.add_argument("--time-limit", type=seconds_arg, default=d.time_limit_s, help="MILP seconds")
    p.add_argument("--gap", type=float, default=d.gap, help=f"MILP relative gap ({d.gap})")
    p.add_argument(
        "--node-limit",
        type=int,
        default=d.node_limit,
        help="most branch-and-bound nodes per MILP solve (a limit on work, not time)",
    )
    p.add_argument("--window", type=int, default=d.window, help=f"async window ({d.window})")


def capacity_from_args(args: argparse.Namespace) -> Capacity | None:
    """The capacity ``--ratio`` or ``--fast-bytes`` asks for, or None (the tier's own)."""
    if args.fast_bytes is not None:
        return Capacity.of_bytes(args.fast_bytes)
    ratio: Capacity | None = args.ratio
    return ratio


def settings_from_args(args: argparse.Namespace) -> PlanSettings:
    """The planner settings the parsed arguments ask for. Raises :class:`TmsimError` naming
    the option for a value out of range."""
    try:
        return PlanSettings(
            capacity=capacity_from_args(args),
            solver=args.solver,
            time_limit_s=args.time_limit,
            gap=args.gap,
            node_limit=args.node_limit,
            window=args.window,
        )
    except TmsimError as exc:
        raise TmsimError(f"bad planner option: {exc}") from None


__all__ = [
    "DEFAULT_PLATFORM",
    "add_plan_arguments",
    "capacity_from_args",
    "ratio_arg",
    "seconds_arg",
    "settings_from_args",
    "size_arg",
]
