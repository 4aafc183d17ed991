"""The MILP over three named tiers: optima equal to exhaustive search, plans the validator
accepts and the simulator replays to their prediction, and the catalogue of states and edges."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from milp_brute import brute_force
from tiers3 import cpu3, gpu3
from tiny_graphs import tiny_graphs, tiny_step

from hwmodels.platform import Platform
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError
from tmsim.levels import InterferenceLevel
from tmsim.planners.milp.chain.plan import plan_milp
from tmsim.planners.milp.formulation import build
from tmsim.planners.milp.formulation.build import catalogue_of
from tmsim.planners.milp.formulation.dominance import dominator, usable_tiers
from tmsim.planners.milp.formulation.states import Kind, build_catalogue
from tmsim.planners.settings import PlanSettings
from tmsim.plans.validate import validate
from tmsim.sim import replay
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

MB = 1_000_000


def _check(graph: Graph, platform: Platform, formulation: str, window: int) -> None:
    """MILP optimum == brute force; a plan validates and replays to its prediction."""
    cost = CostModel(graph, platform)
    limit = platform.tiers[0].capacity_bytes
    best = brute_force(cost, limit, formulation, window=window)
    settings = PlanSettings(
        capacity=Capacity.of_bytes(limit), gap=1e-9, layout=False, window=window
    )
    if math.isinf(best):
        with pytest.raises(InfeasibleError):
            plan_milp(graph, platform, settings, formulation)
        return
    plan = plan_milp(graph, platform, settings, formulation)
    assert plan.predicted_s == pytest.approx(best, rel=1e-6)
    check = validate(plan, graph, platform)
    assert check.ok, check.errors[:3]
    uncontended = replay(plan, graph, platform, level=InterferenceLevel.NONE).simulated_s
    assert uncontended == pytest.approx(plan.predicted_s, rel=1e-9)


@settings(max_examples=12, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.2, 0.9),
    st.floats(0.2, 0.9),
    st.booleans(),
    st.sampled_from(["static", "sync", "async"]),
    st.sampled_from([1, 2]),
)
def test_cpu_with_three_tiers_matches_exhaustive_search(
    graph: Graph, dram: float, cxl: float, cxl_kernel: bool, formulation: str, window: int
) -> None:
    """Every tier a kernel tier, or the middle one (cxl) reached by copies only."""
    total = int(graph.sizes_bytes.sum())
    platform = cpu3(int(total * dram), int(total * cxl), 10 * total)
    if not cxl_kernel:
        platform = dataclasses.replace(platform, kernel_tiers=("dram", "pmm"))
    _check(graph, platform, formulation, window)


@settings(max_examples=12, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.3, 1.0),
    st.floats(0.2, 0.9),
    st.booleans(),
    st.sampled_from(["static", "sync", "async"]),
    st.sampled_from([1, 2]),
)
def test_gpu_with_host_and_nvme_matches_exhaustive_search(
    graph: Graph, device: float, host: float, direct: bool, formulation: str, window: int
) -> None:
    total = int(graph.sizes_bytes.sum())
    platform = gpu3(int(total * device), int(total * host), 10 * total, direct=direct)
    _check(graph, platform, formulation, window)


@pytest.mark.parametrize("formulation", ["static", "sync", "async"])
@pytest.mark.parametrize(("device_mb", "host_mb"), [(120, 60), (160, 40), (220, 220)])
def test_tiny_step_on_a_gpu_with_host_and_nvme(
    formulation: str, device_mb: int, host_mb: int
) -> None:
    platform = gpu3(device_mb * MB, host_mb * MB, 10_000 * MB, direct=False)
    _check(tiny_step(), platform, formulation, 2)


def test_two_tier_catalogue_is_autotms_twelve_edges() -> None:
    cat = build_catalogue(["F", "S"], [True, True], [True, False], lambda s, d: True)
    assert [cat.state_name(s) for s in range(cat.n_states)] == ["F", "F+S", "S"]
    expected = (
        "stay F->F, stay F+S->F+S, stay S->S, fetch S->F+S, inval F+S->F, fetch-inval S->F, "
        "keep F->F, keep F+S->F+S, keep S->S, write F->F+S, write-drop F->S, drop F+S->S"
    )
    assert [e.name for e in cat.edges] == expected.split(", ")
    assert list(cat.access) == [0, 0, 1]


def test_catalogue_follows_copy_paths_and_capacity() -> None:
    paths = {(0, 1), (1, 0), (1, 2), (2, 1)}  # device - host - nvme, no device <-> nvme
    cat = build_catalogue(
        ["d", "h", "n"], [True, False, False], [True, True, False], lambda s, d: (s, d) in paths
    )
    names = {e.name for e in cat.edges}
    assert "fetch n->h+n" in names and "fetch n->d+n" not in names  # staged through h
    assert "write d->d+n" not in names and "write d->d+h" in names
    assert "drop h+n->n" in names and "drop h+n->h" not in names  # n is never freed
    assert list(cat.access) == [0 if 0 in s else -1 for s in cat.states]
    for e in cat.edges:
        src, dst = cat.states[e.src], cat.states[e.dst]
        if e.kind is Kind.FETCH:
            assert dst == src | {e.add} and e.add < min(src)
        if e.kind in (Kind.WRITE, Kind.WRITE_DROP):
            assert e.add in dst and e.add > min(src) and dst == (src | {e.add}) - e.frees
        assert e.frees <= {0, 1}


def _graph(
    name: str, sizes_mb: dict[str, float], kernels: list[tuple[str, str, str, float]]
) -> Graph:
    """Tensors ``sizes_mb`` (names starting with w are weights) and forward kernels
    ``(name, inputs, outputs, flop)``, inputs and outputs comma-separated."""
    tensors = [
        Tensor(t, int(mb * MB), Role.WEIGHT if t.startswith("w") else Role.ACTIVATION)
        for t, mb in sizes_mb.items()
    ]
    ops = [
        Kernel(
            k,
            "relu",
            tuple(filter(None, i.split(","))),
            tuple(filter(None, o.split(","))),
            Phase.FORWARD,
            int(flop),
        )
        for k, i, o, flop in kernels
    ]
    return Graph(name, tensors, ops)


def test_a_copy_after_the_last_kernel_holds_its_tier_there() -> None:
    """Writing w back to the host after the last kernel needs room on the host during it,
    where y still is: 10 + 20 MB on a 25 MB host, so no plan fits."""
    graph = _graph(
        "last-write",
        {"w": 10, "p": 35, "y": 20, "b": 25},
        [("k0", "", "p", 0), ("k1", "w", "y", 0), ("k2", "w", "b", 0), ("k3", "w,y", "", 0)],
    )
    _check(graph, gpu3(40 * MB, 25 * MB, 10**10, nvme_paths=False), "sync", 1)


def test_an_eviction_beside_a_fetch_copies_from_a_tier_already_there() -> None:
    """At k1 w1 is fetched into DRAM and written to CXL at once: the write comes from PMM."""
    graph = _graph(
        "fetch-and-write",
        {"w0": 5, "w1": 4, "a0": 37, "a1": 16},
        [
            ("k0", "w1", "a0", 0),
            ("k1", "", "a1", 16_468_676_472),
            ("k2", "w1", "", 0),
            ("k3", "w0", "", 0),
            ("k4", "w1", "", 0),
        ],
    )
    _check(graph, cpu3(44_612_687, 43_286_006, 100_132_213), "async", 1)


def test_a_write_back_after_the_last_update_counts_besides_its_stale_copy() -> None:
    """w1 is updated in place by the last kernel; fetching it from the host for that and
    writing it back would hold 2 x 10 MB of the 28.9 MB host at k3 beside w2's 15 MB (the
    conservative count both the MILP and the search make), so w1 stays on the device."""
    graph = _graph(
        "write-back",
        {"w0": 24, "w1": 10, "w2": 15, "a0": 13, "a1": 12, "a2": 36, "a3": 11},
        [
            ("k0", "w2", "a0", 0),
            ("k1", "w0", "a1", 39_935_239_064),
            ("k2", "a0", "a2", 0),
            ("k3", "a1", "a3", 0),
        ],
    )
    graph = Graph(
        graph.name,
        list(graph.tensors),
        [*graph.kernels[:3], dataclasses.replace(graph.kernels[3], updates=("w1",))],
    )
    platform = gpu3(67_292_529, 28_881_273, 106_583_619)
    _check(graph, platform, "sync", 1)


def test_static_plans_when_no_heuristic_finds_a_start() -> None:
    """Greedy and first-touch overflow the 15 MB PMM; the MILP keeps everything in DRAM."""
    graph = _graph(
        "no-start",
        {"w": 10, "a": 20, "b": 20},
        [("k0", "w", "a", 1e12), ("k1", "a", "b", 1e12)],
    )
    _check(graph, cpu3(60 * MB, 60 * MB, 15 * MB), "static", 1)


def test_an_in_place_update_keeps_the_copy_it_updates() -> None:
    """From CXL + PMM with CXL reached by copies only, the update writes PMM and keeps it."""
    cat = build_catalogue(
        ["d", "c", "p"], [True, False, True], [True, True, False], lambda s, d: True
    )
    names = {e.name for e in cat.edges if e.kind is Kind.INVAL}
    assert "inval c+p->p" in names and "inval c+p->c" not in names


# ---------------------------------------------------------------------- dominated tiers


@settings(max_examples=12, deadline=None)
@given(
    tiny_graphs,
    st.floats(0.3, 1.0),
    st.booleans(),
    st.sampled_from(["static", "sync", "async"]),
    st.sampled_from([1, 2]),
)
def test_a_gpu_whose_host_holds_everything_plans_without_its_nvme(
    graph: Graph, device: float, direct: bool, formulation: str, window: int
) -> None:
    """Host memory with room for every tensor, faster to and from every tier than the drive:
    the MILP leaves the drive out, and its optimum is still the exhaustive search's, which
    tries the drive too."""
    total = int(graph.sizes_bytes.sum())
    platform = gpu3(int(total * device), 2 * total, 10 * total, direct=direct)
    assert usable_tiers(CostModel(graph, platform)) == (True, True, False)
    _check(graph, platform, formulation, window)


def test_a_tier_is_left_out_only_where_another_dominates_it() -> None:
    g = tiny_step()
    total = int(g.sizes_bytes.sum())
    roomy = gpu3(total, 2 * total, 10 * total, direct=True)
    assert dominator(CostModel(g, roomy), 2) == 1
    assert dominator(CostModel(g, roomy), 1) == -1  # the drive copies to the device slower
    # the host's capacity can bind: it may not take the drive's tensors too
    tight = gpu3(total, total // 2, 10 * total, direct=True)
    assert usable_tiers(CostModel(g, tight)) == (True, True, True)
    # the drive copies to the device faster than the host does
    fast = tuple(
        dataclasses.replace(p, sync_bw_bytes_per_s=40e9, async_bw_bytes_per_s=40e9)
        if (p.src, p.dst) == ("nvme", "device")
        else p
        for p in roomy.copy_paths
    )
    faster = dataclasses.replace(roomy, copy_paths=fast)
    assert usable_tiers(CostModel(g, faster)) == (True, True, True)
    # kernels read the drive
    reached = dataclasses.replace(roomy, kernel_tiers=("device", "nvme"))
    assert usable_tiers(CostModel(g, reached)) == (True, True, True)


@pytest.mark.parametrize("formulation", ["sync", "async"])
def test_leaving_a_dominated_tier_out_shrinks_the_model_and_keeps_its_optimum(
    formulation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = tiny_step()
    total = int(g.sizes_bytes.sum())
    platform = gpu3(170 * MB, 2 * total, 10 * total, direct=True)  # f3 needs 160 MB
    settings = PlanSettings(capacity=Capacity.of_bytes(170 * MB), gap=1e-9, layout=False, window=2)
    cost = CostModel(g, platform)
    assert catalogue_of(cost).n_states == 3  # device, host, both
    pruned = plan_milp(g, platform, settings, formulation)
    monkeypatch.setattr(build, "usable_tiers", lambda c: (True,) * len(c.platform.tiers))
    assert catalogue_of(cost).n_states == 7
    whole = plan_milp(g, platform, settings, formulation)
    assert pruned.stats is not None and whole.stats is not None
    assert pruned.stats.variables < whole.stats.variables
    assert pruned.predicted_s == pytest.approx(whole.predicted_s, rel=1e-9)
