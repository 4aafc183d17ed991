"""Result tables with provenance, and ``tmsim reproduce`` with stand-in figure modules."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

import experiments
from tmsim.cli.main import main
from tmsim.errors import TmsimError
from tmsim.results import ResultFileError, git_commit, provenance, read_table, write_table


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_tables_round_trip_with_their_metadata(tmp_path: Path, suffix: str) -> None:
    frame = pd.DataFrame({"model": ["a", "b"], "slowdown": [1.0, 2.5], "kernels": [3, 4]})
    meta = {"config": {"ratio": "4:1", "batch": [1, 2]}, "provenance": provenance(seed=7)}
    path = write_table(frame, tmp_path / f"t{suffix}", meta)
    back, got = read_table(path)
    pd.testing.assert_frame_equal(back, frame)
    assert got == meta
    assert got["provenance"]["seed"] == 7
    assert not list(tmp_path.glob(".*.tmp"))  # nothing half-written left behind


def test_provenance_names_version_commit_and_solver() -> None:
    p = provenance("HIGHS")
    assert p["tmsim_version"] and p["solver"] == "HIGHS"
    assert p["solver_version"] != "not installed"  # highspy is a dependency
    assert set(p["libraries"]) >= {"numpy", "cvxpy", "simpy"}
    commit = git_commit()
    assert commit == "unknown" or len(commit.split("-")[0]) == 40


def test_bad_result_files_name_the_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(ResultFileError, match=r"junk\.parquet"):
        read_table(junk)
    bare = tmp_path / "bare.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(bare)
    with pytest.raises(ResultFileError, match="no tmsim metadata"):
        read_table(bare)
    lone = tmp_path / "lone.csv"
    lone.write_text("a\n1\n")
    with pytest.raises(ResultFileError, match=r"lone\.meta\.json"):
        read_table(lone)
    with pytest.raises(TmsimError, match=r"\.parquet or \.csv"):
        write_table(pd.DataFrame(), tmp_path / "x.txt", {})


# ---------------------------------------------------------------------- reproduce
@dataclass(frozen=True)
class _Config:
    points: int = 3


def _fake_module(name: str, calls: list[str], fail: bool = False) -> types.ModuleType:
    mod = types.ModuleType(f"experiments.{name}")

    def compute(config: _Config, out_dir: Path, progress: object = None) -> Path:
        calls.append(f"compute {name} {config.points}")
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


def test_reproduce_runs_each_figure_resumes_and_reports_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    mods = {"one": _fake_module("one", calls), "two": _fake_module("two", calls, fail=True)}
    monkeypatch.setattr(experiments, "FIGURES", ("one", "two"))
    monkeypatch.setattr(experiments, "figure_module", lambda n: mods[n])
    assert main(["reproduce", "--quick", "--out", str(tmp_path)]) == 1  # "two" failed
    assert calls == ["compute one 1", "plot one", "compute two 1"]
    report = json.loads((tmp_path / "reproduce.json").read_text())
    assert report["kind"] == "quick"
    assert "boom" in report["figures"]["two"]["error"]
    assert (tmp_path / "one.png").read_bytes() == b"png"
    # a second quick run redraws from the data it has; a full run recomputes
    calls.clear()
    assert main(["reproduce", "--quick", "--out", str(tmp_path), "--only", "one"]) == 0
    assert calls == ["plot one"]
    calls.clear()
    assert main(["reproduce", "--out", str(tmp_path), "--only", "one"]) == 0
    assert calls == ["compute one 3", "plot one"]
    assert (tmp_path / "one.png").read_bytes() == b"png" * 3


def test_reproduce_refuses_unknown_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["reproduce", "--out", str(tmp_path), "--only", "nope"]) == 2
    assert "unknown figure(s) nope" in capsys.readouterr().err
