"""The GPU figure (experiments.gpu): on a tiny configuration each plan is bounded by the
all-fast oracle, unified memory is the baseline of every speedup, and a sync plan's copies
between kernels make contention change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from figure_checks import ROW_FIELDS, check_meta, check_plot

from experiments import gpu
from experiments.common import read_data

# VGG19 on a GPU at 0.6 of the peak: b8 is the smallest batch whose SGD kernel fits; a loose
# gap and a short cap: seconds per point.
GPU_TINY = gpu.Config(
    points=(("rtx2080ti-pcie3", "vgg19", 8), ("a100-pcie4", "vgg19", 8)),
    device_fraction=0.6,
    time_limit_s=None,  # the gap alone stops each solve: the same plans on any load
    gap=0.1,
    workers=1,
)


@pytest.fixture(scope="module")
def gpu_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, dict[str, Any]]:
    path = gpu.compute(GPU_TINY, tmp_path_factory.mktemp("gpu"))
    frame, meta = read_data(path)
    return path, frame, meta


def test_gpu_table(gpu_data: tuple[Path, pd.DataFrame, dict[str, Any]]) -> None:
    path, frame, meta = gpu_data
    assert path.name == "gpu.parquet"
    assert list(frame.columns) == [*gpu.LEADING, *ROW_FIELDS, "speedup", "fallback", "unimproved"]
    assert len(frame) == len(GPU_TINY.points) * len(gpu.STRATEGIES)
    check_meta(meta, "gpu", GPU_TINY)
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
    check_plot(gpu, gpu_data[0], tmp_path)


def test_workers_are_not_part_of_a_point() -> None:
    two = gpu.Config(points=GPU_TINY.points, device_fraction=0.6, time_limit_s=None, gap=0.1)
    assert two.workers != GPU_TINY.workers and gpu.points(two) == gpu.points(GPU_TINY)


def test_quick_is_a_reduced_full_run() -> None:
    full, quick = gpu.Config(), gpu.QUICK
    assert len(gpu.points(quick)) < len(gpu.points(full))
    assert quick.time_limit_s <= 30 < full.time_limit_s and quick.gap >= full.gap
