"""The prediction_gpu figure: every measured H200 step planned, replayed and set beside its
measurement (calibration/h200/steps.csv)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from figure_checks import check_meta, check_plot

from experiments import prediction_gpu
from experiments.common import read_data
from tmsim import TmsimError


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = prediction_gpu.compute(prediction_gpu.QUICK, tmp_path_factory.mktemp("pgpu"))
    frame, meta = read_data(path)
    return path, frame, meta


def test_every_measured_step_is_predicted(data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    _, frame, meta = data
    check_meta(meta, prediction_gpu.NAME, prediction_gpu.QUICK)
    assert len(frame) == 5
    assert (frame["ratio"] == frame["predicted_s"] / frame["measured_s"]).all()
    fast = frame[frame["strategy"] == "all-fast"]
    assert (abs(fast["ratio"] - 1) <= 0.10).all()
    offload = frame[frame["strategy"] == "save-on-cpu"]
    assert (abs(offload["ratio"] - 1) <= 0.20).all()
    # With nothing moving beside the kernels, the replay is the prediction.
    assert fast["simulated_s"].to_numpy() == pytest.approx(fast["predicted_s"].to_numpy())


def test_plot(data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path) -> None:
    check_plot(prediction_gpu, data[0], tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workload,graph\n", "missing column"),
        ("workload,graph,platform,strategy,measured_s,source\n", "no measured step"),
        (
            "workload,graph,platform,strategy,measured_s,source\nw,g.json,p,all-fast,-1,x\n",
            r"steps.csv:2: measured_s must be a time > 0",
        ),
    ],
)
def test_a_bad_measurements_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "steps.csv"
    f.write_text(text)
    with pytest.raises(TmsimError, match=message):
        prediction_gpu.read_measurements(f)
    with pytest.raises(TmsimError, match="cannot read"):
        prediction_gpu.read_measurements(tmp_path / "none.csv")
