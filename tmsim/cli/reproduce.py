"""``tmsim reproduce``: every figure of :mod:`experiments`, data first, then the figure.

Each figure's compute stage writes ``OUT/NAME.parquet`` and its plot stage ``OUT/NAME.pdf``
and ``OUT/NAME.png``; ``OUT/reproduce.json`` records, per figure, the seconds each stage took
and whether it failed. A figure whose data file already exists for the same run kind (quick or
full) is plotted again without recomputing unless ``--force`` is given, so an interrupted run
picks up where it stopped. A figure that fails is reported and the others still run; the exit
code is 1 if any failed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from tmsim.errors import TmsimError
from tmsim.jsonio import write_json_atomic
from tmsim.results import ResultFileError, read_table


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``reproduce`` on ``sub``."""
    p = sub.add_parser("reproduce", help="regenerate every figure and its data")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for data and figures")
    p.add_argument(
        "--quick", action="store_true", help="reduced configurations (minutes, not hours)"
    )
    p.add_argument("--only", help="comma-separated figure names (default: all)")
    p.add_argument("--force", action="store_true", help="recompute data files that exist")
    p.add_argument("--plot-only", action="store_true", help="only redraw from existing data")
    p.set_defaults(func=_reproduce)


def _reproduce(args: argparse.Namespace) -> int:
    from experiments import FIGURES, figure_module

    names = list(FIGURES)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in FIGURES]
        if unknown:
            raise TmsimError(
                f"unknown figure(s) {', '.join(unknown)}; figures are {', '.join(FIGURES)}"
            )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kind = "quick" if args.quick else "full"
    report: dict[str, Any] = {"kind": kind, "figures": {}}
    started = time.perf_counter()
    failed = 0
    for i, name in enumerate(names):
        module = figure_module(name)
        entry: dict[str, Any] = {"title": module.TITLE}
        _say(f"[{i + 1}/{len(names)}] {name}: {module.TITLE}")
        try:
            data = out / f"{name}.parquet"
            if args.plot_only or (not args.force and _has_data(data, kind)):
                if not data.is_file():
                    raise TmsimError(f"{data}: no data file to plot (run without --plot-only)")
                entry["compute_s"] = 0.0
                _say("    data exists; not recomputed")
            else:
                config = module.QUICK if args.quick else module.Config()
                t0 = time.perf_counter()
                data = module.compute(config, out, progress=lambda m: _say(f"    {m}"))
                _mark(data, kind)
                entry["compute_s"] = round(time.perf_counter() - t0, 2)
            t0 = time.perf_counter()
            entry["files"] = [str(p) for p in module.plot(data, out)]
            entry["plot_s"] = round(time.perf_counter() - t0, 2)
            _say(f"    done: compute {entry['compute_s']} s, plot {entry['plot_s']} s")
        except Exception as exc:  # one figure's failure must not lose the others
            failed += 1
            entry["error"] = f"{type(exc).__name__}: {exc}"
            _say(f"    FAILED: {entry['error']}")
        report["figures"][name] = entry
        report["total_s"] = round(time.perf_counter() - started, 2)
        write_json_atomic(report, out / "reproduce.json")
    _say(f"{len(names) - failed} of {len(names)} figures in {report['total_s']} s; see {out}")
    return 1 if failed else 0


def _marker(data: Path) -> Path:
    return data.with_name(f".{data.stem}.kind")


def _mark(data: Path, kind: str) -> None:
    tmp = _marker(data).with_suffix(".tmp")
    tmp.write_text(kind, encoding="utf-8")
    tmp.replace(_marker(data))


def _has_data(data: Path, kind: str) -> bool:
    """Whether ``data`` holds a finished result of a ``kind`` run."""
    marker = _marker(data)
    if not (data.is_file() and marker.is_file()):
        return False
    if marker.read_text(encoding="utf-8").strip() != kind:
        return False
    try:
        read_table(data)
    except (ResultFileError, OSError, ValueError):
        return False
    return True


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
