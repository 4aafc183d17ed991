"""Checks shared by the figure tests (tests/test_figures_*.py): the data file's metadata, the
plot files, and which stored points a compute stage wrote."""

from __future__ import annotations

from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

import tmsim
from tmsim.comparison import Row
from tmsim.figures import points_dir

#: One small workload (142 kernels, 1.2 GB) whose sync MILP at 4:1 solves in about a second
#: (at 1:1 it takes ten times longer) for every tiny configuration.
TINY = (("vgg19", 4),)
RATIO = "4:1"
ROW_FIELDS = [f.name for f in fields(Row)]


def jsonish(value: Any) -> Any:
    """``value`` as it comes back from a data file's JSON metadata (dataclasses become dicts,
    tuples lists)."""
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        value = asdict(value)
    if isinstance(value, dict):
        return {k: jsonish(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonish(v) for v in value]
    return value


def check_meta(meta: dict[str, Any], name: str, config: Any) -> None:
    """The data file names its figure, holds ``config`` exactly and says where it came from."""
    assert meta["figure"] == name
    assert meta["config"] == jsonish(config)
    prov = meta["provenance"]
    assert prov["solver"] == "HIGHS"
    for key in ("tmsim_version", "git_commit", "libraries", "created_utc"):
        assert prov[key], key


def check_plot(module: Any, data: Path, out: Path) -> None:
    """``module.plot`` writes ``NAME.pdf`` and ``NAME.png`` into ``out``, both non-trivial;
    through the public API the figure draws from its table on a figure of its own and on
    Axes the caller gives, one per panel, and refuses another number of them."""
    files = module.plot(data, out)
    assert sorted(p.suffix for p in files) == [".pdf", ".png"]
    for p in files:
        assert p.parent == out and p.stem == module.NAME and p.stat().st_size > 1000
    frame = tmsim.read_table(data)
    own = tmsim.figure(module.NAME, frame)
    count = len(own.axes)
    assert count >= 1
    mine = Figure()
    axes = mine.subplots(1, count, squeeze=False)[0]
    drawn = tmsim.figure(module.NAME, frame, ax=list(axes))
    assert drawn is mine and all(a.has_data() or a.texts or a.patches for a in axes)
    with pytest.raises(tmsim.TmsimError, match=f"draws {count} panel"):
        tmsim.figure(module.NAME, frame, ax=list(Figure().subplots(1, count + 1)))
    with pytest.raises(tmsim.TmsimError, match="no configuration"):
        tmsim.figure(module.NAME, frame.iloc[:0].copy().pipe(_without_attrs))


def _without_attrs(frame: Any) -> Any:
    frame.attrs.clear()
    return frame


def stored_points(out: Path, name: str) -> dict[str, int]:
    """The finished point files of figure ``name`` in ``out``, each with its modification
    time in nanoseconds (unchanged: the point was not evaluated again)."""
    folder = points_dir(out, name) / "points"
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("*.json"))}
