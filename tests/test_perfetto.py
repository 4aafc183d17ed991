"""Chrome trace-event export (tmsim.sim.perfetto): the file parses, holds one event per kernel,
copy and residency range at the trace's own times, keeps every track free of overlaps, and
its memory counters are the plan's resident bytes."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import tmsim
from tmsim.cli.main import main
from tmsim.errors import TmsimError
from tmsim.layout.fast_tier import resident_bytes
from tmsim.planners import PlanSettings, plan
from tmsim.sim import replay
from tmsim.sim.perfetto import (
    COMPUTE_PID,
    COPIES_PID,
    LINKS_PID,
    MEMORY_PID,
    TENSORS_PID,
    US_PER_S,
    save_trace_events,
    trace_events,
)
from tmsim.sim.trace import ASYNC, KERNEL, RECOMPUTE, SYNC


@pytest.fixture(scope="module")
def offloaded() -> tuple[Any, Any, Any, Any]:
    """VGG19 b1 on a GPU with every activation offloaded: asynchronous copies both ways."""
    g = tmsim.graph("vgg19", batch=1)
    p = tmsim.platform("h100-pcie5")
    made = plan("vdnn", g, p, PlanSettings(offload_all=True, offload_min_bytes=0))
    return g, p, made, replay(made, g, p)


def _written(tmp_path: Path, replays: list[list[dict[str, Any]]]) -> list[Any]:
    path = save_trace_events(tmp_path / "t.json", replays)
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ms"
    return list(doc["traceEvents"])


def test_events_match_the_trace(offloaded: tuple[Any, Any, Any, Any], tmp_path: Path) -> None:
    g, _, made, trace = offloaded
    events = _written(tmp_path, [trace_events(trace, made, g, "vdnn")])
    by_pid: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_pid[e["pid"]].append(e)
    kernels = [r for r in trace.records if r.kind in (KERNEL, RECOMPUTE)]
    copies = [r for r in trace.records if r.kind in (SYNC, ASYNC)]
    assert any(r.kind == ASYNC for r in copies)  # the fixture moves asynchronously
    assert len(by_pid[COMPUTE_PID]) == len(kernels) == len(g.kernels)
    assert len(by_pid[COPIES_PID]) == len(by_pid[LINKS_PID]) == len(copies)
    assert len(by_pid[TENSORS_PID]) == len(made.residency)
    # times are the records' own, in microseconds
    for e, r in zip(by_pid[COMPUTE_PID], kernels, strict=True):
        assert e["name"] == r.name
        assert e["ts"] == pytest.approx(r.start_s * US_PER_S)
        assert e["dur"] == pytest.approx((r.end_s - r.start_s) * US_PER_S)
    moved = sum(e["args"].get("read device bytes", 0) for e in by_pid[COPIES_PID])
    assert moved == sum(r.read_bytes[0] for r in copies)
    end = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X" and e["pid"] != TENSORS_PID)
    assert end == pytest.approx(trace.simulated_s * US_PER_S)
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
    assert (COMPUTE_PID, "vdnn: compute") in names and (LINKS_PID, "vdnn: links") in names


def test_no_track_holds_overlapping_slices(
    offloaded: tuple[Any, Any, Any, Any], tmp_path: Path
) -> None:
    g, _, made, trace = offloaded
    events = _written(tmp_path, [trace_events(trace, made, g)])
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for key, spans in tracks.items():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-6, key
    # asynchronous copies of one direction that overlap sit on different engines
    lanes = {e["tid"] for e in events if e["ph"] == "X" and e["pid"] == COPIES_PID}
    assert len(lanes) >= 2


def test_memory_counters_are_the_plans_resident_bytes(
    offloaded: tuple[Any, Any, Any, Any],
) -> None:
    g, p, made, trace = offloaded
    counters = [e for e in trace_events(trace, made, g) if e["ph"] == "C"]
    fast = p.tiers[0].name
    values = [e["args"][fast] for e in counters if fast in e["args"]]
    resident = resident_bytes(made, g, p)
    assert values[0] == resident[0]
    assert max(values) == int(resident.max())
    assert {e["pid"] for e in counters} == {MEMORY_PID}


def test_two_replays_in_one_file_do_not_share_processes(
    offloaded: tuple[Any, Any, Any, Any], tmp_path: Path
) -> None:
    _, _, _, trace = offloaded
    events = _written(tmp_path, [trace_events(trace, label="a"), trace_events(trace, label="b")])
    named = [e for e in events if e["name"] == "process_name"]
    pids = [e["pid"] for e in named]
    assert len(pids) == len(set(pids)) == 6  # compute, copies, links, twice
    assert {e["args"]["name"].split(":")[0] for e in named} == {"a", "b"}


def test_bad_arguments_fail_in_one_line(
    offloaded: tuple[Any, Any, Any, Any], tmp_path: Path
) -> None:
    g, _, made, trace = offloaded
    with pytest.raises(TmsimError, match="need the plan's graph"):
        trace_events(trace, made)
    other = tmsim.plan(tmsim.graph("vgg19", batch=2), tmsim.platform("h100-pcie5"), "all-fast")
    with pytest.raises(TmsimError, match="the plan is for vgg19-b2"):
        trace_events(trace, other, g)
    with pytest.raises(TmsimError, match="cannot write") as err:
        save_trace_events(tmp_path / "missing" / "t.json", [trace_events(trace)])
    assert "\n" not in str(err.value)


def test_the_command_line_writes_a_trace_event_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file = tmp_path / "plan.json"
    argv = ["plan", "vgg19", "--batch", "2", "--ratio", "4:1", "--mode", "greedy"]
    assert main([*argv, "--out", str(plan_file)]) == 0
    capsys.readouterr()
    out = tmp_path / "step.json"
    assert main(["simulate", str(plan_file), "--perfetto", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["perfetto"] == str(out)
    events = json.loads(out.read_text())["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X" and e["pid"] == COMPUTE_PID]
    assert len(kernels) == len(tmsim.graph("vgg19", batch=2).kernels)
    assert any(e["ph"] == "C" for e in events)  # the memory counters need the plan's graph
    cache = tmp_path / "cache.json"
    argv = ["simulate", "--cache-mode", "vgg19", "--batch", "2", "--perfetto", str(cache)]
    assert main(argv) == 0
    assert json.loads(cache.read_text())["traceEvents"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--perfetto", "t.txt"], "a trace-event file is written as .json"),
        (["--perfetto", "same.parquet", "--trace", "same.parquet"], "both name"),
        (["--perfetto", ""], "--perfetto needs a file name"),
    ],
)
def test_bad_perfetto_paths_fail_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    plan_file = tmp_path / "plan.json"
    argv = ["plan", "vgg19", "--batch", "2", "--ratio", "4:1", "--mode", "greedy"]
    assert main([*argv, "--out", str(plan_file)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(plan_file), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_compare_writes_every_replay_in_one_file(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    g = tmsim.graph("vgg19", batch=2)
    frame = tmsim.compare(
        g, tmsim.platform(), ["all-fast", "greedy", "2lm"], fast="4:1", perfetto=out
    )
    events = json.loads(out.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"all-fast: compute", "greedy: compute", "2lm: compute"} <= names
    assert "greedy: memory in use (bytes)" in names and "2lm: memory in use (bytes)" not in names
    kernels = [e for e in events if e["ph"] == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == len(frame) * len(g.kernels)
    with pytest.raises(TmsimError, match="perfetto must be a file path"):
        tmsim.compare(g, tmsim.platform(), ["all-fast"], perfetto=3)  # type: ignore[arg-type]


def test_compare_refuses_a_perfetto_path_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "vgg19", "--batch", "2", "--strategies", "all-fast"]
    assert main([*argv, "--perfetto", str(tmp_path / "no" / "t.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main([*argv, "--perfetto", str(tmp_path / "t.csv")]) == 2


def test_host_kernels_have_their_own_track() -> None:
    g = tmsim.graph("gpt2_small", batch=1, seq_len=128, layers=2)
    p = tmsim.platform("h100-host-nvme")
    made = tmsim.plan(g, p, "zero-offload")
    events = trace_events(replay(made, g, p), made, g)
    threads = {
        e["tid"]: e["args"]["name"]
        for e in events
        if e["name"] == "thread_name" and e["pid"] == COMPUTE_PID
    }
    host = [e for e in events if e["ph"] == "X" and threads.get(e["tid"]) == "host CPU"]
    assert e_names(host) == [g.kernels[k].name for k in made.host_kernels]


def e_names(events: list[dict[str, Any]]) -> list[str]:
    return [e["name"] for e in events if e["pid"] == COMPUTE_PID]
