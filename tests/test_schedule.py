"""A chain's formulations and a comparison's rows on several threads: the order, what each
solve sees, and the same plans and rows as on one thread."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.comparison import CompareSettings, Replays, Row, compare
from tmsim.errors import TmsimError
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain.schedule import Memo, contained, solve_chains
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.plans.values import Plan
from tmsim.workload.zoo import training_graph_of

F = Formulation
CPU = load_preset("cascadelake-optane")
WAIT_S = 5.0  # how long async's task waits for async-aware's to start beside it


def test_contained_is_the_closure_of_the_containment() -> None:
    assert contained(F.STATIC) == set()
    assert contained(F.ASYNC) == {F.SYNC, F.STATIC}
    assert contained(F.ASYNC_AWARE) == {F.SYNC, F.STATIC}
    assert contained(F.ASYNC_RC) == {F.SYNC_RC, F.ASYNC, F.SYNC, F.STATIC, F.STATIC_RC, F.REMAT}


class Recorder:
    """A task that records what each solve saw and which ran at once; async waits until
    async-aware has started (so that, on two workers, async-aware ends first)."""

    def __init__(self, wait_s: float = WAIT_S) -> None:
        self.wait_s = wait_s
        self.seen: dict[Formulation, list[Formulation]] = {}
        self.deadlines: dict[Formulation, float | None] = {}
        self.aware_started = threading.Event()
        self.overlapped = False
        self.lock = threading.Lock()

    def __call__(self, f: Formulation, deadline: float | None, view: Memo) -> None:
        with self.lock:
            self.seen[f] = list(view)
            self.deadlines[f] = deadline
        if f is F.ASYNC_AWARE:
            self.aware_started.set()
        if f is F.ASYNC:
            self.overlapped = self.aware_started.wait(self.wait_s)
            time.sleep(0.05)  # ends after async-aware
        view[f] = TmsimError(f"{f.value} solved")


@pytest.mark.parametrize("workers", [1, 2])
def test_each_solve_sees_only_what_it_contains_in_chain_order(workers: int) -> None:
    task = Recorder(WAIT_S if workers == 2 else 0.2)  # on one worker it waits in vain
    memo: Memo = {}
    done: list[Formulation] = []
    solve_chains(
        [F.ASYNC, F.ASYNC_AWARE], memo, task, None, None, workers, lambda f, v: done.append(f)
    )
    assert task.seen == {
        F.STATIC: [],
        F.SYNC: [F.STATIC],
        F.ASYNC: [F.STATIC, F.SYNC],
        F.ASYNC_AWARE: [F.STATIC, F.SYNC],  # never async, solved beside it
    }
    # memo in chain order however the solves end; ``done`` in the order they ended
    assert list(memo) == [F.STATIC, F.SYNC, F.ASYNC, F.ASYNC_AWARE]
    assert all(str(memo[f]) == f"{f.value} solved" for f in memo)
    assert task.overlapped is (workers == 2)
    expected = [F.ASYNC_AWARE, F.ASYNC] if workers == 2 else [F.ASYNC, F.ASYNC_AWARE]
    assert done == [F.STATIC, F.SYNC, *expected]


def test_a_later_top_has_its_time_limit_from_when_its_first_solve_starts() -> None:
    task = Recorder()
    first = time.perf_counter() + 100.0
    before = time.perf_counter()
    solve_chains([F.SYNC, F.ASYNC_AWARE], {}, task, first, 30.0, 2)
    after = time.perf_counter()
    assert task.deadlines[F.STATIC] == task.deadlines[F.SYNC] == first
    aware = task.deadlines[F.ASYNC_AWARE]
    assert aware is not None and before + 30.0 <= aware <= after + 30.0
    # what memo holds already is not solved again
    again = Recorder()
    memo: Memo = {F.STATIC: TmsimError("known")}
    solve_chains([F.SYNC], memo, again, None, None, 1)
    assert list(again.seen) == [F.SYNC] and str(memo[F.STATIC]) == "known"


@pytest.mark.parametrize("workers", [1, 2])
def test_a_later_top_waits_for_what_it_contains_before_its_clock_runs_out(workers: int) -> None:
    """``async-rc`` after ``async``: ``remat`` (the later top's own) may start at once beside
    ``async``, but ``async-rc``, which contains ``async``, still gets the whole limit after
    ``async`` has ended, as on one worker."""
    starts: dict[Formulation, float] = {}
    ends: dict[Formulation, float] = {}
    deadlines: dict[Formulation, float | None] = {}

    def task(f: Formulation, deadline: float | None, view: Memo) -> None:
        starts[f], deadlines[f] = time.perf_counter(), deadline
        time.sleep(0.3 if f is F.ASYNC else 0.01)
        view[f] = TmsimError("solved")
        ends[f] = time.perf_counter()

    limit_s = 10.0
    solve_chains([F.ASYNC, F.ASYNC_RC], {}, task, None, limit_s, workers)
    own = (F.REMAT, F.STATIC_RC, F.SYNC_RC, F.ASYNC_RC)
    assert all(deadlines[f] is None for f in (F.STATIC, F.SYNC, F.ASYNC))
    clock = min(starts[f] for f in own)
    remat = deadlines[F.REMAT]
    assert remat is not None and remat == pytest.approx(starts[F.REMAT] + limit_s, abs=0.05)
    last = deadlines[F.ASYNC_RC]
    assert last is not None and last >= ends[F.ASYNC] + limit_s - 0.01
    if workers == 1:  # one clock for the whole later chain, started after the earlier one
        assert clock >= ends[F.ASYNC]
        assert all(deadlines[f] == pytest.approx(clock + limit_s, abs=0.05) for f in own)
    else:  # remat ran beside async
        assert starts[F.REMAT] < ends[F.ASYNC]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_task_that_raises_stops_the_chain_with_its_exception(workers: int) -> None:
    def task(f: Formulation, deadline: float | None, view: Memo) -> None:
        if f is F.SYNC:
            raise RuntimeError("broken solver")
        view[f] = TmsimError("fine")

    memo: Memo = {}
    with pytest.raises(RuntimeError, match="broken solver"):
        solve_chains([F.ASYNC], memo, task, None, None, workers)
    assert F.ASYNC not in memo  # nothing after the failure ran


def test_fewer_than_one_worker_is_refused() -> None:
    with pytest.raises(TmsimError, match="at least one worker"):
        solve_chains([F.SYNC], {}, Recorder(), None, None, 0)
    graph = training_graph_of("vgg19", 2)
    with pytest.raises(TmsimError, match="at least one worker"):
        compare(graph, CPU, CompareSettings(strategies=("all-fast",), workers=0))


def test_a_comparison_on_two_threads_gives_the_rows_and_plans_of_one() -> None:
    graph = training_graph_of("vgg19", 1)
    plan = PlanSettings(capacity=Capacity.parse("4:1"), time_limit_s=None)
    names = ("all-fast", "all-slow", "greedy", "static", "sync", "async", "async-aware", "2lm")
    started: dict[int, list[tuple[str, int, int]]] = {1: [], 2: []}
    rows: dict[int, list[Row]] = {}
    plans: dict[int, dict[str, Plan | None]] = {}
    for workers in (1, 2):
        settings = CompareSettings(plan=plan, strategies=names, workers=workers)
        replays: Replays = {}
        calls = started[workers]

        def progress(name: str, index: int, total: int, calls: list[Any] = calls) -> None:
            calls.append((name, index, total))

        got = compare(graph, CPU, settings, progress, replays)
        rows[workers] = [replace(r, solve_s=math.nan) for r in got]
        plans[workers] = {name: replays[name][1] for name in names if name != "2lm"}
    assert [r.strategy for r in rows[2]] == list(names)
    assert all(r.valid and not r.error for r in rows[2])
    # the async plan moves beside kernels: the async solve is not a copy of sync's
    assert rows[2][names.index("async")].predicted_s < rows[2][names.index("sync")].predicted_s
    # nan == nan is False in a dataclass comparison: compare the fields as text
    assert [repr(r) for r in rows[1]] == [repr(r) for r in rows[2]]
    for name, one in plans[1].items():
        two = plans[2][name]
        assert isinstance(one, Plan) and isinstance(two, Plan)
        assert replace(one, stats=None) == replace(two, stats=None)
        if one.stats is not None and two.stats is not None:  # all but its wall-clock seconds
            a = replace(one.stats, build_s=0.0, solve_s=0.0, trace=())
            assert a == replace(two.stats, build_s=0.0, solve_s=0.0, trace=())
    for workers in (1, 2):  # once per row, counted as they start
        assert sorted(s for s, _, _ in started[workers]) == sorted(names)
        assert [i for _, i, _ in started[workers]] == list(range(len(names)))
        assert {n for _, _, n in started[workers]} == {len(names)}


@pytest.mark.parametrize("workers", [1, 2])
def test_a_chain_that_breaks_breaks_the_comparison(
    workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception the MILP chain raises (a defect, not a plan's error) reaches the caller,
    from the chain's own thread too, after the other rows ran."""
    import tmsim.comparison.runner as runner

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broken chain")

    monkeypatch.setattr(runner, "plan_milp_chain", broken)
    started: list[str] = []
    settings = CompareSettings(strategies=("all-fast", "all-slow", "sync"), workers=workers)
    with pytest.raises(RuntimeError, match="broken chain"):
        compare(training_graph_of("vgg19", 1), CPU, settings, lambda s, i, n: started.append(s))
    assert started == ["all-fast", "all-slow"]


def test_making_highs_instances_on_two_threads_leaves_stdout_where_it_was() -> None:
    """Each instance is made with the process's standard output pointed at the null device
    (HiGHS's banner); two threads doing so at once must not leave it there."""
    import os

    import highspy

    from tmsim.planners.milp.solver.instance import new_highs

    before = os.fstat(1)

    def make() -> None:
        for _ in range(400):  # without the lock 2 of 6 runs of 200 left it there
            new_highs(highspy, False)

    threads = [threading.Thread(target=make) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = os.fstat(1)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
