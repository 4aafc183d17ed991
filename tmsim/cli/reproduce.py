"""``tmsim reproduce``: every figure of a :class:`~tmsim.figures.FigureRegistry`, data first,
then the figure. The registry is the one given to :func:`tmsim.cli.main.main`, else the one
installed in the ``tmsim.figures`` entry-point group (:func:`tmsim.figures.discover`; this
repository's ``experiments`` package).

Each figure's compute stage writes ``OUT/NAME.parquet`` and its plot stage ``OUT/NAME.pdf``
and ``OUT/NAME.png``; ``OUT/reproduce.json`` records, per figure, the seconds each stage took
and whether it failed. A figure whose data file already exists for the same run kind (quick or
full) is plotted again without recomputing unless ``--force`` is given, so an interrupted run
picks up where it stopped. A figure that fails is reported and the others still run; the exit
code is 1 if any failed, 130 if interrupted. Within a figure, finished points are kept in
``OUT/NAME.points/`` (:func:`tmsim.figures.points_dir`), so an interrupted compute stage
resumes without repeating them; ``--force`` deletes them first. ``--workers N`` and
``--dask ADDRESS`` say where the points run. When figures failed, the last line on stderr is
a ``tmsim: error:`` line naming them.

The registry, the results tables (pandas) and the figures are imported when the command runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmsim import TmsimError
from tmsim.cli.args import names_arg, one_line, text_arg, workers_arg

if TYPE_CHECKING:
    from tmsim.figures import FigureRegistry

EXIT_INTERRUPTED = 130


def add_commands(
    sub: argparse._SubParsersAction[Any], figures: FigureRegistry | None = None
) -> None:
    """Register ``reproduce`` on ``sub``, running the figures of ``figures`` (None: the
    installed registry, looked up when the command runs)."""
    p = sub.add_parser("reproduce", help="regenerate every figure and its data")
    p.add_argument(
        "--out",
        type=text_arg,
        required=True,
        metavar="DIR",
        help="directory for data and figures",
    )
    p.add_argument(
        "--quick", action="store_true", help="reduced configurations (minutes, not hours)"
    )
    p.add_argument("--only", type=names_arg, help="comma-separated figure names (default: all)")
    redo = p.add_mutually_exclusive_group()
    redo.add_argument(
        "--force",
        action="store_true",
        help="recompute data files that exist, and their stored points",
    )
    redo.add_argument("--plot-only", action="store_true", help="only redraw from existing data")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=workers_arg,
        metavar="N",
        help="local processes per figure (default: the figure's own, usually 1)",
    )
    where.add_argument(
        "--dask",
        type=text_arg,
        metavar="ADDRESS",
        help="run the points on the Dask scheduler at ADDRESS (e.g. tcp://host:8786); its "
        "workers need tmsim installed (pip install 'tmsim[dask]')",
    )
    p.set_defaults(func=partial(_reproduce, figures=figures))


def _reproduce(args: argparse.Namespace, figures: FigureRegistry | None) -> int:
    from tmsim.figures import discover

    registry = figures if figures is not None else discover()
    names = list(registry.names)
    if args.only is not None:
        names = registry.select(list(dict.fromkeys(args.only)))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kind = "quick" if args.quick else "full"
    report: dict[str, Any] = {"kind": kind, "figures": {}, "total_s": 0.0}
    started = time.perf_counter()
    for i, name in enumerate(names):
        _say(f"[{i + 1}/{len(names)}] {name}")
        try:
            entry = _figure(registry, name, args, out, kind)
        except KeyboardInterrupt:
            _say(f"interrupted; finished points are kept in {out}: run again to resume")
            return EXIT_INTERRUPTED
        report["figures"][name] = entry
        report["total_s"] = round(time.perf_counter() - started, 2)
        _write_atomic(out / "reproduce.json", json.dumps(report, indent=2, allow_nan=False))
    failed = [n for n, e in report["figures"].items() if "error" in e]
    done = f"{len(names) - len(failed)} of {len(names)} figures in {report['total_s']} s"
    if failed:
        where = out / "reproduce.json"
        _say(one_line(f"tmsim: error: {done}; failed: {', '.join(failed)}; see {where}"))
        return 1
    _say(f"{done}; see {out}")
    return 0


def _figure(
    registry: FigureRegistry, name: str, args: argparse.Namespace, out: Path, kind: str
) -> dict[str, Any]:
    """Compute (unless its data exists) and plot figure ``name``; its ``reproduce.json``
    entry, with ``error`` if it failed."""
    from tmsim.figures import points_dir

    entry: dict[str, Any] = {}
    try:
        module = registry.module(name)
        entry["title"] = module.TITLE
        _say(f"    {module.TITLE}")
        data = out / f"{name}.parquet"
        if args.plot_only or (not args.force and _has_data(data, kind)):
            if not data.is_file():
                raise TmsimError(f"{data}: no data file to plot (run without --plot-only)")
            entry["compute_s"] = 0.0
            _say("    data exists; not recomputed")
        else:
            config = module.QUICK if args.quick else module.Config()
            _marker(data).unlink(missing_ok=True)  # an interrupted compute leaves no finished data
            if args.force:
                shutil.rmtree(points_dir(out, name), ignore_errors=True)
            t0 = time.perf_counter()
            data = module.compute(
                config,
                out,
                progress=lambda m: _say(f"    {m}"),
                workers=args.workers,
                dask_address=args.dask,
            )
            _mark(data, kind)
            entry["compute_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        entry["files"] = [str(p) for p in module.plot(data, out)]
        entry["plot_s"] = round(time.perf_counter() - t0, 2)
        _say(f"    done: compute {entry['compute_s']} s, plot {entry['plot_s']} s")
    except Exception as exc:  # one figure's failure must not lose the others
        entry["error"] = f"{type(exc).__name__}: {exc}"
        _say(f"    FAILED: {entry['error']}")
    return entry


def _marker(data: Path) -> Path:
    return data.with_name(f".{data.stem}.kind")


def _mark(data: Path, kind: str) -> None:
    _write_atomic(_marker(data), kind)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so that an
    interrupted run never leaves a half-written file under the final name."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _has_data(data: Path, kind: str) -> bool:
    """Whether ``data`` holds a finished result of a ``kind`` run."""
    import tmsim

    marker = _marker(data)
    if not (data.is_file() and marker.is_file()):
        return False
    if marker.read_text(encoding="utf-8").strip() != kind:
        return False
    try:
        tmsim.read_table(data)
    except (TmsimError, OSError, ValueError):
        return False
    return True


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
