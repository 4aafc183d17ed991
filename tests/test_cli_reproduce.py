"""``tmsim reproduce`` with a registry it is given (stand-in figure modules written here) and
with the one installed through the ``tmsim.figures`` entry point: each figure's compute and
plot run, finished points survive a failed run, and bad input is a one-line error."""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import experiments
from experiments.common import run_figure_points
from tmsim import figures
from tmsim.cli.main import main
from tmsim.errors import TmsimError
from tmsim.figures import FigureRegistry, discover, points_dir
from tmsim.results import read_table, write_table


@dataclass(frozen=True)
class _Config:
    points: int = 3


def _fake_module(name: str, calls: list[str], fail: bool = False) -> types.ModuleType:
    """A figure module whose compute writes ``config.points`` rows and logs its call."""
    mod = types.ModuleType(f"fake.{name}")

    def compute(
        config: _Config,
        out_dir: Path,
        progress: Any = None,
        *,
        workers: int | None = None,
        dask_address: str | None = None,
    ) -> Path:
        calls.append(f"compute {name} {config.points} {workers} {dask_address}")
        if fail:
            raise RuntimeError("boom")
        frame = pd.DataFrame({"x": list(range(config.points))})
        return write_table(frame, Path(out_dir) / f"{name}.parquet", {"config": config.points})

    def plot(data: Path, out_dir: Path) -> list[Path]:
        calls.append(f"plot {name}")
        frame, _ = read_table(data)
        target = Path(out_dir) / f"{name}.png"
        target.write_bytes(b"png" * len(frame))
        return [target]

    mod.NAME, mod.TITLE = name, f"figure {name}"  # type: ignore[attr-defined]
    mod.Config, mod.QUICK = _Config, _Config(points=1)  # type: ignore[attr-defined]
    mod.compute, mod.plot = compute, plot  # type: ignore[attr-defined]
    return mod


def _registry(mods: dict[str, types.ModuleType]) -> FigureRegistry:
    return FigureRegistry(tuple(mods), mods.__getitem__)


def test_each_figure_is_computed_then_plotted_and_a_failure_spares_the_others(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    mods = {"one": _fake_module("one", calls), "two": _fake_module("two", calls, fail=True)}
    registry = _registry(mods)
    assert main(["reproduce", "--quick", "--out", str(tmp_path)], registry) == 1  # two failed
    assert calls == ["compute one 1 None None", "plot one", "compute two 1 None None"]
    report = json.loads((tmp_path / "reproduce.json").read_text())
    assert report["kind"] == "quick"
    assert "boom" in report["figures"]["two"]["error"]
    assert (tmp_path / "one.png").read_bytes() == b"png"
    # a second quick run redraws from the data it has; a full run recomputes
    calls.clear()
    assert main(["reproduce", "--quick", "--out", str(tmp_path), "--only", "one"], registry) == 0
    assert calls == ["plot one"]
    calls.clear()
    assert main(["reproduce", "--out", str(tmp_path), "--only", "one"], registry) == 0
    assert calls == ["compute one 3 None None", "plot one"]
    assert (tmp_path / "one.png").read_bytes() == b"png" * 3


def test_workers_and_dask_reach_compute_and_force_drops_stored_points(tmp_path: Path) -> None:
    calls: list[str] = []
    registry = _registry({"one": _fake_module("one", calls)})
    stale = points_dir(tmp_path, "one") / "points" / "0123456789abcdef.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    assert main(["reproduce", "--out", str(tmp_path), "--workers", "2"], registry) == 0
    assert stale.exists()  # kept: a figure resumes from its points
    assert (
        main(["reproduce", "--out", str(tmp_path), "--force", "--dask", "tcp://h:1"], registry) == 0
    )
    assert not points_dir(tmp_path, "one").exists()
    assert calls == ["compute one 3 2 None", "plot one", "compute one 3 None tcp://h:1", "plot one"]


def test_a_figure_that_does_not_load_fails_alone_and_an_interrupt_stops_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    one = _fake_module("one", calls)

    def load(name: str) -> Any:
        if name == "broken":
            raise ImportError("no module named 'broken'")
        return one

    registry = FigureRegistry(("broken", "one"), load)
    assert main(["reproduce", "--out", str(tmp_path)], registry) == 1
    assert calls == ["compute one 3 None None", "plot one"]
    report = json.loads((tmp_path / "reproduce.json").read_text())
    assert report["figures"]["broken"] == {"error": "ImportError: no module named 'broken'"}

    def interrupted(*args: Any, **kwargs: Any) -> Path:
        raise KeyboardInterrupt

    finished = one.compute  # type: ignore[attr-defined]
    one.compute = interrupted  # type: ignore[attr-defined]
    capsys.readouterr()
    assert main(["reproduce", "--out", str(tmp_path), "--force", "--only", "one"], registry) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"interrupted; finished points are kept in {tmp_path}: run again to resume"
    )
    # the interrupted compute left its old data file, but no longer as finished data
    one.compute = finished  # type: ignore[attr-defined]
    calls.clear()
    assert main(["reproduce", "--out", str(tmp_path), "--only", "one"], registry) == 0
    assert calls == ["compute one 3 None None", "plot one"]


def tally_frame(params: Mapping[str, Any]) -> pd.DataFrame:
    """One row per point; logs each evaluation; fails point 2 while ``params["fail_if"]``
    exists."""
    with Path(params["log"]).open("a", encoding="utf-8") as f:
        f.write(f"{params['n']}\n")
    if params["n"] == 2 and Path(params["fail_if"]).exists():
        raise RuntimeError("injected")
    return pd.DataFrame({"n": [params["n"]], "twice": [2 * params["n"]]})


def test_a_figure_that_failed_midway_resumes_from_its_finished_points(tmp_path: Path) -> None:
    log, marker = tmp_path / "log", tmp_path / "fail"
    mod = _fake_module("pts", [])

    def compute(config: _Config, out_dir: Path, progress: Any = None, **where: Any) -> Path:
        points = [{"n": n, "log": str(log), "fail_if": str(marker)} for n in range(4)]
        frame = run_figure_points("pts", points, tally_frame, out_dir, progress, **where)
        return write_table(frame, Path(out_dir) / "pts.parquet", {"config": config.points})

    mod.compute = compute  # type: ignore[attr-defined]
    registry = _registry({"pts": mod})
    out = tmp_path / "out"
    marker.touch()
    assert main(["reproduce", "--out", str(out)], registry) == 1
    report = json.loads((out / "reproduce.json").read_text())
    assert "1 of 4 points failed" in report["figures"]["pts"]["error"]
    assert sorted(log.read_text().split()) == ["0", "1", "2", "3"]
    marker.unlink()
    log.unlink()
    assert main(["reproduce", "--out", str(out)], registry) == 0
    assert log.read_text().split() == ["2"]  # the three finished points were not recomputed
    assert list(read_table(out / "pts.parquet")[0]["twice"]) == [0, 2, 4, 6]


def test_bad_figure_names_and_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = _registry({"one": _fake_module("one", []), "two": _fake_module("two", [])})
    assert main(["reproduce", "--out", str(tmp_path), "--only", "one,nope"], registry) == 2
    assert capsys.readouterr().err == (
        "tmsim: error: unknown figure(s) nope; figures are one, two\n"
    )
    for bad, message in (
        (["--workers", "0"], "argument --workers: must be a whole number >= 1, got '0'"),
        (["--workers", "two"], "argument --workers: must be a whole number, got 'two'"),
        (["--workers", "2", "--dask", "tcp://h:1"], "not allowed with argument --workers"),
        (["--only", ""], "argument --only: must name at least one, got ''"),
        (["--only", " , "], "argument --only: must name at least one"),
        (["--only", "one,,two"], "argument --only: has an empty name between commas"),
        (["--dask", ""], "argument --dask: must not be empty"),
        (["--out", ""], "argument --out: must not be empty"),
        (["--force", "--plot-only"], "argument --plot-only: not allowed with argument --force"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["reproduce", "--out", str(tmp_path), *bad], registry)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("tmsim reproduce: error: ") and err.count("\n") == 1
        assert message in err
    with pytest.raises(TmsimError, match="unknown figure 'three'"):
        registry.module("three")


@pytest.mark.parametrize(
    ("installed", "message"),
    [
        ([], "no figures installed: no package declares the 'tmsim.figures' entry point"),
        (
            [EntryPoint("x", "no_such_module_here:REGISTRY", "tmsim.figures")],
            "figures entry point x = no_such_module_here:REGISTRY does not load: "
            "ModuleNotFoundError",
        ),
        (
            [EntryPoint("y", "tmsim.figures:points_dir", "tmsim.figures")],
            "is a function, not a tmsim.figures.FigureRegistry",
        ),
        (
            [
                EntryPoint("a", "experiments:REGISTRY", "tmsim.figures"),
                EntryPoint("b", "experiments:REGISTRY", "tmsim.figures"),
            ],
            "several 'tmsim.figures' entry points",
        ),
    ],
)
def test_without_one_loadable_registry_reproduce_says_so_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    installed: list[EntryPoint],
    message: str,
) -> None:
    monkeypatch.setattr(figures, "entry_points", lambda group: installed)
    assert main(["reproduce", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tmsim: error: ") and message in err and err.count("\n") == 1


def test_the_installed_entry_point_is_the_experiments_registry() -> None:
    installed = list(entry_points(group=figures.ENTRY_POINT_GROUP))
    assert [(e.name, e.value) for e in installed] == [("experiments", "experiments:REGISTRY")]
    assert installed[0].load() is experiments.REGISTRY
    assert discover() is experiments.REGISTRY
    assert experiments.REGISTRY.names == experiments.FIGURES


@pytest.mark.parametrize("name", experiments.FIGURES)
def test_every_experiments_figure_follows_the_contract(name: str) -> None:
    module = experiments.REGISTRY.module(name)
    assert name == module.NAME and module.TITLE
    assert isinstance(module.QUICK, module.Config)
    compute = inspect.signature(module.compute).parameters
    assert list(compute)[:3] == ["config", "out_dir", "progress"]
    for keyword in ("workers", "dask_address"):
        assert compute[keyword].kind is inspect.Parameter.KEYWORD_ONLY
        assert compute[keyword].default is None
    assert list(inspect.signature(module.plot).parameters) == ["data", "out_dir"]


def test_failed_figures_end_with_an_error_line_and_a_repeated_name_runs_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    mods = {"one": _fake_module("one", calls), "two": _fake_module("two", calls, fail=True)}
    argv = ["reproduce", "--quick", "--out", str(tmp_path), "--only", "one,two,one"]
    assert main(argv, _registry(mods)) == 1
    assert calls == ["compute one 1 None None", "plot one", "compute two 1 None None"]
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("tmsim: error: 1 of 2 figures in ")
    assert last.endswith(f"; failed: two; see {tmp_path / 'reproduce.json'}")


def test_an_empty_registry_reproduces_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reproduce", "--out", str(tmp_path)], _registry({})) == 0
    assert capsys.readouterr().err == f"0 of 0 figures in 0.0 s; see {tmp_path}\n"
