"""The unified-memory (cudaMallocManaged) replay: hand-worked page traces, the fits-in-memory
case against the all-device plan, the oversubscribed case against AutoTM-style plans,
conservation, determinism and errors."""

from __future__ import annotations

import warnings
from dataclasses import replace
from functools import cache
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from hwmodels import HardwareModelError, UnifiedMemory
from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import InfeasibleError, TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.sim import load_trace, replay, save_trace
from tmsim.sim.trace import KERNEL, SYNC
from tmsim.sim.unified.pages import ALLOC, EVICT, FETCH, simulate_pages
from tmsim.sim.unified.replay import UnifiedTrace, replay_unified
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import training_graph_of

M = 2**20  # one page in the hand-worked cases
GPU = load_preset("rtx2080ti-pcie3")
assert GPU.unified_memory is not None
DRIVER = GPU.unified_memory  # the preset's driver constants
PCIE_BYTES_PER_S = 12e9  # the preset's host<->device rate, both directions
F, U = Phase.FORWARD, Phase.UPDATE
# 1 MiB pages and a 1 ms fault: easy sums.
HAND = UnifiedMemory(page_bytes=M, fault_s=1e-3)


def small_gpu(device_bytes: int) -> Platform:
    """The RTX 2080 Ti preset with a device tier of ``device_bytes``."""
    tiers = (replace(GPU.tiers[0], capacity_bytes=device_bytes), *GPU.tiers[1:])
    return replace(GPU, tiers=tiers)


def chain() -> Graph:
    """x (input, 1.5 MiB) and weights w1, w2 (1 MiB each) feed a chain a -> b -> c (2, 2, 1 MiB);
    f3 reuses w1, and upd updates w2 in place. Live ranges: x [0, 0], a [0, 1], b [1, 2],
    c [2, 3]."""
    tensors = [
        Tensor("x", 3 * M // 2, Role.INPUT),
        Tensor("w1", M, Role.WEIGHT),
        Tensor("w2", M, Role.WEIGHT),
        Tensor("a", 2 * M, Role.ACTIVATION),
        Tensor("b", 2 * M, Role.ACTIVATION),
        Tensor("c", M, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("f1", "linear", ("x", "w1"), ("a",), F, 10**6),
        Kernel("f2", "linear", ("a", "w2"), ("b",), F, 10**6),
        Kernel("f3", "linear", ("b", "w1"), ("c",), F, 10**6),
        Kernel("upd", "sgd", ("c",), (), U, 10**6, updates=("w2",)),
    ]
    return Graph("chain", tensors, kernels)


def events(graph: Graph, device_bytes: int, params: UnifiedMemory = HAND) -> list[tuple]:
    run = simulate_pages(graph, device_bytes, params)
    names = [t.name for t in graph.tensors]
    kinds = {EVICT: "evict", FETCH: "fetch", ALLOC: "alloc"}
    table = zip(
        run.kernel, run.kind, run.tensor, run.pages, run.nbytes, run.copied_bytes, strict=True
    )
    return [
        (int(k), kinds[int(e)], names[int(t)], int(p), int(b), int(c)) for k, e, t, p, b, c in table
    ]


def test_chain_by_hand() -> None:
    # 5 MiB device. f1: x (2 pages, the last half full), w1 fault in; a is allocated: 4.5 MiB.
    # f2: x is dead (1.5 MiB freed); b and w2 need 3 MiB, 2 free, so w1 (the only tensor
    # f2 does not use) is evicted and copied back. f3: a is dead; w1 faults back in, c is
    # allocated. upd: b is dead; c and w2 are resident.
    assert events(chain(), 5 * M) == [
        (0, "fetch", "x", 2, 3 * M // 2, 3 * M // 2),
        (0, "fetch", "w1", 1, M, M),
        (0, "alloc", "a", 2, 2 * M, 0),
        (1, "evict", "w1", 1, M, M),
        (1, "fetch", "w2", 1, M, M),
        (1, "alloc", "b", 2, 2 * M, 0),
        (2, "fetch", "w1", 1, M, M),
        (2, "alloc", "c", 1, M, 0),
    ]
    run = simulate_pages(chain(), 5 * M, HAND)
    assert run.resident_bytes.tolist() == [9 * M // 2, 5 * M, 5 * M, 3 * M]
    assert run.freed_bytes == 3 * M // 2 + 2 * M + 2 * M
    # A clean weight (never written) may be dropped without a copy; w2, updated, may not.
    clean = events(chain(), 5 * M, replace(HAND, writeback_clean=False))
    assert clean[3] == (1, "evict", "w1", 1, M, 0)
    assert run.final.host_valid.tolist() == [True, True, False, False, False, False]


def test_chain_timing_and_records_by_hand() -> None:
    graph, platform = chain(), small_gpu(5 * M)
    u = replay_unified(graph, platform, params=HAND, level=InterferenceLevel.NONE)
    c = u.counters
    assert (c.fault_pages, c.migrated_in_bytes) == (5, 9 * M // 2)
    assert (c.evicted_pages, c.evicted_bytes, c.migrated_out_bytes) == (1, M, M)
    assert (c.alloc_pages, c.alloc_bytes, c.device_peak_bytes) == (5, 5 * M, 5 * M)
    assert (c.device_bytes, c.final_resident_bytes) == (5 * M, 3 * M)  # w1, w2, c
    # The kernels take what they take with every operand on the device; on top come five
    # 1 ms faults and 5.5 MiB over PCIe at 12 GB/s.
    roomy = platform.with_tier_capacity("device", graph.peak_live_bytes)  # the 6 MiB peak
    device = replay(
        plan("all-fast", graph, roomy, PlanSettings()), graph, roomy, level=InterferenceLevel.NONE
    )
    extra_s = 5e-3 + 11 * M / 2 / PCIE_BYTES_PER_S
    assert c.simulated_s == pytest.approx(device.simulated_s + extra_s, rel=1e-12)
    assert c.predicted_s == pytest.approx(c.simulated_s, rel=1e-12)
    recs = u.trace.records
    assert [(r.kind, r.name, r.src, r.dst) for r in recs] == [
        (SYNC, "x", "host", "device"),
        (SYNC, "w1", "host", "device"),
        (KERNEL, "f1", "", ""),
        (SYNC, "w1", "device", "host"),
        (SYNC, "w2", "host", "device"),
        (KERNEL, "f2", "", ""),
        (SYNC, "w1", "host", "device"),
        (KERNEL, "f3", "", ""),
        (KERNEL, "upd", "", ""),
    ]
    x = recs[0]
    assert x.duration_s == pytest.approx(2e-3 + 1.5 * M / PCIE_BYTES_PER_S, rel=1e-12)
    assert (x.read_bytes, x.write_bytes) == ((0, 3 * M // 2), (3 * M // 2, 0))
    assert all(a.end_s <= b.start_s + 1e-15 for a, b in pairwise(recs))
    assert [r.fast_resident_bytes for r in u.trace.kernels()] == [9 * M // 2, 5 * M, 5 * M, 3 * M]


def spill() -> Graph:
    """A 2.5 MiB weight (3 pages, the last half full) used first and last; between, a chain
    y1 -> y2 -> y3 that needs room."""
    tensors = [Tensor("big", 5 * M // 2, Role.WEIGHT)] + [
        Tensor(n, s, Role.ACTIVATION)
        for n, s in (("y1", M), ("y2", 2 * M), ("y3", M), ("y4", M // 2))
    ]
    kernels = [
        Kernel("a", "relu", ("big",), ("y1",), F),
        Kernel("b", "relu", ("y1",), ("y2",), F),
        Kernel("c", "relu", ("y2",), ("y3",), F),
        Kernel("d", "add", ("big", "y3"), ("y4",), F),
    ]
    return Graph("spill", tensors, kernels)


def test_partial_eviction_takes_whole_pages_by_hand() -> None:
    # b needs 2 MiB with 1.5 free: one whole page of big goes (not its half page), and big
    # keeps 1.5 MiB; d faults that page back in.
    assert events(spill(), 5 * M) == [
        (0, "fetch", "big", 3, 5 * M // 2, 5 * M // 2),
        (0, "alloc", "y1", 1, M, 0),
        (1, "evict", "big", 1, M, M),
        (1, "alloc", "y2", 2, 2 * M, 0),
        (2, "alloc", "y3", 1, M, 0),
        (3, "fetch", "big", 1, M, M),
        (3, "alloc", "y4", 1, M // 2, 0),
    ]
    run = simulate_pages(spill(), 5 * M, HAND)
    assert run.resident_bytes.tolist() == [7 * M // 2, 9 * M // 2, 9 * M // 2, 4 * M]


def policy_graph() -> Graph:
    """wa is used at kernels 0 and 2, wb at 1; kernel 3 needs room for wc."""
    tensors = [Tensor(n, M, Role.WEIGHT) for n in ("wa", "wb", "wc")] + [
        Tensor(f"o{i}", M // 2, Role.ACTIVATION) for i in range(4)
    ]
    kernels = [
        Kernel(f"k{i}", "relu", (w,), (f"o{i}",), F) for i, w in enumerate(("wa", "wb", "wa", "wc"))
    ]
    return Graph("policy", tensors, kernels)


@pytest.mark.parametrize(("policy", "victim"), [("lru", "wb"), ("fifo", "wa")])
def test_lru_evicts_least_recently_used_fifo_oldest_arrival(policy: str, victim: str) -> None:
    # Before k3: wa (arrived at k0, used at k2) and wb (arrived and used at k1) fill 2 of 3 MiB;
    # wc and o3 need 1.5.
    evicted = [
        e for e in events(policy_graph(), 3 * M, replace(HAND, policy=policy)) if e[1] == "evict"
    ]
    assert evicted == [(3, "evict", victim, 1, M, M)]


@cache
def resnet50() -> Graph:
    return training_graph_of("resnet50", 2)


@cache
def all_device_s(contention: bool) -> float:
    g = resnet50()
    level = DEFAULT_LEVEL if contention else InterferenceLevel.NONE
    return replay(plan("all-fast", g, GPU, PlanSettings()), g, GPU, level=level).simulated_s


def test_fitting_workload_pays_only_first_touch_faults() -> None:
    g = resnet50()
    assert g.peak_live_bytes < GPU.tiers[0].capacity_bytes
    u = replay_unified(g, GPU, level=InterferenceLevel.NONE)
    c = u.counters
    _, operands = g.operand_csr
    touched = np.zeros(len(g.tensors), dtype=bool)
    touched[operands] = True
    pre = np.array([t.role in (Role.INPUT, Role.WEIGHT, Role.OPTIMIZER_STATE) for t in g.tensors])
    # Everything pre-existing that a kernel uses faults in once; outputs allocate on the device.
    assert c.migrated_in_bytes == int(g.sizes_bytes[touched & pre].sum())
    assert c.alloc_bytes == int(g.sizes_bytes[~pre].sum())
    assert c.evicted_pages == c.migrated_out_bytes == 0
    extra_s = c.fault_pages * 45e-6 + c.migrated_in_bytes / PCIE_BYTES_PER_S
    assert c.simulated_s == pytest.approx(all_device_s(False) + extra_s, rel=1e-9)
    # In the steady state only the new batch of inputs moves: near all-device speed.
    warm = replay_unified(g, GPU, warm=True).counters
    inputs = sum(t.size_bytes for t in g.tensors if t.role is Role.INPUT)
    assert warm.migrated_in_bytes == inputs
    assert all_device_s(True) < warm.simulated_s < 1.05 * all_device_s(True)


def test_oversubscribed_workload_evicts_and_loses_to_planned_offload() -> None:
    g = resnet50()
    limit = g.peak_live_bytes // 2
    vdnn = plan("vdnn", g, GPU, PlanSettings(capacity=Capacity.of_bytes(limit)))
    planned = replay(vdnn, g, GPU).simulated_s
    for warm in (False, True):
        u = replay_unified(g, GPU, device_bytes=limit, warm=warm)
        assert u.counters.evicted_pages > 0
        assert u.counters.device_peak_bytes <= limit
        assert u.counters.simulated_s > planned > all_device_s(True)


def test_oversubscribed_workload_loses_to_the_sync_milp() -> None:
    g = resnet50()
    limit = g.peak_live_bytes // 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # HiGHS at its time limit
        milp = plan(
            "sync", g, GPU, PlanSettings(capacity=Capacity.of_bytes(limit), time_limit_s=None)
        )
    unified = replay_unified(g, GPU, device_bytes=limit, warm=True).counters.simulated_s
    assert unified > replay(milp, g, GPU).simulated_s


@pytest.mark.parametrize("fraction", [1.0, 0.6, 0.35, 0.25])
@pytest.mark.parametrize("policy", ["lru", "fifo"])
@pytest.mark.parametrize("warm", [False, True])
def test_conservation_and_capacity(fraction: float, policy: str, warm: bool) -> None:
    g = resnet50()
    cap = int(g.peak_live_bytes * fraction)
    params = replace(DRIVER, policy=policy)
    u = replay_unified(g, GPU, device_bytes=cap, params=params, warm=warm)
    c = u.counters
    assert (
        c.initial_resident_bytes
        + c.migrated_in_bytes
        + c.alloc_bytes
        - c.evicted_bytes
        - c.freed_bytes
        == c.final_resident_bytes
    )
    assert c.migrated_out_bytes == c.evicted_bytes  # managed memory copies every evicted page
    assert c.device_peak_bytes <= cap
    moved = u.trace.moves()
    assert sum(sum(r.read_bytes) for r in moved) == c.migrated_in_bytes + c.migrated_out_bytes
    assert [r.kernel for r in u.trace.kernels()] == list(range(len(g.kernels)))


def test_deterministic_and_parquet_round_trip(tmp_path: Path) -> None:
    g = resnet50()
    a = replay_unified(g, GPU, device_bytes=g.peak_live_bytes // 3)
    b = replay_unified(g, GPU, device_bytes=g.peak_live_bytes // 3)
    assert isinstance(a, UnifiedTrace) and a == b
    assert a.trace.planner == "unified-memory"
    save_trace(a.trace, tmp_path / "um.parquet")
    assert load_trace(tmp_path / "um.parquet") == a.trace
    row = a.to_frame()
    assert row.loc[0, "fault_pages"] == a.counters.fault_pages
    assert row.loc[0, "param_page_bytes"] == 2 * M
    assert "param_source" not in row  # the parameters' provenance text is not a parameter


def test_kernel_larger_than_device_is_infeasible() -> None:
    # f1 needs x, w1 and a: 4.5 MiB, half a MiB more than 4 MiB.
    with pytest.raises(InfeasibleError, match=r"kernel 0 \('f1'\).* 524288 bytes more"):
        replay_unified(chain(), small_gpu(4 * M), params=HAND)


def test_the_driver_parameters_come_from_the_platform() -> None:
    # The preset's table holds the class defaults (the numbers replay_unified used before the
    # constants moved to hwmodels), so replaying with either gives the same step.
    assert replace(DRIVER, source="") == UnifiedMemory()
    platform = small_gpu(5 * M)
    by_default = replay_unified(chain(), platform, level=InterferenceLevel.NONE)
    explicit = replay_unified(
        chain(), platform, params=UnifiedMemory(), level=InterferenceLevel.NONE
    )
    assert by_default.params is DRIVER
    assert (by_default.trace, by_default.counters) == (explicit.trace, explicit.counters)
    # Other parameters change the step: 1 ms faults instead of 45 us.
    slow = replay_unified(chain(), platform, params=replace(DRIVER, fault_s=1e-3))
    assert slow.counters.fault_pages == by_default.counters.fault_pages > 0
    assert slow.counters.fault_s == pytest.approx(1e-3 * slow.counters.fault_pages)
    # Without [unified_memory] the caller must pass the parameters.
    bare = replace(platform, unified_memory=None)
    with pytest.raises(TmsimError, match=r"no \[unified_memory\] driver parameters") as info:
        replay_unified(chain(), bare)
    assert "\n" not in str(info.value)
    assert replay_unified(chain(), bare, params=DRIVER, level=InterferenceLevel.NONE) == by_default


def test_bad_input_is_named() -> None:
    with pytest.raises(HardwareModelError, match="page_bytes"):
        replace(DRIVER, page_bytes=0)
    with pytest.raises(HardwareModelError, match="migration_bw_fraction"):
        replace(DRIVER, migration_bw_fraction=1.5)
    with pytest.raises(HardwareModelError, match="policy"):
        replace(DRIVER, policy="random")
    with pytest.raises(TmsimError, match="device tier"):
        replay_unified(chain(), load_preset("cascadelake-2lm"))
    with pytest.raises(TmsimError, match="device_bytes"):
        replay_unified(chain(), GPU, device_bytes=0)
