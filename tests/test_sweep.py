"""Declarative sweeps run: platform overrides take effect, MILP chains and the limit that
stopped them, resume after a limit, a failure or a kill, the Dask path, the CLI and its
progress bar (specs: test_sweep_spec.py; time limits, workers and kills:
test_sweep_resume.py)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cli.main import main
from tmsim.cli.sweep import ProgressBar
from tmsim.comparison import CompareSettings, compare
from tmsim.planners import PlanSettings
from tmsim.results import read_table
from tmsim.sweeps.engine import (
    Counts,
    Outcome,
    Task,
    evaluate_task,
    milp_stop,
    plan_tasks,
    run_sweep,
)
from tmsim.sweeps.spec import load_sweep, sweep_from_dict
from tmsim.workload.zoo import training_graph_of

REPO = Path(__file__).resolve().parent.parent
CPU = "cascadelake-optane"

#: resnet50 at batch 2, two capacities, three cheap strategies: 6 grid points + 1 baseline.
SMALL = """
[sweep]
name = "small"
[grid]
model = ["resnet50"]
batch = [2]
platform = ["cascadelake-optane"]
ratio = ["4:1", "1:1"]
strategy = ["all-slow", "first-touch", "2lm"]
[settings]
cache_block_bytes = 1048576
"""

#: Columns that differ between two runs of the same points.
VOLATILE = ["elapsed_s", "git_commit"]


def write_spec(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def stable(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without run-dependent columns, in key order."""
    return frame.drop(columns=VOLATILE).sort_values("key").reset_index(drop=True)


class CountingEvaluate:
    """Evaluates like :func:`evaluate_task`, appending each evaluated key to ``log``; raises for
    points whose strategy is in ``fail``. Picklable, so it runs in pool workers too."""

    def __init__(self, log: Path, fail: tuple[str, ...] = ()) -> None:
        self.log, self.fail = log, fail

    def __call__(self, task: Task) -> list[Outcome]:
        with self.log.open("a", encoding="utf-8") as f:
            f.writelines(f"{p.key}\n" for p in task.points)
        if any(p.strategy in self.fail for p in task.points):
            raise RuntimeError("injected failure")
        return evaluate_task(task)


def crash_after(spec: str, out: str, survivors: int) -> None:
    """Run a sweep in this process and SIGKILL it as task ``survivors + 1`` starts (for the
    crash test, run in a subprocess)."""
    started = [0]

    def evaluate(task: Task) -> list[Outcome]:
        started[0] += 1
        if started[0] > survivors:
            os.kill(os.getpid(), signal.SIGKILL)
        return evaluate_task(task)

    run_sweep(load_sweep(spec), out, workers=1, evaluate=evaluate)


# --- evaluation -----------------------------------------------------------------------------


def test_halving_pmm_bandwidth_doubles_all_slow_on_a_memory_bound_platform(
    tmp_path: Path,
) -> None:
    # Compute made free (huge peak, no launch overhead): every kernel is memory-bound, and
    # all-slow's step time is bytes over PMM bandwidth, so halving both rates doubles it.
    spec = write_spec(
        tmp_path,
        """
        [grid]
        model = "resnet50"
        batch = 2
        platform = "cascadelake-optane"
        strategy = "all-slow"
        [grid.overrides]
        "tiers.PMM.read_bw_GBps" = [37.6, 18.8]
        "tiers.PMM.write_bw_GBps" = [12.5, 6.25]
        "compute.peak_TFLOPs.fp32" = [1e9]
        "compute.launch_overhead_us" = [0.0]
        [settings]
        interference = "none"
        """,
    )
    report = run_sweep(load_sweep(spec), tmp_path / "out", workers=1)
    assert report.table is not None
    frame, _ = read_table(report.table)
    slow = frame[frame.strategy == "all-slow"].set_index(
        ["tiers.PMM.read_bw_GBps", "tiers.PMM.write_bw_GBps"]
    )["simulated_s"]
    assert slow[(18.8, 6.25)] / slow[(37.6, 12.5)] == pytest.approx(2.0, rel=1e-9)
    assert 1.0 < slow[(18.8, 12.5)] / slow[(37.6, 12.5)] < 2.0
    assert 1.0 < slow[(37.6, 6.25)] / slow[(37.6, 12.5)] < 2.0
    # DRAM untouched: the all-fast baselines are equal, and each slowdown is over its own.
    fast = frame[frame.role == "baseline"]["simulated_s"]
    assert len(fast) == 4 and fast.nunique() == 1
    rows = frame[frame.strategy == "all-slow"]
    assert (rows.slowdown == rows.simulated_s / fast.iloc[0]).all()


def test_milp_points_of_one_capacity_are_one_task_solved_as_a_chain() -> None:
    spec = tomllib.loads(
        """
        [grid]
        model = "vgg19"
        batch = 1
        platform = "cascadelake-optane"
        ratio = ["4:1", "2:1"]
        strategy = ["first-touch", "static", "sync"]
        [settings]
        time_limit_s = 60
        """
    )
    points = sweep_from_dict(spec, "x").points
    tasks = plan_tasks(points)
    sizes = sorted(len(t.points) for t in tasks)
    assert sizes == [1, 1, 1, 2, 2]  # first-touch x2, baseline, (static, sync) x2
    chain = next(t for t in tasks if len(t.points) == 2)
    outcomes = evaluate_task(chain)
    graph = training_graph_of("vgg19", 1)
    want = compare(
        graph,
        load_preset(CPU),
        CompareSettings(
            plan=PlanSettings(
                capacity=None
                if chain.points[0].ratio is None
                else Capacity.parse(chain.points[0].ratio),
                time_limit_s=60,
            ),
            strategies=("static", "sync"),
        ),
    )
    for outcome, row in zip(outcomes, want, strict=True):
        assert outcome.row is not None and outcome.error == ""
        assert outcome.row["planner"] == row.planner
        assert outcome.row["simulated_s"] == pytest.approx(row.simulated_s, rel=1e-9)


#: What the MILP chain says when a limit left it without a plan (old and new wordings).
RAN_OUT = "the time limit of 2.0 s ran out before the sync solve"
NO_PLAN = "solver HIGHS found no sync plan (status {}) within 2.0 s"


@pytest.mark.parametrize(
    ("status", "error", "time_limit_s", "node_limit", "chain_s", "stop"),
    [
        ("optimal", "", 60.0, None, 61.0, None),
        ("user_limit", "", 60.0, None, 10.0, "time_limit"),
        ("user_limit", "", 60.0, 100, 10.0, "node_limit"),  # the deadline was never reached
        ("user_limit", "", 60.0, 100, 60.0, "time_limit"),
        ("user_limit", "", None, 100, 99.0, "node_limit"),
        ("time_limit", "", 60.0, 100, 10.0, "time_limit"),
        ("time_limit (its warm start)", "", 60.0, None, 60.5, "time_limit"),
        ("node_limit", "", 60.0, 100, 70.0, "node_limit"),
        ("fallback to milp-sync (user_limit)", "", 60.0, None, 61.0, "time_limit"),
        (
            "fallback to milp-sync (fallback to milp-static (time_limit))",
            "",
            9,
            None,
            9,
            "time_limit",
        ),
        ("fallback to milp-static (node_limit)", "", 60.0, 100, 30.0, "node_limit"),
        # a fallback hides the formulation's own solve: the deadline decides
        ("fallback to milp-static (node_limit)", "", 60.0, 100, 60.2, "time_limit"),
        ("fallback to milp-static (optimal)", "", 60.0, None, 59.0, None),
        ("fallback to milp-static (optimal)", "", 60.0, None, 60.0, "time_limit"),
        ("fallback to milp-static (optimal)", "", None, 100, 999.0, None),
        (
            "fallback to milp-static (optimal); own solve: time_limit",
            "",
            60.0,
            None,
            9.0,
            "time_limit",
        ),
        ("fallback to milp-static (optimal); own solve: optimal", "", 60.0, None, 60.0, None),
        (
            "fallback to milp-static (optimal); own solve: node_limit",
            "",
            60.0,
            9,
            60.0,
            "node_limit",
        ),
        ("error", RAN_OUT, 2.0, None, 2.1, "time_limit"),
        ("error", NO_PLAN.format("user_limit"), 2.0, None, 2.1, "time_limit"),
        ("error", NO_PLAN.format("time_limit"), 2.0, 5, 2.1, "time_limit"),
        ("error", NO_PLAN.format("node_limit"), 2.0, 5, 1.0, "node_limit"),
        ("error", "no sync plan fits in 0.100 GB of fast memory", 60.0, None, 70.0, None),
        ("error", "the fast-tier layout still overflows 10 bytes", 60.0, None, 70.0, None),
    ],
)
def test_the_limit_that_stopped_a_milp_row(
    status: str,
    error: str,
    time_limit_s: float | None,
    node_limit: int | None,
    chain_s: float,
    stop: str | None,
) -> None:
    row = {"status": status, "error": error}
    assert milp_stop(row, time_limit_s, node_limit, chain_s) == stop


def test_a_limited_run_resumes_without_recomputing_anything(tmp_path: Path) -> None:
    sweep = load_sweep(write_spec(tmp_path, SMALL))
    log = tmp_path / "evaluated.log"
    counting = CountingEvaluate(log)
    first = run_sweep(sweep, tmp_path / "out", workers=2, limit=3, evaluate=counting)
    assert (first.counts.evaluated, first.counts.pending, first.table) == (3, 4, None)
    points = tmp_path / "out" / "points"
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in points.iterdir()}
    assert len(before) == 3
    second = run_sweep(sweep, tmp_path / "out", workers=2, evaluate=counting)
    assert (second.counts.reused, second.counts.evaluated, second.counts.failed) == (3, 4, 0)
    evaluated = log.read_text().split()
    assert sorted(evaluated) == sorted(p.key for p in sweep.points)  # each exactly once
    for p in points.iterdir():
        if p.name in before:
            assert (p.stat().st_mtime_ns, p.read_bytes()) == before[p.name]
    whole = run_sweep(sweep, tmp_path / "whole", workers=1)
    assert second.table is not None and whole.table is not None
    resumed, meta = read_table(second.table)
    pd.testing.assert_frame_equal(stable(resumed), stable(read_table(whole.table)[0]))
    assert meta["counts"] == {"points": 7, "failed": 0, "error": 0, "time_limit": 0}
    assert meta["sweep"]["name"] == "small" and "git_commit" in meta["provenance"]
    base = resumed[resumed.role == "baseline"].simulated_s.iloc[0]
    assert (resumed.slowdown == resumed.simulated_s / base).all()


def test_a_failed_point_is_recorded_kept_in_the_table_and_retried(tmp_path: Path) -> None:
    sweep = load_sweep(write_spec(tmp_path, SMALL))
    log = tmp_path / "evaluated.log"
    out = tmp_path / "out"
    broken = run_sweep(sweep, out, workers=1, evaluate=CountingEvaluate(log, ("2lm",)))
    assert broken.counts.failed == 2 and len(broken.failures) == 2
    assert "RuntimeError: injected failure" in broken.failures[0]
    assert broken.table is not None
    frame, meta = read_table(broken.table)
    failed = frame[frame.status == "failed"]
    assert list(failed.strategy) == ["2lm", "2lm"] and failed.slowdown.isna().all()
    assert meta["counts"]["failed"] == 2
    record = json.loads(next((out / "failed").iterdir()).read_text())
    assert "Traceback" in record["detail"] and record["config"]["strategy"] == "2lm"
    log.write_text("")
    fixed = run_sweep(sweep, out, workers=1, evaluate=CountingEvaluate(log))
    assert (fixed.counts.evaluated, fixed.counts.failed, fixed.counts.reused) == (2, 0, 5)
    assert sorted(log.read_text().split()) == sorted(
        p.key for p in sweep.points if p.strategy == "2lm"
    )
    assert not list((out / "failed").iterdir())
    whole = run_sweep(sweep, tmp_path / "whole", workers=1)
    assert fixed.table is not None and whole.table is not None
    pd.testing.assert_frame_equal(
        stable(read_table(fixed.table)[0]), stable(read_table(whole.table)[0])
    )


def test_a_killed_sweep_keeps_its_finished_points_and_resumes(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SMALL)
    out = tmp_path / "out"
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'tests')!r}); import test_sweep; "
        f"test_sweep.crash_after({str(spec)!r}, {str(out)!r}, 3)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert sorted(p.suffix for p in (out / "points").iterdir()) == [".json"] * 3
    assert not (out / "results.parquet").exists()
    log = tmp_path / "evaluated.log"
    sweep = load_sweep(spec)
    report = run_sweep(sweep, out, workers=1, evaluate=CountingEvaluate(log))
    assert (report.counts.reused, report.counts.evaluated) == (3, 4)
    assert len(set(log.read_text().split())) == 4
    assert report.table is not None and len(read_table(report.table)[0]) == 7


@pytest.mark.slow
def test_the_dask_path_gives_the_local_table(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    sweep = load_sweep(write_spec(tmp_path, SMALL))
    with distributed.LocalCluster(
        n_workers=1, processes=False, threads_per_worker=2, dashboard_address=None
    ) as cluster:
        remote = run_sweep(sweep, tmp_path / "dask", dask_address=cluster.scheduler_address)
    local = run_sweep(sweep, tmp_path / "local", workers=2)
    assert remote.counts.evaluated == 7 and remote.table is not None and local.table is not None
    pd.testing.assert_frame_equal(
        stable(read_table(remote.table)[0]), stable(read_table(local.table)[0])
    )


# --- the command line -----------------------------------------------------------------------


def test_cli_runs_resumes_and_writes_csv_with_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, SMALL)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--dry-run"]) == 0
    assert "7 points (6 asked for, 1 all-fast baselines), 0 finished" in capsys.readouterr().out
    args = ["sweep", str(spec), "--out", str(out), "--workers", "1", "--format", "csv"]
    assert main([*args, "--limit", "2"]) == 0
    assert "2 computed now, 0 reused, 0 failed; 5 pending" in capsys.readouterr().out
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "5 computed now, 2 reused, 0 failed; -> " in captured.out
    assert "sweep small [" in captured.err and "7/7 points (2 reused)" in captured.err
    frame, meta = read_table(out / "results.csv")
    assert len(frame) == 7 and meta["sweep"]["spec"]["sweep"]["name"] == "small"
    assert (out / "results.meta.json").is_file()


def test_cli_reports_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, "[grid]\nmodle = 1\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == f"tmsim: error: {spec}: grid.modle: unknown key (known here: " + (
        "model, batch, dtype, platform, ratio, fast_bytes, strategy, overrides)\n"
    )
    good = write_spec(tmp_path, SMALL, "good.toml")
    with pytest.raises(SystemExit) as usage:  # a usage error, refused while parsing
        main(["sweep", str(good), "--out", str(tmp_path / "o"), "--workers", "0"])
    assert usage.value.code == 2
    assert "--workers" in capsys.readouterr().err


def test_progress_bar_shows_done_failures_elapsed_and_eta() -> None:
    now = [100.0]
    stream = io.StringIO()
    bar = ProgressBar("s", stream, clock=lambda: now[0], width=10)
    bar(Counts(total=10, reused=2))
    now[0] = 130.0
    bar(Counts(total=10, reused=2, evaluated=2, failed=1))
    assert bar.render(Counts(total=10, reused=2, evaluated=2, failed=1)) == (
        "sweep s [#####-----] 5/10 points (2 reused), 1 failed, 0:30 elapsed, ETA 0:50"
    )
    now[0] = 160.0
    bar(Counts(total=10, reused=2, evaluated=7, failed=1))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert (
        lines[-1]
        == "sweep s [##########] 10/10 points (2 reused), 1 failed, 1:00 elapsed, ETA --:--"
    )
