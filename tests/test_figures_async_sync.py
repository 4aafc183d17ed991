"""The async-against-sync figure (experiments.async_sync): on a tiny configuration, sync, async
and async-aware plans replayed at each interference level; without interference the replay is
the prediction for sync and async, the aware plan never predicts worse than sync, and on a GPU
(no controller, no copy thread) the full model is the bandwidth level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from figure_checks import ROW_FIELDS, check_meta, check_plot

from experiments import async_sync
from experiments.common import read_data

ASYNC_TINY = async_sync.Config(
    cpu_ratios=("4:1",),
    cpu_workloads=(("vgg19", 2),),
    gpu_device_fraction=0.6,
    gpu_workloads=(("vgg19", 8),),
    time_limit_s=None,  # the gap alone stops each solve: the same plans on any load
    gap=0.1,
    workers=1,
)


@pytest.fixture(scope="module")
def async_data(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = async_sync.compute(ASYNC_TINY, tmp_path_factory.mktemp("async"))
    frame, meta = read_data(path)
    return path, frame, meta


@pytest.mark.slow
def test_async_sync_table(async_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = async_data
    assert path.name == "async_sync.parquet"
    extra = ["async_moved_bytes", "fallback", "improved", "over_sync"]
    assert list(frame.columns) == [*async_sync.LEADING, *ROW_FIELDS, *extra]
    check_meta(meta, "async_sync", ASYNC_TINY)
    assert set(frame["kind"]) == {"Optane PMM", "GPU"}
    # every plan at every level on both platforms
    assert (
        frame.groupby("kind")["condition"].agg(set) == {"none", "bandwidth", "controller"}
    ).all()
    assert len(frame) == 2 * 3 * 3
    assert set(frame["strategy"]) == set(async_sync.SHOWN)
    assert (frame["error"] == "").all() and frame["valid"].all()
    assert (frame["contention"] == (frame["condition"] != "none")).all()
    quiet = frame[~frame["contention"] & (frame["strategy"] != "async-aware")]
    # without interference the replay is the planner's world: simulated equals predicted
    np.testing.assert_allclose(quiet["simulated_s"], quiet["predicted_s"], rtol=1e-9)
    for _, rows in frame.groupby("platform"):
        by = rows.set_index(["strategy", "condition"])
        sync_predicted = by.at[("sync", "none"), "predicted_s"]
        for condition in set(rows["condition"]):
            assert by.at[("sync", condition), "over_sync"] == pytest.approx(1.0)
            for strategy in ("async", "async-aware"):
                ratio = (
                    by.at[(strategy, condition), "simulated_s"]
                    / by.at[("sync", condition), "simulated_s"]
                )
                assert by.at[(strategy, condition), "over_sync"] == pytest.approx(ratio)
        assert by.at[("sync", "bandwidth"), "async_moved_bytes"] == 0
        for strategy in ("async", "async-aware"):
            plan = by.loc[(strategy, "bandwidth")]
            assert 0 <= plan["async_moved_bytes"] <= plan["moved_bytes"]
            improved = plan["predicted_s"] < sync_predicted * (1 - 1e-9)
            assert bool(plan["improved"]) == bool(improved)
            if plan["async_moved_bytes"] == 0:  # no overlap: contention changes nothing
                assert plan["simulated_s"] == pytest.approx(plan["predicted_s"])
        # sync is among the aware MILP's plans, under its own charges
        assert by.at[("async-aware", "none"), "predicted_s"] <= sync_predicted * (1 + 1e-9)
    gpu = frame[frame["kind"] == "GPU"].set_index(["strategy", "condition"])
    for strategy in async_sync.SHOWN:
        assert gpu.at[(strategy, "controller"), "simulated_s"] == pytest.approx(
            gpu.at[(strategy, "bandwidth"), "simulated_s"], rel=1e-12
        )


@pytest.mark.slow
def test_async_sync_plot(
    async_data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path
) -> None:
    check_plot(async_sync, async_data[0], tmp_path)


def test_every_ratio_gives_its_cpu_points() -> None:
    config = async_sync.Config(cpu_ratios=("1:1", "8:1"), cpu_workloads=(("vgg19", 2),))
    cpu = [p for p in async_sync.points(config) if p["kind"] == "Optane PMM"]
    assert [p["ratio"] for p in cpu] == ["1:1", "8:1"]


def test_quick_is_a_reduced_full_run() -> None:
    full, quick = async_sync.Config(), async_sync.QUICK
    assert len(async_sync.points(quick)) < len(async_sync.points(full))
    assert quick.time_limit_s <= 30 < full.time_limit_s and quick.gap >= full.gap
