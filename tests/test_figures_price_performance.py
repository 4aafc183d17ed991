"""The price-performance figure (experiments.price_performance): memory costs by hand on a tiny
configuration, the cost curves and the cheapest configuration within a budget; new prices
reuse every stored point."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from figure_checks import RATIO, TINY, check_meta, check_plot, stored_points

from experiments import conventional, price_performance
from experiments.common import read_data
from tmsim.errors import TmsimError
from tmsim.figures import points_dir

NAME = price_performance.NAME
PRICED = price_performance.Config(
    workloads=TINY, ratios=(RATIO,), time_limit_s=None, budget_slowdown=1.5
)


@pytest.fixture(scope="module")
def priced_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return price_performance.compute(PRICED, tmp_path_factory.mktemp("price_performance"))


def _point(frame: pd.DataFrame, ratio: str, strategy: str) -> pd.Series:
    hit = frame[(frame["ratio"] == ratio) & (frame["strategy"] == strategy)]
    assert len(hit) == 1, (ratio, strategy)
    return hit.iloc[0]


def test_costs_by_hand(priced_data: Path, tmp_path: Path) -> None:
    frame, meta = read_data(priced_data)
    assert priced_data.name == "price_performance.parquet"
    check_meta(meta, NAME, PRICED)
    gb = float(frame["footprint_bytes"].iloc[0]) / 1e9
    dram = _point(frame, conventional.ALL_DRAM, "all-fast")
    fifth = _point(frame, RATIO, "sync")
    pmm = _point(frame, conventional.ALL_PMM, "all-slow")
    # DRAM 2.1 and PMM 1.0 per GB: all-DRAM 2.1 F, 4:1 (2.1 + 4 x 1.0) F / 5, all-PMM 1.0 F
    assert dram["memory_cost"] == pytest.approx(2.1 * gb)
    assert fifth["memory_cost"] == pytest.approx(1.22 * gb)
    assert pmm["memory_cost"] == pytest.approx(1.0 * gb)
    assert (dram["cost_norm"], fifth["cost_norm"], pmm["cost_norm"]) == pytest.approx(
        (1.0, 1.22 / 2.1, 1.0 / 2.1)
    )
    assert 4 * fifth["dram_bytes"] == pytest.approx(fifth["pmm_bytes"])
    assert set(frame["strategy"]) == {"all-fast", "all-slow", "first-touch", "sync"}
    assert (frame["within_budget"] == (frame["slowdown"] <= 1.5)).all()
    check_plot(price_performance, priced_data, tmp_path)


def test_new_prices_reuse_every_stored_point(priced_data: Path, tmp_path: Path) -> None:
    shutil.copytree(points_dir(priced_data.parent, NAME), points_dir(tmp_path, NAME))
    before = stored_points(tmp_path, NAME)
    dearer = replace(PRICED, dram_price_per_gb=4.2, budget_slowdown=1.0)
    frame, meta = read_data(price_performance.compute(dearer, tmp_path))
    assert stored_points(tmp_path, NAME) == before
    assert meta["config"]["dram_price_per_gb"] == 4.2
    old = read_data(priced_data)[0]
    pd.testing.assert_series_equal(frame["slowdown"], old["slowdown"])
    assert _point(frame, conventional.ALL_PMM, "all-slow")["cost_norm"] == pytest.approx(1 / 4.2)
    assert list(frame["within_budget"]) == list(frame["slowdown"] <= 1.0)


def test_curve_and_cheapest(priced_data: Path) -> None:
    frame, _ = read_data(priced_data)
    points = price_performance.curve(frame, "VGG19 b4", "sync")
    assert list(points["ratio"]) == [conventional.ALL_PMM, RATIO, conventional.ALL_DRAM]
    assert price_performance.curve(frame, conventional.GEOMEAN, "sync")["slowdown"].tolist() == (
        pytest.approx(points["slowdown"].tolist())
    )
    hand = pd.DataFrame(
        {
            "ratio": ["a", "b", "c", "d"],
            "cost_norm": [0.5, 0.7, 0.7, 1.0],
            "slowdown": [3.0, 1.19, 1.1, 1.0],
        }
    )
    best = price_performance.cheapest(hand, 1.2)
    assert best is not None and best["ratio"] == "c"  # cheapest in budget; ties: the faster
    assert price_performance.cheapest(hand, 0.9) is None


def test_memory_split() -> None:
    assert price_performance.memory_split(100.0, "4:1") == pytest.approx((20.0, 80.0))
    assert price_performance.memory_split(100.0, conventional.ALL_DRAM) == (100.0, 0.0)
    assert price_performance.memory_split(100.0, conventional.ALL_PMM) == (0.0, 100.0)
    with pytest.raises(TmsimError, match="ratio"):
        price_performance.memory_split(100.0, "half")


def test_quick_is_smaller_than_the_paper() -> None:
    full, quick = price_performance.Config(), price_performance.QUICK
    assert full.dram_price_per_gb / full.pmm_price_per_gb == 2.1
    assert quick.time_limit_s < full.time_limit_s
    assert len(quick.workloads) <= len(full.workloads)
