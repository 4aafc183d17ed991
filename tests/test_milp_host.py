"""The MILP deciding which kernels the host runs (:mod:`tmsim.planners.milp.formulation.host`),
on a small GPT-2 step (two blocks, 128 tokens, fp16 with Adam) on the H100 with a Sapphire
Rapids host and an NVMe drive.

At the device budget ZeRO-Offload's plan needs (its peak: 0.267 GB), a plan that keeps every
kernel on the device does not exist (the token table's Adam step alone reads 0.62 GB); with
host kernels the MILP plans it, at most 1% (its gap) slower than ZeRO-Offload's own plan in the
model both are timed by, and that model's step time is the replay's without contention where
the host memory's floor (tmsim.plans.hostmem) does not hold it higher.
"""

from __future__ import annotations

import argparse
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import tmsim
from tmsim import Capacity, PlanSettings
from tmsim.cli.args import add_plan_arguments, settings_from_args
from tmsim.errors import InfeasibleError
from tmsim.levels import InterferenceLevel
from tmsim.planners.milp.chain.nesting import HOST_RUNTIMES, RECOMPUTE_HEURISTICS, outside_names
from tmsim.planners.milp.chain.starts import lift
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.host import find_candidates
from tmsim.planners.milp.formulation.model import two_stream_bound_s
from tmsim.plans.validate import validate
from tmsim.plans.values import Plan
from tmsim.profiles import cost_model
from tmsim.sim import replay
from tmsim.workload.graph import Graph, Phase

H100 = tmsim.platform("h100-host-nvme")
#: ZeRO-Offload's device peak on :func:`gpt2` (bytes), measured by its replay
ZERO_PEAK = 266_922_496


@cache
def gpt2() -> Graph:
    return tmsim.graph("gpt2_small", batch=1, seq_len=128, layers=2)


@cache
def planned(formulation: str, capacity_bytes: int, host: bool) -> Plan:
    settings = PlanSettings(
        capacity=Capacity.of_bytes(capacity_bytes), time_limit_s=None, host_kernels=host
    )
    plan = tmsim.plan(gpt2(), H100, formulation, settings=settings)
    check = validate(plan, gpt2(), H100)
    assert check.ok, check.errors[:3]
    return plan


def uncontended_s(plan: Plan) -> float:
    return replay(plan, gpt2(), H100, level=InterferenceLevel.NONE).simulated_s


def test_every_update_kernel_is_a_candidate_released_after_its_gradient() -> None:
    g = gpt2()
    cost = cost_model(g, H100, None)
    cand = find_candidates(cost, 0)
    assert cand is not None
    updates = [k for k, kern in enumerate(g.kernels) if kern.phase is Phase.UPDATE]
    assert cand.kernel.tolist() == updates
    for k, release, waits in zip(cand.kernel, cand.release, cand.waits, strict=True):
        names = [g.tensors[t].name for t in waits]
        assert len([n for n in names if n.endswith((".grad", ".grad2"))]) == 1  # its gradient
        uses = [int(j) for t in waits for j in (*g.users(t), g.producers[t]) if 0 <= j < k]
        assert g.kernels[max(uses)].phase is Phase.BACKWARD
        assert release == min(max(uses) + 1, k)  # sync: the copy runs before the next kernel
    wider = find_candidates(cost, 3)
    assert wider is not None
    assert np.all(
        wider.release == np.minimum(np.where(cand.release >= 0, cand.release + 3, -1), cand.kernel)
    )


def test_no_candidates_without_a_host_compute() -> None:
    g = gpt2()
    assert find_candidates(cost_model(g, tmsim.platform("h100-pcie5"), None), 0) is None


def test_at_zero_offloads_budget_only_host_kernels_make_a_plan() -> None:
    with pytest.raises(InfeasibleError, match=r"wte\.adam"):
        planned("sync", ZERO_PEAK, host=False)
    plan = planned("sync", ZERO_PEAK, host=True)
    hosted = {gpt2().kernels[k].name for k in plan.host_kernels}
    assert "wte.adam" in hosted  # the 0.62 GB one
    for k in plan.host_kernels:  # the host reads and writes its own memory
        assert set(plan.operand_tiers[k]) == {"host"}


@pytest.mark.parametrize("formulation", ["sync", "sync-rc"])
def test_the_objective_is_the_step_the_replay_times(formulation: str) -> None:
    # the prediction is the two-stream timeline, which the uncontended replay reproduces, or
    # the host memory's floor where that is higher (tmsim.plans.hostmem; not here: its case is
    # tests/test_hostmem.py); the replay with shared tiers takes longer still. (The MILP once
    # counted a host kernel's launch twice: 2 us above the prediction here.)
    plan = planned(formulation, ZERO_PEAK, host=True)
    assert plan.stats is not None and plan.host_kernels
    assert plan.stats.objective == pytest.approx(plan.predicted_s, rel=1e-9)
    alone = uncontended_s(plan)
    shared = replay(plan, gpt2(), H100, level=InterferenceLevel.BANDWIDTH).simulated_s
    assert alone <= plan.predicted_s * (1 + 1e-9) and plan.predicted_s <= shared


def test_the_plan_is_no_slower_than_zero_offload_in_the_model_both_are_timed_by() -> None:
    zero = tmsim.plan(gpt2(), H100, "zero-offload")
    plan = planned("sync", ZERO_PEAK, host=True)
    assert plan.stats is not None
    # the formulation holds ZeRO-Offload's split (its gradients copied down synchronously
    # here, where ZeRO-Offload copies them beside later kernels), and falls back to its plan
    assert uncontended_s(plan) <= uncontended_s(zero) * (1 + plan.stats.gap + 1e-6)


def test_host_kernels_never_cost_where_the_device_alone_can_plan() -> None:
    budget = 2 * ZERO_PEAK + 700_000_000  # the token table's step fits on the device
    alone, both = planned("sync", budget, host=False), planned("sync", budget, host=True)
    assert not alone.host_kernels
    assert both.stats is not None and alone.stats is not None
    assert both.stats.objective <= alone.stats.objective * (1 + 0.01) + 1e-12
    assert uncontended_s(both) <= uncontended_s(alone) * (1 + 0.01)


def test_refreshes_go_at_the_next_position_and_hold_only_the_end_of_the_step() -> None:
    plan = planned("sync", 700_000_000, host=True)  # keeps some hosted weights on the device
    g = gpt2()
    n_k = len(g.kernels)
    updater = {n: k for k in plan.host_kernels for n in g.kernels[k].updates}
    refreshed = [m for m in plan.moves if m.src == "host" and m.kernel > updater.get(m.tensor, n_k)]
    assert refreshed
    for m in refreshed:
        assert m.kernel == updater[m.tensor] + 1 and m.dst == "device"
    assert plan.stats is not None
    # the model's rows are lower bounds on the plan's step (the path takes the refreshes one
    # at a time, each once the device reaches it and its host kernel has ended), here within
    # 0.02% (the refreshes queue in the order they become ready, the rows in plan order);
    # the uncontended replay reproduces the plan's step
    assert plan.predicted_s == pytest.approx(uncontended_s(plan), rel=1e-6)
    assert plan.stats.objective <= plan.predicted_s * (1 + 1e-9)
    assert plan.predicted_s <= plan.stats.objective * (1 + 1e-3)


def test_the_host_does_not_wait_for_copies_the_asynchronous_model_does_not_time() -> None:
    # beside the kernels before a host update the copy path is idle, so a fetch of the
    # operand there looked free; but the host waits for it to read the copy it overwrites.
    # Without the clash rows (tmsim.planners.milp.formulation.host_clash) the MILP's own
    # plan here was priced below the sync plan and timed above it (a fallback to sync).
    # The model may price a host kernel later than the plan starts it (it releases the host
    # a window after the last device use, whether or not a copy runs there), never earlier.
    plan = planned("async", 700_000_000, host=True)
    sync = planned("sync", 700_000_000, host=True)
    assert plan.planner == "milp-async" and plan.stats is not None
    assert plan.host_kernels
    assert plan.predicted_s <= plan.stats.objective * (1 + 1e-3)
    assert plan.predicted_s == pytest.approx(uncontended_s(plan), rel=1e-6)
    assert plan.predicted_s < sync.predicted_s


@pytest.mark.parametrize(("capacity", "relax"), [(ZERO_PEAK, False), (700_000_000, True)])
def test_the_compact_form_with_host_kernels_has_the_general_forms_optimum(
    capacity: int, relax: bool
) -> None:
    # the release rows read the events of a gap, the clash rows group them by gap: the same
    # optimum (at tight tolerances: HiGHS's defaults leave 1e-4 of slack in the time rows)
    # and LP bound as the general form, whose window kernels have gadgets of their own
    cost = cost_model(gpt2(), H100, None)
    limits = np.full(len(gpt2().kernels), capacity, dtype=np.int64)
    found = []
    for compact in (True, False):
        model = build_model(
            cost, 2, Formulation.ASYNC, limits, relax, compact=compact, host_kernels=True
        )
        assert model.gaps.compact is compact and model.host is not None
        tight = {"mip_feasibility_tolerance": 1e-9, "primal_feasibility_tolerance": 1e-9}
        model.problem.solve(solver="HIGHS", mip_rel_gap=1e-9, mip_abs_gap=0.0, **tight)
        assert model.problem.status == "optimal"
        found.append((model.variables, float(model.problem.value)))
    (small, compact_s), (large, general_s) = found
    assert small < large / 1.5
    assert compact_s == pytest.approx(general_s, rel=1e-9)


def test_the_command_line_turns_host_kernels_off() -> None:
    parser = argparse.ArgumentParser()
    add_plan_arguments(parser)
    assert settings_from_args(parser.parse_args([])).host_kernels
    assert not settings_from_args(parser.parse_args(["--no-host-kernels"])).host_kernels


def test_formulations_where_the_host_runs_kernels_fall_back_to_the_zero_runtimes() -> None:
    sync, static, sync_rc = Formulation.SYNC, Formulation.STATIC, Formulation.SYNC_RC
    assert outside_names(sync, H100, PlanSettings()) == HOST_RUNTIMES
    assert outside_names(sync_rc, H100, PlanSettings()) == (*RECOMPUTE_HEURISTICS, *HOST_RUNTIMES)
    assert outside_names(static, H100, PlanSettings()) == ()
    assert outside_names(sync, H100, PlanSettings(host_kernels=False)) == ()
    assert outside_names(sync, H100, PlanSettings(energy_weight_s_per_j=1.0)) == ()
    assert outside_names(sync, tmsim.platform("h100-pcie5"), PlanSettings()) == ()


def test_a_solve_stopped_at_once_returns_zero_offloads_plan_where_it_is_better() -> None:
    """At ZeRO-Offload's budget a sync solve stopped before its first node has only its start
    (every tensor fetched for its uses), slower than ZeRO-Offload's plan: it returns that."""
    settings = PlanSettings(capacity=Capacity.of_bytes(ZERO_PEAK), time_limit_s=1e-9)
    plan = tmsim.plan(gpt2(), H100, "sync", settings=settings)
    zero = tmsim.plan(gpt2(), H100, "zero-offload")
    assert plan.stats is not None and plan.planner == "milp-sync"
    assert plan.stats.status.startswith("fallback to zero-offload")
    assert plan.predicted_s == zero.predicted_s
    assert plan.host_kernels == zero.host_kernels


def test_async_aware_prices_its_own_copies_without_host_kernels_and_keeps_syncs_plan() -> None:
    """Copies beside kernels are priced by replays of plans without host kernels, so the
    async-aware model offers the host nothing; it still falls back to the sync plan, which
    runs the optimizer partly on the host, where that is faster (not an error)."""
    settings = PlanSettings(capacity=Capacity.of_bytes(700_000_000), time_limit_s=None, window=2)
    aware = tmsim.plan(gpt2(), H100, "async-aware", settings=settings)
    sync = tmsim.plan(gpt2(), H100, "sync", settings=settings)
    assert aware.stats is not None and sync.host_kernels
    assert aware.predicted_s <= sync.predicted_s * (1 + 1e-9)
    assert outside_names(Formulation.ASYNC_AWARE, H100, PlanSettings()) == ()


def test_host_kernels_do_not_lift_into_a_model_without_host_candidates() -> None:
    # The async-aware model offers the host nothing, and the chain lifts into it the plan of
    # the sync model, whose host may run update kernels: no lift (None), where indexing the
    # empty candidate list raised IndexError (the dominance figure on GH200, GPT-2 small b4
    # at 0.6 of the peak).
    g = gpt2()
    cost = cost_model(g, H100, None)
    limits = np.full(len(g.kernels), 700_000_000, dtype=np.int64)
    sync = build_model(cost, 2, Formulation.SYNC, limits, relax=False, host_kernels=True)
    sync.problem.solve(solver="HIGHS", mip_rel_gap=0.01)
    x = np.asarray(sync.x.value) > 0.5
    assert x[sync.vars.host_first :].any()  # the host runs some update kernel
    bare = build_model(cost, 2, Formulation.SYNC, limits, relax=False)
    assert bare.vars.host_kernel.size == 0
    assert lift(sync, x, bare) is None
    # with the host's candidates the same solution lifts, host kernels and all
    lifted = lift(sync, x, sync)
    assert lifted is not None and np.array_equal(
        lifted[sync.vars.host_first :], x[sync.vars.host_first :]
    )


def test_the_host_floor_rows_lift_the_lp_bound_and_keep_the_optimum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # c_k >= L_k (1 - h_k) holds at every binary point, so the optimum stays (within the
    # gaps of the two solves), while the LP relaxation, in which a small fractional h_k let
    # an update kernel's device time drop, rises: on GH200, whose device reaches the host's
    # memory (LLaMA-7B b1 sync in 60 s: bound 0.0956 -> 0.2289 s, gap 64.7% -> 3.7%).
    from tmsim.planners.milp.formulation import build, host

    g = gpt2()
    cost = cost_model(g, H100, None)
    cand = find_candidates(cost, 0)
    assert cand is not None
    floor_s = np.linspace(1.0, 2.0, len(g.kernels))
    floor_s[int(cand.kernel[0])] = 0.0
    columns = np.arange(cand.count, dtype=np.int64) + 100
    on, least, cols = host.host_floor(floor_s, cand, columns)
    assert on.tolist() == cand.kernel[1:].tolist()
    assert least.tolist() == floor_s[cand.kernel[1:]].tolist()
    assert cols.tolist() == columns[1:].tolist()

    def solve(cut: bool) -> Plan:
        if not cut:
            monkeypatch.setattr(build, "host_floor", lambda *a: (np.zeros(0, np.int64),) * 3)
        settings = PlanSettings(
            capacity=Capacity.of_bytes(2 * ZERO_PEAK), time_limit_s=None, lp_bound=True
        )
        plan = tmsim.plan(g, tmsim.platform("gh200"), "sync", settings=settings)
        monkeypatch.undo()
        return plan

    with_cut, without = solve(True), solve(False)
    a, b = with_cut.stats, without.stats
    assert a.lp_bound > b.lp_bound * 1.03
    assert a.objective == pytest.approx(b.objective, rel=a.gap + b.gap + 1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.0, 5.0),
    st.lists(st.tuples(st.floats(0.0, 3.0), st.floats(0.01, 3.0)), min_size=1, max_size=6),
)
def test_the_two_stream_bound_is_the_lp_over_the_host_shares(
    device_s: float, kernels: list[tuple[float, float]]
) -> None:
    # min T s.t. T >= device_s + sum L (1 - h), T >= sum H h, 0 <= h <= 1, by an LP solver.
    floor = np.array([k[0] for k in kernels])
    host = np.array([k[1] for k in kernels])
    m = len(kernels)
    c = np.r_[np.zeros(m), 1.0]  # variables h, T
    a_ub = np.vstack([np.r_[-floor, -1.0], np.r_[host, -1.0]])
    b_ub = np.array([-(device_s + floor.sum()), 0.0])
    got = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=[(0, 1)] * m + [(0, None)], method="highs")
    assert got.status == 0
    assert two_stream_bound_s(device_s, floor, host) == pytest.approx(got.fun, rel=1e-9, abs=1e-12)


def test_the_two_stream_bound_holds_below_the_optimum_and_above_the_floors() -> None:
    # By hand: device 1 s, candidates (floor 1, host 1) and (floor 1, host 4): the first goes
    # to the host whole (device 2, host 1), then a fifth of the second: both streams 1.8 s.
    assert two_stream_bound_s(1.0, np.array([1.0, 1.0]), np.array([1.0, 4.0])) == pytest.approx(1.8)
    g, gh200 = gpt2(), tmsim.platform("gh200")
    cost = cost_model(g, gh200, None)
    limits = np.full(len(g.kernels), 2 * ZERO_PEAK, dtype=np.int64)
    model = build_model(cost, 1, Formulation.SYNC, limits, relax=False, host_kernels=True)
    assert model.host is not None and model.host_floor_s is not None
    assert model.lower_bound_s > model.floor_s.sum() * 1.01
    settings = PlanSettings(capacity=Capacity.of_bytes(2 * ZERO_PEAK), time_limit_s=None, gap=1e-6)
    best = tmsim.plan(g, gh200, "sync", settings=settings)
    assert model.lower_bound_s <= best.stats.objective * (1 + 1e-9)
