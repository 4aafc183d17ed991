"""Where tasks run: in this process, in a local process pool, or on a Dask cluster.

:func:`run_tasks` is the one place that knows about executors; the sweep engine
(:mod:`tmsim.sweeps.engine`) and keyed jobs (:mod:`tmsim.sweeps.jobs`) hand it picklable tasks
and a module-level function and get each task back with its result, as tasks finish.

Local workers are started fresh (the ``spawn`` start method), not forked: a process forked
from one in which HiGHS has solved a MIP inherits HiGHS's thread pool without its threads,
and its next MIP solve waits for them forever, time limit or not (seen with highspy 1.16: a
1.6 s solve had not returned after 120 s); forking a process that runs threads is unsafe in
general. A worker therefore imports ``evaluate``'s module afresh, and a script that runs a
pool must guard its top level with ``if __name__ == "__main__":``.

Local workers die with the process that started them. Each runs a watchdog thread
(:func:`watch_parent`, the pool's initializer) that ends the worker as soon as its parent is
gone, however the parent died (``kill -9``, a crash, the out-of-memory killer): it waits on
multiprocessing's parent sentinel (a pipe that reaches end-of-file, or on Windows a process
handle that is signalled, when the parent exits) and, every :data:`PARENT_POLL_S` seconds,
checks ``os.getppid()``, which changes when a POSIX orphan is adopted (a second way, for a
sentinel pipe that another child forked from the parent still holds open). It needs no
platform call and works with every start method, unlike Linux's
``prctl(PR_SET_PDEATHSIG)``, which is Linux-only and fires when the *thread* that started the
worker ends, not its process. A worker busy in native code that holds the GIL exits when that
call returns (HiGHS releases it while it solves). A run stopped early (an interrupt, the
caller closing the iterator) kills its workers too: the tasks they were running could no
longer be recorded.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing.connection import wait as wait_ready
from typing import TypeVar

from tmsim.sweeps.store import SweepError

T = TypeVar("T")
R = TypeVar("R")

#: What :func:`run_tasks` yields: a task and its result, or the exception evaluating it raised.
Finished = tuple[T, R | Exception]


#: Seconds between a worker's checks of its parent's process id.
PARENT_POLL_S = 1.0
#: Exit status of a worker that ended because its parent was gone.
ORPHAN_EXIT = 70


def watch_parent() -> None:
    """Start a daemon thread that ends this process, without cleanup, once the process that
    started it is gone (see the module docstring). For a pool worker's initializer; in a
    process that multiprocessing did not start it watches the process id alone."""
    parent = multiprocessing.parent_process()
    sentinel = None if parent is None else parent.sentinel
    args = (sentinel, os.getppid())
    threading.Thread(target=_exit_with_parent, args=args, name="watch-parent", daemon=True).start()


def _exit_with_parent(sentinel: int | None, ppid: int) -> None:
    while True:
        if sentinel is None:
            time.sleep(PARENT_POLL_S)
        elif wait_ready([sentinel], PARENT_POLL_S):
            break  # the parent's end of the pipe is closed, or its handle signalled: it exited
        if os.getppid() != ppid:
            break  # adopted by another process: the parent exited
    os._exit(ORPHAN_EXIT)


def check_options(workers: int | None, dask_address: str | None) -> None:
    """Raise :class:`SweepError` unless ``workers`` is None or a whole number of at least 1
    and at most one of ``workers`` and ``dask_address`` is given."""
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise SweepError(f"workers must be a whole number >= 1 or None, got {workers!r}")
    if dask_address is not None and workers is not None:
        raise SweepError("give workers or a Dask scheduler address, not both")


def run_tasks(
    tasks: Sequence[T],
    evaluate: Callable[[T], R],
    *,
    workers: int | None = None,
    dask_address: str | None = None,
) -> Iterator[Finished[T, R]]:
    """``(task, evaluate(task))`` for every task, in the order they finish; where evaluating
    raised an ``Exception`` (in this process or a worker, a lost worker, a task that could not
    be shipped) the exception takes the result's place. ``KeyboardInterrupt`` propagates.

    ``workers``: local processes (default ``os.cpu_count()``; 1, or a single task, evaluates
    in this process, the easiest to debug); ``dask_address``: the Dask scheduler to submit to
    instead (connected to before the first task, so a bad address fails before any work; its
    workers need this package installed). In a pool, ``evaluate`` must be a module-level
    function (or a ``functools.partial`` of one) and the tasks picklable. Raises
    :class:`SweepError` for bad options (:func:`check_options`), a missing ``distributed``
    package or an unreachable scheduler, before yielding anything. Nothing starts until the
    first item is asked for; closing the iterator early drops the tasks still queued.
    """
    check_options(workers, dask_address)
    if not tasks:
        return iter(())
    if dask_address is not None:
        return _run_dask(tasks, evaluate, dask_address)
    return _run_local(tasks, evaluate, workers or os.cpu_count() or 1)


def _run_local(
    tasks: Sequence[T], evaluate: Callable[[T], R], workers: int
) -> Iterator[Finished[T, R]]:
    if workers == 1 or len(tasks) == 1:
        for t in tasks:
            try:
                result: R | Exception = evaluate(t)
            except Exception as exc:  # as in a pool: a task that raises is reported, not fatal
                result = exc
            yield t, result
        return
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=watch_parent,
    )
    pending: dict[Future[R], T] = {}
    try:
        pending = {pool.submit(evaluate, t): t for t in tasks}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                task = pending.pop(fut)
                try:
                    yield task, fut.result()
                except Exception as exc:  # the task raised, a worker died (BrokenProcessPool)
                    yield task, exc
    finally:
        # Stopped early (an interrupt, the iterator closed): queued tasks are dropped and the
        # workers killed, since what they run could not be recorded; their points stay
        # pending for the next run. Otherwise the idle workers are joined.
        if pending:
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.kill()
        pool.shutdown(wait=not pending, cancel_futures=True)


def _run_dask(
    tasks: Sequence[T], evaluate: Callable[[T], R], address: str
) -> Iterator[Finished[T, R]]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SweepError(
            "--dask needs the distributed package: pip install 'tmsim[dask]'"
        ) from None
    try:
        client = Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise SweepError(f"cannot reach the Dask scheduler at {address}: {exc}") from None

    def finished() -> Iterator[Finished[T, R]]:
        try:
            futures = {client.submit(evaluate, t, pure=False): t for t in tasks}
            for fut in as_completed(futures):
                try:
                    yield futures[fut], fut.result()
                except Exception as exc:  # the task raised, a worker was lost, shipping failed
                    yield futures[fut], exc
        finally:
            client.close()

    return finished()


__all__ = ["PARENT_POLL_S", "Finished", "check_options", "run_tasks", "watch_parent"]
