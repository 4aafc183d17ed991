"""Traces: records, DataFrames, the Parquet round trip, and the timeline figure."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.levels import InterferenceLevel
from tmsim.planners.heuristics import plan_vdnn
from tmsim.planners.settings import PlanSettings
from tmsim.plots import merge_intervals, timeline
from tmsim.sim import Trace, TraceFileError, load_trace, replay, save_trace
from tmsim.sim.trace import Record
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

CPU = load_preset("cascadelake-optane")


@cache
def graph() -> Graph:
    return training_graph_of("resnet50", 2)


@cache
def trace() -> Trace:
    p = plan_vdnn(graph(), CPU, PlanSettings(capacity=Capacity.parse("4:1")))
    return replay(p, graph(), CPU, level=InterferenceLevel.BANDWIDTH)


def test_to_frame_columns_and_values() -> None:
    t = trace()
    records, occupancy = t.to_frame()
    assert list(records.columns) == [
        "kind",
        "name",
        "kernel",
        "phase",
        "src",
        "dst",
        "start_s",
        "end_s",
        "uncontended_s",
        "fast_resident_bytes",
        "lost_shared_s",
        "lost_blocked_s",
        "lost_core_s",
        "lost_latency_s",
        "read_bytes_DRAM",
        "read_bytes_PMM",
        "write_bytes_DRAM",
        "write_bytes_PMM",
        "duration_s",
        "rate_bytes_per_s",
    ]
    assert len(records) == len(t.records)
    assert set(records["kind"]) == {"kernel", "sync", "async"}
    assert (records["kind"] == "kernel").sum() == len(graph().kernels)
    assert records["start_s"].is_monotonic_increasing
    assert records["end_s"].max() == t.simulated_s
    moves = records[records["kind"] != "kernel"]
    assert (moves["fast_resident_bytes"] == -1).all()
    # A copy's rate is its bytes over its span, which is its latency (the source's read and
    # the destination's write latency) and then its bytes at the helper thread's idle rate,
    # 1.726 (PMM to DRAM) or 2.648 GB/s (DRAM to PMM).
    copies = moves[moves["kind"] == "async"]
    nbytes = copies["duration_s"] * copies["rate_bytes_per_s"]
    latency = copies["src"].map({"PMM": 305e-9 + 86.9e-9, "DRAM": 101.5e-9 + 90.4e-9})
    rate = copies["src"].map(
        {"PMM": 1 / (1 / 2.88e9 + 1 / 4.31e9), "DRAM": 1 / (1 / 7.38e9 + 1 / 4.13e9)}
    )
    assert np.allclose(copies["duration_s"], latency + nbytes / rate, rtol=1e-9, atol=0)
    assert set(copies["src"]) == {"PMM", "DRAM"}
    assert list(occupancy.columns) == ["time_s", "fast_bytes"]
    assert len(occupancy) == 2 * len(graph().kernels)
    assert occupancy["fast_bytes"].max() == t.fast_peak_bytes <= t.fast_limit_bytes


def test_record_rate_counts_bytes_once_for_a_copy() -> None:
    r = Record("async", "x", 0, "forward", "DRAM", "PMM", 1.0, 3.0, (4, 0), (0, 4), 2.0, -1)
    assert r.rate_bytes_per_s == 2.0
    k = Record("kernel", "k", 0, "forward", "", "", 1.0, 2.0, (3, 1), (2, 0), 1.0, 10)
    assert k.rate_bytes_per_s == 6.0
    assert (
        Record("kernel", "k", 0, "", "", "", 1.0, 1.0, (1, 0), (0, 0), 0.0, 0).rate_bytes_per_s == 0
    )


def test_parquet_round_trip_is_exact(tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    save_trace(trace(), path)
    back = load_trace(path)
    assert back == trace()
    assert back.occupancy()[1].tolist() == trace().occupancy()[1].tolist()


def test_attribution_survives_a_file_and_older_files_read_as_none(tmp_path: Path) -> None:
    got = plan_vdnn(graph(), CPU, PlanSettings(capacity=Capacity.parse("4:1")))
    full = replay(got, graph(), CPU, level="controller")  # type: ignore[arg-type]
    assert sum(full.losses_s(("sync", "async")).values()) > 0
    path = tmp_path / "full.parquet"
    save_trace(full, path)
    assert load_trace(path) == full
    table = pq.read_table(path)
    old = table.drop_columns([c for c in table.column_names if c.startswith("lost_")])
    pq.write_table(old.replace_schema_metadata(table.schema.metadata), path)
    back = load_trace(path)
    assert back.losses_s() == dict.fromkeys(("shared", "blocked", "core", "latency"), 0.0)
    assert [r.end_s for r in back.records] == [r.end_s for r in full.records]


def test_loading_something_else_fails_with_the_file_name(tmp_path: Path) -> None:
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(TraceFileError, match=r"junk\.parquet"):
        load_trace(junk)
    plain = tmp_path / "plain.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(plain)
    with pytest.raises(TraceFileError, match="not a tmsim trace"):
        load_trace(plain)


def test_merge_intervals_closed_form() -> None:
    # Gaps of 0.5 and 2: the first two merge at min_gap 1, all three at 3, none at 0.1.
    starts, ends = [0.0, 1.5, 5.0], [1.0, 3.0, 6.0]
    assert merge_intervals(starts, ends, 1.0) == [(0.0, 3.0), (5.0, 1.0)]
    assert merge_intervals(starts, ends, 3.0) == [(0.0, 6.0)]
    assert merge_intervals(starts, ends, 0.1) == [(0.0, 1.0), (1.5, 1.5), (5.0, 1.0)]
    # Unsorted and nested input.
    assert merge_intervals([2.0, 0.0], [2.5, 10.0], 0.0) == [(0.0, 10.0)]
    assert merge_intervals([], [], 1.0) == []


def test_timeline_writes_a_png(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "timeline.png"
    timeline(trace(), path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10_000
