"""The prediction figure (experiments.prediction): on a tiny configuration every plan's
relative error, exact zero for plans whose copies run between kernels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from figure_checks import ROW_FIELDS, check_meta, check_plot

from experiments import prediction
from experiments.common import read_data

PREDICTION_TINY = prediction.Config(
    cpu_workloads=(("vgg19", 2),),
    cpu_ratios=("4:1",),
    gpu_device_fraction=0.6,
    gpu_workloads=(("vgg19", 8),),
    time_limit_s=None,  # the gap alone stops each solve: the same plans on any load
    gap=0.1,
    workers=1,
)


@pytest.fixture(scope="module")
def prediction_data(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = prediction.compute(PREDICTION_TINY, tmp_path_factory.mktemp("prediction"))
    frame, meta = read_data(path)
    return path, frame, meta


def test_prediction_table(prediction_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = prediction_data
    assert path.name == "prediction.parquet"
    extra = ["rel_error", "fallback", "same_as_sync"]
    assert list(frame.columns) == [*prediction.LEADING, *ROW_FIELDS, *extra]
    check_meta(meta, "prediction", PREDICTION_TINY)
    cpu = frame[frame["kind"] == "Optane PMM"]
    assert list(cpu["strategy"]) == list(PREDICTION_TINY.cpu_strategies)
    assert list(frame.loc[frame["kind"] == "GPU", "strategy"]) == ["sync", "async", "async-aware"]
    assert (frame["error"] == "").all() and frame["valid"].all()
    expected = (frame["simulated_s"] - frame["predicted_s"]) / frame["predicted_s"]
    np.testing.assert_allclose(frame["rel_error"], expected, rtol=1e-12)
    # plans without overlapping copies are simulated as predicted, with contention, but for
    # the fitted controller's device-switch cost, which charges a kernel that mixes DRAM and
    # PMM traffic channel time even alone (up to 0.18% of a step here, measured); nothing is
    # simulated faster than predicted
    serial = frame[~frame["strategy"].isin(["async", "async-aware"])]
    assert (serial["rel_error"] > -1e-9).all() and (serial["rel_error"] < 0.005).all()
    # the aware plans are predicted with the interference they were planned with
    aware = frame[frame["strategy"] == "async-aware"]
    assert (aware["rel_error"].abs() <= 0.02).all()
    assert frame["rel_error"].abs().max() < 0.5  # contention is a correction, not a new world
    sync = frame[frame["strategy"] == "sync"].set_index("platform")["predicted_s"]
    for _, row in frame[frame["strategy"] == "async"].iterrows():
        assert row["same_as_sync"] == (not row["predicted_s"] < sync[row["platform"]] * (1 - 1e-9))


def test_prediction_plot(
    prediction_data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path
) -> None:
    check_plot(prediction, prediction_data[0], tmp_path)


def test_quick_is_a_reduced_full_run() -> None:
    full, quick = prediction.Config(), prediction.QUICK
    assert len(prediction.points(quick)) < len(prediction.points(full))
    assert quick.time_limit_s <= 30 < full.time_limit_s and quick.gap >= full.gap
