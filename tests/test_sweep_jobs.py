"""The engine's generic path (tmsim.sweeps.jobs): keyed jobs whose result is a list of rows,
stored one record each, resumed, retried after a failure, run in this process, a local pool
or on Dask."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tmsim.sweeps.jobs import Job, run_jobs
from tmsim.sweeps.store import Counts, PointStore, SweepError


def square_rows(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of one job; logs ``n`` and the evaluating pid to ``params["log"]`` and raises for
    ``n == 2`` while the file ``params["fail_if"]`` exists."""
    n = params["n"]
    with Path(params["log"]).open("a", encoding="utf-8") as f:
        f.write(f"{n} {os.getpid()}\n")
    if n == 2 and Path(params["fail_if"]).exists():
        raise RuntimeError("injected failure")
    # keys deliberately not in sorted order: the order must survive the record
    return [{"n": n, "square": n * n, "half": n / 2, "odd": n % 2 == 1, "name": f"p{n}"}]


def limited_rows(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Two rows; the second says it stopped on the limit named in the file ``params["stop"]``
    (none while the file is empty). Logs ``n`` as :func:`square_rows` does."""
    with Path(params["log"]).open("a", encoding="utf-8") as f:
        f.write(f"{params['n']} {os.getpid()}\n")
    stop = Path(params["stop"]).read_text() or None
    return [{"n": params["n"], "stopped_on": None}, {"n": -params["n"], "stopped_on": stop}]


def nan_rows(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"x": math.nan}]


def not_a_list(params: Mapping[str, Any]) -> Any:
    return {"x": 1}


def _jobs(tmp_path: Path, ns: list[int]) -> list[Job]:
    where = {"log": str(tmp_path / "log"), "fail_if": str(tmp_path / "fail")}
    return [Job("squares", {"n": n, **where}) for n in ns]


def _evaluated(tmp_path: Path) -> list[int]:
    log = tmp_path / "log"
    return [int(line.split()[0]) for line in log.read_text().splitlines()] if log.exists() else []


def _stored(store: PointStore) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in store.done_dir.glob("*.json")}


def test_keys_hash_group_and_params_only() -> None:
    a = Job("fig", {"x": 1, "y": [1, 2]})
    assert len(a.key) == 16 and int(a.key, 16) >= 0
    assert Job("fig", {"y": (1, 2), "x": 1}).key == a.key  # key order and tuples do not matter
    assert Job("other", {"x": 1, "y": [1, 2]}).key != a.key
    assert len({Job("fig", {"x": v}).key for v in (4, 4.0, "4", None)}) == 4
    with pytest.raises(TypeError):
        _ = Job("fig", {"x": object()}).key
    with pytest.raises(ValueError):
        _ = Job("fig", {"x": math.nan}).key


def test_each_key_is_evaluated_once_and_a_second_run_evaluates_nothing(tmp_path: Path) -> None:
    store = PointStore(tmp_path / "store")
    jobs = _jobs(tmp_path, [3, 1, 2, 1])
    seen: list[tuple[Counts, Job | None]] = []
    rows = run_jobs(jobs, square_rows, store, progress=lambda c, j: seen.append((c, j)))
    assert [r[0]["n"] for r in rows] == [3, 1, 2, 1]
    assert sorted(_evaluated(tmp_path)) == [1, 2, 3]
    assert list(rows[0][0]) == ["n", "square", "half", "odd", "name"]
    assert rows[0] == [{"n": 3, "square": 9, "half": 1.5, "odd": True, "name": "p3"}]
    assert [(c.total, c.reused, c.evaluated) for c, _ in seen] == [
        (3, 0, 0),
        (3, 0, 1),
        (3, 0, 2),
        (3, 0, 3),
    ]
    assert seen[0][1] is None and {j.params["n"] for _, j in seen[1:] if j} == {1, 2, 3}
    record = json.loads((store.done_dir / f"{jobs[0].key}.json").read_text())
    assert record["group"] == "squares" and record["params"]["n"] == 3
    assert record["columns"] == ["n", "square", "half", "odd", "name"] and record["error"] == ""
    before = _stored(store)
    again = run_jobs(jobs, square_rows, store, progress=lambda c, j: seen.append((c, j)))
    assert again == rows and _stored(store) == before
    assert sorted(_evaluated(tmp_path)) == [1, 2, 3]  # nothing evaluated the second time
    assert (seen[-1][0].reused, seen[-1][0].pending) == (3, 0)
    # a changed job is a new key: only it is evaluated
    run_jobs(_jobs(tmp_path, [3, 1, 5]), square_rows, store)
    assert sorted(_evaluated(tmp_path)) == [1, 2, 3, 5]


def test_a_failed_job_is_recorded_raised_after_the_others_and_retried(tmp_path: Path) -> None:
    store = PointStore(tmp_path / "store")
    jobs = _jobs(tmp_path, [1, 2, 3])
    (tmp_path / "fail").touch()
    with pytest.raises(SweepError, match=r"1 of 3 points failed: squares .*RuntimeError: injected"):
        run_jobs(jobs, square_rows, store)
    assert len(_stored(store)) == 2
    record = json.loads((store.failed_dir / f"{jobs[1].key}.json").read_text())
    assert record["rows"] is None and "Traceback" in record["detail"]
    (tmp_path / "fail").unlink()
    (tmp_path / "log").unlink()
    rows = run_jobs(jobs, square_rows, store)
    assert _evaluated(tmp_path) == [2] and [r[0]["n"] for r in rows] == [1, 2, 3]
    assert not list(store.failed_dir.iterdir())


def test_a_job_stopped_on_a_wall_clock_limit_is_kept_and_evaluated_again(
    tmp_path: Path,
) -> None:
    store = PointStore(tmp_path / "store")
    stop = tmp_path / "stop"
    stop.write_text("time_limit")
    jobs = [Job("g", {"n": n, "log": str(tmp_path / "log"), "stop": str(stop)}) for n in (1, 2)]
    rows = run_jobs(jobs, limited_rows, store)
    assert rows[0] == [{"n": 1, "stopped_on": None}, {"n": -1, "stopped_on": "time_limit"}]
    record = json.loads((store.done_dir / f"{jobs[0].key}.json").read_text())
    assert record["stopped_on"] == "time_limit" and store.finished() == set()
    assert run_jobs(jobs, limited_rows, store) == rows
    assert _evaluated(tmp_path) == [1, 2, 1, 2]  # evaluated again
    stop.write_text("node_limit")  # a limit on work: the same answer on any machine
    run_jobs(jobs, limited_rows, store)
    assert store.finished() == {j.key for j in jobs}
    run_jobs(jobs, limited_rows, store)
    assert _evaluated(tmp_path) == [1, 2, 1, 2, 1, 2]


def test_the_store_keeps_a_result_stopped_on_the_time_limit_until_another_replaces_it(
    tmp_path: Path,
) -> None:
    store = PointStore(tmp_path)
    store.write("a", {"rows": [1], "stopped_on": "time_limit"}, finished=True)
    store.write("b", {"rows": [2], "stopped_on": "node_limit"}, finished=True)
    store.write("c", {"rows": [3]}, finished=True)
    assert store.finished() == {"b", "c"}
    assert (store.read("a") or {})["rows"] == [1]
    store.write("a", {"rows": None, "error": "lost worker"}, finished=False)
    assert store.read("a") == {"key": "a", "rows": None, "error": "lost worker"}
    store.write("c", {"rows": None, "error": "lost worker"}, finished=False)
    assert (store.read("c") or {})["rows"] == [3]  # a finished result is never replaced so
    store.write("a", {"rows": [4], "stopped_on": None}, finished=True)
    assert store.finished() == {"a", "b", "c"} and not (store.failed_dir / "a.json").exists()


@pytest.mark.parametrize(
    ("evaluate", "error"),
    [(nan_rows, "ValueError: Out of range float"), (not_a_list, "TypeError: evaluate must")],
)
def test_rows_that_json_cannot_write_fail_the_job(
    tmp_path: Path, evaluate: Any, error: str
) -> None:
    with pytest.raises(SweepError, match=error):
        run_jobs([Job("g", {"n": 1})], evaluate, PointStore(tmp_path))


def test_a_pool_and_dask_give_the_rows_of_this_process(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path, [1, 3, 4, 5])
    here = run_jobs(jobs, square_rows, PointStore(tmp_path / "here"))
    pids = {line.split()[1] for line in (tmp_path / "log").read_text().splitlines()}
    assert pids == {str(os.getpid())}
    (tmp_path / "log").unlink()
    assert run_jobs(jobs, square_rows, PointStore(tmp_path / "pool"), workers=2) == here
    pids = {line.split()[1] for line in (tmp_path / "log").read_text().splitlines()}
    assert str(os.getpid()) not in pids
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, processes=False, threads_per_worker=2, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        remote = run_jobs(jobs, square_rows, PointStore(tmp_path / "dask"), dask_address=address)
    assert remote == here


def test_bad_options_and_records_are_one_line_errors(tmp_path: Path) -> None:
    store = PointStore(tmp_path)
    job = Job("g", {"n": 1, "log": str(tmp_path / "log"), "fail_if": str(tmp_path / "f")})
    with pytest.raises(SweepError, match="workers must be a whole number >= 1"):
        run_jobs([job], square_rows, store, workers=0)
    with pytest.raises(SweepError, match="not both"):
        run_jobs([job], square_rows, store, workers=2, dask_address="tcp://nowhere:1")
    store.done_dir.mkdir(parents=True)
    (store.done_dir / f"{job.key}.json").write_text("{not json")
    with pytest.raises(SweepError, match=rf"{job.key}\.json: not a point record"):
        run_jobs([job], square_rows, store)
