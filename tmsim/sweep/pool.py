"""Where tasks run: in this process, in a local process pool, or on a Dask cluster.

:func:`run_tasks` is the one place that knows about executors; the sweep engine
(:mod:`tmsim.sweep.engine`) and keyed jobs (:mod:`tmsim.sweep.jobs`) hand it picklable tasks
and a module-level function and get each task back with its result, as tasks finish.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TypeVar

from tmsim.sweep.store import SweepError

T = TypeVar("T")
R = TypeVar("R")

#: What :func:`run_tasks` yields: a task and its result, or the exception evaluating it raised.
Finished = tuple[T, R | Exception]


def check_options(workers: int | None, dask_address: str | None) -> None:
    """Raise :class:`SweepError` unless ``workers`` is None or at least 1 and at most one of
    ``workers`` and ``dask_address`` is given."""
    if workers is not None and workers < 1:
        raise SweepError(f"workers must be >= 1, got {workers}")
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
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)))
    try:
        pending: dict[Future[R], T] = {pool.submit(evaluate, t): t for t in tasks}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                task = pending.pop(fut)
                try:
                    yield task, fut.result()
                except Exception as exc:  # the task raised, a worker died (BrokenProcessPool)
                    yield task, exc
    finally:
        # On an interrupt, queued tasks are dropped; their points stay pending for the next run.
        pool.shutdown(wait=False, cancel_futures=True)


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


__all__ = ["Finished", "check_options", "run_tasks"]
