"""Kernels on the host CPU beside the compute device: the platform's ``[host_compute]``, the
host roofline, plans with ``host_kernels`` (files, validator) and their replay on two streams.

The replay cases are worked out by hand on round numbers (:mod:`tiers3`): the device
computes 1 TFLOP/s and reads its memory at 1000 GB/s, the host 0.1 TFLOP/s at 100 GB/s, and
copies between them run at 10 GB/s, so a kernel of 1 GFLOP over 20 MB takes 1 ms on the
device and 10 ms on the host, and a copy of 10 MB takes 1 ms.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from tiers3 import gpu3, round_compute
from tiny_graphs import MB

from hwmodels.compute import HostCompute
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.presets import load_preset, platform_from_toml, platform_to_toml
from hwmodels.timing import MoveMode, roofline
from tmsim.cost import CostModel, IndexMove
from tmsim.errors import PlanError
from tmsim.levels import InterferenceLevel
from tmsim.planners.assemble import assemble_plan
from tmsim.plans.deps import stream_deps
from tmsim.plans.files import plan_from_dict, plan_to_dict
from tmsim.plans.streams import copy_servers
from tmsim.plans.validate import validate
from tmsim.plans.values import Plan
from tmsim.sim import replay
from tmsim.sim.trace import HOST, KERNEL, Trace
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

GFLOP = 10**9
DEVICE, HOST_TIER = 0, 1
#: a host CPU ten times slower than the device, reaching the host tier
CPU = HostCompute(
    replace(round_compute(), name="cpu", peak_flop_per_s=(("fp32", 1e11),)), ("host",)
)
P = replace(gpu3(10**9, 10**10, 10**11), host_compute=CPU)


def t(name: str, role: Role = Role.ACTIVATION) -> Tensor:
    return Tensor(name, 10 * MB, role, "fp32", (10 * MB // 4,))


def relu(name: str, src: str, dst: str) -> Kernel:
    return Kernel(name, "relu", (src,), (dst,), Phase.FORWARD, GFLOP)


def planned(
    g: Graph,
    tiers: list[int],
    initial: dict[int, tuple[int, ...]],
    moves: list[IndexMove],
    host: tuple[int, ...],
    platform: Platform = P,
) -> Plan:
    return assemble_plan(
        CostModel(g, platform), "hand", 10**9, np.array(tiers), initial, moves, host_kernels=host
    )


def replays(plan: Plan, g: Graph) -> tuple[Trace, Trace]:
    return replay(plan, g, P, level=InterferenceLevel.NONE), replay(plan, g, P)


def spans(trace: Trace) -> dict[str, tuple[float, float]]:
    return {r.name: (r.start_s, r.end_s) for r in trace.records}


# ---------------------------------------------------------------------- the platform
def test_host_compute_round_trips_and_shows() -> None:
    assert platform_from_toml(platform_to_toml(P), "t") == P
    assert ("host compute", "1 cores, reach host") in P.summary_rows()
    assert P.host_kernel_tier_mask() == (False, True, False)
    assert gpu3(1, 1, 1).host_kernel_tier_mask() == (False, False, False)
    with pytest.raises(HardwareModelError, match="kernel_tiers names unknown tier 'dram'"):
        replace(P, host_compute=HostCompute(CPU.compute, ("dram",)))
    with pytest.raises(HardwareModelError, match="kernel_tiers lists a tier twice"):
        HostCompute(CPU.compute, ("host", "host"))


@pytest.mark.parametrize(
    ("name", "cores", "fp32_tflops"), [("h100-host-nvme", 52, 6.656), ("gh200", 72, 7.1)]
)
def test_presets_describe_their_host_cpu(name: str, cores: int, fp32_tflops: float) -> None:
    host = load_preset(name).host_compute
    assert host is not None and host.kernel_tiers == ("host",)
    assert host.compute.cores == cores and host.compute.peak("fp32") == fp32_tflops * 1e12


def test_host_roofline_uses_the_host_peak_and_its_tiers_only() -> None:
    on_host = np.array([[0.0, 20 * MB, 0.0]])
    t_host = roofline(P, [GFLOP], "elementwise", on_host, 0 * on_host, host=True).time_s
    assert t_host[0] == pytest.approx(1e-2)  # 1 GFLOP at 0.1 TFLOP/s, over 0.2 ms of memory
    memory_bound = roofline(P, [0], "elementwise", on_host, 0 * on_host, host=True)
    assert memory_bound.time_s[0] == pytest.approx(20 * MB / 100e9)
    with pytest.raises(HardwareModelError, match="which the host compute cannot access"):
        roofline(P, [GFLOP], "elementwise", np.roll(on_host, -1), 0 * on_host, host=True)
    with pytest.raises(HardwareModelError, match="has no host compute"):
        roofline(gpu3(1, 1, 1), [GFLOP], "elementwise", on_host, 0 * on_host, host=True)


# ---------------------------------------------------------------------- the replay
def test_independent_host_and_device_kernels_take_the_max_not_the_sum() -> None:
    g = Graph(
        "beside",
        [t("x", Role.INPUT), t("y", Role.INPUT), t("a"), t("b")],
        [relu("dev", "x", "a"), relu("cpu", "y", "b")],
    )
    plan = planned(g, [0, 0, 1, 1], {0: (DEVICE,), 1: (HOST_TIER,)}, [], (1,))
    assert validate(plan, g, P).ok
    assert plan.predicted_s == pytest.approx(10e-3, rel=1e-12)  # max(1, 10) ms, not 11
    for trace in replays(plan, g):
        assert trace.simulated_s == pytest.approx(10e-3, rel=1e-12)
        assert spans(trace)["dev"] == pytest.approx((0.0, 1e-3))
        assert spans(trace)["cpu"] == pytest.approx((0.0, 10e-3))
        assert [r.kind for r in trace.records] == [KERNEL, HOST]


def test_a_host_kernel_waits_for_the_copy_bringing_its_input() -> None:
    g = Graph(
        "after",
        [t("x", Role.INPUT), t("a"), t("b")],
        [relu("dev", "x", "a"), relu("cpu", "a", "b")],
    )
    down = IndexMove(1, DEVICE, HOST_TIER, 1, MoveMode.SYNC)
    plan = planned(g, [0, 0, 1, 1], {0: (DEVICE,)}, [down], (1,))
    assert validate(plan, g, P).ok
    assert plan.predicted_s == pytest.approx(12e-3, rel=1e-12)  # 1 + 1 (copy) + 10 ms
    for trace in replays(plan, g):
        assert trace.simulated_s == pytest.approx(12e-3, rel=1e-12)
        assert spans(trace)["cpu"] == pytest.approx((2e-3, 12e-3))


def test_the_device_waits_for_a_host_kernel_it_needs_but_not_for_one_it_does_not() -> None:
    # cpu makes a on the host (10 ms), a is copied up (1 ms) and read by late; early, which
    # needs nothing of the host, runs at once beside cpu
    g = Graph(
        "before",
        [t("y", Role.INPUT), t("x", Role.INPUT), t("a"), t("b"), t("c")],
        [relu("cpu", "y", "a"), relu("early", "x", "b"), relu("late", "a", "c")],
    )
    up = IndexMove(2, HOST_TIER, DEVICE, 2, MoveMode.SYNC)
    plan = planned(g, [1, 1, 0, 0, 0, 0], {0: (HOST_TIER,), 1: (DEVICE,)}, [up], (0,))
    assert validate(plan, g, P).ok
    assert plan.predicted_s == pytest.approx(12e-3, rel=1e-12)  # 10 + 1 + 1 ms
    for trace in replays(plan, g):
        at = spans(trace)
        assert at["early"] == pytest.approx((0.0, 1e-3))
        assert at["a"] == pytest.approx((10e-3, 11e-3))  # the copy waits for cpu
        assert at["late"] == pytest.approx((11e-3, 12e-3))


def test_copies_at_a_host_position_do_not_hold_the_device() -> None:
    # after dev0 makes a, it is copied to the host beside cpu's position (cpu reads only y):
    # dev1 waits for that copy (1 ms) but not for cpu (10 ms); the step waits for cpu
    g = Graph(
        "pending",
        [t("x", Role.INPUT), t("y", Role.INPUT), t("a"), t("b"), t("c")],
        [relu("dev0", "x", "a"), relu("cpu", "y", "b"), relu("dev1", "a", "c")],
    )
    down = IndexMove(2, DEVICE, HOST_TIER, 1, MoveMode.ASYNC)
    plan = planned(g, [0, 0, 1, 1, 0, 0], {0: (DEVICE,), 1: (HOST_TIER,)}, [down], (1,))
    assert validate(plan, g, P).ok
    assert plan.predicted_s == pytest.approx(10e-3, rel=1e-12)
    for trace in replays(plan, g):
        at = spans(trace)
        assert at["a"] == pytest.approx((1e-3, 2e-3))
        assert at["dev1"] == pytest.approx((2e-3, 3e-3))
        assert trace.simulated_s == pytest.approx(10e-3, rel=1e-12)


def test_copies_on_their_own_take_their_path_in_turn() -> None:
    # a and b (1 ms of copy each) go down at cpu's position, both on the device -> host path:
    # one after the other (2-3 and 3-4 ms), not side by side, and dev1 (which reads both on
    # the device) waits for both
    g = Graph(
        "turns",
        [t("x", Role.INPUT), t("y", Role.INPUT), t("a"), t("b"), t("c"), t("d")],
        [
            relu("dev0", "x", "a"),
            relu("devb", "x", "b"),
            Kernel("cpu", "relu", ("y",), ("c",), Phase.FORWARD, GFLOP // 10),
            Kernel("dev1", "relu", ("a", "b"), ("d",), Phase.FORWARD, GFLOP),
        ],
    )
    moves = [IndexMove(tn, DEVICE, HOST_TIER, 2, MoveMode.ASYNC) for tn in (2, 3)]
    tiers = [0, 0, 0, 0, 1, 1, 0, 0, 0]
    plan = planned(g, tiers, {0: (DEVICE,), 1: (HOST_TIER,)}, moves, (2,))
    assert validate(plan, g, P).ok
    assert plan.predicted_s == pytest.approx(5e-3, rel=1e-12)  # 2 + 1 + 1 + 1 ms
    for trace in replays(plan, g):  # with contention the path's one copy engine does so too
        at = spans(trace)
        assert at["a"] == pytest.approx((2e-3, 3e-3))
        assert at["b"] == pytest.approx((3e-3, 4e-3))
        assert at["dev1"] == pytest.approx((4e-3, 5e-3))
        assert trace.simulated_s == pytest.approx(5e-3, rel=1e-12)


def refresh_graph(dev2_reads_w: bool) -> Graph:
    """dev0, then upd (the host updates weight w in place, 10 ms), dev1 and dev2; w lives on
    both tiers and its new value is copied up beside dev1."""
    w = Tensor("w", 10 * MB, Role.WEIGHT, "fp32", (10 * MB // 4,))
    last = ("b", "w") if dev2_reads_w else ("b",)
    return Graph(
        "refresh",
        [t("x", Role.INPUT), t("y", Role.INPUT), w, t("a"), t("b"), t("c")],
        [
            relu("dev0", "x", "a"),
            Kernel("upd", "relu", ("y",), (), Phase.UPDATE, GFLOP, updates=("w",)),
            relu("dev1", "a", "b"),
            Kernel("dev2", "relu", last, ("c",), Phase.UPDATE, GFLOP),
        ],
    )


@pytest.mark.parametrize(
    ("dev2_reads_w", "dev2_span_ms", "step_ms"),
    [
        # nothing on the device touches w after the copy: it holds only the step's end, and
        # dev2 runs at once (the copy: 10 ms for upd, then 1 ms)
        (False, (2.0, 3.0), 11.0),
        # dev2 reads the refreshed copy: it waits for the copy, as every device kernel after
        # a copy beside the kernel before it does
        (True, (11.0, 12.0), 12.0),
    ],
)
def test_a_copy_of_what_the_host_updated_holds_only_what_touches_it(
    dev2_reads_w: bool, dev2_span_ms: tuple[float, float], step_ms: float
) -> None:
    g = refresh_graph(dev2_reads_w)
    up = IndexMove(2, HOST_TIER, DEVICE, 2, MoveMode.ASYNC)
    tiers = [0, 0, 1, 1, 0, 0, *([0, 0, 0] if dev2_reads_w else [0, 0])]
    initial = {0: (DEVICE,), 1: (HOST_TIER,), 2: (DEVICE, HOST_TIER)}
    plan = planned(g, tiers, initial, [up], (1,))
    check = validate(plan, g, P)
    assert check.ok, check.errors
    assert plan.predicted_s == pytest.approx(step_ms * 1e-3, rel=1e-12)
    for trace in replays(plan, g):
        at = spans(trace)
        assert at["w"] == pytest.approx((10e-3, 11e-3))
        assert at["dev2"] == pytest.approx(tuple(x * 1e-3 for x in dev2_span_ms))
        assert trace.simulated_s == pytest.approx(step_ms * 1e-3, rel=1e-12)
    # a copy whose destination is not resident to the step's end (or not known to be) holds
    # the device as any other
    cost, n_t = CostModel(g, P), len(P.tiers)
    lasting = {2 * n_t + DEVICE: 0, 2 * n_t + HOST_TIER: 0}
    op_tiers = np.array(tiers)
    detached = stream_deps(cost, op_tiers, [up], [], (1,), lasting).detached
    assert detached == (frozenset() if dev2_reads_w else frozenset({0}))
    assert not stream_deps(cost, op_tiers, [up], [], (1,), {2 * n_t + HOST_TIER: 0}).detached
    assert not stream_deps(cost, op_tiers, [up], [], (1,)).detached


def test_replays_with_host_kernels_are_deterministic() -> None:
    g = Graph(
        "after",
        [t("x", Role.INPUT), t("a"), t("b")],
        [relu("dev", "x", "a"), relu("cpu", "a", "b")],
    )
    plan = planned(g, [0, 0, 1, 1], {0: (DEVICE,)}, [IndexMove(1, 0, 1, 1, MoveMode.SYNC)], (1,))
    assert replay(plan, g, P) == replay(plan, g, P)


# ---------------------------------------------------------------------- the rules
def deadlocking() -> tuple[Graph, Plan]:
    """The host order (late, first) makes late wait for first through the device: first
    makes a, which the device needs to make c, which late reads."""
    g = Graph(
        "circle",
        [t("y", Role.INPUT), t("a"), t("c"), t("d")],
        [relu("first", "y", "a"), relu("dev", "a", "c"), relu("late", "c", "d")],
    )
    moves = [
        IndexMove(1, HOST_TIER, DEVICE, 1, MoveMode.SYNC),
        IndexMove(2, DEVICE, HOST_TIER, 2, MoveMode.SYNC),
    ]
    plan = planned(g, [1, 1, 0, 0, 1, 1], {0: (HOST_TIER,)}, moves, (0, 2))
    return g, replace(plan, host_kernels=(2, 0))


def test_a_host_order_that_deadlocks_is_refused() -> None:
    g, plan = deadlocking()
    check = validate(plan, g, P)
    assert not check.ok and "can never start" in check.errors[0] and math.isnan(check.recomputed_s)
    with pytest.raises(PlanError, match="can never start"):
        replay(plan, g, P)


def test_host_kernels_keep_their_own_plan_order_where_they_share_a_copy() -> None:
    g = Graph(
        "chain", [t("y", Role.INPUT), t("a"), t("b")], [relu("h0", "y", "a"), relu("h1", "a", "b")]
    )
    plan = planned(g, [1, 1, 1, 1], {0: (HOST_TIER,)}, [], (0, 1))
    assert validate(plan, g, P).ok and plan.predicted_s == pytest.approx(20e-3)
    check = validate(replace(plan, host_kernels=(1, 0)), g, P)
    assert not check.ok and "the host order runs the later first" in check.errors[0]


def test_the_validator_names_what_is_wrong_with_host_kernels() -> None:
    g = Graph(
        "after",
        [t("x", Role.INPUT), t("a"), t("b")],
        [relu("dev", "x", "a"), relu("cpu", "a", "b")],
    )
    plan = planned(g, [0, 0, 1, 1], {0: (DEVICE,)}, [IndexMove(1, 0, 1, 1, MoveMode.SYNC)], (1,))
    bare = gpu3(10**9, 10**10, 10**11)
    errors = validate(plan, g, bare).errors
    assert any("platform 'gpu3' has no host compute" in e for e in errors)
    twice = validate(replace(plan, host_kernels=(1, 1, 7)), g, P).errors
    assert "host_kernels[1]: kernel 1 ('cpu') listed twice" in twice
    assert "host_kernels[2]: kernel 7 outside [0, 1]" in twice
    # the host kernel with its operands on the device: the host does not reach it
    on_device = validate(replace(plan, operand_tiers=(("device",) * 2,) * 2), g, P).errors
    assert any("which the host compute cannot access (kernel tiers: host)" in e for e in on_device)


def test_plan_files_keep_host_kernels_and_read_version_3() -> None:
    g = Graph(
        "after",
        [t("x", Role.INPUT), t("a"), t("b")],
        [relu("dev", "x", "a"), relu("cpu", "a", "b")],
    )
    plan = planned(g, [0, 0, 1, 1], {0: (DEVICE,)}, [IndexMove(1, 0, 1, 1, MoveMode.SYNC)], (1,))
    doc = plan_to_dict(plan)
    assert doc["version"] == 4 and doc["host_kernels"] == [1]
    assert plan_from_dict(doc) == plan
    del doc["host_kernels"]
    doc["version"] = 3
    assert plan_from_dict(doc).host_kernels == ()


def test_a_path_that_is_not_duplex_shares_its_turns_with_the_reverse_direction() -> None:
    h100 = load_preset("h100-host-nvme")  # PCIe to the device duplex, the drive not
    device, host, nvme = 0, 1, 2
    moves = [
        IndexMove(0, host, device, 0, MoveMode.ASYNC),
        IndexMove(1, device, host, 0, MoveMode.ASYNC),
        IndexMove(2, host, device, 1, MoveMode.ASYNC),
        IndexMove(3, nvme, host, 1, MoveMode.ASYNC),
        IndexMove(4, host, nvme, 2, MoveMode.ASYNC),
    ]
    up, down, up_again, read, write = copy_servers(h100, moves)
    assert up == up_again and up != down
    assert read == write and read not in (up, down)
