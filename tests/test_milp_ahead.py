"""The asynchronous formulations' LP solved ahead, beside the formulations they contain
(:mod:`tmsim.planners.milp.chain.ahead`), in a process of its own
(:mod:`tmsim.planners.milp.solver.remote`): the same plans as without it, the first round
taking the model made ahead, a solve from the LP made ahead ending as one that makes it, and
an LP that is no longer wanted stopped."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from functools import cache
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tiny_graphs import MB, tiny_step

import tmsim
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners.milp.chain import ahead as ahead_module
from tmsim.planners.milp.chain import nesting, rounds
from tmsim.planners.milp.chain.ahead import Ahead, prepares
from tmsim.planners.milp.chain.plan import plan_milp, plan_milp_chain
from tmsim.planners.milp.chain.preflight import setup
from tmsim.planners.milp.chain.solve import solve_within, solver_options
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind
from tmsim.planners.milp.solver import remote as remote_module
from tmsim.planners.milp.solver.compiled import compile_problem
from tmsim.planners.milp.solver.first_lp import Prepared
from tmsim.planners.milp.solver.lp_arrays import LpData
from tmsim.planners.milp.solver.remote import RemoteLp
from tmsim.planners.settings import PlanSettings
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.sim import replay
from tmsim.workload.graph import Graph

F = Formulation
CPU = load_preset("cascadelake-optane")
H100 = load_preset("h100-host-nvme")


@cache
def gpt1() -> Graph:
    """GPT-2 small cut to one block of 64 tokens (57 kernels): the MILP plans it with the
    host running Adam's kernels at ZeRO-Offload's device peak."""
    return tmsim.graph("gpt2_small", batch=1, seq_len=64, layers=1)


@cache
def zero_peak() -> Capacity:
    """ZeRO-Offload's device peak on :func:`gpt1`, by its replay."""
    plan = tmsim.plan(gpt1(), H100, "zero-offload")
    peak = replay(plan, gpt1(), H100, level=InterferenceLevel.NONE).fast_peak_bytes
    return Capacity.of_bytes(int(peak))


def settings() -> PlanSettings:
    return PlanSettings(capacity=zero_peak(), time_limit_s=None)


def async_model() -> tuple[Any, np.ndarray]:
    """:func:`gpt1`'s first-round async model at :func:`zero_peak`, and its limits."""
    opts = settings()
    limit, _, _ = setup(gpt1(), H100, opts, F.ASYNC)
    cost = cost_model(gpt1(), H100, None)
    limits = np.full(len(gpt1().kernels), limit, dtype=np.int64)
    model = build_model(cost, opts.window, F.ASYNC, limits, relax=False, host_kernels=True)
    assert model.host is not None
    return model, limits


def decisions(plan: Plan) -> tuple[Any, ...]:
    """What a plan decides, and the step time it is predicted at."""
    return (
        plan.operand_tiers,
        dict(plan.initial_tiers),
        plan.moves,
        plan.recomputes,
        plan.host_kernels,
        plan.predicted_s,
    )


def without_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead_module, "prepares", lambda formulation, opts, platform: False)


@pytest.mark.parametrize(
    ("graph", "platform", "capacity", "formulation"),
    [
        (gpt1, H100, zero_peak, "async"),
        pytest.param(gpt1, H100, zero_peak, "async-rc", marks=pytest.mark.slow),
        (tiny_step, CPU, lambda: Capacity.of_bytes(60 * MB), "async"),  # nothing ahead
    ],
)
def test_the_plans_are_those_of_the_chain_without_the_lp_ahead(
    monkeypatch: pytest.MonkeyPatch,
    graph: Any,
    platform: Any,
    capacity: Any,
    formulation: str,
) -> None:
    opts = PlanSettings(capacity=capacity(), time_limit_s=None)
    taken: list[Formulation] = []  # the LPs the first rounds took from the Ahead
    real_take = Ahead.take

    def take(self: Ahead, f: Formulation) -> Any:
        made = real_take(self, f)
        if made is not None and made.prepared is not None and made.prepared.relaxed is not None:
            taken.append(f)
        return made

    monkeypatch.setattr(Ahead, "take", take)
    ahead = plan_milp(graph(), platform, opts, formulation)
    chained = plan_milp_chain(graph(), platform, opts, formulation)
    with monkeypatch.context() as patch:
        without_ahead(patch)
        alone = plan_milp(graph(), platform, opts, formulation)
        chained_alone = plan_milp_chain(graph(), platform, opts, formulation)
    assert decisions(ahead) == decisions(alone)
    assert chained.keys() == chained_alone.keys()
    for f, plan in chained.items():
        other = chained_alone[f]
        assert isinstance(plan, Plan) == isinstance(other, Plan), f
        if isinstance(plan, Plan) and isinstance(other, Plan):
            assert decisions(plan) == decisions(other), f
    if platform is H100:  # the interior point path, taken by both entry points
        assert ahead.host_kernels
        assert taken.count(Formulation(formulation)) == 2
    else:
        assert not taken


def test_the_first_round_takes_the_model_made_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain builds the async model once, ahead; without the LP ahead its first round
    builds it."""
    built: list[Formulation] = []
    real = rounds.build_model

    def spy(cost: Any, window: int, formulation: Formulation, *args: Any, **kw: Any) -> Any:
        built.append(formulation)
        return real(cost, window, formulation, *args, **kw)

    monkeypatch.setattr(rounds, "build_model", spy)
    plan = plan_milp(gpt1(), H100, settings(), "async")
    assert plan.stats is not None and plan.stats.rounds == 1
    assert F.ASYNC not in built and F.SYNC in built
    without_ahead(monkeypatch)
    built.clear()
    plan_milp(gpt1(), H100, settings(), "async")
    assert built.count(F.ASYNC) == 1


def remote_lp(model: Any, opts: PlanSettings) -> tuple[Any, RemoteLp]:
    """``model`` compiled, and its LP first started in a process of its own."""
    import highspy

    compiled = compile_problem(highspy, model.problem)
    options = solver_options(opts.solver, opts.gap, None, opts.node_limit)
    return compiled, RemoteLp(compiled.arrays, options, False, opts.lp_iterations)


def test_a_solve_from_the_lp_made_ahead_ends_as_one_that_makes_it() -> None:
    opts = settings()
    made, limits = async_model()
    plain, _ = async_model()
    compiled, remote = remote_lp(made, opts)
    prepared = Prepared(compiled, remote.result())
    assert prepared.relaxed is not None and prepared.relaxed.status == "kOptimal"
    assert prepared.relaxed.interior and prepared.relaxed.point is not None
    ahead = solve_within(made, opts, "async", limits, None, None, prepared=prepared)
    own = solve_within(plain, opts, "async", limits, None, None)
    assert ahead.status == own.status == "optimal"
    assert (ahead.objective, ahead.bound, ahead.iterations) == (
        own.objective,
        own.bound,
        own.iterations,
    )
    assert np.array_equal(np.asarray(made.x.value), np.asarray(plain.x.value))


def test_an_lp_stopped_answers_with_an_error_and_its_process_ends() -> None:
    model, _ = async_model()
    _, remote = remote_lp(model, settings())
    remote.stop()
    with pytest.raises(TmsimError, match=r"stopped|ended"):
        remote.result()
    assert remote._process.returncode is not None  # ended and reaped
    remote.stop()  # again: nothing to end


def test_an_lp_that_does_not_answer_in_time_is_ended() -> None:
    model, _ = async_model()
    compiled, _ = remote_lp(model, settings())
    slow = RemoteLp(compiled.arrays, {}, False, None, wait_s=1e-3)
    with pytest.raises(TmsimError, match="had not answered"):
        slow.result()
    assert slow._process.returncode is not None


def empty_lp() -> LpData:
    """An LP of no columns and no rows (HiGHS takes it)."""
    none, indices = np.zeros(0), np.zeros(0, dtype=np.int64)
    return LpData(none, none, none, none, none, np.zeros(1, dtype=np.int64), indices, none)


def test_a_process_that_cannot_start_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    with pytest.raises(TmsimError, match="did not start"):
        RemoteLp(empty_lp(), {}, False, None)
    monkeypatch.setattr("sys.executable", "")
    with pytest.raises(TmsimError, match="no Python interpreter"):
        RemoteLp(empty_lp(), {}, False, None)


def test_a_contained_plan_the_lp_proves_within_the_gap_ends_the_solve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """async-rc starting from no plan of its own: its LP (made ahead) proves sync-rc's plan,
    a point of its model, within the gap, and the solve ends there with that plan and the
    LP's bound. At 1% the LP does not (its bound lies 14% below that plan: the sub-MIPs find
    the optimum); at a 20% gap it does."""
    monkeypatch.setitem(nesting.STARTS, F.ASYNC_RC, ())
    opts = replace(settings(), gap=0.2)
    out = plan_milp_chain(gpt1(), H100, opts, "async-rc")
    rc, held = out[F.ASYNC_RC], out[F.SYNC_RC]
    assert isinstance(rc, Plan) and isinstance(held, Plan)
    assert rc.stats is not None and held.stats is not None
    assert rc.stats.status == "optimal (within the gap of its LP bound: milp-sync-rc's plan)"
    assert decisions(rc) == decisions(held)
    assert rc.stats.bound <= held.stats.objective + 1e-12
    assert rc.stats.gap == pytest.approx(
        (held.stats.objective - rc.stats.bound) / held.stats.objective
    )
    assert 0.01 < rc.stats.gap <= opts.gap
    # async-rc's own bound, not sync-rc's: async's plan is a point of async-rc too
    other = out[F.ASYNC]
    assert isinstance(other, Plan) and other.stats is not None
    assert rc.stats.bound <= other.stats.objective + 1e-9


def test_a_process_that_fails_says_why() -> None:
    remote = RemoteLp(empty_lp(), {"no_such_option": 1}, False, None)  # a refused option
    with pytest.raises(TmsimError, match="failed: TmsimError: HiGHS refused option"):
        remote.result()


def test_the_lp_sent_ahead_is_the_compiled_model_without_its_integrality() -> None:
    """The HiGHS model the LP's process builds from the compiled arrays has the compiled
    model's arrays, every column continuous."""
    import highspy

    model, _ = async_model()
    compiled = compile_problem(highspy, model.problem)
    built = compiled.arrays.model(highspy)
    for name in ("col_cost_", "col_lower_", "col_upper_", "row_lower_", "row_upper_"):
        assert np.array_equal(getattr(built, name), getattr(compiled.lp, name)), name
    for name in ("start_", "index_", "value_"):
        mine, theirs = getattr(built.a_matrix_, name), getattr(compiled.lp.a_matrix_, name)
        assert np.array_equal(mine, theirs), name
    assert built.offset_ == compiled.lp.offset_ == 0.0
    assert built.num_col_ == compiled.lp.num_col_ and built.num_row_ == compiled.lp.num_row_
    assert len(compiled.lp.integrality_) == built.num_col_ and len(built.integrality_) == 0


def test_what_is_solved_ahead_and_handed_over_once() -> None:
    opts = PlanSettings()
    assert prepares(F.ASYNC, opts, H100) and prepares(F.ASYNC_RC, opts, H100)
    for f in (F.STATIC, F.SYNC, F.SYNC_RC, F.REMAT, F.STATIC_RC, F.ASYNC_AWARE):
        assert not prepares(f, opts, H100), f
    assert not prepares(F.ASYNC, opts, CPU)  # no host compute: its LP goes by simplex
    for other in (
        replace(opts, solver="SCIP"),
        replace(opts, lp_iterations=None),
        replace(opts, warm_start=False),
        replace(opts, host_kernels=False),
        replace(opts, energy_weight_s_per_j=1e-3),
    ):
        assert not prepares(F.ASYNC, other, H100)
    cost = cost_model(gpt1(), H100, None)
    limit, _, _ = setup(gpt1(), H100, settings(), F.ASYNC)
    with Ahead(cost, settings(), limit, None) as ahead:
        ahead.start([F.SYNC, F.ASYNC, F.ASYNC_AWARE])
        assert ahead.take(F.SYNC) is None and ahead.take(F.ASYNC_AWARE) is None
        made = ahead.take(F.ASYNC)
        assert made is not None and (made.model.gadgets.kind == GadgetKind.WINDOW).any()
        assert made.prepared is not None and made.prepared.relaxed is not None
        assert made.prepared.relaxed.status == "kOptimal"
        assert made.build_s > 0 and made.solve_s > 0
        assert ahead.take(F.ASYNC) is None  # once


def test_leaving_stops_the_lps_and_their_threads() -> None:
    cost = cost_model(gpt1(), H100, None)
    limit, _, _ = setup(gpt1(), H100, settings(), F.ASYNC)
    with Ahead(cost, settings(), limit, None) as ahead:
        ahead.start([F.ASYNC, F.ASYNC_RC])
        waited = 0.0
        while not ahead._running and waited < 60.0:  # an LP under way in its process
            time.sleep(0.01)
            waited += 0.01
        assert ahead._running
    assert not [t for t in threading.enumerate() if t.name.startswith("tmsim-lp")]
    assert all(remote._process.returncode is not None for remote in ahead._running)


def test_the_lp_process_ends_once_the_process_that_started_it_has() -> None:
    """A process that starts an LP (20 s of interior point alone) and is then killed outright
    leaves no LP running: the LP's process ends within a few of its checks."""
    script = textwrap.dedent(
        """
        import numpy as np, scipy.sparse as sp, highspy
        from tmsim.planners.milp.solver.lp_arrays import LpData
        from tmsim.planners.milp.solver.remote import RemoteLp
        rng = np.random.default_rng(0)
        m, n = 60000, 80000
        a = sp.csc_matrix(
            (rng.random(8 * n), (rng.integers(0, m, 8 * n), np.repeat(np.arange(n), 8))),
            shape=(m, n),
        )
        lp = LpData(
            rng.random(n) - 0.3, np.zeros(n), np.ones(n), np.full(m, -highspy.kHighsInf),
            np.ones(m), a.indptr, a.indices, a.data,
        )
        remote = RemoteLp(lp, {"time_limit": 120.0}, False, None)
        print(remote._process.pid, flush=True)
        remote.result()
        """
    )
    starter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        time.sleep(2.0)  # the LP's process has its request and solves
        assert _running(child)
    finally:
        starter.kill()
        starter.wait()
    deadline = time.monotonic() + 10 * remote_module.WATCH_S
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(child)


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_watch_ends_a_process_whose_parent_is_another() -> None:
    run = [sys.executable, "-c"]
    code = "from tmsim.planners.milp.solver.remote import watch_parent; watch_parent({}, 0.01)"
    orphan = subprocess.run([*run, code.format(-1)], timeout=30)
    assert orphan.returncode == remote_module.ORPHANED
    kept = subprocess.run(
        [
            *run,
            "import os, threading, time; from tmsim.planners.milp.solver.remote import "
            "watch_parent; threading.Thread(target=watch_parent, args=(os.getppid(), 0.01), "
            "daemon=True).start(); time.sleep(0.3)",
        ],
        timeout=30,
    )
    assert kept.returncode == 0


@given(
    before=st.binary(max_size=64),
    reply=st.tuples(st.sampled_from(["ok", "error"]), st.binary(max_size=64)),
)
def test_an_answer_is_read_after_whatever_came_before_it(
    before: bytes, reply: tuple[str, bytes]
) -> None:
    """Bytes a module printed before the answer, even the mark itself, are passed over; a cut
    answer or none is a ValueError."""
    framed = remote_module.frame(reply)
    assert remote_module.unframe(before + framed) == reply
    assert remote_module.unframe(before + remote_module.MARK + framed) == reply
    for cut in (framed[:-1], framed[: len(remote_module.MARK) + 3], b"", before):
        with pytest.raises(ValueError):
            remote_module.unframe(cut)


def test_an_lp_process_whose_imports_print_still_answers() -> None:
    """The process's side with output on its standard output before ``main`` runs."""
    import highspy

    model, _ = async_model()
    request = remote_module.Request(compile_problem(highspy, model.problem).arrays, {}, False, None)
    code = "print('imported'); from tmsim.planners.milp.solver.remote import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(request), capture_output=True, timeout=120
    )
    assert done.stdout.startswith(b"imported")
    kind, value = remote_module.unframe(done.stdout)
    assert kind == "ok" and value.status == "kOptimal"
