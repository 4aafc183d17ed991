"""The plan validator: valid plans pass; every rule of tmsim.plans.values, broken by hand, is caught."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from hwmodels.timing import MoveMode
from tmsim.capacity import Capacity
from tmsim.cost import CostModel, IndexMove
from tmsim.planners.assemble import assemble_plan
from tmsim.planners.heuristics import plan_vdnn
from tmsim.planners.settings import PlanSettings
from tmsim.plans.validate import MAX_ERRORS, PlanError, validate
from tmsim.plans.values import Move, Plan, Residency
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import training_graph_of

F, B, U = Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE
A, S = MoveMode.ASYNC, MoveMode.SYNC


def train_graph() -> Graph:
    """A seven-kernel training step: two layers, loss, backward, one SGD update."""
    tensors = [
        Tensor("x", 64, Role.INPUT),
        Tensor("w", 16, Role.WEIGHT),
        Tensor("m", 16, Role.OPTIMIZER_STATE),
        Tensor("a", 40, Role.ACTIVATION),
        Tensor("b", 24, Role.ACTIVATION),
        Tensor("c", 8, Role.ACTIVATION),
        Tensor("db", 24, Role.GRADIENT),
        Tensor("da", 40, Role.GRADIENT),
        Tensor("dw", 16, Role.GRADIENT),
    ]
    kernels = [
        Kernel("f1", "linear", ("x", "w"), ("a",), F, 100),
        Kernel("f2", "relu", ("a",), ("b",), F, 10),
        Kernel("f3", "relu", ("b",), ("c",), F, 10),
        Kernel("b3", "relu_backward", ("c", "b"), ("db",), B, 10),
        Kernel("b2", "relu_backward", ("db", "a"), ("da",), B, 10),
        Kernel("b1", "linear_backward_weight", ("da", "x"), ("dw",), B, 100),
        Kernel("sgd", "sgd_momentum", ("dw",), (), U, 64, ("w", "m")),
    ]
    return Graph("train", tensors, kernels)


@pytest.fixture(scope="module")
def cpu() -> Platform:
    return load_preset("cascadelake-optane")


@pytest.fixture(scope="module")
def gpu() -> Platform:
    return load_preset("rtx2080ti-pcie3")


def build(
    graph: Graph,
    platform: Platform,
    tier_of: dict[str, int],
    moves: list[tuple[str, int, int, int, MoveMode]] = (),  # type: ignore[assignment]
    drops: dict[tuple[str, int], list[int]] | None = None,
    initial: dict[str, tuple[int, ...]] | None = None,
    limit: int = 10**9,
) -> Plan:
    """A plan through assemble_plan: ``tier_of`` gives each tensor's operand tier (default 0)."""
    cost = CostModel(graph, platform)
    ix = graph.tensor_index
    op_tiers = [tier_of.get(graph.tensors[int(t)].name, 0) for t in cost.op_tensor]
    init = {
        ix(t.name): (initial or {}).get(t.name, (tier_of.get(t.name, 0),))
        for t in graph.tensors
        if t.role in (Role.INPUT, Role.WEIGHT, Role.OPTIMIZER_STATE)
    }
    return assemble_plan(
        cost,
        "hand",
        limit,
        op_tiers,
        init,
        [IndexMove(ix(t), s, d, k, mode) for t, s, d, k, mode in moves],
        drops={(ix(t), tier): ks for (t, tier), ks in (drops or {}).items()},
    )


def gpu_offload_plan(graph: Graph, gpu: Platform, back: int = 3, mode: MoveMode = A) -> Plan:
    """``a`` leaves the device beside f2 (its last forward use) and comes back for b2."""
    return build(
        graph,
        gpu,
        {},
        moves=[("a", 0, 1, 1, A), ("a", 1, 0, back, mode)],
        drops={("a", 0): [1], ("a", 1): [back]},
    )


def errors_of(plan: Plan, graph: Graph, platform: Platform) -> str:
    v = validate(plan, graph, platform)
    assert not v.ok
    return "\n".join(v.errors)


# ---------------------------------------------------------------------- valid plans
def test_offload_plan_is_valid_and_frees_memory(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    v = validate(plan, g, gpu)
    assert v.ok, v.errors
    assert v.errors == ()
    assert v.moved_bytes == 2 * 40
    # a is away from the device at kernel 2 only: 40 bytes less than everything live there
    assert v.fast_peak_bytes == int(g.live_bytes.max())
    assert abs(v.recomputed_s - plan.predicted_s) <= 1e-12 * plan.predicted_s
    a_ranges = sorted((r.tier, r.first, r.last) for r in plan.residency if r.tensor == "a")
    assert a_ranges == [("device", 0, 1), ("device", 3, 4), ("host", 1, 3)]
    v.raise_if_invalid()  # does not raise


def test_sync_move_may_read_a_copy_freed_after_the_previous_kernel(gpu: Platform) -> None:
    g = train_graph()
    # a freed from the device after f2 (kernel 1); a sync copy at kernel 2 still reads it.
    plan = build(
        g,
        gpu,
        {},
        moves=[("a", 0, 1, 2, S), ("a", 1, 0, 4, S)],
        drops={("a", 0): [1], ("a", 1): [4]},
    )
    v = validate(plan, g, gpu)
    assert v.ok, v.errors


def test_weight_written_back_after_the_last_kernel_is_valid(cpu: Platform) -> None:
    g = train_graph()
    plan = build(
        g,
        cpu,
        {},
        moves=[("w", 1, 0, 0, S), ("w", 0, 1, 7, S)],
        initial={"w": (1,)},
    )
    v = validate(plan, g, cpu)
    assert v.ok, v.errors
    assert v.moved_bytes == 32


# ---------------------------------------------------------------------- broken plans
def test_wrong_graph_and_platform_names(gpu: Platform) -> None:
    g = train_graph()
    plan = replace(gpu_offload_plan(g, gpu), graph="other", platform="elsewhere")
    text = errors_of(plan, g, gpu)
    assert "plan is for graph 'other', not 'train'" in text
    assert "plan is for platform 'elsewhere', not 'rtx2080ti-pcie3'" in text


def test_operand_tiers_of_the_wrong_shape(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    short = replace(plan, operand_tiers=plan.operand_tiers[:-1])
    assert "operand_tiers has 6 rows for 7 kernels" in errors_of(short, g, gpu)
    rows = list(plan.operand_tiers)
    rows[1] = ("device",)
    v = validate(replace(plan, operand_tiers=tuple(rows)), g, gpu)
    assert not v.ok and v.recomputed_s != v.recomputed_s  # nan: not timed
    assert "kernel 1 ('f2'): operand_tiers lists 1 tier(s) for 2 distinct operand(s)" in v.errors


def test_unknown_tier_name(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    rows = list(plan.operand_tiers)
    rows[0] = ("device", "HBM", "device")
    text = errors_of(replace(plan, operand_tiers=tuple(rows)), g, gpu)
    assert "kernel 0 ('f1'): operand 'w' names unknown tier 'HBM'" in text


def test_operand_on_a_tier_the_gpu_kernel_cannot_access(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    rows = list(plan.operand_tiers)
    rows[2] = ("host", "device")  # f3 reads b from host
    v = validate(replace(plan, operand_tiers=tuple(rows)), g, gpu)
    assert "kernel 2 ('f3'): operand 'b' is on tier 'host', which kernels cannot access" in (
        "\n".join(v.errors)
    )
    assert v.recomputed_s == float("inf")


def test_dropped_residency(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    kept = tuple(r for r in plan.residency if not (r.tensor == "a" and r.first == 3))
    text = errors_of(replace(plan, residency=kept), g, gpu)
    assert "kernel 4 ('b2'): operand 'a' is not resident in tier 'device' there" in text
    assert "destination is not resident at kernel 3 ('b3')" in text


def test_move_reads_from_a_tier_where_the_tensor_is_not(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    bad = Move("b", "host", "device", 2, A)
    text = errors_of(replace(plan, moves=(*plan.moves, bad)), g, gpu)
    assert "move 2 ('b' 'host' -> 'device', async at kernel 2): source copy is not resident" in (
        text
    )


def test_fast_capacity_exceeded(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    peak = validate(plan, g, gpu).fast_peak_bytes
    v = validate(replace(plan, fast_limit_bytes=peak - 1), g, gpu)
    assert not v.ok
    assert v.fast_peak_bytes == peak
    assert v.errors[0].startswith(f"tier 'device' over its limit of {peak - 1} bytes at")
    assert "(1 over)" in v.errors[0]


def test_fast_tier_checked_against_its_capacity_whatever_the_plan_says(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    peak = validate(plan, g, gpu).fast_peak_bytes
    small = replace(gpu, tiers=(replace(gpu.tiers[0], capacity_bytes=peak - 2), *gpu.tiers[1:]))
    v = validate(replace(plan, fast_limit_bytes=10 * peak, platform=small.name), g, small)
    assert not v.ok
    assert v.errors[0].startswith(f"tier 'device' over its capacity of {peak - 2} bytes at")


def test_weight_updated_in_fast_ends_stale_in_its_slow_initial_tier(cpu: Platform) -> None:
    g = train_graph()
    # w starts in PMM, is copied to DRAM for f1 and updated there by sgd: no write-back.
    plan = build(g, cpu, {}, moves=[("w", 1, 0, 0, S)], initial={"w": (1,)})
    text = errors_of(plan, g, cpu)
    assert (
        "weight 'w' ends the step without a valid copy in its initial tier 'PMM': stale since "
        "kernel 6 updated it in place in tier 'DRAM'"
    ) in text


def test_move_reads_a_stale_copy(cpu: Platform) -> None:
    g = train_graph()
    # After sgd updates w in DRAM, copying the stale PMM copy back over it is wrong.
    plan = build(g, cpu, {}, moves=[("w", 1, 0, 0, S), ("w", 1, 0, 7, S)], initial={"w": (0, 1)})
    text = errors_of(plan, g, cpu)
    assert "its source copy is not valid: stale since kernel 6 updated it" in text


def test_wrong_predicted_time(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    v = validate(replace(plan, predicted_s=plan.predicted_s * (1 + 1e-5)), g, gpu)
    assert not v.ok
    assert len(v.errors) == 1 and "differs from the recomputed" in v.errors[0]
    assert validate(replace(plan, predicted_s=plan.predicted_s * (1 + 1e-8)), g, gpu).ok


def test_async_data_used_at_the_same_kernel(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu, back=4)  # prefetch beside b2, which reads a
    text = errors_of(plan, g, gpu)
    assert (
        "kernel 4 ('b2'): reads 'a' from tier 'device', where its copy is not valid: still "
        "arriving by an asynchronous move at kernel 4 (usable from kernel 5)"
    ) in text
    assert validate(gpu_offload_plan(g, gpu, back=4, mode=S), g, gpu).ok


def test_update_while_an_async_move_writes_the_same_copy(cpu: Platform) -> None:
    g = train_graph()
    plan = build(
        g, cpu, {}, moves=[("w", 1, 0, 6, A)], initial={"w": (0, 1)}, drops={("w", 1): [6]}
    )
    text = errors_of(plan, g, cpu)
    assert "kernel 6 ('sgd'): updates 'w' in tier 'DRAM' while an asynchronous move" in text


def test_unjustified_range_start(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    extra = Residency("c", "host", 3, 3)
    text = errors_of(replace(plan, residency=(*plan.residency, extra)), g, gpu)
    assert (
        "tensor 'c' appears in tier 'host' at kernel 3 ('b3') with no producer writing it there"
    ) in text


def test_range_before_its_producer(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    res = tuple(replace(r, first=0) if r.tensor == "b" else r for r in plan.residency)
    text = errors_of(replace(plan, residency=res), g, gpu)
    assert "tensor 'b' appears in tier 'device' at kernel 0 ('f1'), before its producer" in text


def test_overlapping_and_out_of_bounds_ranges(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    res = (*plan.residency, Residency("a", "device", 1, 2), Residency("c", "device", 2, 9))
    text = errors_of(replace(plan, residency=res), g, gpu)
    assert "tensor 'a': residency ranges in tier 'device' overlap" in text
    assert "range [2, 9] is not inside [0, 6]" in text


def test_initial_tiers_must_list_exactly_the_preexisting_tensors(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    init = {k: v for k, v in plan.initial_tiers.items() if k != "m"}
    init["a"] = ("device",)
    text = errors_of(replace(plan, initial_tiers=init), g, gpu)
    assert "pre-existing tensor 'm' has no initial tier" in text
    assert "initial_tiers lists tensor 'a', but its role 'activation'" in text
    # m's residency from kernel 0 is now unexplained
    assert "tensor 'm' appears in tier 'device' at kernel 0 ('f1')" in text


def test_an_input_starts_in_one_tier_and_a_weight_may_start_in_two(cpu: Platform) -> None:
    g = train_graph()
    both = {"x": (0, 1), "w": (0, 1)}
    plan = build(g, cpu, {}, initial=both)
    text = errors_of(plan, g, cpu)
    assert "input 'x' starts in 2 tiers ('DRAM', 'PMM'); an input starts in one" in text
    assert text.count("tiers ('DRAM', 'PMM')") == 1  # a weight may (it ends stale: another rule)
    assert validate(build(g, cpu, {}), g, cpu).ok


def test_initial_tier_without_a_range_from_kernel_0(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    res = tuple(r for r in plan.residency if r.tensor != "m")
    text = errors_of(replace(plan, residency=res), g, gpu)
    assert "tensor 'm': initial tier 'device' has no residency range starting at kernel 0" in text


def test_malformed_moves(gpu: Platform) -> None:
    g = train_graph()
    plan = gpu_offload_plan(g, gpu)
    bad = (
        Move("a", "device", "device", 1, S),
        Move("a", "device", "host", 7, A),
        Move("zz", "device", "host", 1, A),
    )
    text = errors_of(replace(plan, moves=plan.moves + bad), g, gpu)
    assert "move 2 ('a' 'device' -> 'device', sync at kernel 1): source and destination" in text
    assert "move 3 ('a' 'device' -> 'host', async at kernel 7): kernel 7 outside [0, 6]" in text
    assert "move 4 ('zz' 'device' -> 'host', async at kernel 1): unknown tensor 'zz'" in text


def test_errors_are_capped_and_raise_plan_error(gpu: Platform) -> None:
    g = training_graph_of("resnet50", 2)
    plan = plan_vdnn(g, gpu, PlanSettings(capacity=Capacity.parse("1:1")))
    # Drop every residency on the device: hundreds of operands are missing.
    broken = replace(plan, residency=tuple(r for r in plan.residency if r.tier != "device"))
    v = validate(broken, g, gpu)
    assert len(v.errors) == MAX_ERRORS + 1
    assert v.errors[-1].startswith("... and ") and v.errors[-1].endswith("more error(s)")
    with pytest.raises(PlanError, match=r"invalid plan: .*and 46 more"):
        v.raise_if_invalid()


def test_validation_is_fast_on_a_large_graph(gpu: Platform) -> None:
    g = training_graph_of("densenet264", 64)
    assert len(g.kernels) > 3000 and len(g.tensors) > 5000
    plan = plan_vdnn(g, gpu, PlanSettings(offload_all=True))
    assert len(plan.moves) > 1000
    start = time.perf_counter()
    v = validate(plan, g, gpu)
    elapsed = time.perf_counter() - start
    assert v.ok, v.errors[:3]
    assert elapsed < 1.0
