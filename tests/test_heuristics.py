"""Heuristic planners: hand-checked small cases, orderings on zoo graphs, random graphs."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_validate import train_graph

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity, fast_limit_bytes
from tmsim.cost import CostModel
from tmsim.errors import InfeasibleError, NoPlanError, TmsimError
from tmsim.planners.heuristics import (
    REGISTRY,
    plan_all_fast,
    plan_all_slow,
    plan_first_touch,
    plan_greedy,
    plan_vdnn,
)
from tmsim.planners.settings import PlanSettings
from tmsim.plans.files import plan_from_dict, plan_to_dict
from tmsim.plans.validate import validate
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import training_graph_of

CPU = load_preset("cascadelake-optane")
GPU = load_preset("rtx2080ti-pcie3")
CPU_ONLY = ("all-slow", "first-touch", "greedy")
REL = 1e-9


@cache
def zoo(name: str, batch: int) -> Graph:
    return training_graph_of(name, batch)


def checked(plan_fn: object, graph: Graph, platform: Platform, opts: PlanSettings) -> float:
    """Plan, validate, and return the predicted time."""
    assert callable(plan_fn)
    plan = plan_fn(graph, platform, opts)
    v = validate(plan, graph, platform)
    assert v.ok, v.errors[:5]
    assert v.fast_peak_bytes <= plan.fast_limit_bytes
    return float(plan.predicted_s)


def operand_bytes(graph: Graph) -> np.ndarray:
    ptr, tensor = graph.operand_csr
    kernel = np.repeat(np.arange(len(graph.kernels)), np.diff(ptr))
    return np.bincount(kernel, weights=graph.sizes_bytes[tensor], minlength=len(graph.kernels))


# ---------------------------------------------------------------------- hand-checked cases
def test_first_touch_on_mlp_by_hand(mlp: Graph) -> None:
    # Weights first (24 B at every kernel), then x (100 B: no room), h1 (44 B at kernels 0-1),
    # h2 (44 + 32 > 64 at kernel 1: slow), y (24 + 40 = 64 at kernel 2: fits exactly).
    plan = plan_first_touch(mlp, CPU, PlanSettings(capacity=Capacity.of_bytes(64)))
    assert plan.operand_tiers == (
        ("PMM", "DRAM", "DRAM"),  # fc1: x, w1, h1
        ("DRAM", "DRAM", "PMM"),  # fc2: h1, w2, h2
        ("PMM", "DRAM", "DRAM"),  # fc3: h2, w3, y
    )
    assert plan.initial_tiers == {"x": ("PMM",), "w1": ("DRAM",), "w2": ("DRAM",), "w3": ("DRAM",)}
    assert plan.moves == ()
    v = validate(plan, mlp, CPU)
    assert v.ok and v.fast_peak_bytes == 64 and v.moved_bytes == 0

    # The predicted time by hand from the cost model's per-byte rates.
    c = CostModel(mlp, CPU)
    r, w = c.read_s_per_byte, c.write_s_per_byte
    fast, slow = 0, 1
    assert r[0, slow] == pytest.approx(1 / (37.6e9 * 0.8))  # PMM read, matmul memory efficiency
    mem = [
        100 * r[0, slow] + 12 * r[0, fast] + 20 * w[0, fast],
        20 * r[1, fast] + 8 * r[1, fast] + 32 * w[1, slow],
        32 * r[2, slow] + 4 * r[2, fast] + 40 * w[2, fast],
    ]
    expected = sum(max(c.compute_s[k], mem[k]) + c.launch_s for k in range(3))
    assert plan.predicted_s == pytest.approx(expected, rel=1e-12)

    # One byte less and y no longer fits.
    tighter = plan_first_touch(mlp, CPU, PlanSettings(capacity=Capacity.of_bytes(63)))
    assert tighter.operand_tiers[2] == ("PMM", "DRAM", "PMM")
    assert tighter.predicted_s > plan.predicted_s


def test_all_fast_and_all_slow_on_mlp(mlp: Graph) -> None:
    fast = plan_all_fast(mlp, CPU, PlanSettings(capacity=Capacity.of_bytes(10)))
    assert fast.fast_limit_bytes == mlp.peak_live_bytes == 144  # raised to what it uses
    assert {t for row in fast.operand_tiers for t in row} == {"DRAM"}
    slow = plan_all_slow(mlp, CPU, PlanSettings(capacity=Capacity.of_bytes(10)))
    assert slow.fast_limit_bytes == 10
    assert {t for row in slow.operand_tiers for t in row} == {"PMM"}
    assert validate(slow, mlp, CPU).fast_peak_bytes == 0
    big = plan_all_fast(mlp, GPU)
    assert big.fast_limit_bytes == GPU.tiers[0].capacity_bytes  # the default: the real device
    assert fast.predicted_s < slow.predicted_s
    tiny = replace(CPU, tiers=(replace(CPU.tiers[0], capacity_bytes=143), *CPU.tiers[1:]))
    with pytest.raises(NoPlanError, match="tier 'DRAM' holds 143 bytes but the step needs 144"):
        plan_all_fast(mlp, tiny)


@pytest.mark.parametrize("limit", [1, 24, 44, 64, 76, 100, 144])
def test_cpu_planners_on_hand_graphs(mlp: Graph, diamond: Graph, limit: int) -> None:
    for g in (mlp, diamond, train_graph()):
        opts = PlanSettings(capacity=Capacity.of_bytes(limit))
        t = {name: checked(REGISTRY[name], g, CPU, opts) for name in ("all-fast", *CPU_ONLY)}
        assert t["all-fast"] <= min(t.values()) * (1 + REL)
        assert t["first-touch"] <= t["all-slow"] * (1 + REL)
        assert t["greedy"] <= t["all-slow"] * (1 + REL)
        assert t["greedy"] <= t["first-touch"] * (1 + REL)


def test_vdnn_offloads_what_it_must_by_hand() -> None:
    g = train_graph()  # live bytes per kernel: 136 160 168 192 200 152 48
    moves = lambda p: [(m.tensor, m.src, m.dst, m.kernel, m.mode.value) for m in p.moves]  # noqa: E731
    # Over the limit at kernel 4 only: x (idle from kernel 1 to 4) goes, fetched just in time.
    plan = plan_vdnn(g, GPU, PlanSettings(capacity=Capacity.of_bytes(199)))
    assert moves(plan) == [("x", "device", "host", 0, "async"), ("x", "host", "device", 5, "sync")]
    # x away for kernels 1-4: 136 96 104 128 136 152 48
    assert validate(plan, g, GPU).fast_peak_bytes == 152
    # Over at kernels 3 and 4: first the activation a (kernels 2-3), then x.
    plan = plan_vdnn(g, GPU, PlanSettings(capacity=Capacity.of_bytes(180)))
    assert moves(plan) == [
        ("x", "device", "host", 0, "async"),
        ("a", "device", "host", 1, "async"),
        ("a", "host", "device", 4, "sync"),
        ("x", "host", "device", 5, "sync"),
    ]
    assert validate(plan, g, GPU).ok
    # Asynchronous copies of tens of bytes hide behind 5 us kernels; the synchronous fetches
    # of a and x (104 bytes at the 12 GB/s of PCIe 3.0) add their own time, each after the
    # host's read latency (101.5 ns; the device's write latency is not modelled).
    fastest = plan_all_fast(g, GPU).predicted_s
    assert plan.predicted_s == pytest.approx(fastest + 104 / 12e9 + 2 * 101.5e-9, rel=1e-12)
    # vDNN-all with no size threshold offloads a even with room to spare, prefetching ahead.
    plan = plan_vdnn(g, GPU, PlanSettings(offload_all=True, offload_min_bytes=0))
    assert moves(plan) == [("a", "device", "host", 1, "async"), ("a", "host", "device", 3, "async")]
    assert validate(plan, g, GPU).ok
    assert plan.predicted_s == pytest.approx(fastest, rel=1e-12)


def test_vdnn_down_to_the_operand_bound_then_infeasible() -> None:
    g = train_graph()
    need = int(operand_bytes(g).max())  # f1 and b1 each need 120 bytes
    assert need == 120
    plan = plan_vdnn(g, GPU, PlanSettings(capacity=Capacity.of_bytes(need)))
    v = validate(plan, g, GPU)
    assert v.ok and v.fast_peak_bytes <= need
    assert plan.initial_tiers["m"] == ("host",)  # optimizer state waits on the host
    with pytest.raises(InfeasibleError, match=r"kernel 0 \('f1'\) needs 120 bytes .* 1 bytes more"):
        plan_vdnn(g, GPU, PlanSettings(capacity=Capacity.of_bytes(need - 1)))


def test_vdnn_without_room_to_offload_says_where(mlp: Graph) -> None:
    with pytest.raises(InfeasibleError, match=r"kernel 0 \('fc1'\) needs 132 bytes"):
        plan_vdnn(mlp, GPU, PlanSettings(capacity=Capacity.of_bytes(100)))
    # On a CPU other plans exist, so it is not called infeasible there.
    with pytest.raises(NoPlanError, match="no plan that keeps operands") as info:
        plan_vdnn(mlp, CPU, PlanSettings(capacity=Capacity.of_bytes(100)))
    assert not isinstance(info.value, InfeasibleError)
    # Every kernel's operands fit (80 bytes at most), but at k1 x, h1 and h2 (88 bytes) are
    # all live and none is idle long enough to leave.
    chain = Graph(
        "chain",
        [
            Tensor("x", 40, Role.INPUT),
            Tensor("h1", 40, Role.ACTIVATION),
            Tensor("h2", 8, Role.ACTIVATION),
            Tensor("h3", 4, Role.ACTIVATION),
        ],
        [
            Kernel("k0", "relu", ("x",), ("h1",), Phase.FORWARD),
            Kernel("k1", "relu", ("x",), ("h2",), Phase.FORWARD),
            Kernel("k2", "add", ("h1", "h2"), ("h3",), Phase.FORWARD),
        ],
    )
    with pytest.raises(NoPlanError, match=r"at kernel 1 \('k1'\) 88 bytes stay there \(3 too many"):
        plan_vdnn(chain, GPU, PlanSettings(capacity=Capacity.of_bytes(85)))
    assert validate(
        plan_vdnn(chain, GPU, PlanSettings(capacity=Capacity.of_bytes(88))), chain, GPU
    ).ok


def test_gpu_rejects_planners_that_use_host_memory(mlp: Graph) -> None:
    for name in CPU_ONLY:
        with pytest.raises(TmsimError, match=f"{name}: kernels on platform 'rtx2080ti-pcie3' "):
            REGISTRY[name](mlp, GPU, None)


def test_options_registry_and_json(mlp: Graph) -> None:
    assert set(REGISTRY) == {
        "all-fast",
        "all-slow",
        "first-touch",
        "vdnn",
        "greedy",
        "checkpoint",
        "selective",
    }
    with pytest.raises(TmsimError, match="prefetch_ahead"):
        PlanSettings(prefetch_ahead=0)
    with pytest.raises(TmsimError, match="exactly one"):
        Capacity(ratio=(1.0, 1.0), size_bytes=10)
    opts = PlanSettings(capacity=Capacity.parse("4:1"), offload_min_bytes=0)
    g = zoo("resnet50", 2)
    plan = plan_vdnn(g, GPU, opts)
    assert plan.planner == "vdnn" and plan.options == opts.to_dict()
    back = plan_from_dict(plan_to_dict(plan))
    assert back == plan and validate(back, g, GPU).ok


# ---------------------------------------------------------------------- zoo graphs
ZOO = [("resnet50", 2), ("resnet50", 8), ("densenet121", 2)]


@pytest.mark.parametrize(("name", "batch"), ZOO)
@pytest.mark.parametrize("cap", ["1:1", "4:1", "32MiB"])
def test_cpu_heuristics_on_zoo(name: str, batch: int, cap: str) -> None:
    g = zoo(name, batch)
    opts = (
        PlanSettings(capacity=Capacity.of_bytes(32 << 20))
        if cap == "32MiB"
        else PlanSettings(capacity=None if cap is None else Capacity.parse(cap))
    )
    t = {n: checked(REGISTRY[n], g, CPU, opts) for n in ("all-fast", *CPU_ONLY)}
    assert t["all-fast"] < t["greedy"] <= t["first-touch"] < t["all-slow"]
    plan = plan_first_touch(g, CPU, opts)
    assert plan.fast_limit_bytes == fast_limit_bytes(g, CPU, opts.capacity)


@pytest.mark.parametrize(("name", "batch"), ZOO)
@pytest.mark.parametrize("ratio", ["1:1", "4:1", "8:1"])
def test_vdnn_on_zoo(name: str, batch: int, ratio: str) -> None:
    g = zoo(name, batch)
    opts = PlanSettings(capacity=None if ratio is None else Capacity.parse(ratio))
    fastest = checked(plan_all_fast, g, GPU, opts)
    assert checked(plan_vdnn, g, GPU, opts) > fastest
    assert checked(plan_vdnn, g, CPU, opts) > checked(plan_all_fast, g, CPU, opts)


# ---------------------------------------------------------------------- random graphs
@st.composite
def training_graphs(draw: st.DrawFn) -> Graph:
    """Random steps with sensible roles: forward, backward, then one update per weight."""
    size = st.integers(1, 64).map(lambda n: 4 * n)
    tensors: list[Tensor] = []
    kernels: list[Kernel] = []

    def tensor(prefix: str, role: Role) -> str:
        name = f"{prefix}{len(tensors)}"
        tensors.append(Tensor(name, draw(size), role))
        return name

    inputs = [tensor("x", Role.INPUT) for _ in range(draw(st.integers(1, 2)))]
    weights = [tensor("w", Role.WEIGHT) for _ in range(draw(st.integers(0, 3)))]
    moments = [tensor("m", Role.OPTIMIZER_STATE) for _ in weights]
    acts: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        ins = draw(st.lists(st.sampled_from(inputs + acts), min_size=1, max_size=2, unique=True))
        ins += draw(st.lists(st.sampled_from(weights), max_size=1)) if weights else []
        outs = tuple(tensor("a", Role.ACTIVATION) for _ in range(draw(st.integers(1, 2))))
        kernels.append(Kernel(f"f{len(kernels)}", "conv2d", tuple(ins), outs, Phase.FORWARD, 99))
        acts += outs
    grads: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        ins = draw(st.lists(st.sampled_from(acts + grads), min_size=1, max_size=2, unique=True))
        out = tensor("g", Role.GRADIENT)
        kernels.append(
            Kernel(f"b{len(kernels)}", "relu_backward", tuple(ins), (out,), Phase.BACKWARD)
        )
        grads.append(out)
    for w, m in zip(weights, moments, strict=True):
        if not draw(st.booleans()):
            continue
        src = draw(st.sampled_from(acts + inputs))
        dw = tensor("dw", Role.GRADIENT)
        kernels.append(
            Kernel(f"bw{len(kernels)}", "conv2d_backward_weight", (src,), (dw,), Phase.BACKWARD, 9)
        )
        kernels.append(
            Kernel(f"u{len(kernels)}", "sgd_momentum", (dw,), (), Phase.UPDATE, 4, (w, m))
        )
    return Graph("random", tensors, kernels)


@settings(max_examples=80, deadline=None)
@given(training_graphs(), st.floats(0.01, 1.2))
def test_every_heuristic_plan_validates_or_is_refused(g: Graph, fraction: float) -> None:
    limit = max(1, int(g.peak_live_bytes * fraction))
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), offload_min_bytes=64)
    need = float(operand_bytes(g).max())
    for platform in (CPU, GPU):
        times: dict[str, float] = {}
        for name, planner in REGISTRY.items():
            try:
                times[name] = checked(planner, g, platform, opts)
            except InfeasibleError:
                assert name == "vdnn" and platform is GPU and need > limit
            except NoPlanError:
                # checkpoint, selective: even with their recomputes the step needs more than
                # the limit
                assert name in ("vdnn", "checkpoint", "selective")
            except TmsimError as exc:
                assert platform is GPU and name in CPU_ONLY, exc
                assert "reach only tier 'device'" in str(exc)
        if platform is GPU and need > limit:
            assert "vdnn" not in times
        assert times["all-fast"] <= min(times.values()) * (1 + REL)
        if platform is CPU:
            assert times["first-touch"] <= times["all-slow"] * (1 + REL)
            assert times["greedy"] <= times["all-slow"] * (1 + REL)


@settings(max_examples=60, deadline=None)
@given(training_graphs(), st.data())
def test_every_residency_of_a_static_plan_is_needed(g: Graph, data: st.DataObject) -> None:
    plan = plan_all_fast(g, CPU)
    v = validate(plan, g, CPU)
    assert v.ok and v.fast_peak_bytes == g.peak_live_bytes
    drop = data.draw(st.integers(0, len(plan.residency) - 1))
    broken = plan.residency[:drop] + plan.residency[drop + 1 :]
    assert not validate(replace(plan, residency=broken), g, CPU).ok


@settings(max_examples=60, deadline=None)
@given(training_graphs(), st.floats(0.01, 1.2))
def test_milp_start_placement_is_the_better_heuristic_plan(g: Graph, fraction: float) -> None:
    # the MILP's static start places tensors by index, without building the two plans;
    # it must be the placement of whichever plan predicts less time (greedy on a tie)
    from tmsim.planners.milp.chain.starts import best_heuristic_tiers

    limit = max(1, int(g.peak_live_bytes * fraction))
    opts = PlanSettings(capacity=Capacity.of_bytes(limit))
    plans = []
    for planner in (plan_greedy, plan_first_touch):
        try:
            plans.append(planner(g, CPU, opts))
        except NoPlanError:
            continue
    tiers = best_heuristic_tiers(CostModel(g, CPU), limit)
    if not plans:
        assert tiers is None
        return
    best = min(plans, key=lambda p: p.predicted_s)
    index = {name: i for i, name in enumerate(CPU.tier_names)}
    expected = np.zeros(len(g.tensors), dtype=np.int64)
    for r in best.residency:
        expected[g.tensor_index(r.tensor)] = index[r.tier]
    assert tiers is not None and tiers.tolist() == expected.tolist()
