"""The GPU, async-against-sync and prediction figures: each compute stage on a tiny
configuration writes the expected table with its configuration and provenance, and the values
obey what the simulator guarantees; each plot writes a non-empty PDF and PNG."""

from __future__ import annotations

import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from experiments import async_sync, gpu, prediction
from experiments.common import read_data, run_points
from tmsim.compare import Row

ROW_FIELDS = [f.name for f in fields(Row)]
# Tiny graphs (VGG19 has 142 kernels; on a GPU at 0.6 of the peak, b8 is the smallest batch
# whose SGD kernel fits), loose gaps and short caps: each compute takes seconds.
GPU_TINY = gpu.Config(
    points=(("rtx2080ti-pcie3", "vgg19", 8), ("a100-pcie4", "vgg19", 8)),
    device_fraction=0.6, time_limit_s=2.0, gap=0.1, workers=1,
)  # fmt: skip
ASYNC_TINY = async_sync.Config(
    cpu_workloads=(("vgg19", 2),), gpu_device_fraction=0.6, gpu_workloads=(("vgg19", 8),),
    time_limit_s=2.0, gap=0.1, workers=1,
)  # fmt: skip
PREDICTION_TINY = prediction.Config(
    cpu_workloads=(("vgg19", 2),), cpu_ratios=("4:1",), gpu_device_fraction=0.6,
    gpu_workloads=(("vgg19", 8),), time_limit_s=2.0, gap=0.1, workers=1,
)  # fmt: skip


def _jsonish(config: Any) -> Any:
    """``asdict(config)`` as it reads back from JSON (tuples become lists)."""

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        return v

    return walk(asdict(config))


def _check_meta(meta: dict[str, Any], name: str, config: Any) -> None:
    assert meta["figure"] == name
    assert meta["config"] == _jsonish(config)
    prov = meta["provenance"]
    for key in ("tmsim_version", "git_commit", "solver", "libraries", "created_utc"):
        assert key in prov


def _check_plot(module: Any, data: Path, out: Path) -> None:
    paths = module.plot(data, out)
    assert {p.suffix for p in paths} == {".pdf", ".png"}
    for p in paths:
        assert p.name.startswith(module.NAME) and p.stat().st_size > 1000


@pytest.fixture(scope="module")
def gpu_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = gpu.compute(GPU_TINY, tmp_path_factory.mktemp("gpu"))
    frame, meta = read_data(path)
    return path, frame, meta


@pytest.fixture(scope="module")
def async_data(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = async_sync.compute(ASYNC_TINY, tmp_path_factory.mktemp("async"))
    frame, meta = read_data(path)
    return path, frame, meta


@pytest.fixture(scope="module")
def prediction_data(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = prediction.compute(PREDICTION_TINY, tmp_path_factory.mktemp("prediction"))
    frame, meta = read_data(path)
    return path, frame, meta


# ------------------------------------------------------------------------------------ gpu


def test_gpu_table(gpu_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = gpu_data
    assert path.name == "gpu.parquet"
    assert list(frame.columns) == [*gpu.LEADING, *ROW_FIELDS, "speedup", "fallback", "unimproved"]
    assert len(frame) == len(GPU_TINY.points) * len(gpu.STRATEGIES)
    _check_meta(meta, "gpu", GPU_TINY)
    for platform, rows in frame.groupby("platform"):
        by = rows.set_index("strategy")
        assert sorted(by.index) == sorted(gpu.STRATEGIES), platform
        assert (rows["error"] == "").all() and rows["valid"].all()
        # the device was shrunk to 0.6 of the step's peak: the step oversubscribes it
        assert by.at["sync", "oversubscription"] == pytest.approx(1 / 0.6, rel=1e-6)
        assert by.at["sync", "fast_limit_bytes"] <= by.at["sync", "device_bytes"]
        assert by.at["sync", "fast_peak_bytes"] <= by.at["sync", "device_bytes"]
        oracle = by.at["all-fast", "simulated_s"]
        # unified memory is never faster than the oracle; no plan beats the oracle either
        assert by.at["unified-memory", "simulated_s"] >= oracle
        assert by.at["sync", "simulated_s"] >= oracle * (1 - 1e-9)
        assert by.at["async", "simulated_s"] >= oracle * (1 - 1e-9)
        assert by.at["unified-memory", "speedup"] == pytest.approx(1.0)
        um = by.at["unified-memory", "simulated_s"]
        assert by.at["sync", "speedup"] == pytest.approx(um / by.at["sync", "simulated_s"])
        assert by.at["unified-memory", "moved_bytes"] > 0 and by.at["sync", "moved_bytes"] > 0
        # a sync plan's copies run between kernels: contention cannot change its time
        assert by.at["sync", "simulated_s"] == pytest.approx(by.at["sync", "predicted_s"])
        async_same = not by.at["async", "predicted_s"] < by.at["sync", "predicted_s"] * (1 - 1e-9)
        assert bool(by.at["async", "unimproved"]) == async_same


def test_gpu_plot(gpu_data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path) -> None:
    _check_plot(gpu, gpu_data[0], tmp_path)


# ------------------------------------------------------------------------------ async_sync


def test_async_sync_table(async_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = async_data
    assert path.name == "async_sync.parquet"
    extra = ["async_moved_bytes", "fallback", "improved", "over_sync"]
    assert list(frame.columns) == [*async_sync.LEADING, *ROW_FIELDS, *extra]
    _check_meta(meta, "async_sync", ASYNC_TINY)
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
    _check_plot(async_sync, async_data[0], tmp_path)


# ------------------------------------------------------------------------------ prediction


def test_prediction_table(prediction_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = prediction_data
    assert path.name == "prediction.parquet"
    extra = ["rel_error", "fallback", "same_as_sync"]
    assert list(frame.columns) == [*prediction.LEADING, *ROW_FIELDS, *extra]
    _check_meta(meta, "prediction", PREDICTION_TINY)
    cpu = frame[frame["kind"] == "Optane PMM"]
    assert list(cpu["strategy"]) == list(PREDICTION_TINY.cpu_strategies)
    assert list(frame.loc[frame["kind"] == "GPU", "strategy"]) == ["sync", "async"]
    assert (frame["error"] == "").all() and frame["valid"].all()
    expected = (frame["simulated_s"] - frame["predicted_s"]) / frame["predicted_s"]
    np.testing.assert_allclose(frame["rel_error"], expected, rtol=1e-12)
    # plans without overlapping copies are simulated exactly as predicted, with contention
    serial = frame[frame["strategy"] != "async"]
    assert (serial["rel_error"].abs() < 1e-9).all()
    assert frame["rel_error"].abs().max() < 0.5  # contention is a correction, not a new world
    sync = frame[frame["strategy"] == "sync"].set_index("platform")["predicted_s"]
    for _, row in frame[frame["strategy"] == "async"].iterrows():
        assert row["same_as_sync"] == (not row["predicted_s"] < sync[row["platform"]] * (1 - 1e-9))


def test_prediction_plot(
    prediction_data: tuple[Path, pd.DataFrame, dict[str, Any]], tmp_path: Path
) -> None:
    _check_plot(prediction, prediction_data[0], tmp_path)


# ------------------------------------------------------------------------------- helpers


def _square(x: int) -> int:
    return x * x


def _pid(_: int) -> int:
    return os.getpid()


def test_run_points_keeps_order_and_reports_each_point() -> None:
    seen: list[str] = []
    assert run_points(_square, [3, 1, 2], 1, seen.append) == [9, 1, 4]
    assert run_points(_square, list(range(6)), 2, seen.append) == [0, 1, 4, 9, 16, 25]
    assert sorted(seen) == sorted(["3", "1", "2", *map(str, range(6))])
    assert os.getpid() not in run_points(_pid, [0, 1], 2)
    with pytest.raises(ValueError, match="workers"):
        run_points(_square, [1], 0)


@pytest.mark.parametrize("module", [gpu, async_sync, prediction])
def test_quick_is_a_reduced_full_run(module: Any) -> None:
    full, quick = module.Config(), module.QUICK
    assert isinstance(quick, module.Config)

    def count(c: Any) -> int:
        return len(c.points) if module is gpu else len(module.points(c))

    assert count(quick) < count(full)
    assert quick.time_limit_s <= 30 < full.time_limit_s and quick.gap >= full.gap
