"""Plans as points of the placement MILP (:mod:`tmsim.planners.milp.formulation.projection`).

The projection inverts the read-back: a plan the MILP made projects onto the binaries it came
from (the same plan is read back, every byte and copy, at the same step time), on CPUs, GPUs,
three tiers and with host kernels, for every formulation. ZeRO-Offload's plan is a point of
every formulation on the host GPU it plans for, and, as a warm start, what a solve stopped at
once returns under the formulation's own name (LLaMA-7B b1 on ``h100-host-nvme``: at ZeRO's
own step time to the bit). Other planners' plans either project or are refused in one line.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers3 import cpu3, gpu3
from tiny_graphs import random_graph, spill_step, tiny_step

import tmsim
from hwmodels.platform import Platform
from hwmodels.timing import MoveMode
from tmsim import Capacity, PlanSettings
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.planners.milp.chain import outside
from tmsim.planners.milp.chain.outside import outside_start
from tmsim.planners.milp.chain.solve import fits
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.planners.milp.formulation.model import Model
from tmsim.planners.milp.formulation.projection import NotAPoint, project
from tmsim.planners.milp.formulation.readback import extract_plan
from tmsim.plans.values import Plan, Recompute, SolverStats
from tmsim.profiles import cost_model
from tmsim.workload.graph import Graph

MB = 1_000_000
H100 = tmsim.platform("h100-host-nvme")
#: ZeRO-Offload's device peak on :func:`gpt2` (bytes), as in test_milp_host
ZERO_PEAK = 266_922_496
EVERY = ("static", "sync", "async", "static-rc", "sync-rc", "async-rc", "remat")


@cache
def gpt2() -> Graph:
    return tmsim.graph("gpt2_small", batch=1, seq_len=128, layers=2)


def model_of(graph: Graph, platform: Platform, formulation: str, limit: int, window: int) -> Model:
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    cost = cost_model(graph, platform)
    return build_model(
        cost, window, Formulation(formulation), limits, relax=False, host_kernels=True
    )


def read_back(graph: Graph, platform: Platform, model: Model, x: np.ndarray, limit: int) -> Plan:
    """The plan binaries ``x`` of ``model`` describe (named after any formulation: the
    comparisons here leave the name out)."""
    model.x.save_value(x.astype(np.float64))
    cost = cost_model(graph, platform)
    return extract_plan(cost, model, Formulation.SYNC, {}, limit, SolverStats("x", "x"))


def decisions(plan: Plan) -> tuple[object, ...]:
    """What a plan decides, in an order that does not depend on how it was listed."""
    return (
        plan.operand_tiers,
        dict(plan.initial_tiers),
        sorted(plan.residency, key=repr),
        sorted(plan.moves, key=repr),
        sorted(plan.recomputes, key=repr),
        sorted(plan.host_kernels),
    )


def check_round_trip(
    graph: Graph, platform: Platform, formulation: str, limit: int, gap: float = 1e-6
) -> Plan | None:
    """Plan ``graph`` with ``formulation`` (window 1, no layout); where the MILP's own plan
    came back (not a heuristic's), assert that it projects onto binaries that fit and read
    back as the same plan at the same step time, and return it (None where there was none)."""
    opts = PlanSettings(
        capacity=Capacity.of_bytes(limit), gap=gap, layout=False, window=1, time_limit_s=None
    )
    try:
        plan = tmsim.plan(graph, platform, formulation, settings=opts)
    except TmsimError:
        return None
    assert plan.stats is not None
    if "(heuristic)" in plan.stats.status:
        return None  # a plan made outside the MILP (a smaller formulation's lifts: kept)
    model = model_of(graph, platform, formulation, limit, window=1)
    x = project(cost_model(graph, platform), model, plan)
    assert fits(model, x)
    back = read_back(graph, platform, model, x, limit)
    assert decisions(back) == decisions(plan)
    assert back.predicted_s == pytest.approx(plan.predicted_s, rel=1e-12)
    return plan


@pytest.mark.parametrize("formulation", EVERY)
@pytest.mark.parametrize(
    ("graph", "platform"),
    [
        (tiny_step(), "cascadelake-optane"),
        (tiny_step(), "spr-ddr5-cxl"),
        (spill_step(), "rtx2080ti-pcie3"),
        (spill_step(), "cascadelake-optane"),
        (spill_step(), "cpu3"),
        (spill_step(), "gpu3"),
    ],
    ids=["tiny-optane", "tiny-cxl", "spill-gpu", "spill-optane", "spill-cpu3", "spill-gpu3"],
)
def test_the_milps_own_plans_project_onto_the_binaries_they_came_from(
    graph: Graph, platform: str, formulation: str
) -> None:
    total, peak = int(graph.sizes_bytes.sum()), graph.peak_live_bytes
    preset = {  # a middle tier that binds too
        "cpu3": lambda: cpu3(peak, peak // 2, 10 * total),
        "gpu3": lambda: gpu3(peak, peak // 2, 10 * total),
    }
    plat = preset[platform]() if platform in preset else tmsim.platform(platform)
    made = [
        check_round_trip(graph, plat, formulation, int(graph.peak_live_bytes * s))
        for s in (0.5, 0.8)
    ]
    if formulation not in ("static", "static-rc", "remat"):
        assert any(p is not None for p in made)  # a plan of the formulation's own in each case


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 80), min_size=4, max_size=4),
    flops=st.lists(st.integers(10**6, 10**10), min_size=3, max_size=3),
    extra=st.booleans(),
    share=st.floats(0.3, 1.0),
    formulation=st.sampled_from(("sync", "async", "sync-rc", "async-rc")),
    platform=st.sampled_from(("cascadelake-optane", "rtx2080ti-pcie3")),
)
def test_every_plan_the_milp_makes_on_a_random_step_projects_back(
    sizes: list[int], flops: list[int], extra: bool, share: float, formulation: str, platform: str
) -> None:
    graph = random_graph(sizes, flops, extra)
    limit = max(1, int(graph.peak_live_bytes * share))
    check_round_trip(graph, tmsim.platform(platform), formulation, limit)


@pytest.mark.parametrize("formulation", ["sync", "async", "sync-rc", "async-rc"])
def test_host_kernels_and_their_refreshes_project_back(formulation: str) -> None:
    """GPT-2 small on the H100 at 0.8 GB: the MILP keeps some weights the host updates on the
    device too (refreshed after their update); the projection leaves those refreshes to the
    model, which makes them again."""
    plan = check_round_trip(gpt2(), H100, formulation, 800_000_000, gap=0.01)
    assert plan is not None
    updater = {n: k for k in plan.host_kernels for n in gpt2().kernels[k].updates}
    assert any(m.src == "host" and m.kernel == updater.get(m.tensor, -2) + 1 for m in plan.moves)


@pytest.mark.parametrize("formulation", ["sync", "async", "sync-rc", "async-rc"])
@pytest.mark.parametrize(
    ("platform", "peak_bytes", "slower"),
    [("h100-host-nvme", ZERO_PEAK, (0.0099, 0.0081)), ("gh200", 263_383_552, (0.0175, 0.0016))],
)
def test_zero_offloads_plan_is_a_point_of_every_formulation_that_moves(
    formulation: str, platform: str, peak_bytes: int, slower: tuple[float, float]
) -> None:
    """At ZeRO-Offload's own device peak (window 2): the point fits, with ZeRO-Offload's
    placement, its kernels on the host and its copies (tensor, source, destination). Its copies
    beside kernels out of the window move to the window's edge, and in the synchronous
    formulations every gradient's copy is synchronous (the refreshes of the weights stay
    beside the next kernel), so the plan read back from the point is slower than
    ZeRO-Offload's by what was measured (sync, async): +0.99%, +0.81% on the H100, +1.75%,
    +0.16% on the GH200."""
    plat = tmsim.platform(platform)
    zero = tmsim.plan(gpt2(), plat, "zero-offload")
    model = model_of(gpt2(), plat, formulation, peak_bytes, window=2)
    x = project(cost_model(gpt2(), plat), model, zero)
    assert fits(model, x)
    back = read_back(gpt2(), plat, model, x, peak_bytes)
    assert back.operand_tiers == zero.operand_tiers
    assert sorted(back.host_kernels) == sorted(zero.host_kernels)
    assert sorted((m.tensor, m.src, m.dst) for m in back.moves) == sorted(
        (m.tensor, m.src, m.dst) for m in zero.moves
    )
    down = {m.mode for m in back.moves if m.src == "device"}  # the gradients' copies
    assert (MoveMode.ASYNC in down) == formulation.startswith("async")
    expected = slower[formulation.startswith("async")]
    assert back.predicted_s / zero.predicted_s - 1 == pytest.approx(expected, abs=5e-5)


def test_zero_offloads_copies_inside_the_window_are_its_own() -> None:
    """With a window wide enough for every copy ZeRO-Offload makes beside a kernel (25), the
    point is its plan: the same copies at the same kernels, the same residency; only the host
    order is the model's (by release)."""
    zero = tmsim.plan(gpt2(), H100, "zero-offload")
    model = model_of(gpt2(), H100, "async", ZERO_PEAK, window=25)
    x = project(cost_model(gpt2(), H100), model, zero)
    assert fits(model, x)
    back = read_back(gpt2(), H100, model, x, ZERO_PEAK)
    assert set(back.moves) == set(zero.moves)
    assert set(back.residency) == set(zero.residency)
    assert back.operand_tiers == zero.operand_tiers


def test_zero_infinitys_plan_projects_onto_its_twin_zero_offloads() -> None:
    """The NVMe drive is dominated by 512 GiB of host memory, so the models leave it out; the
    optimizer state ZeRO-Infinity keeps there projects onto the host: ZeRO-Offload's point."""
    cost = cost_model(gpt2(), H100)
    model = model_of(gpt2(), H100, "async", ZERO_PEAK, window=2)
    infinity = project(cost, model, tmsim.plan(gpt2(), H100, "zero-infinity"))
    offload = project(cost, model, tmsim.plan(gpt2(), H100, "zero-offload"))
    assert np.array_equal(infinity, offload)


def test_plans_no_binaries_express_are_refused_in_one_line() -> None:
    cost = cost_model(gpt2(), H100)
    zero = tmsim.plan(gpt2(), H100, "zero-offload")
    remat = model_of(gpt2(), H100, "remat", ZERO_PEAK, window=1)  # the host runs nothing
    with pytest.raises(NotAPoint, match=r"^kernel 73 \('wte.adam'\) runs on the host, which"):
        project(cost, remat, zero)
    sync = model_of(gpt2(), H100, "sync", ZERO_PEAK, window=1)
    early = replace(zero.moves[0], kernel=0)  # a gradient copied before it is made
    with pytest.raises(NotAPoint, match=r"^tensor '[^']+\.grad': a change after kernel 0, befo"):
        project(cost, sync, replace(zero, moves=(early, *zero.moves[1:])))
    with pytest.raises(NotAPoint, match=r"^zero-offload.s plan does not parse: operand_tiers"):
        project(cost, sync, replace(zero, operand_tiers=zero.operand_tiers[:-1]))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_changed_plan_projects_or_is_refused_never_a_traceback(data: st.DataObject) -> None:
    """ZeRO-Offload's plan on the H100 (three tiers, the general form) or the GH200 (two, the
    compact form), changed: moves shifted, re-moded, dropped or sent elsewhere, a residency
    cut short or kept to the end, a recompute and a host kernel added (known or not). The
    projection returns binaries or raises NotAPoint in one line; binaries that fit the model
    read back as a plan the validator accepts."""
    name = data.draw(st.sampled_from(("h100-host-nvme", "gh200")))
    plat, model = _gpt2_async(name)
    zero = tmsim.plan(gpt2(), plat, "zero-offload")
    n_k = len(gpt2().kernels)
    moves = list(zero.moves)
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(moves) - 1))
        m = moves[i]
        change = data.draw(st.sampled_from(("kernel", "mode", "drop", "tier")))
        if change == "kernel":
            moves[i] = replace(m, kernel=data.draw(st.integers(0, n_k)))
        elif change == "mode":
            moves[i] = replace(
                m, mode=MoveMode.SYNC if m.mode is MoveMode.ASYNC else MoveMode.ASYNC
            )
        elif change == "tier":
            moves[i] = replace(m, dst=data.draw(st.sampled_from(plat.tier_names)))
        elif len(moves) > 1:
            moves.pop(i)
    residency = list(zero.residency)
    j = data.draw(st.integers(0, len(residency) - 1))
    r = residency[j]
    residency[j] = replace(r, last=data.draw(st.integers(r.first, n_k - 1)))
    tensors = [t.name for t in gpt2().tensors]
    recomputes = tuple(
        Recompute(
            data.draw(st.sampled_from([*tensors, "nope"])),
            data.draw(st.integers(0, 10 * n_k)),
            tuple(data.draw(st.lists(st.sampled_from(plat.tier_names), max_size=4))),
        )
        for _ in range(data.draw(st.integers(0, 1)))
    )
    host = zero.host_kernels + tuple(data.draw(st.lists(st.integers(0, 2 * n_k), max_size=1)))
    changed = replace(
        zero,
        moves=tuple(moves),
        residency=tuple(residency),
        recomputes=recomputes,
        host_kernels=host,
    )
    try:
        x = project(cost_model(gpt2(), plat), model, changed)
    except NotAPoint as exc:
        assert "\n" not in str(exc)
        return
    assert x.dtype == np.bool_ and x.size == model.vars.count
    if fits(model, x):
        back = read_back(gpt2(), plat, model, x, ZERO_PEAK)
        check = tmsim.validate(back, gpt2(), plat)
        assert check.ok, check.errors[:3]


@cache
def _gpt2_async(platform: str) -> tuple[Platform, Model]:
    plat = tmsim.platform(platform)
    return plat, model_of(gpt2(), plat, "async", ZERO_PEAK, window=2)


def test_the_better_of_a_start_and_the_outside_plans_is_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cost = cost_model(gpt2(), H100)
    model = model_of(gpt2(), H100, "sync", ZERO_PEAK, window=1)
    zero = tmsim.plan(gpt2(), H100, "zero-offload")
    point = project(cost, model, zero)
    calls: list[str] = []

    def spy(cost: CostModel, model: Model, plan: Plan) -> np.ndarray:
        calls.append(plan.planner)
        return project(cost, model, plan)

    monkeypatch.setattr(outside, "project", spy)
    # no start: ZeRO-Offload's point, named
    x, origin = outside_start(cost, model, [zero], None)
    assert origin == "zero-offload" and x is not None and np.array_equal(x, point)
    assert calls == ["zero-offload"]
    # a plan no faster than the start is not projected at all, and the start is kept
    x, origin = outside_start(cost, model, [replace(zero, predicted_s=math.inf)], point)
    assert origin == "" and x is point and calls == ["zero-offload"]
    # a plan that is no point of the model is passed over
    remat = model_of(gpt2(), H100, "remat", ZERO_PEAK, window=1)
    assert outside_start(cost, remat, [zero], None) == (None, "")


def test_a_solve_stopped_at_once_is_zero_offloads_plan_under_its_own_name() -> None:
    """LLaMA-7B b1 on the H100: nothing fits statically, so the synchronous formulation has no
    start of its own; a solve stopped before its first node returns ZeRO-Offload's point as the
    formulation's plan, at ZeRO's step time to the bit (the host stream sets the step)."""
    graph = tmsim.graph("llama_7b", batch=1)
    zero = tmsim.plan(graph, H100, "zero-offload")
    plan = tmsim.plan(graph, H100, "sync", settings=PlanSettings(time_limit_s=1e-9))
    assert plan.stats is not None and plan.planner == "milp-sync"
    assert plan.stats.status == "time_limit (its warm start: zero-offload's plan)"
    assert plan.predicted_s == zero.predicted_s
    assert plan.host_kernels == zero.host_kernels
    # the same copies at the same kernels; those ZeRO-Offload runs beside the producer's next
    # kernel are synchronous after the producer here (the formulation's copies at producers)
    assert {(m.tensor, m.src, m.dst, m.kernel) for m in plan.moves} == {
        (m.tensor, m.src, m.dst, m.kernel) for m in zero.moves
    }
