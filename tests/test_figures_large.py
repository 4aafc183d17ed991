"""The large-workloads figure (experiments.large): on a tiny configuration, static and sync
against the 2LM cache at the same DRAM capacity, the oracle's slowdown 1 and 2LM's speedup 1."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from figure_checks import TINY, check_meta, check_plot

from experiments import large
from experiments.common import read_data
from tmsim.errors import TmsimError
from tmsim.figures import points_dir

LARGE_TINY = large.Config(workloads=TINY, fast_share=0.2, time_limit_s=None)


def _num(frame: pd.DataFrame, strategy: str, column: str) -> float:
    hit = frame[frame["strategy"] == strategy]
    assert len(hit) == 1, strategy
    return float(hit[column].iloc[0])


def test_large_against_2lm(tmp_path: Path) -> None:
    data = large.compute(LARGE_TINY, tmp_path)
    frame, meta = read_data(data)
    check_meta(meta, "large", LARGE_TINY)
    assert list(frame["strategy"]) == list(LARGE_TINY.strategies)
    assert (frame["error"] == "").all(), frame["error"].tolist()

    def by(strategy: str, column: str) -> float:
        return _num(frame, strategy, column)

    assert by("2lm", "speedup_vs_2lm") == 1.0
    assert by("all-fast", "slowdown") == 1.0
    limit = int(0.2 * int(frame["footprint_bytes"].iloc[0]))
    for s in ("static", "sync", "2lm"):
        assert by(s, "fast_limit_bytes") == limit
    assert by("sync", "speedup_vs_2lm") >= by("static", "speedup_vs_2lm") - 1e-9
    assert by("sync", "slowdown") < by("all-slow", "slowdown")
    assert 0 < by("2lm", "hit_rate") <= 1
    check_plot(large, data, tmp_path)


def test_large_refuses_bad_share_before_any_point_runs(tmp_path: Path) -> None:
    with pytest.raises(TmsimError, match="fast_share"):
        large.compute(large.Config(workloads=TINY, fast_share=1.5), tmp_path)
    assert not points_dir(tmp_path, "large").exists()


def test_only_a_2lm_point_carries_the_block_size() -> None:
    with_cache = large.points(LARGE_TINY)[0]
    without = large.points(large.Config(workloads=TINY, strategies=("all-fast", "sync")))[0]
    assert with_cache["cache_block_bytes"] is None and "cache_block_bytes" not in without


def test_quick_is_smaller_than_the_paper() -> None:
    full, quick = large.Config(), large.QUICK
    assert full.fast_share is None  # the platform's real DRAM
    assert quick.time_limit_s < full.time_limit_s
    assert len(quick.workloads) <= len(full.workloads)
