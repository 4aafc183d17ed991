"""Replays of hand-made plans whose times are computed by hand: what contention does to a
kernel and its copies on Optane and on a PCIe GPU, engines, links, duplex, overlap rules, at
the ``bandwidth`` level (the controller and copy thread have tests of their own)."""

from __future__ import annotations

import pytest

from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode, Overlap
from tmsim.cost import CostModel, IndexMove, step_time_s
from tmsim.levels import InterferenceLevel
from tmsim.planners.assemble import assemble_plan
from tmsim.plans.validate import validate
from tmsim.plans.values import Plan
from tmsim.sim import replay
from tmsim.sim.trace import ASYNC, Trace
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

CPU = load_preset("cascadelake-optane")
GPU = load_preset("rtx2080ti-pcie3")
F = Phase.FORWARD
GB, MB = 10**9, 10**6
REL = 1e-9
FAST, SLOW = 0, 1
BANDWIDTH = InterferenceLevel.BANDWIDTH


def hand_plan(graph: Graph, platform, op_tiers, initial, moves, cost=None) -> Plan:  # type: ignore[no-untyped-def]
    cost = cost or CostModel(graph, platform)
    plan = assemble_plan(cost, "hand", 8 * GB, op_tiers, initial, moves)
    check = validate(plan, graph, platform, cost)
    assert check.ok, check.errors[:3]
    return plan


def only(trace: Trace, kind: str, name: str):  # type: ignore[no-untyped-def]
    (rec,) = [r for r in trace.records if r.kind == kind and r.name == name]
    return rec


# ---------------------------------------------------------------------- Optane
def pmm_graph() -> Graph:
    """k0 streams 4 GB from PMM while ``a`` (50 MB) is evicted to PMM beside it."""
    tensors = [
        Tensor("x", 4 * GB, Role.INPUT),
        Tensor("a", 50 * MB, Role.INPUT),
        Tensor("y", 1 * MB, Role.ACTIVATION),
        Tensor("z", 1 * MB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k0", "relu", ("x",), ("y",), F, 1),
        Kernel("k1", "add", ("y", "a"), ("z",), F, 1),
    ]
    return Graph("pmm-overlap", tensors, kernels)


def test_async_eviction_slows_a_pmm_bound_kernel_by_the_device_time_it_takes() -> None:
    graph = pmm_graph()
    cost = CostModel(graph, CPU)
    # operand order per kernel: inputs then outputs: k0 (x, y), k1 (y, a, z)
    op_tiers = [SLOW, FAST, FAST, FAST, FAST]
    plan = hand_plan(
        graph,
        CPU,
        op_tiers,
        {0: (SLOW,), 1: (FAST,)},
        [IndexMove(1, FAST, SLOW, 0, MoveMode.ASYNC)],
    )
    off = replay(plan, graph, CPU, level=InterferenceLevel.NONE)
    on = replay(plan, graph, CPU, level=BANDWIDTH)
    launch = cost.launch_s
    times = cost.kernel_times_s(op_tiers)
    latency = 101.5e-9 + 90.4e-9  # DRAM's read and PMM's write latency: the first byte
    c = CPU.copy_path("DRAM", "PMM").async_bw_bytes_per_s
    copy_s = latency + 50 * MB / c
    assert off.simulated_s == pytest.approx(plan.predicted_s, rel=REL)
    assert only(off, "kernel", "k0").end_s == pytest.approx(times[0], rel=REL)
    assert only(on, ASYNC, "a").end_s == pytest.approx(copy_s, rel=REL)  # the copy keeps its rate

    # By hand: the kernel moves n bytes (4 GB read on PMM, 1 MB written on DRAM) at its
    # roofline cap n / mem_s; beside the copy, PMM is the bottleneck: per second,
    # (x * a + c / write_bw(1 writer)) * mix(F) = 1, F the read fraction of PMM's traffic.
    pmm = CPU.tiers[1]
    n = 4 * GB + 1 * MB
    mem_s = float(cost.memory_s(op_tiers)[0])
    cap = n / mem_s
    a = (4 * GB / n) / (0.8 * pmm.read_bw_bytes_per_s)
    w = c / float(pmm.write_bw_at(1))

    def excess(x: float) -> float:
        f = x * (4 * GB / n) / (x * (4 * GB / n) + c)
        return (x * a + w) * float(pmm.interference.mix_factor(f)) - 1.0

    lo, hi = 0.0, cap
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
    x = lo
    assert x < cap * (1 - 0.19)  # the copy's writes take a fifth of PMM's time
    end = copy_s + (n - x * (copy_s - launch)) / cap
    assert only(on, "kernel", "k0").end_s == pytest.approx(end, rel=1e-7)
    assert on.simulated_s > plan.predicted_s * 1.02
    k1 = only(on, "kernel", "k1")
    assert k1.end_s - k1.start_s == pytest.approx(times[1], rel=REL)  # alone again


# ---------------------------------------------------------------------- GPU
def gpu_graph(s: int) -> Graph:
    """k0 reads v (1.2 GB) while four inputs come to the device and ``u`` goes to the host."""
    tensors = [
        Tensor("v", 1200 * MB, Role.INPUT),
        Tensor("u", s, Role.INPUT),
        *(Tensor(f"i{j}", s, Role.INPUT) for j in range(4)),
        Tensor("y", 1 * MB, Role.ACTIVATION),
        Tensor("z", 1 * MB, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k0", "relu", ("v", "u"), ("y",), F, 1),
        Kernel("k1", "add", ("y", "i0", "i1", "i2", "i3"), ("z",), F, 1),
    ]
    return Graph("gpu-overlap", tensors, kernels)


def gpu_plan(s: int) -> tuple[Graph, Plan]:
    graph = gpu_graph(s)
    moves = [IndexMove(t, SLOW, FAST, 0, MoveMode.ASYNC) for t in (2, 3, 4, 5)]
    moves.append(IndexMove(1, FAST, SLOW, 0, MoveMode.ASYNC))
    initial = {0: (FAST,), 1: (FAST,), **{t: (SLOW,) for t in (2, 3, 4, 5)}}
    return graph, hand_plan(graph, GPU, [FAST] * 9, initial, moves)


def test_gpu_copy_engines_share_the_link_and_directions_overlap() -> None:
    s = 120 * MB
    graph, plan = gpu_plan(s)
    cost = CostModel(graph, GPU)
    plan_tiers = [FAST] * 9
    times = cost.kernel_times_s(plan_tiers)
    link = 12e9
    # Each copy first waits its latency: the host's read latency (101.5 ns) into the device
    # (a GPU's posted writes have none), the device's read latency (321.2 ns, a pointer chase)
    # and the host's write latency (86.9 ns) out of it.
    up, down = 101.5e-9, 321.2e-9 + 86.9e-9
    # Without contention the cost model's sum: five copies one after another.
    off = replay(plan, graph, GPU, level=InterferenceLevel.NONE)
    copies = 4 * (up + s / link) + down + s / link
    assert plan.predicted_s == pytest.approx(max(times[0], copies) + times[1], rel=REL)
    assert off.simulated_s == pytest.approx(plan.predicted_s, rel=REL)
    # With it: three engines share 12 GB/s host->device (4 GB/s each, done at 3s/12), the
    # fourth copy then alone (at 4s/12); device->host has its own direction (done at s/12).
    on = replay(plan, graph, GPU, level=BANDWIDTH)
    h2d = sorted((r.start_s, r.end_s) for r in on.records if r.kind == ASYNC and r.dst == "device")
    first = up + 3 * s / link
    assert [e for _, e in h2d] == pytest.approx([first] * 3 + [first + up + s / link], rel=REL)
    assert h2d[3][0] == pytest.approx(first, rel=REL)  # queued for an engine
    assert only(on, ASYNC, "u").end_s == pytest.approx(down + s / link, rel=REL)
    # The next kernel waits for the copies it depends on.
    k1 = only(on, "kernel", "k1")
    assert k1.start_s == pytest.approx(first + up + s / link, rel=REL)
    assert on.simulated_s == pytest.approx(first + up + s / link + times[1], rel=REL)
    assert on.simulated_s < plan.predicted_s  # PCIe is duplex: the directions overlap
    # k0 shares device memory with 12 GB/s written and 12 GB/s read by the copies while it
    # runs: it gets the rest of the device, 1 - 24/555.7 of it.
    k0 = only(on, "kernel", "k0")
    mem_s = float(cost.memory_s(plan_tiers)[0])
    assert k0.end_s == pytest.approx(cost.launch_s + mem_s / (1 - 24e9 / 555.7e9), rel=1e-7)
    assert (k0.end_s - k0.start_s) / k0.uncontended_s < 1.05


# ---------------------------------------------------------------------- overlap and tables
def test_sync_moves_run_between_kernels_and_after_the_last() -> None:
    graph = pmm_graph()
    moves = [IndexMove(1, FAST, SLOW, 1, MoveMode.SYNC), IndexMove(3, FAST, SLOW, 2, MoveMode.SYNC)]
    plan = hand_plan(graph, CPU, [SLOW, FAST, FAST, FAST, FAST], {0: (SLOW,), 1: (FAST,)}, moves)
    for contention in (False, True):
        trace = replay(plan, graph, CPU, level=BANDWIDTH if contention else InterferenceLevel.NONE)
        k0, k1 = only(trace, "kernel", "k0"), only(trace, "kernel", "k1")
        a, z = only(trace, "sync", "a"), only(trace, "sync", "z")
        assert k0.end_s == a.start_s
        assert a.end_s == k1.start_s
        latency = 101.5e-9 + 90.4e-9  # DRAM read, PMM write: the first byte
        assert a.end_s - a.start_s == pytest.approx(latency + 50 * MB / 12e9, rel=REL)
        assert k1.end_s == z.start_s
        assert trace.simulated_s == z.end_s
        assert trace.simulated_s == pytest.approx(plan.predicted_s, rel=REL)


def test_sum_overlap_and_measured_times_follow_the_cost_model() -> None:
    graph = pmm_graph()
    op_tiers = [SLOW, FAST, FAST, FAST, FAST]
    moves = [IndexMove(1, FAST, SLOW, 0, MoveMode.ASYNC)]
    initial = {0: (SLOW,), 1: (FAST,)}
    summed = CostModel(graph, CPU, overlap=Overlap.SUM, measured={(1, (0, 0, 0)): 0.5})
    plan = hand_plan(graph, CPU, op_tiers, initial, moves, cost=summed)
    expected, _ = step_time_s(summed, op_tiers, moves)
    trace = replay(plan, graph, CPU, level=InterferenceLevel.NONE, cost=summed)
    assert trace.simulated_s == pytest.approx(expected, rel=REL)
    k0, k1 = only(trace, "kernel", "k0"), only(trace, "kernel", "k1")
    assert k1.end_s - k1.start_s == pytest.approx(0.5, rel=REL)  # the measured time
    # Not overlapped: launch, then compute, then memory.
    serial = summed.launch_s + float(summed.compute_s[0] + summed.memory_s(op_tiers)[0])
    assert k0.end_s - k0.start_s == pytest.approx(serial, rel=REL)


def test_both_directions_at_once_share_the_pair_rate() -> None:
    """With ``both_bw`` (PCIe measured: 55 GB/s alone, 46.6 each way at once) an upload and a
    download beside one kernel each run at the both rate while the other runs; alone, at the
    path's own rate."""
    from dataclasses import replace

    both = 10e9
    paths = tuple(
        replace(p, both_bw_bytes_per_s=both) if {p.src, p.dst} == {"host", "device"} else p
        for p in GPU.copy_paths
    )
    gpu = replace(GPU, copy_paths=paths)
    s = 120 * MB
    graph = gpu_graph(s)
    initial = {0: (FAST,), 1: (FAST,), 2: (SLOW,), **{t: (FAST,) for t in (3, 4, 5)}}
    moves = [
        IndexMove(2, SLOW, FAST, 0, MoveMode.ASYNC),
        IndexMove(1, FAST, SLOW, 0, MoveMode.ASYNC),
    ]
    plan = hand_plan(graph, gpu, [FAST] * 9, initial, moves)
    on = replay(plan, graph, gpu, level=BANDWIDTH)
    up, down = only(on, ASYNC, "i0"), only(on, ASYNC, "u")
    # Both start after their latencies (101.5 and 321.2 + 86.9 ns) and share 2 x 10 GB/s: each
    # moves at 10 GB/s to its end (the upload's first 306.6 ns alone at 12, and the download's
    # last bytes alone after it, make no visible difference).
    assert up.end_s == pytest.approx(101.5e-9 + s / both, rel=1e-4)
    assert down.end_s == pytest.approx(321.2e-9 + 86.9e-9 + s / both, rel=1e-4)
    # Alone (no download), the upload runs at the path's 12 GB/s.
    alone = hand_plan(graph, gpu, [FAST] * 9, initial, moves[:1])
    solo = replay(alone, graph, gpu, level=BANDWIDTH)
    assert only(solo, ASYNC, "i0").end_s == pytest.approx(101.5e-9 + s / 12e9, rel=1e-6)
    # Without both_bw, the two directions do not slow each other (the test above).
    plain = replay(hand_plan(graph, GPU, [FAST] * 9, initial, moves), graph, GPU, level=BANDWIDTH)
    assert only(plain, ASYNC, "i0").end_s == pytest.approx(101.5e-9 + s / 12e9, rel=1e-6)
