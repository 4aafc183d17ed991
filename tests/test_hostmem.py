"""The host memory's floor (tmsim.plans.hostmem): its arithmetic by hand and by brute force,
its ready positions against the MILP's releases, and the floor under the replay that shares
the host's memory."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tmsim
from tmsim import Capacity, PlanSettings
from tmsim.levels import InterferenceLevel
from tmsim.planners.milp.formulation.host import find_candidates
from tmsim.plans.hostmem import copy_tier_s, floor_s, ready_positions
from tmsim.profiles import cost_model
from tmsim.sim.replay import replay
from tmsim.workload.graph import Graph, Phase


@cache
def gpt2() -> Graph:
    return tmsim.graph("gpt2_small", batch=1, seq_len=128, layers=2)


def test_the_floor_by_hand() -> None:
    # kernels start at 0, 4 and 6 s; a host kernel ready at kernel 1 costs the tier 5 s; moves
    # at positions 1 and 3 cost it 1 and 2 s. From kernel 1's start: 4 + 5 + 2 (the move at 1
    # starts before it) = 11; from the step's start 0 + 5 + 1 + 2 = 8; from kernel 2's: 6 + 2
    start = np.array([0.0, 4.0, 6.0])
    got = floor_s(3, start, np.array([1]), np.array([5.0]), np.array([1, 3]), np.array([1.0, 2.0]))
    assert got == pytest.approx(11.0)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.floats(0, 10), min_size=n, max_size=n),
            st.lists(st.tuples(st.integers(-1, n - 1), st.floats(0, 5)), max_size=4),
            st.lists(st.tuples(st.integers(0, n), st.floats(0, 5)), max_size=5),
        )
    )
)
def test_the_floor_is_the_largest_row_by_brute_force(
    case: tuple[int, list[float], list[tuple[int, float]], list[tuple[int, float]]],
) -> None:
    n, starts, hosted, moves = case
    start = np.cumsum(starts)  # a device stream starts its kernels in order
    ready = np.array([r for r, _ in hosted], dtype=np.int64)
    host_s = np.array([s for _, s in hosted])
    at = np.array([k for k, _ in moves], dtype=np.int64)
    move_s = np.array([s for _, s in moves])
    best = 0.0
    for low in range(-1, n):
        begin = 0.0 if low < 0 else float(start[low])
        held = sum(s for r, s in hosted if r >= low) + sum(s for k, s in moves if k > low)
        best = max(best, begin + held)
    assert floor_s(n, start, ready, host_s, at, move_s) == pytest.approx(best)


def test_a_copy_costs_each_tier_its_bytes_over_that_tiers_bandwidth() -> None:
    gh200 = tmsim.platform("gh200")
    host = gh200.tier_names.index("host")
    device = gh200.tier_names.index("device")
    got = copy_tier_s(gh200, np.array([486e9]), np.array([host]), np.array([device]))
    assert got[0, host] == pytest.approx(1.0)  # 486 GB/s read (reference: Schieffer et al.)
    assert got[0, device] == pytest.approx(486e9 / gh200.tiers[device].write_bw_bytes_per_s)


def test_a_host_kernel_is_ready_after_the_last_device_kernel_that_writes_its_operands() -> None:
    g = gpt2()
    cost = cost_model(g, tmsim.platform("h100-host-nvme"), None)
    cand = find_candidates(cost, 0)
    assert cand is not None
    ready = ready_positions(cost, cand.kernel.tolist())
    assert np.array_equal(cand.ready, ready)
    for k, r in zip(cand.kernel.tolist(), ready.tolist(), strict=True):
        adam = g.kernels[k]
        ops = {*adam.inputs, *adam.updates}
        made = [
            j
            for j in range(k)
            if g.kernels[j].phase is not Phase.UPDATE
            and ops & {*g.kernels[j].outputs, *g.kernels[j].updates}
        ]
        assert r == max(made)  # its gradient's last writer in the backward pass
    # no later than the last device use the MILP's release waits for (window 0: one past it)
    assert (ready <= cand.release - 1).all()


@pytest.mark.parametrize(
    ("preset", "strategy"),
    [
        ("h100-host-nvme", "zero-offload"),
        ("h100-host-nvme", "zero-infinity"),  # the GH200 has no tier behind its host memory
        ("h100-host-nvme", "sync"),
        ("gh200", "zero-offload"),
        ("gh200", "sync"),
    ],
)
def test_the_prediction_is_no_more_than_the_replay_that_shares_the_tiers(
    preset: str, strategy: str
) -> None:
    platform = tmsim.platform(preset)
    fast = 300_000_000 if strategy == "sync" else None
    plan = tmsim.plan(gpt2(), platform, strategy, fast=fast, time_limit_s=None)
    assert plan.host_kernels
    alone = replay(plan, gpt2(), platform, level=InterferenceLevel.NONE).simulated_s
    shared = replay(plan, gpt2(), platform, level=InterferenceLevel.BANDWIDTH).simulated_s
    assert alone <= plan.predicted_s * (1 + 1e-9)
    # up to the replay's reordering: sharing can reorder the copies waiting for a path, so
    # that an action starts earlier than without it (ZeRO-Infinity here: its first Adam
    # kernel 66 us earlier on the H100, and the floor 0.02% above the shared replay)
    assert plan.predicted_s <= shared * (1 + 1e-3)


@pytest.mark.parametrize("formulation", ["sync", "async"])
def test_where_the_floor_binds_the_milp_prices_the_plan_as_it_is_predicted(
    formulation: str,
) -> None:
    # the H100's host memory at 0.3 of its bandwidth (82 / 61 GB/s): the host's Adam and the
    # copies through that memory hold the step above its two streams (by 7-10% here), and the
    # MILP's rows price the plan it returns as the plan is predicted, up to what its other
    # rows already leave: the refreshes queue in the order they become ready, the rows take
    # them in plan order (sync: 6e-6 apart here), and async's model holds a host kernel's
    # position for the copies beside it, which the timeline lets run on their own
    base = tmsim.platform("h100-host-nvme")
    host = base.tier_names.index("host")
    tiers = list(base.tiers)
    tiers[host] = replace(
        tiers[host],
        read_bw_bytes_per_s=0.3 * tiers[host].read_bw_bytes_per_s,
        write_bw_bytes_per_s=0.3 * tiers[host].write_bw_bytes_per_s,
    )
    slow = replace(base, tiers=tuple(tiers))
    settings = PlanSettings(
        capacity=Capacity.of_bytes(266_922_496), time_limit_s=None, host_kernels=True
    )
    plan = tmsim.plan(gpt2(), slow, formulation, settings=settings)
    assert plan.stats is not None and plan.host_kernels
    assert plan.stats.objective == pytest.approx(plan.predicted_s, rel=1e-4)
    alone = replay(plan, gpt2(), slow, level=InterferenceLevel.NONE).simulated_s
    shared = replay(plan, gpt2(), slow, level=InterferenceLevel.BANDWIDTH).simulated_s
    assert alone * 1.05 < plan.predicted_s <= shared
