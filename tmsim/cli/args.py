"""Arguments several commands share, each parsed and range-checked once, at the edge.

Every option's value is checked by its argparse ``type``, so a value out of range is a usage
error naming the option (exit code 2, one line) before anything runs: whole numbers
(:func:`whole_number`), fractions, seconds, non-empty text, lists of names, capacities
(:class:`~tmsim.capacity.Capacity`) and sizes. Planner settings become one
:class:`~tmsim.planners.PlanSettings`.

Building a parser imports nothing heavy (numpy, cvxpy, pandas, the simulator): defaults and
choices come from :mod:`tmsim.cli.catalog`, :mod:`tmsim.strategies` and
:mod:`tmsim.planners.settings` (the planner settings themselves), and the library
modules a value needs are imported when a value is converted or a command runs.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tmsim import InterferenceLevel, PlanSettings, TmsimError
from tmsim.errors import one_line

if TYPE_CHECKING:
    from tmsim import Capacity

#: The interference level of the commands that replay plans when none is given.
DEFAULT_LEVEL = InterferenceLevel.default()

DEFAULT_PLATFORM = "cascadelake-optane"
#: The largest count an option takes: what the library's int64 arrays hold.
MAX_COUNT = 2**63 - 1
#: The most branch-and-bound nodes a solve may be limited to (HiGHS's ``mip_max_nodes`` is a
#: 32-bit integer; a larger limit is no limit on any graph the planners can solve).
MAX_NODES = PlanSettings.RANGES["node_limit"][1]
#: The planner settings' defaults, which the options show and take (the library's own value:
#: :mod:`tmsim.planners.settings` imports nothing heavy).
DEFAULT_SETTINGS = PlanSettings()


def whole_number(low: int, high: int = MAX_COUNT, note: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``; ``note`` (if any) ends the
    message for a number below ``low``, saying why."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < low:
            why = f" ({note})" if note else ""
            raise argparse.ArgumentTypeError(f"must be a whole number >= {low}, got {text!r}{why}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {text!r}")
        return value

    parse.__name__ = f"whole_number_from_{low}"
    return parse


#: ``--batch``: samples per step.
batch_arg = whole_number(1)
#: ``--workers``: local processes.
workers_arg = whole_number(1)
#: The planner settings' ranges, the same check as the library's (``PlanSettings.RANGES``).
_RANGES = PlanSettings.RANGES
#: ``--node-limit``: branch-and-bound nodes per solve (0: the root only).
node_limit_arg = whole_number(*_RANGES["node_limit"])
#: ``--lp-iterations``: simplex iterations of the LP relaxation before each MILP solve.
lp_iterations_arg = whole_number(*_RANGES["lp_iterations"])
#: ``--window``: kernels either side of a use where an asynchronous copy may run.
window_arg = whole_number(*_RANGES["window"])
MAX_WINDOW = _RANGES["window"][1]
#: Deepest chain of producers the recomputing formulations run again before one kernel.
MAX_RECOMPUTE_DEPTH = _RANGES["recompute_depth"][1]
#: ``--recompute-depth``.
recompute_depth_arg = whole_number(*_RANGES["recompute_depth"])


def energy_weight_arg(text: str) -> float:
    """An argparse type: a finite number >= 0 (seconds per joule)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def fraction_arg(text: str) -> float:
    """An argparse type: a number from 0 to 1 (a relative gap)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}")
    return value


def level_arg(text: str) -> InterferenceLevel:
    """An argparse type: an interference level (:class:`tmsim.InterferenceLevel`), any
    case."""
    try:
        return InterferenceLevel.parse(text)
    except TmsimError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_interference_argument(p: argparse.ArgumentParser) -> None:
    """``--interference LEVEL`` (:func:`level_arg`), for the commands that replay plans."""
    p.add_argument(
        "--interference",
        type=level_arg,
        default=DEFAULT_LEVEL,
        metavar="LEVEL",
        help="how much sharing the replay models: none (the cost model's world), bandwidth "
        "(tiers, links and copy engines shared max-min), controller (bandwidth plus the "
        "platform's memory controller: channel time by traffic type, writes drained first, "
        f"shares by demand) (default: {DEFAULT_LEVEL.value})",
    )


def seconds_arg(text: str) -> float | None:
    """An argparse type: a finite number of seconds > 0, or ``none`` (no wall-clock limit:
    the solve stops on the gap or a limit on work alone, the same on any load)."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"seconds must be a finite number > 0, got {text!r}")
    return value


def text_arg(text: str) -> str:
    """An argparse type: text that is not blank and holds no NUL (a name, a path, an address);
    returned as given."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty, got {text!r}")
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"must not contain a NUL character, got {text!r}")
    return text


def names_arg(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated names, at least one, none empty (spaces around a
    name are dropped)."""
    parts = tuple(p.strip() for p in text.split(","))
    if not any(parts):
        raise argparse.ArgumentTypeError(f"must name at least one, got {text!r}")
    if not all(parts):
        raise argparse.ArgumentTypeError(f"has an empty name between commas: {text!r}")
    return parts


def ratio_arg(text: str) -> Capacity:
    """An argparse type: a capacity ratio ``S:F`` (slow to fast)."""
    from tmsim import Capacity

    if ":" not in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a ratio such as '4:1'")
    try:
        return Capacity.parse(text)
    except TmsimError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    except ArithmeticError:  # decimal overflow of an absurd exponent
        raise argparse.ArgumentTypeError(f"capacity {text!r} is out of range") from None


def size_arg(text: str) -> int:
    """An argparse type: a size in bytes (``"1000000"``, ``"3e9"``, ``"24GiB"``, ``"96GB"``),
    from 1 to 2**63 - 1."""
    from tmsim import Capacity

    try:
        return Capacity.parse_size(text)
    except TmsimError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def setting_arg(text: str) -> tuple[str, object]:
    """An argparse type: ``KEY=VALUE``, the value a JSON number, boolean or quoted string, or
    else the text as it is."""
    import json

    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"give KEY=VALUE, e.g. compute.cores=64, got {text!r}")
    try:
        value: object = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


def add_plan_arguments(
    p: argparse.ArgumentParser, time_limit_s: float | None = DEFAULT_SETTINGS.time_limit_s
) -> None:
    """Platform, capacity, solver and profile arguments shared by ``plan`` and ``compare``;
    the MILP time limit defaults to ``time_limit_s``."""
    p.add_argument(
        "--platform", type=text_arg, default=DEFAULT_PLATFORM, help="preset name or TOML file"
    )
    p.add_argument(
        "--set",
        type=setting_arg,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="platform_set",
        help="set a field of the platform, a dotted path as sweeps write them (e.g. "
        "compute.kernels.matmul_fp32=tf32: fp32 matrix products in TF32, as "
        "torch.set_float32_matmul_precision('high') does); repeatable",
    )
    cap = p.add_mutually_exclusive_group()
    cap.add_argument(
        "--ratio", type=ratio_arg, help="slow:fast capacity ratio, e.g. 4:1 (fast = peak / 5)"
    )
    cap.add_argument(
        "--fast-bytes", type=size_arg, help="fast-tier capacity, e.g. 3e9, 96GB or 24GiB"
    )
    d = DEFAULT_SETTINGS
    p.add_argument(
        "--solver", type=text_arg, default=d.solver, help=f"cvxpy MILP solver ({d.solver})"
    )
    p.add_argument(
        "--time-limit",
        type=seconds_arg,
        default=time_limit_s,
        help=f"MILP seconds, > 0, or none: stop on the gap and the node limit alone, the same "
        f"on any load ({'none' if time_limit_s is None else f'{time_limit_s:g}'})",
    )
    p.add_argument(
        "--gap", type=fraction_arg, default=d.gap, help=f"MILP relative gap, 0 to 1 ({d.gap})"
    )
    p.add_argument(
        "--node-limit",
        type=node_limit_arg,
        default=d.node_limit,
        help=f"most branch-and-bound nodes per MILP solve, 0 to {MAX_NODES} (a limit on work, "
        "not time)",
    )
    p.add_argument(
        "--lp-iterations",
        type=lp_iterations_arg,
        default=d.lp_iterations,
        help=f"most simplex iterations of the LP relaxation solved (with RINS) before HiGHS's "
        f"branch and bound, 1 to {MAX_NODES} ({d.lp_iterations})",
    )
    p.add_argument(
        "--window",
        type=window_arg,
        default=d.window,
        help=f"async window: kernels either side of a use, 1 to {MAX_WINDOW} ({d.window})",
    )
    p.add_argument(
        "--recompute-depth",
        type=recompute_depth_arg,
        default=d.recompute_depth,
        help="remat and the -rc formulations: longest chain of producers run again before one "
        f"kernel, 1 to {MAX_RECOMPUTE_DEPTH} ({d.recompute_depth}; each level adds variables)",
    )
    p.add_argument(
        "--energy-weight",
        type=energy_weight_arg,
        default=d.energy_weight_s_per_j,
        metavar="S_PER_J",
        help="MILP: seconds of step time one joule is worth; the objective becomes time + "
        "this x the energy the plan decides (default 0: time alone; needs a platform with "
        "an [energy] table)",
    )
    p.add_argument(
        "--no-host-kernels",
        dest="host_kernels",
        action="store_false",
        help="MILP: keep every kernel on the compute device (by default, on a platform with a "
        "host compute, the MILP may run update kernels on the host, as ZeRO-Offload does)",
    )
    add_profile_argument(p)


def add_profile_argument(p: argparse.ArgumentParser, replay: bool = False) -> None:
    """``--profile FILE``: measured kernel times (:mod:`tmsim.profiles`), for every planner
    or, with ``replay``, for a plan's check and replay."""
    what = (
        "replay with these measured kernel times (default: those the plan was made with, if any)"
        if replay
        else "measured kernel times that replace the roofline's in every planner and replay"
    )
    p.add_argument(
        "--profile",
        type=text_arg,
        metavar="FILE",
        help=f"{what}: a CSV file with columns kernel,placement,seconds (placement: the tier "
        "of each operand, joined by |)",
    )


def check_output(flag: str, path: str) -> None:
    """Refuse an output file ``path`` (given with ``flag``) that cannot be written: a
    directory, a missing or non-directory parent, a file or parent that is not writable.
    Raises :class:`TmsimError`."""
    target = Path(path)
    parent = target.parent
    where = f"{flag} {path}"
    if target.is_dir():
        raise TmsimError(f"{where}: is a directory, not a file")
    if not parent.exists():
        raise TmsimError(f"{where}: directory {str(parent)!r} does not exist")
    if not parent.is_dir():
        raise TmsimError(f"{where}: {str(parent)!r} is not a directory")
    if target.exists() and not os.access(target, os.W_OK):
        raise TmsimError(f"{where}: the file is not writable")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TmsimError(f"{where}: directory {str(parent)!r} is not writable")


def capacity_from_args(args: argparse.Namespace) -> Capacity | None:
    """The capacity ``--ratio`` or ``--fast-bytes`` asks for, or None (the tier's own)."""
    if args.fast_bytes is not None:
        from tmsim import Capacity

        return Capacity.of_bytes(args.fast_bytes)
    ratio: Capacity | None = args.ratio
    return ratio


def settings_from_args(args: argparse.Namespace) -> PlanSettings:
    """The planner settings the parsed arguments ask for. Raises :class:`TmsimError` naming
    the option for a value out of range."""
    from tmsim.api.measured import read_profile

    profile = read_profile(args.profile) if args.profile is not None else None
    try:
        return PlanSettings(
            capacity=capacity_from_args(args),
            solver=args.solver,
            time_limit_s=args.time_limit,
            gap=args.gap,
            node_limit=args.node_limit,
            lp_iterations=args.lp_iterations,
            window=args.window,
            recompute_depth=args.recompute_depth,
            energy_weight_s_per_j=args.energy_weight,
            host_kernels=args.host_kernels,
            profile=profile,
        )
    except TmsimError as exc:
        raise TmsimError(f"bad planner option: {exc}") from None


__all__ = [
    "DEFAULT_LEVEL",
    "DEFAULT_PLATFORM",
    "MAX_COUNT",
    "MAX_NODES",
    "MAX_RECOMPUTE_DEPTH",
    "MAX_WINDOW",
    "add_plan_arguments",
    "add_profile_argument",
    "batch_arg",
    "capacity_from_args",
    "check_output",
    "fraction_arg",
    "names_arg",
    "node_limit_arg",
    "one_line",
    "ratio_arg",
    "recompute_depth_arg",
    "seconds_arg",
    "settings_from_args",
    "size_arg",
    "text_arg",
    "whole_number",
    "window_arg",
    "workers_arg",
]
