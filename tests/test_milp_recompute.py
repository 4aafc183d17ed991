"""The placement MILP that also recomputes (tmsim.planners.milp.formulation.recompute): where it may make a
tensor again, ``remat`` against exhaustive search, the joint formulations containing both
movement alone and recomputation alone, and their plans through the validator and replay."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from remat_brute import isclose, points, rc_brute, remat_brute

import tmsim
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners.milp.chain.plan import plan_milp, plan_milp_at_depth, plan_milp_chain
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.candidates import recomputable
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.settings import PlanSettings
from tmsim.sim import replay
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor

MB = 1_000_000
F, B, U = Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE
PRESETS = ("cascadelake-optane", "rtx2080ti-pcie3")


def training_chain(sizes: list[int], flops: list[int], skip: bool, shrink: int = 1) -> Graph:
    """A forward chain ``x -> a0 -> ... -> a{n-1}`` (``a0`` a convolution with weight ``w``,
    the others element-wise, each also reading ``a{i-2}`` with ``skip``), then its backward
    pass in reverse, each step reading its layer's output (its gradients ``shrink`` times
    smaller), and the weight's update."""
    n = len(sizes)
    tensors = [Tensor("x", 1 * MB, Role.INPUT), Tensor("w", 1 * MB, Role.WEIGHT)]
    tensors += [Tensor(f"a{i}", s * MB, Role.ACTIVATION) for i, s in enumerate(sizes)]
    tensors += [
        Tensor(f"g{i}", max(s * MB // shrink, 1), Role.ACTIVATION) for i, s in enumerate(sizes)
    ]
    tensors.append(Tensor("dw", 2 * MB, Role.GRADIENT))
    kernels = [Kernel("f0", "conv2d", ("x", "w"), ("a0",), F, flops[0])]
    for i in range(1, n):
        ins = (f"a{i - 1}", f"a{i - 2}") if skip and i >= 2 else (f"a{i - 1}",)
        kernels.append(
            Kernel(
                f"f{i}",
                "add" if len(ins) > 1 else "relu",
                ins,
                (f"a{i}",),
                F,
                flops[i % len(flops)],
            )
        )
    kernels.append(Kernel("loss", "relu_backward", (f"a{n - 1}",), (f"g{n - 1}",), B, 10**6))
    for i in range(n - 1, 0, -1):
        kernels.append(
            Kernel(f"b{i}", "relu_backward", (f"g{i}", f"a{i}"), (f"g{i - 1}",), B, 10**6)
        )
    kernels.append(Kernel("b0", "conv2d_backward_weight", ("g0", "x"), ("dw",), B, flops[0]))
    kernels.append(Kernel("sgd", "sgd_momentum", ("dw",), (), U, 10**6, updates=("w",)))
    return Graph("training-chain", tensors, kernels)


chains = st.builds(
    training_chain,
    st.lists(st.integers(1, 40), min_size=3, max_size=6),
    st.lists(st.integers(0, 4 * 10**10), min_size=1, max_size=3),
    st.booleans(),
    st.sampled_from([1, 8]),
)


def _settings(limit: int, depth: int, **more: object) -> PlanSettings:
    return PlanSettings(
        capacity=Capacity.of_bytes(limit),
        layout=False,
        gap=0.0,
        time_limit_s=None,
        recompute_depth=depth,
        **more,  # type: ignore[arg-type]
    )


def _value(graph: Graph, preset: str, formulation: Formulation, limit: int, depth: int) -> float:
    """The exact optimum of ``formulation``'s own model (no chain, no fallback), inf if
    infeasible."""
    cost = CostModel(graph, load_preset(preset))
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    model = build_model(cost, 1, formulation, limits, relax=False, depth=depth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.problem.solve(solver="HIGHS", mip_rel_gap=0.0, mip_abs_gap=0.0)
    return float(model.problem.value) if model.problem.status == cp.OPTIMAL else math.inf


# ------------------------------------------------------------------ where, by hand
def test_points_and_supports_by_hand() -> None:
    g = training_chain([10, 10, 10], [10**9], False)
    cost = CostModel(g, load_preset(PRESETS[0]))
    name = {t.name: i for i, t in enumerate(g.tensors)}
    kernel = {k.name: i for i, k in enumerate(g.kernels)}

    def pairs(ts: np.ndarray, ks: np.ndarray) -> set[tuple[str, str]]:
        return {(g.tensors[t].name, g.kernels[k].name) for t, k in zip(ts, ks, strict=True)}

    one = recomputable(cost, 1)
    # a0..a2 come from forward kernels that update nothing; gradients are not candidates
    assert [g.tensors[t].name for t in np.flatnonzero(one.candidate)] == ["a0", "a1", "a2"]
    # kernels: f0 f1 f2 loss b2 b1 b0 sgd. a1 is used by f2 and again by b1, kernels apart:
    # made again there; a2 is used by the loss and then by b2 right after (nothing to free
    # between); a0 only by f1
    assert pairs(one.point_tensor, one.point_kernel) == {("a1", "b1")}
    # what that producer (f1) reads there: a0
    assert pairs(one.support_tensor, one.support_kernel) == {("a0", "b1")}
    # a0 dies at f1; reading it at b1 extends it, so it may be discarded from its producer on
    assert one.discard_from[name["a0"]] == kernel["f0"]
    assert one.discard_from[name["x"]] == len(g.kernels)  # never: x lives to b0 anyway
    two = recomputable(cost, 2)
    # one level deeper: a0 made again at b1 too, from what f0 reads, x and w
    assert pairs(two.point_tensor, two.point_kernel) == {("a1", "b1"), ("a0", "b1")}
    assert pairs(two.support_tensor, two.support_kernel) == {
        ("a0", "b1"),
        ("x", "b1"),
        ("w", "b1"),
    }
    # the search's own reading of the rules gives the same points
    for depth in (1, 2, 3):
        rec = recomputable(cost, depth)
        assert points(cost, depth) == sorted(
            zip(rec.point_tensor.tolist(), rec.point_kernel.tolist(), strict=True)
        )
    with pytest.raises(ValueError, match="at least 1"):
        recomputable(cost, 0)
    with pytest.raises(TmsimError, match="recompute_depth"):
        PlanSettings(recompute_depth=0)


# ------------------------------------------------------------------ exactness
@settings(max_examples=30, deadline=None)
@given(chains, st.floats(0.5, 1.02), st.sampled_from(PRESETS), st.integers(1, 3))
def test_remat_is_the_exhaustive_optimum(
    graph: Graph, share: float, preset: str, depth: int
) -> None:
    platform = load_preset(preset)
    cost = CostModel(graph, platform)
    if len(points(cost, depth)) > 12:
        depth = 1
    limit = int(share * graph.peak_live_bytes)
    expected = remat_brute(cost, limit, depth)
    try:  # at this depth alone, as the brute force searches (no deepening)
        got: float | None = plan_milp_at_depth(
            graph, platform, _settings(limit, depth), Formulation.REMAT
        ).predicted_s
    except TmsimError:
        got = None
    assert isclose(got, expected), (got, expected)


small_chains = st.builds(
    training_chain,
    st.lists(st.integers(1, 40), min_size=3, max_size=4),
    st.lists(st.integers(0, 4 * 10**10), min_size=1, max_size=3),
    st.booleans(),
    st.sampled_from([1, 8]),
)


@settings(max_examples=12, deadline=None)
@given(small_chains, st.floats(0.3, 1.0), st.integers(1, 2))
def test_static_rc_is_the_exhaustive_optimum_on_optane(
    graph: Graph, share: float, depth: int
) -> None:
    """Every tensor in DRAM or PMM for the whole step, and what is in DRAM dropped and made
    again: the MILP (its chain: static, remat, static-rc) against every placement and
    schedule."""
    platform = load_preset(PRESETS[0])
    cost = CostModel(graph, platform)
    limit = int(share * graph.peak_live_bytes)
    expected = rc_brute(cost, limit, depth, placements=True)
    try:  # at this depth alone, as the brute force searches (no deepening)
        got: float | None = plan_milp_at_depth(
            graph, platform, _settings(limit, depth), Formulation.STATIC_RC
        ).predicted_s
    except TmsimError:
        got = None
    assert isclose(got, expected), (got, expected)


@settings(max_examples=15, deadline=None)
@given(chains, st.floats(0.5, 1.0), st.sampled_from(PRESETS), st.integers(1, 2))
def test_each_joint_formulation_contains_movement_alone_and_recomputation_alone(
    graph: Graph, share: float, preset: str, depth: int
) -> None:
    """Each ``-rc`` model, solved exactly on its own, is no worse than the formulation without
    recomputation and than ``remat``: its plans include theirs."""
    limit = int(share * graph.peak_live_bytes)
    remat = _value(graph, preset, Formulation.REMAT, limit, depth)
    for joint, alone in (
        (Formulation.STATIC_RC, Formulation.STATIC),
        (Formulation.SYNC_RC, Formulation.SYNC),
        (Formulation.ASYNC_RC, Formulation.ASYNC),
    ):
        both = _value(graph, preset, joint, limit, depth)
        best = min(remat, _value(graph, preset, alone, limit, depth))
        assert both <= best * (1 + 1e-6) or both == best == math.inf, (joint, both, best)


# ------------------------------------------------------------------ plans
@pytest.mark.parametrize("preset", [pytest.param(PRESETS[0], marks=pytest.mark.slow), PRESETS[1]])
def test_joint_plans_validate_and_replay_to_their_prediction(preset: str) -> None:
    platform = load_preset(preset)
    graph = tmsim.graph("resnet50", batch=4)
    # a limit on work, not on time: sync-rc's plan recomputes from its first points on, and on
    # the GPU its branch and bound would run on to a 60 s limit 16% from its bound
    opts = PlanSettings(capacity=Capacity.parse("1:1"), time_limit_s=None, node_limit=100, window=2)
    plans = plan_milp_chain(graph, platform, opts, [Formulation.SYNC_RC])
    sync, joint = plans[Formulation.SYNC], plans[Formulation.SYNC_RC]
    assert not isinstance(sync, Exception) and not isinstance(joint, Exception)
    assert joint.predicted_s <= sync.predicted_s * (1 + 1e-9)
    assert joint.recomputes, "recomputing BN outputs pays at half the peak"
    check = tmsim.validate(joint, graph, platform)
    assert check.ok, check.errors[:3]
    trace = replay(joint, graph, platform, level=InterferenceLevel.NONE)
    assert trace.simulated_s == pytest.approx(joint.predicted_s, rel=1e-9)
    assert len(trace.recomputes()) == len(joint.recomputes)


def test_the_recomputing_formulations_fall_back_to_the_heuristics_outside_their_chains() -> None:
    """sqrt(N) checkpointing of a 16-layer chain recomputes whole segments before the backward
    pass: chains of producers longer than one. At 0.85 of the peak no plan of one level fits,
    so remat at depth 1 returns the checkpointing plan, and the joint formulation is no worse;
    their gaps are against the kernel-time bound, which holds for every plan."""
    from test_recompute import chain

    graph, platform = chain(16), load_preset(PRESETS[0])
    limit = int(0.85 * graph.peak_live_bytes)
    opts = PlanSettings(capacity=Capacity.of_bytes(limit), recompute_depth=1, time_limit_s=None)
    checkpoint = tmsim.plan(graph, platform, "checkpoint", settings=opts)
    remat = plan_milp(graph, platform, opts, Formulation.REMAT)
    assert remat.planner == "milp-remat" and remat.stats is not None
    assert remat.stats.status.startswith("fallback to checkpoint (heuristic)")
    assert remat.predicted_s == checkpoint.predicted_s and remat.recomputes == checkpoint.recomputes
    floor = CostModel(graph, platform).kernel_time_range_s()[0].sum()
    assert remat.stats.bound == pytest.approx(floor)
    assert tmsim.validate(remat, graph, platform).ok
    joint = plan_milp(graph, platform, opts, Formulation.SYNC_RC)
    assert joint.predicted_s <= checkpoint.predicted_s * (1 + 1e-9)
    assert tmsim.validate(joint, graph, platform).ok


@pytest.mark.parametrize("share", [0.9, 0.7])
def test_static_rc_on_the_gpu_keeps_what_kernels_read_on_the_device(share: float) -> None:
    """A static formulation's only gadgets of a weight are the supports of its recomputes,
    none at its uses: the weights and the input once started on the host, where the device
    cannot read them and the model counted their reads as free (an invalid plan of infinite
    step time at 0.7 of ResNet-50 b4's peak). Now a plan validates, or none fits."""
    graph, platform = tmsim.graph("resnet50", batch=4), load_preset(PRESETS[1])
    opts = PlanSettings(
        capacity=Capacity.of_bytes(int(share * graph.peak_live_bytes)),
        time_limit_s=None,
        node_limit=200,
        warm_start=False,
    )
    try:
        plan = plan_milp(graph, platform, opts, Formulation.STATIC_RC)
    except TmsimError as exc:
        assert share == 0.7 and "no static-rc plan fits" in str(exc)
        return
    assert math.isfinite(plan.predicted_s)
    check = tmsim.validate(plan, graph, platform)
    assert check.ok, check.errors[:3]
    assert plan.stats is not None and plan.stats.status == "optimal"


def test_a_budget_infeasible_at_the_depth_given_is_planned_deeper_or_refused_naming_depths() -> (
    None
):
    """No remat plan of a 16-layer chain fits 70% of its peak on the GPU at depth 1 or 2; the
    planner deepens to 4, where one does, and records the depth; at 50% none fits at any
    depth up to the cap, and the refusal lists every depth tried. The chain does the same."""
    from test_recompute import chain

    from tmsim.errors import InfeasibleError
    from tmsim.planners.milp.chain.plan import MAX_DEEPENED_DEPTH
    from tmsim.plans.validate import validate

    graph, gpu = chain(16), load_preset("rtx2080ti-pcie3")

    def opts(share: float) -> PlanSettings:
        limit = Capacity.of_bytes(int(share * graph.peak_live_bytes))
        return PlanSettings(capacity=limit, recompute_depth=1, time_limit_s=None)

    made = plan_milp(graph, gpu, opts(0.7), Formulation.REMAT)
    assert made.options["recompute_depth"] == 4 and made.recomputes
    assert validate(made, graph, gpu).ok
    with pytest.raises(InfeasibleError, match="at recompute depths 1, 2, 4, 8 "):
        plan_milp(graph, gpu, opts(0.5), Formulation.REMAT)
    assert MAX_DEEPENED_DEPTH == 8
    seen: list[str] = []
    chained = plan_milp_chain(
        graph, gpu, opts(0.7), [Formulation.REMAT], solved=lambda f, v: seen.append(f.value)
    )
    got = chained[Formulation.REMAT]
    assert not isinstance(got, Exception) and got.options["recompute_depth"] == 4
    assert seen == ["remat"]  # handed over once, with the plan the deeper depth made
