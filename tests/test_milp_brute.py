"""The K-tier exhaustive search: the frozen two-tier one on two tiers, hand cases on three.

tests/milp_brute2.py is the two-tier search as it stood before the K-tier rewrite, kept
unchanged but for its imports, as the reference for two tiers.
Times below are worked out from the round numbers of tests/tiers3.py: every efficiency is 1,
no launch overhead, 1 MB at 1 GB/s takes 1 ms, 10^10 FLOP at 1 TFLOP/s take 10 ms.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import Gadget, Machine, best, brute_force, evictions, histories, prefetches
from milp_brute2 import brute_force as brute_force2
from tiers3 import cpu3, first_two, gpu3
from tiny_graphs import MB, spill_step, tiny_graphs, tiny_step

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

MS = 1e-3
F, B, U = Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE
FORMULATIONS = ("static", "sync", "async")


def _same(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=1e-12)


# --- two tiers: the frozen two-tier oracle -------------------------------------------------


@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize(
    ("preset", "limits_mb"),
    [("cascadelake-optane", [60, 100, 150, 220]), ("rtx2080ti-pcie3", [140, 160, 200])],
)
def test_tiny_step_as_the_two_tier_oracle(
    preset: str, limits_mb: list[int], formulation: str, window: int
) -> None:
    cost = CostModel(tiny_step(), load_preset(preset))
    for limit in (mb * MB for mb in limits_mb):
        old = brute_force2(cost, limit, formulation, window)
        assert _same(brute_force(cost, limit, formulation, window), old), limit


def test_spill_step_as_the_two_tier_oracle() -> None:
    # a is written to the host beside conv1, the kernel after its producer: windows open
    # around every kernel with the tensor as an operand, its producer included (around its
    # readers only, the optimum was 32.6 ms, not 24.3 ms, with the device at its 616 GB/s
    # datasheet rate; at its measured 555.7 it is 24.45 ms).
    cost = CostModel(spill_step(), load_preset("rtx2080ti-pcie3"))
    old = brute_force2(cost, 250 * MB, "async", 1)
    assert old == pytest.approx(24.45 * MS, rel=1e-3)
    assert _same(brute_force(cost, 250 * MB, "async", 1), old)


@settings(max_examples=40, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 1.2),
    st.sampled_from(FORMULATIONS),
    st.sampled_from(["cascadelake-optane", "rtx2080ti-pcie3"]),
    st.integers(1, 2),
)
def test_random_graphs_as_the_two_tier_oracle(
    graph: Graph, share: float, formulation: str, preset: str, window: int
) -> None:
    cost = CostModel(graph, load_preset(preset))
    limit = max(1, int(graph.peak_live_bytes * share))
    old = brute_force2(cost, limit, formulation, window)
    assert _same(brute_force(cost, limit, formulation, window), old)


@settings(max_examples=25, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 1.2),
    st.sampled_from(FORMULATIONS),
    st.sampled_from(["gpu", "cpu"]),
    st.integers(1, 2),
)
def test_a_third_tier_out_of_reach_changes_nothing(
    graph: Graph, share: float, formulation: str, kind: str, window: int
) -> None:
    # On the GPU nvme has no copy path, so nothing on it reaches a kernel; on the CPU pmm holds
    # one byte, so nothing fits on it. Either way the optimum is that of the first two tiers,
    # whose second tier (larger than the graph) the two-tier oracle treats as unconstrained.
    big = 10 * sum(int(s) for s in graph.sizes_bytes)
    plat = gpu3(big, big, big, nvme_paths=False) if kind == "gpu" else cpu3(big, big, 1)
    limit = max(1, int(graph.peak_live_bytes * share))
    old = brute_force2(CostModel(graph, first_two(plat)), limit, formulation, window)
    assert _same(brute_force(CostModel(graph, plat), limit, formulation, window), old)


# --- three tiers by hand ------------------------------------------------------------------


def _staging_graph() -> Graph:
    """p is read at k0, q at k1, x at k4; k2 and k3 compute for 10 ms each."""
    tensors = [Tensor(n, 10 * MB, Role.INPUT) for n in ("p", "q", "x")]
    kernels = [
        Kernel("k0", "relu", ("p",), (), F),
        Kernel("k1", "relu", ("q",), (), F),
        Kernel("k2", "conv2d", (), (), F, 10**10),
        Kernel("k3", "conv2d", (), (), F, 10**10),
        Kernel("k4", "relu", ("x",), (), F),
    ]
    return Graph("staging", tensors, kernels)


def _optima(plat: Platform, graph: Graph, limit: int) -> dict[str, float]:
    cost = CostModel(graph, plat)
    out = {f: brute_force(cost, limit, f) for f in FORMULATIONS}
    out["async2"] = brute_force(cost, limit, "async", window=2)
    return out


def test_staging_through_the_host_takes_a_window_of_two() -> None:
    # Device and host hold 10 MB each. p must be on the device at k0, so q (needed on the
    # device at k1, with no room there at k0) sits on the host at k0 and k1 and is fetched
    # synchronously at k1 (10 MB at 10 GB/s: 1 ms). So x starts on nvme, the host is free from
    # k2 on, and without a direct path x goes nvme -> host (10 MB at 2 GB/s: 5 ms) and then
    # host -> device (1 ms), one copy per gadget. Kernels: 3 x 0.01 ms (10 MB read at
    # 1000 GB/s) + 2 x 10 ms.
    # - window 2: both copies hide beside k2 and k3: 20.03 + 1 (q) = 21.03 ms;
    # - window 1: nvme -> host beside k3, host -> device blocks at k4: 22.03 ms;
    # - sync and static: x cannot reach the device at all: inf.
    got = _optima(gpu3(10 * MB, 10 * MB, 1000 * MB, direct=False), _staging_graph(), 10 * MB)
    assert got["async2"] == pytest.approx(21.03 * MS, rel=1e-12)
    assert got["async"] == pytest.approx(22.03 * MS, rel=1e-12)
    assert got["sync"] == got["static"] == math.inf


def test_a_direct_path_makes_a_window_of_one_enough() -> None:
    # As above with device <-> nvme at 4 GB/s: x goes nvme -> device beside k3 (2.5 ms under
    # 10 ms): 21.03 ms with window 1. Sync: x blocks at k4, 2.5 ms from nvme (or 1 ms from the
    # host, but then q comes from nvme at 2.5 ms): 20.03 + 1 + 2.5 = 23.53 ms.
    got = _optima(gpu3(10 * MB, 10 * MB, 1000 * MB), _staging_graph(), 10 * MB)
    assert got["async"] == got["async2"] == pytest.approx(21.03 * MS, rel=1e-12)
    assert got["sync"] == pytest.approx(23.53 * MS, rel=1e-12)
    assert got["static"] == math.inf


@pytest.mark.parametrize(("cxl_mb", "expected_ms"), [(30, 0.9), (20, 1.3)])
def test_a_full_middle_tier_sends_a_tensor_to_the_slowest(cxl_mb: int, expected_ms: float) -> None:
    # One kernel reads a and b, 30 MB each; DRAM holds 40 MB, so one of them is elsewhere.
    # CXL holding 30 MB: 30 MB at 100 GB/s + 30 MB at 50 GB/s = 0.3 + 0.6 = 0.9 ms. CXL holding
    # 20 MB: the other goes to PMM, 0.3 + 30 MB at 30 GB/s = 1.3 ms. With one kernel there is
    # nothing to move (no room to fetch into), so every formulation agrees.
    graph = Graph(
        "pair",
        [Tensor("a", 30 * MB, Role.INPUT), Tensor("b", 30 * MB, Role.INPUT)],
        [Kernel("k0", "add", ("a", "b"), (), F)],
    )
    got = _optima(cpu3(40 * MB, cxl_mb * MB, 1000 * MB), graph, 40 * MB)
    for value in got.values():
        assert value == pytest.approx(expected_ms * MS, rel=1e-12)


def test_a_weight_ends_where_it_started() -> None:
    # w (20 MB) is read at k0; k1 writes y (40 MB); DRAM holds 40 MB, CXL 1 MB (nothing fits).
    # Were w free to end anywhere, it would start in DRAM and on PMM, be read from DRAM
    # (20 MB at 100 GB/s: 0.2 ms), drop its DRAM copy after k0, and y would be written to DRAM
    # (0.4 ms): 0.6 ms. It must end as it started, and nothing after k0 can copy it back, so
    # either w stays in DRAM and y goes to PMM (0.2 + 40 MB at 10 GB/s = 4.2 ms), or w is
    # fetched to DRAM and dropped (20 MB at 20 GB/s: 1 ms; 1 + 0.2 + 0.4 = 1.6 ms), or w is read
    # on PMM (20 MB at 30 GB/s: 0.667 ms) and y goes to DRAM (0.4 ms): 1.0667 ms, the optimum
    # of every formulation.
    graph = Graph(
        "weight",
        [Tensor("w", 20 * MB, Role.WEIGHT), Tensor("y", 40 * MB, Role.ACTIVATION)],
        [Kernel("k0", "linear", ("w",), (), F), Kernel("k1", "relu", (), ("y",), F)],
    )
    got = _optima(cpu3(40 * MB, 1 * MB, 1000 * MB), graph, 40 * MB)
    for value in got.values():
        assert value == pytest.approx((20 / 30 + 0.4) * MS, rel=1e-12)


def test_an_updated_weight_is_written_back_where_it_started() -> None:
    # Device and host hold 10 MB each; w (10 MB) is updated at k0, x (10 MB) read at k1, so w
    # is off the device at k1 and so, ending as it started, at the start too. The update
    # fetches w (D = {device}: its other copies go stale) and writes it back to its one
    # starting tier: host, 1 + 1 ms, or nvme, 2.5 + 2.5 ms. x cannot share the host with w at
    # k1: w on the host and x from nvme, 2 + 2.5 = 4.5 ms, beats w on nvme and x from the host,
    # 5 + 1 = 6 ms. Kernels: 20 MB at k0 and 10 MB at k1 at 1000 GB/s: 0.03 ms. Static: w and
    # x both need the whole device: inf.
    graph = Graph(
        "update",
        [Tensor("w", 10 * MB, Role.WEIGHT), Tensor("x", 10 * MB, Role.INPUT)],
        [
            Kernel("k0", "sgd", (), (), U, updates=("w",)),
            Kernel("k1", "relu", ("x",), (), F),
        ],
    )
    got = _optima(gpu3(10 * MB, 10 * MB, 1000 * MB), graph, 10 * MB)
    assert got["static"] == math.inf
    for f in ("sync", "async", "async2"):
        assert got[f] == pytest.approx(4.53 * MS, rel=1e-12), f


def test_a_use_reads_the_fastest_copy() -> None:
    # k0 writes y (30 MB) and k1..k3 read x (30 MB); DRAM holds 30 MB, CXL 1 MB. y in DRAM
    # (0.3 ms; on PMM 3 ms) leaves no room for x at k0, so x starts on PMM. Read there three
    # times: 3 x 1 ms. Fetched at k1 (30 MB at 20 GB/s: 1.5 ms) it is on DRAM and PMM and each
    # use reads the DRAM copy: 1.5 + 3 x 0.3 = 2.4 ms. Sync and async: 0.3 + 2.4 = 2.7 ms
    # (no room to fetch beside k0); static: 0.3 + 3 = 3.3 ms.
    graph = Graph(
        "reads",
        [Tensor("y", 30 * MB, Role.ACTIVATION), Tensor("x", 30 * MB, Role.INPUT)],
        [Kernel("k0", "relu", (), ("y",), F)]
        + [Kernel(f"k{i}", "relu", ("x",), (), F) for i in (1, 2, 3)],
    )
    got = _optima(cpu3(30 * MB, 1 * MB, 1000 * MB), graph, 30 * MB)
    assert got.pop("static") == pytest.approx(3.3 * MS, rel=1e-12)
    for value in got.values():
        assert value == pytest.approx(2.7 * MS, rel=1e-12)


def test_the_two_phases_of_a_gadget() -> None:
    # gpu3 with host smaller and nvme larger than the graph (10 MB): device and host are
    # constrained, nvme is not. x: device <-> host 1 ms, host <-> nvme 5 ms, device <-> nvme
    # 2.5 ms. Expected: {state: copy milliseconds}.
    graph = Graph("one", [Tensor("x", 10 * MB, Role.INPUT)], [Kernel("k0", "relu", ("x",), (), F)])
    machine = Machine.of(CostModel(graph, gpu3(10 * MB, 5 * MB, 1000 * MB)))
    assert machine.constrained == (0, 1)
    use = Gadget(0, MoveMode.SYNC, uses=True, updates=False, fetch=True, evict=True)
    update = Gadget(0, MoveMode.SYNC, uses=True, updates=True, fetch=True, evict=True)
    dev, host, nvme = 0, 1, 2

    def fetch(g: Gadget, *before: int) -> dict[frozenset[int], float]:
        return {d: round(s / MS, 9) for d, s in prefetches(machine, 0, g, frozenset(before))}

    def evict(*during: int) -> dict[frozenset[int], float]:
        return {a: round(s / MS, 9) for a, s in evictions(machine, 0, use, frozenset(during))}

    def at(*tiers: int) -> frozenset[int]:
        return frozenset(tiers)

    # one copy, into a tier faster than every copy, from the fastest source (host, not nvme)
    assert fetch(use, nvme) == {at(nvme): 0, at(dev, nvme): 2.5, at(host, nvme): 5}
    assert fetch(use, host, nvme) == {at(host, nvme): 0, at(dev, host, nvme): 1}
    assert fetch(use, dev, nvme) == {at(dev, nvme): 0}
    # an update keeps one copy: the one it updates, on the fastest kernel tier (here none
    # but the device), or one fetched from the fastest source
    assert fetch(update, host, nvme) == {at(dev): 1}
    assert fetch(update, dev, nvme) == {at(dev): 0}
    # one copy into a tier slower than the fastest copy; only constrained tiers are freed
    assert evict(dev) == {
        at(dev): 0,
        at(dev, host): 1,
        at(host): 1,
        at(dev, nvme): 2.5,
        at(nvme): 2.5,
    }
    assert evict(dev, nvme) == {
        at(dev, nvme): 0,
        at(nvme): 0,
        at(dev, host, nvme): 1,
        at(host, nvme): 1,
    }
    assert evict(host, nvme) == {at(host, nvme): 0, at(nvme): 0}
    assert evict(host) == {at(host): 0, at(host, nvme): 5, at(nvme): 5}
    # beside a kernel that may fetch, the device copy may still be arriving: copy from nvme
    window = Gadget(0, MoveMode.ASYNC, uses=False, updates=False, fetch=True, evict=True)
    late = dict(evictions(machine, 0, window, frozenset({dev, nvme})))
    from_nvme = machine.copy_s(0, frozenset({nvme}), host, MoveMode.ASYNC)
    from_dev = machine.copy_s(0, frozenset({dev}), host, MoveMode.ASYNC)
    assert from_nvme is not None and from_dev is not None and from_nvme > from_dev
    assert late[at(dev, host, nvme)] == late[at(host, nvme)] == from_nvme


# --- three tiers: properties --------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 1.2),
    st.floats(0.1, 1.5),
    st.floats(0.1, 1.5),
    st.sampled_from(["gpu", "cpu"]),
)
def test_each_formulation_contains_the_one_before(
    graph: Graph, share: float, middle: float, bottom: float, kind: str
) -> None:
    total = sum(int(s) for s in graph.sizes_bytes)
    caps = (graph.peak_live_bytes, int(total * middle), int(total * bottom))
    plat = gpu3(*caps) if kind == "gpu" else cpu3(*caps)
    cost = CostModel(graph, plat)
    limit = max(1, int(graph.peak_live_bytes * share))
    static, sync = brute_force(cost, limit, "static"), brute_force(cost, limit, "sync")
    async1, async2 = brute_force(cost, limit, "async"), brute_force(cost, limit, "async", 2)
    assert async2 <= async1 <= sync <= static


def test_dropping_dominated_histories_keeps_the_optimum() -> None:
    # Every combination of every history, none dropped, against brute_force's pruned search.
    graph = _staging_graph()
    for plat in (gpu3(10 * MB, 10 * MB, 1000 * MB), cpu3(10 * MB, 10 * MB, 15 * MB)):
        cost = CostModel(graph, plat)
        machine = Machine.of(cost)
        limits = machine.limits(cost, 10 * MB)
        for f in FORMULATIONS:
            every = [histories(cost, t, f, 2, machine) for t in range(len(graph.tensors))]
            assert math.prod(len(hs) for hs in every) < 200_000
            assert _same(best(cost, every, limits), brute_force(cost, 10 * MB, f, 2)), f
