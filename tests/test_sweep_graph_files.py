"""Graph files as a sweep's workloads (tmsim.sweeps.workloads): a graph saved or imported is a
model of the grid, its points keyed by the graph's bytes, run like a zoo model's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import tmsim
from tmsim.sweeps.spec import SweepSpecError, sweep_from_dict
from tmsim.workload.files import save_graph

GRID = {"platform": "cascadelake-optane", "ratio": "4:1", "strategy": ["first-touch"]}


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "g.json"
    save_graph(tmsim.graph("vgg19", batch=1), path)
    return path


def test_a_graph_file_is_a_workload_keyed_by_its_bytes(graph_file: Path, tmp_path: Path) -> None:
    spec = {"grid": {**GRID, "model": ["g.json", "vgg19"], "batch": [1]}}
    points = sweep_from_dict(spec, "x", base_dir=tmp_path).points
    files = [p for p in points if p.graph_sha256 is not None]
    zoo = [p for p in points if p.graph_sha256 is None]
    assert len(files) == len(zoo) == 2  # first-touch and its all-fast baseline each
    assert all(p.model == str(graph_file.resolve()) and p.batch == 0 for p in files)
    # the same bytes elsewhere are the same points; other bytes are other points
    other = tmp_path / "copy"
    other.mkdir()
    shutil.copy(graph_file, other / "moved.json")
    moved = sweep_from_dict({"grid": {**GRID, "model": "moved.json"}}, "x", base_dir=other)
    assert {p.key for p in moved.points} == {p.key for p in files}
    save_graph(tmsim.graph("vgg19", batch=2), other / "moved.json")
    changed = sweep_from_dict({"grid": {**GRID, "model": "moved.json"}}, "x", base_dir=other)
    assert not {p.key for p in changed.points} & {p.key for p in files}


def test_a_graph_file_sweep_runs_like_its_zoo_model(graph_file: Path, tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[grid]\nmodel = ["g.json", "vgg19"]\nbatch = 1\nplatform = "cascadelake-optane"\n'
        'ratio = "4:1"\nstrategy = ["first-touch"]\n'
    )
    table = tmsim.sweep(spec)
    assert table.attrs["counts"]["failed"] == 0
    rows = table[table["strategy"] == "first-touch"]
    by_file = rows[rows["graph_sha256"].notna()]["simulated_s"].to_numpy()
    by_zoo = rows[rows["graph_sha256"].isna()]["simulated_s"].to_numpy()
    assert len(by_file) == len(by_zoo) == 1
    assert by_file == pytest.approx(by_zoo)  # the file holds the zoo's graph


def test_a_graph_file_changed_after_loading_fails_its_points(
    graph_file: Path, tmp_path: Path
) -> None:
    sweep = sweep_from_dict({"grid": {**GRID, "model": "g.json"}}, "x", base_dir=tmp_path)
    save_graph(tmsim.graph("vgg19", batch=2), graph_file)
    table = tmsim.sweep(sweep)
    assert table.attrs["counts"]["failed"] == len(sweep.points)
    assert any("changed since the sweep was loaded" in f for f in table.attrs["failures"])


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"model": "missing.json"}, "missing.json"),
        ({"model": "bad.json"}, "bad.json"),
        ({"model": "vgg19"}, "missing key 'batch'"),
    ],
)
def test_bad_graph_workloads_fail_the_spec_in_one_line(
    tmp_path: Path, grid: dict[str, str], message: str
) -> None:
    (tmp_path / "bad.json").write_text('{"format": "not a graph"}')
    with pytest.raises(SweepSpecError) as err:
        sweep_from_dict({"grid": {**GRID, **grid}}, "x", base_dir=tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)
