"""Sweeps whose results do not depend on the machine's load, and nothing lost when a run dies:
points stopped on a wall-clock limit are marked and computed again on resume while finished
ones are kept, pool workers exit when the sweep is killed or stopped, and a sweep killed
halfway resumes to the table of an uninterrupted run (the basic resume tests: test_sweep.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import tmsim.sweeps.engine as engine
from tmsim.cli.main import main
from tmsim.comparison import Row
from tmsim.results import read_table
from tmsim.sweeps.engine import Outcome, Task, evaluate_task, run_sweep
from tmsim.sweeps.pool import run_tasks
from tmsim.sweeps.spec import load_sweep
from tmsim.sweeps.store import Counts

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent

#: The static MILP beside a heuristic at two capacities on VGG19 b1: 4 points + 1 baseline.
#: The time limit is far beyond what the solves take, so they finish unless a test says not.
MILP = """
[sweep]
name = "milp"
[grid]
model = ["vgg19"]
batch = [1]
platform = ["cascadelake-optane"]
ratio = ["4:1", "1:1"]
strategy = ["first-touch", "static"]
[settings]
time_limit_s = 120
"""

#: Columns that differ between two runs of the same points.
VOLATILE = ["elapsed_s", "git_commit", "solve_s"]

#: Generous bound on how long a process may take to notice that it should exit.
LIVENESS_S = 60.0


def write_spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    return path


def stable(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without run-dependent columns, in key order."""
    return frame.drop(columns=VOLATILE).sort_values("key").reset_index(drop=True)


class LoggingEvaluate:
    """Evaluates like :func:`evaluate_task`, appending each evaluated key to ``log``."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def __call__(self, task: Task) -> list[Outcome]:
        with self.log.open("a", encoding="utf-8") as f:
            f.writelines(f"{p.key}\n" for p in task.points)
        return evaluate_task(task)

    def taken(self) -> list[str]:
        """The keys evaluated since the last call, and forget them."""
        keys = self.log.read_text().split() if self.log.exists() else []
        self.log.write_text("")
        return keys


def stopping_compare(ratio: str, status: str) -> Callable[..., list[Row]]:
    """:func:`tmsim.comparison.compare` whose MILP rows at capacity ``ratio`` report ``status``
    and the limit it names in ``stopped_on`` (``user_limit``, cvxpy's word for any limit: the
    wall clock), as they do when the solver stopped on a limit (the plan is the real one)."""
    stop = "node_limit" if status == "node_limit" else "time_limit"
    real = engine.compare

    def compare(graph: Any, platform: Any, settings: Any, *args: Any, **kw: Any) -> list[Row]:
        rows = real(graph, platform, settings, *args, **kw)
        if str(settings.plan.capacity) != ratio:
            return rows
        return [
            replace(r, status=status, stopped_on=stop) if r.planner.startswith("milp") else r
            for r in rows
        ]

    return compare


def still_running(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` whose process exists and has not exited (a zombie has exited)."""
    return [pid for pid in pids if _running(pid)]


def _running(pid: int) -> bool:
    if Path("/proc/self/stat").is_file():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return False
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False)."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def pids_in(folder: Path) -> list[int]:
    return [int(p.stem) for p in folder.glob("*.pid")]


def kill_all(pids: Iterable[int]) -> None:
    """Clean up after a failing liveness check: kill what is left of the given processes."""
    for pid in still_running(pids):
        os.kill(pid, signal.SIGKILL)


def blocking_evaluate(folder: str, task: Task) -> list[Outcome]:
    """Write this process's pid to ``folder``, then wait (at most two minutes) for the file
    ``folder/release``; tasks of the ``all-fast`` strategy are evaluated at once."""
    if any(p.strategy == "all-fast" for p in task.points):
        return evaluate_task(task)
    (Path(folder) / f"{os.getpid()}.pid").touch()
    wait_until((Path(folder) / "release").exists, 120.0)
    return evaluate_task(task)


def block_in_workers(spec: str, out: str, folder: str) -> None:
    """Run a sweep whose points block in two pool workers (for the kill test, in a
    subprocess)."""
    run_sweep(load_sweep(spec), out, workers=2, evaluate=partial(blocking_evaluate, folder))


def crash_after_points(spec: str, out: str, survivors: int) -> None:
    """Run a sweep with two pool workers and SIGKILL its coordinating process once it has
    recorded ``survivors`` points, while workers are busy (for the crash test, in a
    subprocess)."""

    def progress(counts: Counts) -> None:
        if counts.evaluated >= survivors:
            os.kill(os.getpid(), signal.SIGKILL)

    run_sweep(load_sweep(spec), out, workers=2, progress=progress)


def solve_then_pool(spec: str, out: str, folder: str) -> None:
    """Solve a MILP point in this process, then every point of the sweep in a pool of two
    workers (for the test, in a subprocess: a fresh process that has run HiGHS)."""
    sweep = load_sweep(spec)
    static = next(p for p in sweep.points if p.strategy == "static")
    outcome = evaluate_task(Task((static,)))[0]
    assert outcome.row is not None and outcome.row["planner"] == "milp-static"
    (Path(folder) / "release").touch()
    run_sweep(sweep, out, workers=2, evaluate=partial(blocking_evaluate, folder))


def in_subprocess(call: str) -> subprocess.Popen[bytes]:
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_sweep_resume as t; {call}"
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO)


# --- resume ---------------------------------------------------------------------------------


def test_a_point_stopped_on_the_time_limit_is_computed_again_and_a_finished_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = load_sweep(write_spec(tmp_path, MILP))
    out = tmp_path / "out"
    evaluate = LoggingEvaluate(tmp_path / "log")
    stopped = next(p.key for p in sweep.points if (p.strategy, p.ratio) == ("static", "4:1"))
    monkeypatch.setattr(engine, "compare", stopping_compare("4:1", "user_limit"))
    first = run_sweep(sweep, out, workers=1, evaluate=evaluate)
    assert sorted(evaluate.taken()) == sorted(p.key for p in sweep.points)
    assert first.stopped == 1 and first.table is not None
    record = json.loads((out / "points" / f"{stopped}.json").read_text())
    assert record["stopped_on"] == "time_limit" and record["row"]["status"] == "user_limit"
    frame, meta = read_table(first.table)
    marked = frame.set_index("key")["stopped_on"]
    assert marked[stopped] == "time_limit" and (marked.drop(stopped) == "").all()
    assert meta["counts"]["time_limit"] == 1
    # Resumed: the stopped point runs again (and stops again), the finished ones do not.
    again = run_sweep(sweep, out, workers=1, evaluate=evaluate)
    assert evaluate.taken() == [stopped]
    assert (again.counts.reused, again.counts.evaluated, again.stopped) == (4, 1, 1)
    # Once its solve finishes, it is finished too.
    monkeypatch.undo()
    fixed = run_sweep(sweep, out, workers=1, evaluate=evaluate)
    assert evaluate.taken() == [stopped] and fixed.stopped == 0
    assert run_sweep(sweep, out, workers=1, evaluate=evaluate).counts.reused == 5
    assert evaluate.taken() == []
    whole = run_sweep(sweep, tmp_path / "whole", workers=1)
    assert fixed.table is not None and whole.table is not None
    resumed = stable(read_table(fixed.table)[0])
    assert (resumed.stopped_on == "").all()
    pd.testing.assert_frame_equal(resumed, stable(read_table(whole.table)[0]))


def test_a_point_stopped_on_the_node_limit_is_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = load_sweep(write_spec(tmp_path, MILP))
    out = tmp_path / "out"
    evaluate = LoggingEvaluate(tmp_path / "log")
    monkeypatch.setattr(engine, "compare", stopping_compare("4:1", "node_limit"))
    report = run_sweep(sweep, out, workers=1, evaluate=evaluate)
    assert report.stopped == 0 and report.table is not None
    assert list(read_table(report.table)[0].stopped_on).count("node_limit") == 1
    evaluate.taken()
    assert run_sweep(sweep, out, workers=1, evaluate=evaluate).counts.reused == 5
    assert evaluate.taken() == []


def test_a_real_time_limit_stop_is_marked_and_computed_again(tmp_path: Path) -> None:
    # A microsecond runs out before the first solve starts, on any machine.
    spec = MILP.replace("time_limit_s = 120", "time_limit_s = 1e-6").replace(
        '["4:1", "1:1"]', '["4:1"]'
    )
    sweep = load_sweep(write_spec(tmp_path, spec))
    evaluate = LoggingEvaluate(tmp_path / "log")
    first = run_sweep(sweep, tmp_path / "out", workers=1, evaluate=evaluate)
    assert first.table is not None and first.stopped == 1
    frame = read_table(first.table)[0].set_index("strategy")
    assert frame.at["static", "stopped_on"] == "time_limit"
    assert frame.at["first-touch", "stopped_on"] == frame.at["all-fast", "stopped_on"] == ""
    static = next(p.key for p in sweep.points if p.strategy == "static")
    assert sorted(evaluate.taken()) == sorted(p.key for p in sweep.points)
    assert run_sweep(sweep, tmp_path / "out", workers=1, evaluate=evaluate).stopped == 1
    assert evaluate.taken() == [static]


def test_records_written_before_they_said_how_they_stopped_are_judged_by_their_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = load_sweep(write_spec(tmp_path, MILP))
    out = tmp_path / "out"
    evaluate = LoggingEvaluate(tmp_path / "log")
    monkeypatch.setattr(engine, "compare", stopping_compare("4:1", "user_limit"))
    run_sweep(sweep, out, workers=1, evaluate=evaluate)
    for path in (out / "points").glob("*.json"):
        record = json.loads(path.read_text())
        del record["stopped_on"]
        path.write_text(json.dumps(record))
    evaluate.taken()
    report = run_sweep(sweep, out, workers=1, evaluate=evaluate)
    stopped = [p.key for p in sweep.points if (p.strategy, p.ratio) == ("static", "4:1")]
    assert evaluate.taken() == stopped and report.counts.reused == 4


def test_the_command_line_counts_points_stopped_on_the_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sweep", str(write_spec(tmp_path, MILP)), "--out", str(tmp_path / "out")]
    monkeypatch.setattr(engine, "compare", stopping_compare("4:1", "user_limit"))
    assert main([*args, "--workers", "1"]) == 0
    assert "0 failed, 1 stopped on the time limit (rerun next time); -> " in (
        capsys.readouterr().out
    )
    assert main([*args, "--dry-run"]) == 0
    assert "4 finished, 1 to compute in 1 tasks" in capsys.readouterr().out


# --- workers die with the sweep, and a killed sweep resumes -----------------------------------


@pytest.mark.slow
def test_pool_workers_exit_when_the_sweep_is_killed(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, MILP.replace('"static"', '"greedy"'))
    folder = tmp_path / "pids"
    folder.mkdir()
    sweep = in_subprocess(
        f"t.block_in_workers({str(spec)!r}, {str(tmp_path / 'out')!r}, {str(folder)!r})"
    )
    workers: list[int] = []
    try:
        assert wait_until(lambda: len(pids_in(folder)) == 2, 120.0), "workers never started"
        workers = pids_in(folder)
        assert sweep.pid not in workers and still_running(workers) == workers
        os.kill(sweep.pid, signal.SIGKILL)
        assert sweep.wait(timeout=60) == -signal.SIGKILL
        gone = wait_until(lambda: not still_running(workers), LIVENESS_S)
        assert gone, f"workers still running: {still_running(workers)}"
    finally:
        (folder / "release").touch()
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        kill_all(workers)


@pytest.mark.slow
def test_pool_workers_exit_when_a_run_stops_early(tmp_path: Path) -> None:
    folder = tmp_path / "pids"
    folder.mkdir()
    sweep = load_sweep(write_spec(tmp_path, MILP.replace('"static"', '"greedy"')))
    # the all-fast task first: one worker evaluates it while the other blocks, then blocks too
    tasks = sorted(engine.plan_tasks(sweep.points), key=lambda t: t.points[0].role != "baseline")
    runner = run_tasks(tasks, partial(blocking_evaluate, str(folder)), workers=2)
    workers: list[int] = []
    try:
        assert next(runner)[0].points[0].strategy == "all-fast"  # while two tasks block
        assert wait_until(lambda: len(pids_in(folder)) == 2, 120.0), "workers never started"
        workers = pids_in(folder)
        runner.close()  # as an interrupt does: what the workers run can no longer be recorded
        gone = wait_until(lambda: not still_running(workers), LIVENESS_S)
        assert gone, f"workers still running: {still_running(workers)}"
    finally:
        (folder / "release").touch()
        runner.close()
        kill_all(workers)


def test_a_pool_solves_milps_after_this_process_has(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, MILP.replace('"first-touch", ', ""))
    folder = tmp_path / "pids"
    folder.mkdir()
    out = tmp_path / "out"
    run = in_subprocess(f"t.solve_then_pool({str(spec)!r}, {str(out)!r}, {str(folder)!r})")
    try:
        assert run.wait(timeout=300) == 0  # a liveness bound: the solves take seconds
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        kill_all(pids_in(folder))
    assert pids_in(folder) and run.pid not in pids_in(folder)  # solved in the workers
    frame = read_table(out / "results.parquet")[0].set_index("strategy")
    assert frame.loc["static", "planner"].tolist() == ["milp-static"] * 2


def test_a_sweep_killed_halfway_resumes_to_the_table_of_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    spec = write_spec(
        tmp_path, MILP.replace('["first-touch", "static"]', '["first-touch", "greedy", "static"]')
    )
    out = tmp_path / "out"
    crashed = in_subprocess(f"t.crash_after_points({str(spec)!r}, {str(out)!r}, 2)")
    assert crashed.wait(timeout=300) == -signal.SIGKILL
    kept = sorted(p.name for p in (out / "points").iterdir())
    assert 2 <= len(kept) < 7 and all(name.endswith(".json") for name in kept)
    assert not (out / "results.parquet").exists()
    sweep = load_sweep(spec)
    evaluate = LoggingEvaluate(tmp_path / "log")
    resumed = run_sweep(sweep, out, workers=1, evaluate=evaluate)
    assert resumed.counts.reused == len(kept) and resumed.counts.failed == 0
    assert sorted(evaluate.taken() + [k.removesuffix(".json") for k in kept]) == sorted(
        p.key for p in sweep.points
    )
    whole = run_sweep(sweep, tmp_path / "whole", workers=1)
    assert resumed.table is not None and whole.table is not None
    got, want = read_table(resumed.table)[0], read_table(whole.table)[0]
    assert (got.stopped_on == "").all() and (want.stopped_on == "").all()
    pd.testing.assert_frame_equal(stable(got), stable(want))


def test_a_node_limit_in_the_spec_reaches_the_solver_and_its_stop_is_final(
    tmp_path: Path,
) -> None:
    spec = (
        MILP.replace("batch = [1]", "batch = [2]")
        .replace('["4:1", "1:1"]', '["4:1"]')
        .replace('["first-touch", "static"]', '["sync"]')
        .replace("time_limit_s = 120", "time_limit_s = 120\nnode_limit = 1\ngap = 0.0\nwindow = 1")
    )
    sweep = load_sweep(write_spec(tmp_path, spec))
    evaluate = LoggingEvaluate(tmp_path / "log")
    first = run_sweep(sweep, tmp_path / "out", workers=1, evaluate=evaluate)
    assert first.table is not None and first.stopped == 0
    frame = read_table(first.table)[0].set_index("strategy")
    assert (frame.at["sync", "status"], frame.at["sync", "stopped_on"]) == ("node_limit",) * 2
    assert frame.at["sync", "settings.node_limit"] == 1
    evaluate.taken()
    run_sweep(sweep, tmp_path / "out", workers=1, evaluate=evaluate)
    assert evaluate.taken() == []  # a limit on work gives the same answer again: not rerun
