"""The async-against-sync figure (experiments.async_sync): on a tiny configuration, sync and
async plans replayed under each condition; without contention the replay is the prediction,
and a shared memory controller never makes a plan faster."""

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
    cpu_workloads=(("vgg19", 2),),
    gpu_device_fraction=0.6,
    gpu_workloads=(("vgg19", 8),),
    time_limit_s=2.0,
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


def test_async_sync_table(async_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = async_data
    assert path.name == "async_sync.parquet"
    extra = ["async_moved_bytes", "fallback", "improved", "over_sync"]
    assert list(frame.columns) == [*async_sync.LEADING, *ROW_FIELDS, *extra]
    check_meta(meta, "async_sync", ASYNC_TINY)
    assert set(frame["kind"]) == {"Optane PMM", "GPU"}
    # sync and async under no contention and shared bandwidth on both platforms, and under a
    # shared memory controller on Optane only
    conditions = frame.groupby("kind")["condition"].agg(set)
    assert conditions["Optane PMM"] == {"none", "bandwidth", "controller"}
    assert conditions["GPU"] == {"none", "bandwidth"}
    assert len(frame) == 2 * 3 + 2 * 2
    assert (frame["error"] == "").all() and frame["valid"].all()
    assert (frame["contention"] == (frame["condition"] != "none")).all()
    quiet = frame[~frame["contention"]]
    # without contention the replay is the planner's world: simulated equals predicted
    np.testing.assert_allclose(quiet["simulated_s"], quiet["predicted_s"], rtol=1e-9)
    for _, rows in frame.groupby("platform"):
        by = rows.set_index(["strategy", "condition"])
        for condition in set(rows["condition"]):
            assert by.at[("sync", condition), "over_sync"] == pytest.approx(1.0)
            ratio = (
                by.at[("async", condition), "simulated_s"]
                / by.at[("sync", condition), "simulated_s"]
            )
            assert by.at[("async", condition), "over_sync"] == pytest.approx(ratio)
        assert by.at[("sync", "bandwidth"), "async_moved_bytes"] == 0
        asyn = by.loc[("async", "bandwidth")]
        assert 0 <= asyn["async_moved_bytes"] <= asyn["moved_bytes"]
        improved = by.at[("async", "none"), "predicted_s"] < by.at[("sync", "none"), "predicted_s"]
        assert bool(asyn["improved"]) == bool(improved)
        if asyn["async_moved_bytes"] == 0:  # no overlap: contention changes nothing
            assert asyn["simulated_s"] == pytest.approx(asyn["predicted_s"])
    # a shared controller only adds device time: no plan gets faster than with bandwidth alone
    cpu = frame[frame["kind"] == "Optane PMM"].set_index(["strategy", "condition"])
    for strategy in ("sync", "async"):
        shared = cpu.at[(strategy, "controller"), "simulated_s"]
        assert shared >= cpu.at[(strategy, "bandwidth"), "simulated_s"] * (1 - 1e-9)


def test_async_sync_plot(
    async_data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path
) -> None:
    check_plot(async_sync, async_data[0], tmp_path)


def test_only_cpu_points_name_shared_controllers() -> None:
    cpu, gpu = async_sync.points(ASYNC_TINY)
    assert cpu["shared_controllers"] == [["DRAM", "PMM"]] and gpu["shared_controllers"] == []
    plain = async_sync.Config(cpu_workloads=(("vgg19", 2),), cpu_shared_controllers=())
    assert async_sync.points(plain)[0]["shared_controllers"] == []


def test_quick_is_a_reduced_full_run() -> None:
    full, quick = async_sync.Config(), async_sync.QUICK
    assert len(async_sync.points(quick)) < len(async_sync.points(full))
    assert quick.time_limit_s <= 30 < full.time_limit_s and quick.gap >= full.gap
