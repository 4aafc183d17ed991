"""Figure modules conventional, large, cost and solve_time: compute on tiny configurations,
values checked against what must hold (all-DRAM is 1, sync no slower than static, costs by
hand), plots written, data files carrying their configuration and provenance."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments import conventional, cost, large, solve_time
from experiments.common import geomean, read_data
from tmsim.compare import Row
from tmsim.errors import TmsimError

#: One small workload (142 kernels, 1.2 GB) whose sync MILP at 4:1 solves in about a second
#: (at 1:1 it takes ten times longer) for every tiny configuration.
TINY = (("vgg19", 4),)
RATIO = "4:1"
ROW_COLUMNS = [f for f in Row.__dataclass_fields__]


def _jsonish(value: Any) -> Any:
    """``value`` as it comes back from the data file's JSON metadata (tuples become lists)."""
    if isinstance(value, dict):
        return {k: _jsonish(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonish(v) for v in value]
    return value


def _check_meta(meta: dict[str, Any], name: str, config: Any) -> None:
    assert meta["figure"] == name
    assert meta["config"] == _jsonish(asdict(config))
    prov = meta["provenance"]
    assert prov["solver"] == "HIGHS"
    assert prov["git_commit"] and prov["tmsim_version"] and prov["created_utc"]


def _check_plot(module: Any, data: Path, out: Path) -> None:
    files = module.plot(data, out)
    assert sorted(p.suffix for p in files) == [".pdf", ".png"]
    for p in files:
        assert p.parent == out and p.stem == module.NAME and p.stat().st_size > 1000


def _num(frame: pd.DataFrame, key: str, value: str, column: str) -> float:
    """``column`` of the one row of ``frame`` whose ``key`` is ``value``."""
    hit = frame[frame[key] == value]
    assert len(hit) == 1, (key, value)
    return float(hit[column].iloc[0])


def _point(frame: pd.DataFrame, ratio: str, strategy: str) -> pd.Series:
    hit = frame[(frame["ratio"] == ratio) & (frame["strategy"] == strategy)]
    assert len(hit) == 1, (ratio, strategy)
    return hit.iloc[0]


# --- conventional ------------------------------------------------------------------------

CONV = conventional.Config(workloads=TINY, ratios=(RATIO,), time_limit_s=20.0)


@pytest.fixture(scope="module")
def conv_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return conventional.compute(CONV, tmp_path_factory.mktemp("conventional"))


def test_conventional_table(conv_data: Path) -> None:
    frame, meta = read_data(conv_data)
    _check_meta(meta, "conventional", CONV)
    assert list(frame.columns) == [*conventional.LEADING, *ROW_COLUMNS]
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
    _check_plot(conventional, conv_data, tmp_path)


def test_geomean() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([2.0, 2.0, 2.0]) == pytest.approx(2.0)
    assert math.isnan(geomean([]))
    assert math.isnan(geomean([1.0, math.nan]))  # a failed point is not averaged away
    assert math.isnan(geomean([1.0, 0.0]))


# --- cost --------------------------------------------------------------------------------

COST = cost.Config(workloads=TINY, ratios=(RATIO,), time_limit_s=20.0, budget_slowdown=1.5)


@pytest.fixture(scope="module")
def cost_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cost.compute(COST, tmp_path_factory.mktemp("cost"))


def test_cost_by_hand(cost_data: Path, tmp_path: Path) -> None:
    frame, meta = read_data(cost_data)
    _check_meta(meta, "cost", COST)
    gb = float(frame["footprint_bytes"].iloc[0]) / 1e9
    dram = _point(frame, conventional.ALL_DRAM, "all-fast")
    fifth = _point(frame, RATIO, "sync")
    pmm = _point(frame, conventional.ALL_PMM, "all-slow")
    # DRAM 2.1 and PMM 1.0 per GB: all-DRAM 2.1 F, 4:1 (2.1 + 4 x 1.0) F / 5, all-PMM 1.0 F
    assert dram["memory_cost"] == pytest.approx(2.1 * gb)
    assert fifth["memory_cost"] == pytest.approx(1.22 * gb)
    assert pmm["memory_cost"] == pytest.approx(1.0 * gb)
    assert dram["memory_cost"] > fifth["memory_cost"] > pmm["memory_cost"]
    assert (dram["cost_norm"], fifth["cost_norm"], pmm["cost_norm"]) == pytest.approx(
        (1.0, 1.22 / 2.1, 1.0 / 2.1)
    )
    assert 4 * fifth["dram_bytes"] == pytest.approx(fifth["pmm_bytes"])
    assert set(frame["strategy"]) == {"all-fast", "all-slow", "first-touch", "sync"}
    assert (frame["within_budget"] == (frame["slowdown"] <= 1.5)).all()
    _check_plot(cost, cost_data, tmp_path)


def test_cost_curve_and_cheapest(cost_data: Path) -> None:
    frame, _ = read_data(cost_data)
    points = cost.curve(frame, "VGG19 b4", "sync")
    assert list(points["ratio"]) == [conventional.ALL_PMM, RATIO, conventional.ALL_DRAM]
    assert cost.curve(frame, conventional.GEOMEAN, "sync")["slowdown"].tolist() == (
        pytest.approx(points["slowdown"].tolist())
    )
    hand = pd.DataFrame(
        {"ratio": ["a", "b", "c", "d"], "cost_norm": [0.5, 0.7, 0.7, 1.0],
         "slowdown": [3.0, 1.19, 1.1, 1.0]}
    )  # fmt: skip
    best = cost.cheapest(hand, 1.2)
    assert best is not None and best["ratio"] == "c"  # cheapest in budget; ties: the faster
    assert cost.cheapest(hand, 0.9) is None


def test_memory_split() -> None:
    assert cost.memory_split(100.0, "4:1") == pytest.approx((20.0, 80.0))
    assert cost.memory_split(100.0, conventional.ALL_DRAM) == (100.0, 0.0)
    assert cost.memory_split(100.0, conventional.ALL_PMM) == (0.0, 100.0)
    with pytest.raises(TmsimError, match="ratio"):
        cost.memory_split(100.0, "half")


# --- large -------------------------------------------------------------------------------

LARGE_TINY = large.Config(workloads=TINY, fast_share=0.2, time_limit_s=20.0)


def test_large_against_2lm(tmp_path: Path) -> None:
    data = large.compute(LARGE_TINY, tmp_path)
    frame, meta = read_data(data)
    _check_meta(meta, "large", LARGE_TINY)
    assert list(frame["strategy"]) == list(LARGE_TINY.strategies)
    assert (frame["error"] == "").all(), frame["error"].tolist()

    def by(strategy: str, column: str) -> float:
        return _num(frame, "strategy", strategy, column)

    assert by("2lm", "speedup_vs_2lm") == 1.0
    assert by("all-fast", "slowdown") == 1.0
    limit = int(0.2 * int(frame["footprint_bytes"].iloc[0]))
    for s in ("static", "sync", "2lm"):
        assert by(s, "fast_limit_bytes") == limit
    assert by("sync", "speedup_vs_2lm") >= by("static", "speedup_vs_2lm") - 1e-9
    assert by("sync", "slowdown") < by("all-slow", "slowdown")
    assert 0 < by("2lm", "hit_rate") <= 1
    _check_plot(large, data, tmp_path)


def test_large_refuses_bad_share(tmp_path: Path) -> None:
    with pytest.raises(TmsimError, match="fast_share"):
        large.compute(large.Config(workloads=TINY, fast_share=1.5), tmp_path)


# --- solve_time --------------------------------------------------------------------------

SOLVE = solve_time.Config(workloads=TINY, formulations=("static", "sync"), time_limit_s=20.0)


def test_solve_time(tmp_path: Path) -> None:
    data = solve_time.compute(SOLVE, tmp_path)
    frame, meta = read_data(data)
    _check_meta(meta, "solve_time", SOLVE)
    assert list(frame["formulation"]) == ["static", "sync"]

    def by(formulation: str, column: str) -> float:
        return _num(frame, "formulation", formulation, column)

    assert (frame["kernels"] == 142).all()
    assert not frame["time_limit_hit"].any()
    # sync is warm-started from static: its seconds include static's, its model is larger
    assert 0 < by("static", "solve_s") <= by("sync", "solve_s")
    assert by("sync", "own_solve_s") == pytest.approx(
        by("sync", "solve_s") - by("static", "solve_s")
    )
    if not by("sync", "fallback"):
        assert by("sync", "variables") > by("static", "variables") > 0
    assert by("sync", "predicted_s") <= by("static", "predicted_s") + 1e-12
    _check_plot(solve_time, data, tmp_path)


def test_quick_configs_are_smaller_than_the_paper() -> None:
    assert conventional.Config().workloads == (
        ("inception_v4", 1024), ("vgg19", 2048), ("resnet200", 512), ("densenet264", 512)
    )  # fmt: skip
    assert conventional.Config().ratios == ("8:1", "4:1", "1:1")
    assert large.Config().fast_share is None  # the platform's real DRAM
    assert cost.Config().dram_price_per_gb / cost.Config().pmm_price_per_gb == 2.1
    for module in (conventional, cost, large, solve_time):
        quick, full = module.QUICK, module.Config()
        assert quick.time_limit_s < full.time_limit_s
        assert len(quick.workloads) <= len(full.workloads)
