"""An LP relaxation solved by interior point in a Python process of its own, which can be
stopped at once.

HiGHS stops a run from outside only through a callback it asks at its regular checks, and an
interior point run asks it in every inner iteration: 110.7k times on LLaMA-7B b1's
asynchronous LP on h100-host-nvme, each a wait for Python's GIL, which took that LP from 28 s
to 399 s beside a thread running Python. Run in a process of its own
(a new interpreter that calls :func:`main`, its model and settings in on standard
input and the :class:`~tmsim.planners.milp.solver.presolved.Relaxed` out, pickled behind a
mark and its length (:func:`frame`: what a module prints as it is imported is passed over), on
a copy of its standard output; HiGHS's own output goes to standard error) the LP needs no callback
and no GIL, and :meth:`RemoteLp.stop` ends it by ending the process. A new interpreter is
started rather than a fork of this one (whose HiGHS and solver threads a fork would copy
half-way) or a ``multiprocessing`` spawn (which runs the caller's main script again). The
process watches the one that started it and ends once that one has (killed outright, it stops
nothing itself): HiGHS lets other threads run while it solves, so a thread checks every
:data:`WATCH_S` seconds.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tmsim.errors import TmsimError
from tmsim.planners.milp.solver.instance import run_model
from tmsim.planners.milp.solver.lp_arrays import LpData
from tmsim.planners.milp.solver.presolved import Relaxed, relaxation_of

if TYPE_CHECKING:
    from tmsim.planners.milp.solver.compiled import Compiled


#: Seconds between the LP process's checks that the process that started it still runs.
WATCH_S = 1.0
#: The exit status of an LP process that ended because the one that started it had.
ORPHANED = 3
#: What precedes the answer on the LP process's stream (:func:`frame`).
MARK = b"\x00tmsim-lp-answer\x00"


@dataclass(frozen=True)
class Request:
    """What the process solves: the LP ``data``, by interior point without crossover, as
    :func:`~tmsim.planners.milp.solver.instance.run_model` runs it with ``interior``, HiGHS
    ``options`` (a time limit among them counts from the process's start), ``verbose`` and
    ``lp_iterations``."""

    data: LpData
    options: Mapping[str, Any]
    verbose: bool
    lp_iterations: int | None


def solve_request(request: Request) -> Relaxed:
    """The LP relaxation ``request`` asks for, solved here."""
    import highspy

    lp = request.data.model(highspy)
    highs = run_model(
        highspy,
        lp,
        request.options,
        request.verbose,
        None,
        True,
        lp_iterations=request.lp_iterations,
        interior=True,
    )
    return relaxation_of(highs)


class RemoteLp:
    """An interior point run of the LP ``arrays`` (a problem's as compiled,
    :attr:`~tmsim.planners.milp.solver.compiled.Compiled.arrays`) with :class:`Request`'s
    settings in a process started now (:class:`TmsimError` where it cannot start).
    :meth:`result` waits for it, up to ``wait_s`` seconds (None: no limit); :meth:`stop`, from
    any thread, ends it."""

    def __init__(
        self,
        arrays: LpData,
        options: Mapping[str, Any],
        verbose: bool,
        lp_iterations: int | None,
        wait_s: float | None = None,
    ) -> None:
        request = Request(arrays, dict(options), verbose, lp_iterations)
        self._payload = pickle.dumps(request)
        self._wait_s = wait_s
        self._lock = threading.Lock()
        self._stopped = False
        if not sys.executable:
            raise TmsimError("no Python interpreter to start the LP's process with")
        # the child finds this package where this process does (a path the caller added too)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", f"from {__name__} import main; main({os.getpid()})"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise TmsimError(f"the LP's process did not start: {exc}") from None

    def result(self) -> Relaxed:
        """The LP's outcome. Raises :class:`TmsimError` where the process was stopped, ended
        without one, or had not answered ``wait_s`` seconds after this call (it is then
        ended)."""
        try:
            out, _ = self._process.communicate(self._payload, timeout=self._wait_s)
        except subprocess.TimeoutExpired:
            self.stop()
            self._process.communicate()
            raise TmsimError(f"the LP's process had not answered in {self._wait_s} s") from None
        except OSError as exc:
            self.stop()
            self._process.communicate()
            raise TmsimError(f"the LP's process ended early: {exc}") from None
        finally:
            self._payload = b""
        with self._lock:
            if self._stopped:
                raise TmsimError("the LP's process was stopped")
        try:
            kind, value = unframe(out)
        except ValueError:  # an empty or cut answer: the process died
            raise TmsimError(
                f"the LP's process ended without an answer (exit status {self._process.returncode})"
            ) from None
        if kind != "ok":
            raise TmsimError(f"the LP's process failed: {value}")
        assert isinstance(value, Relaxed)
        return value

    def stop(self) -> None:
        """End the process (nothing where it has ended)."""
        with self._lock:
            self._stopped = True
            if self._process.poll() is None:
                self._process.kill()


def compiled_for_highs(problem: Any) -> Compiled:
    """cvxpy ``problem`` compiled for HiGHS
    (:func:`~tmsim.planners.milp.solver.compiled.compile_problem`)."""
    import highspy

    from tmsim.planners.milp.solver.compiled import compile_problem

    return compile_problem(highspy, problem)


def main(parent: int | None = None) -> None:
    """The process's side: a :class:`Request` in on standard input, ``("ok", Relaxed)`` or
    ``("error", message)`` out on the standard output it was started with; HiGHS writes to
    standard error. With ``parent`` (the process id of the one that started it), it ends
    with exit status :data:`ORPHANED` once that process is no longer its parent."""
    if parent is not None:
        threading.Thread(target=watch_parent, args=(parent, WATCH_S), daemon=True).start()
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        request = pickle.loads(sys.stdin.buffer.read())
        reply: tuple[str, Any] = ("ok", solve_request(request))
    except Exception as exc:
        reply = ("error", f"{type(exc).__name__}: {exc}")
    with answer:
        answer.write(frame(reply))


def frame(reply: tuple[str, Any]) -> bytes:
    """``reply`` pickled behind :data:`MARK` and its length in bytes (8, little-endian), so
    that whatever else reached the same stream before it (a module printing as it is
    imported) is passed over."""
    body = pickle.dumps(reply)
    return MARK + len(body).to_bytes(8, "little") + body


def unframe(out: bytes) -> tuple[str, Any]:
    """The reply :func:`frame` wrote into ``out``, after anything before it. Raises
    ``ValueError`` where there is none whole."""
    at = out.find(MARK)
    while at >= 0:  # the first mark whose length reaches the end exactly
        start = at + len(MARK) + 8
        if int.from_bytes(out[at + len(MARK) : start], "little") == len(out) - start:
            break
        at = out.find(MARK, at + 1)
    if at < 0:
        raise ValueError("no whole answer")
    try:
        kind, value = pickle.loads(out[start:])
    except Exception as exc:
        raise ValueError(f"an answer that does not unpickle: {exc}") from None
    return str(kind), value


def watch_parent(parent: int, every_s: float) -> None:
    """Check every ``every_s`` seconds that process ``parent`` is still this one's parent;
    once it is not (it ended, and this process was handed to another), end this process at
    once with exit status :data:`ORPHANED`."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(ORPHANED)


__all__ = [
    "MARK",
    "ORPHANED",
    "WATCH_S",
    "RemoteLp",
    "Request",
    "compiled_for_highs",
    "frame",
    "main",
    "solve_request",
    "unframe",
    "watch_parent",
]
