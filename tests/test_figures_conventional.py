"""The conventional-workloads figure (experiments.conventional): slowdowns against all-DRAM on
a tiny configuration obey what must hold (all-DRAM is 1, sync no slower than static, static no
slower than first-touch), the table carries its configuration, a second compute reuses every
stored point, and a point's key changes only with what shapes it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from figure_checks import RATIO, ROW_FIELDS, TINY, check_meta, check_plot, stored_points

from experiments import conventional
from experiments.common import read_data
from tmsim.figures import points_dir
from tmsim.sweeps.jobs import Job

CONV = conventional.Config(workloads=TINY, ratios=(RATIO,), time_limit_s=None)


@pytest.fixture(scope="module")
def conv_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return conventional.compute(CONV, tmp_path_factory.mktemp("conventional"))


def _point(frame: pd.DataFrame, ratio: str, strategy: str) -> pd.Series:
    hit = frame[(frame["ratio"] == ratio) & (frame["strategy"] == strategy)]
    assert len(hit) == 1, (ratio, strategy)
    return hit.iloc[0]


def test_conventional_table(conv_data: Path) -> None:
    frame, meta = read_data(conv_data)
    check_meta(meta, "conventional", CONV)
    assert list(frame.columns) == [*conventional.LEADING, *ROW_FIELDS]
    # all-DRAM, all-PMM, then each strategy at the one ratio
    assert len(frame) == 2 + len(CONV.strategies)
    assert (frame["error"] == "").all() and frame["valid"].all()
    assert _point(frame, conventional.ALL_DRAM, "all-fast")["slowdown"] == 1.0
    pmm = _point(frame, conventional.ALL_PMM, "all-slow")["slowdown"]
    first = _point(frame, RATIO, "first-touch")["slowdown"]
    static = _point(frame, RATIO, "static")["slowdown"]
    sync = _point(frame, RATIO, "sync")["slowdown"]
    # a fifth of the footprint in DRAM: better than all PMM, worse than all DRAM
    assert 1.0 < sync <= static + 1e-9 <= first + 1e-9 <= pmm + 1e-9
    assert sync < pmm
    assert (frame["footprint_bytes"] == frame["footprint_bytes"].iloc[0]).all()
    limit = _point(frame, RATIO, "sync")["fast_limit_bytes"]
    assert limit == int(frame["footprint_bytes"].iloc[0] / 5)


def test_conventional_geomean_and_plot(conv_data: Path, tmp_path: Path) -> None:
    frame, _ = read_data(conv_data)
    means = conventional.geomean_table(frame)
    # one workload: the geometric mean is that workload's value
    assert means.at[RATIO, "sync"] == pytest.approx(_point(frame, RATIO, "sync")["slowdown"])
    check_plot(conventional, conv_data, tmp_path)


def test_a_second_compute_reuses_every_stored_point(conv_data: Path, tmp_path: Path) -> None:
    shutil.copytree(
        points_dir(conv_data.parent, "conventional"), points_dir(tmp_path, "conventional")
    )
    before = stored_points(tmp_path, "conventional")
    assert len(before) == 2  # the all-DRAM/all-PMM pair and the one ratio
    messages: list[str] = []
    again = conventional.compute(CONV, tmp_path, messages.append)
    assert stored_points(tmp_path, "conventional") == before
    assert messages == ["2 points: 2 finished earlier, 0 to compute"]
    pd.testing.assert_frame_equal(read_data(again)[0], read_data(conv_data)[0])


def test_a_point_is_keyed_by_what_shapes_it() -> None:
    def keys(config: conventional.Config) -> list[str]:
        return [Job(conventional.NAME, p).key for p in conventional.points(config)]

    base, at_ratio = keys(CONV)
    longer = keys(replace(CONV, time_limit_s=30.0))
    assert longer[0] == base and longer[1] != at_ratio  # the pair runs no MILP
    assert keys(replace(CONV, ratios=(RATIO, "1:1")))[:2] == [base, at_ratio]
    assert keys(replace(CONV, interference="none"))[0] != base
    heuristic = conventional.points(replace(CONV, strategies=("first-touch",)))[1]
    assert "time_limit_s" not in heuristic and "gap" not in heuristic


def test_quick_is_smaller_than_the_paper() -> None:
    full = conventional.Config()
    assert full.workloads == (
        ("inception_v4", 1024),
        ("vgg19", 2048),
        ("resnet200", 512),
        ("densenet264", 512),
    )
    assert full.ratios == ("8:1", "4:1", "1:1")
    assert conventional.QUICK.time_limit_s < full.time_limit_s
    assert len(conventional.QUICK.workloads) <= len(full.workloads)
