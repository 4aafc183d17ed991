"""What the figure modules share (experiments.common): points run through the sweep engine come
back as the frame the figure computed, column order and dtypes included; geometric means;
which points carry solver settings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.common import describe, geomean, run_figure_points, solver_params
from tmsim.errors import TmsimError
from tmsim.figures import points_dir


def point_frame(params: Mapping[str, Any]) -> pd.DataFrame:
    """Two rows per point, with every kind of column a figure writes."""
    n = params["n"]
    return pd.DataFrame(
        {
            "workload": [f"w{n}", f"w{n}"],
            "batch": [n, n],
            "time_s": [n / 4, math.nan],
            "never": [math.nan, math.nan],
            "valid": [True, n % 2 == 0],
        }
    )


def test_points_come_back_as_the_frames_they_made_in_point_order(tmp_path: Path) -> None:
    points = [{"n": 2}, {"n": 1}]
    messages: list[str] = []
    frame = run_figure_points("fig", points, point_frame, tmp_path, messages.append)
    expected = pd.concat([point_frame(p) for p in points], ignore_index=True)
    pd.testing.assert_frame_equal(frame, expected)
    assert frame["never"].dtype == "float64"  # NaN is stored as null and read back as NaN
    assert messages[0] == "2 points: 0 finished earlier, 2 to compute"
    assert messages[1:] == ["[1/2] {'n': 2}", "[2/2] {'n': 1}"]
    stored = sorted((points_dir(tmp_path, "fig") / "points").glob("*.json"))
    assert len(stored) == 2
    messages.clear()
    again = run_figure_points("fig", points, point_frame, tmp_path, messages.append)
    pd.testing.assert_frame_equal(again, expected)
    assert messages == ["2 points: 2 finished earlier, 0 to compute"]
    # another figure's points with the same parameters are its own
    run_figure_points("other", points, point_frame, tmp_path)
    assert len(list((points_dir(tmp_path, "other") / "points").glob("*.json"))) == 2


def test_the_default_worker_count_gives_way_to_a_scheduler(tmp_path: Path) -> None:
    with pytest.raises(TmsimError, match="not both"):
        run_figure_points("f", [{"n": 1}], point_frame, tmp_path, workers=2, dask_address="x")
    with pytest.raises(TmsimError, match="workers must be a whole number >= 1"):
        run_figure_points("f", [{"n": 1}], point_frame, tmp_path, default_workers=0)


def test_solver_settings_only_where_a_milp_runs() -> None:
    assert solver_params(("first-touch", "sync"), gap=0.05) == {"gap": 0.05}
    assert solver_params(("all-fast", "all-slow", "2lm"), gap=0.05) == {}
    with pytest.raises(TmsimError, match="unknown strategy 'fast'"):
        solver_params(("fast",), gap=0.05)


def test_describe_names_platform_workload_and_ratio() -> None:
    point = {"platform": "p", "model": "vgg19", "batch": 8, "ratio": "4:1", "gap": 0.1}
    assert describe(point) == "p VGG19 b8 4:1"
    assert describe({"model": "resnet50", "batch": 2, "ratio": None}) == "ResNet-50 b2"


def test_geomean() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([2.0, 2.0, 2.0]) == pytest.approx(2.0)
    assert math.isnan(geomean([]))
    assert math.isnan(geomean([1.0, math.nan]))  # a failed point is not averaged away
    assert math.isnan(geomean([1.0, 0.0]))
