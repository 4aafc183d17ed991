"""Roofline kernel time, the per-placement profile, and move times: closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodels import (
    HardwareModelError,
    MoveMode,
    OpClass,
    Overlap,
    Platform,
    cache_traffic_by_tier,
    canonical_dtype,
    load_preset,
    move_time_s,
    new_cache_state,
    op_class,
    placement_profile,
    roofline,
    simulate_accesses,
)

GB = 1e9


@pytest.fixture(scope="module")
def cpu() -> Platform:
    return load_preset("cascadelake-optane")


@pytest.fixture(scope="module")
def gpu() -> Platform:
    return load_preset("rtx2080ti-pcie3")


def test_compute_bound_kernel_ignores_placement(cpu: Platform) -> None:
    """A convolution with far more FLOPs than bytes (VGG convolutions: 300 to 470 FLOP/byte,
    reference/hardware.md) takes the same time wherever its operands live."""
    mb = 1e6
    prof = placement_profile(cpu, 400 * 3 * mb, "conv", [mb, mb, 0], [0, 0, mb])
    assert prof.placements.shape == (8, 3)
    expected = 400 * 3 * mb / (0.65 * 3.6864e12) + 2e-6
    assert np.allclose(prof.time_s, expected, rtol=1e-12)


def test_memory_bound_kernel_slows_by_the_bandwidth_ratio(cpu: Platform) -> None:
    """Reading the one input from PMM instead of DRAM scales the memory time by the read
    bandwidth ratio 104.6 / 37.6 (Yang et al. FAST 2020, Fig. 4, 24 threads)."""
    nbytes = 1e9
    prof = placement_profile(cpu, 1e6, "elementwise", [nbytes], [0])
    launch = cpu.compute.launch_overhead_s
    t_dram = prof.time_of(["DRAM"]) - launch
    t_pmm = prof.time_of(["PMM"]) - launch
    assert t_dram == pytest.approx(nbytes / (0.8 * 104.6 * GB))
    assert t_pmm / t_dram == pytest.approx(104.6 / 37.6)


def test_kernel_writes_see_the_many_writer_falloff(cpu: Platform) -> None:
    """A kernel writes with all 24 cores, where Optane gets about 7.6 GB/s, not the 12.5 peak."""
    t = roofline(cpu, [0.0], "elementwise", [[0.0, 0.0]], [[0.0, 1e9]])
    per_byte = 1 / (0.8 * 12.5 * GB / (1 + 0.04 * (24 - 8)))
    assert float(t.memory_by_tier_s[0, 1]) == pytest.approx(1e9 * per_byte)


def test_memory_time_adds_over_tiers_and_overlap_rules(cpu: Platform) -> None:
    flops = np.array([1e9, 1e10])
    reads = np.array([[2e9, 1e9], [0.0, 0.0]])
    writes = np.array([[1e9, 0.0], [0.0, 5e8]])
    t_max = roofline(cpu, flops, ["elementwise", "matmul"], reads, writes)
    t_sum = roofline(cpu, flops, ["elementwise", "matmul"], reads, writes, overlap=Overlap.SUM)
    w_pmm = 12.5 * GB / 1.64
    dram = (2e9 / 104.6e9 + 1e9 / 76.8e9) / 0.8
    pmm = 1e9 / 37.6e9 / 0.8
    assert t_max.memory_by_tier_s[0] == pytest.approx([dram, pmm])
    assert t_max.memory_s[1] == pytest.approx(5e8 / w_pmm / 0.8)
    assert t_max.compute_s == pytest.approx([1e9 / (0.5 * 3.6864e12), 1e10 / (0.65 * 3.6864e12)])
    launch = 2e-6
    assert t_max.time_s == pytest.approx(np.maximum(t_max.compute_s, t_max.memory_s) + launch)
    assert t_sum.time_s == pytest.approx(t_max.compute_s + t_max.memory_s + launch)


def test_mix_interference_option_doubles_a_one_to_one_mix_on_pmm(cpu: Platform) -> None:
    reads = [[1e9, 1e9]]
    writes = [[1e9, 1e9]]
    plain = roofline(cpu, [0.0], "elementwise", reads, writes)
    mixed = roofline(cpu, [0.0], "elementwise", reads, writes, mix_interference=True)
    assert mixed.memory_by_tier_s[0, 0] == pytest.approx(plain.memory_by_tier_s[0, 0])  # DRAM
    assert mixed.memory_by_tier_s[0, 1] == pytest.approx(2 * plain.memory_by_tier_s[0, 1])


@given(
    reads=st.lists(st.floats(0, 1e9), min_size=1, max_size=4),
    flops=st.floats(0, 1e12),
    data=st.data(),
)
def test_profile_agrees_with_roofline_and_pmm_is_never_faster(
    reads: list[float], flops: float, data: st.DataObject
) -> None:
    cpu = load_preset("cascadelake-optane")
    writes = data.draw(st.lists(st.floats(0, 1e9), min_size=len(reads), max_size=len(reads)))
    prof = placement_profile(cpu, flops, "norm", reads, writes)
    k = len(reads)
    assert prof.placements.shape == (2**k, k)
    assert len({tuple(p) for p in prof.placements.tolist()}) == 2**k
    for p, t in zip(prof.placements, prof.time_s, strict=True):
        r = np.zeros((1, 2))
        w = np.zeros((1, 2))
        for j, tier in enumerate(p):
            r[0, tier] += reads[j]
            w[0, tier] += writes[j]
        assert t == pytest.approx(float(roofline(cpu, [flops], "norm", r, w).time_s[0]))
        # moving any one operand from DRAM (0) to PMM (1) never makes the kernel faster
        for moved in np.flatnonzero(p == 0):
            q = p.copy()
            q[moved] = 1
            slower = prof.time_s[(prof.placements == q).all(axis=1)][0]
            assert slower >= t


def test_gpu_profile_has_one_placement_and_host_access_is_refused(gpu: Platform) -> None:
    prof = placement_profile(gpu, 1e9, "matmul", [1e8, 1e8], [0, 1e8])
    assert prof.placements.tolist() == [[0, 0]]  # both operands in device memory
    with pytest.raises(HardwareModelError, match="kernel 0 accesses tier 'host'"):
        roofline(gpu, [1.0], "matmul", [[0.0, 1.0]], [[0.0, 0.0]])


def test_gpu_dtypes(gpu: Platform) -> None:
    """RTX 2080 Ti: 13.4 TFLOP/s FP32, 53.8 FP16 tensor (reference/hardware.md GPU table)."""
    f32 = roofline(gpu, [1e12], "conv", [[0.0, 0.0]], [[0.0, 0.0]], dtype="float32")
    f16 = roofline(gpu, [1e12], "conv", [[0.0, 0.0]], [[0.0, 0.0]], dtype=["fp16"])
    assert float(f32.compute_s[0]) == pytest.approx(1e12 / (0.65 * 13.4e12))
    assert float(f32.compute_s[0] / f16.compute_s[0]) == pytest.approx(53.8 / 13.4)
    with pytest.raises(HardwareModelError, match="no peak FLOP/s for dtype 'bf16'"):
        roofline(gpu, [1.0], "conv", [[0.0, 0.0]], [[0.0, 0.0]], dtype="bf16")


def test_move_times_use_the_presets_copy_rates(cpu: Platform, gpu: Platform) -> None:
    """darchr/AutoTM, optimizer/abstractoptimizer.jl (BANDWIDTHS, MB/s): PMM->DRAM 29000 sync,
    DRAM->PMM 12000 sync, GPU 12000 in every direction. Asynchronous CPU copies: the copy
    thread's idle rates from Yang et al. FAST 2020 Fig. 4 (one thread), 1 / (1/2.88 + 1/4.31)
    and 1 / (1/7.38 + 1/4.13) GB/s."""
    gb = 1e9
    assert float(move_time_s(cpu, 29 * gb, "PMM", "DRAM")) == pytest.approx(1.0)
    assert float(move_time_s(cpu, 12 * gb, "DRAM", "PMM", MoveMode.SYNC)) == pytest.approx(1.0)
    up, down = 1 / (1 / 2.88 + 1 / 4.31), 1 / (1 / 7.38 + 1 / 4.13)
    assert float(move_time_s(cpu, up * gb, "PMM", "DRAM", MoveMode.ASYNC)) == pytest.approx(1.0)
    assert float(move_time_s(cpu, down * gb, "DRAM", "PMM", "async")) == pytest.approx(1.0)
    for src, dst in (("host", "device"), ("device", "host")):
        for mode in MoveMode:
            assert float(move_time_s(gpu, 12 * gb, src, dst, mode)) == pytest.approx(1.0)
    sizes = move_time_s(cpu, np.array([0.0, 29e9, 58e9]), "PMM", "DRAM")
    assert sizes.tolist() == pytest.approx([0.0, 1.0, 2.0])
    assert float(move_time_s(cpu, 1e9, "PMM", "PMM")) == 0.0


def test_move_errors(cpu: Platform) -> None:
    two_lm = load_preset("cascadelake-2lm")
    with pytest.raises(HardwareModelError, match="no copy path from 'PMM' to 'DRAM'"):
        move_time_s(two_lm, 1.0, "PMM", "DRAM")
    with pytest.raises(HardwareModelError, match="no tier 'HBM'"):
        move_time_s(cpu, 1.0, "HBM", "DRAM")
    with pytest.raises(HardwareModelError, match="nbytes must be >= 0"):
        move_time_s(cpu, -1.0, "PMM", "DRAM")
    with pytest.raises(HardwareModelError, match="unknown move mode 'later'"):
        move_time_s(cpu, 1.0, "PMM", "DRAM", "later")


@pytest.mark.parametrize(
    ("op", "cls"),
    [
        ("conv2d", OpClass.CONV),
        ("conv2d_backward_data", OpClass.CONV),
        ("conv2d_backward_weight", OpClass.CONV),
        ("linear", OpClass.MATMUL),
        ("linear_backward_data", OpClass.MATMUL),
        ("MatMul", OpClass.MATMUL),
        ("batch_norm", OpClass.NORM),
        ("batch_norm_backward", OpClass.NORM),
        ("layer_norm", OpClass.NORM),
        ("softmax_cross_entropy", OpClass.NORM),
        ("relu", OpClass.ELEMENTWISE),
        ("max_pool_backward", OpClass.ELEMENTWISE),
        ("add", OpClass.ELEMENTWISE),
        ("sgd_momentum", OpClass.ELEMENTWISE),
        ("something_new", OpClass.ELEMENTWISE),  # the documented default
    ],
)
def test_op_class_mapping(op: str, cls: OpClass) -> None:
    assert op_class(op) is cls


def test_dtype_aliases() -> None:
    assert [canonical_dtype(d) for d in ("float32", "FP16", "bfloat16", "fp64")] == [
        "fp32",
        "fp16",
        "bf16",
        "fp64",
    ]


def test_bad_roofline_inputs(cpu: Platform) -> None:
    ok = [[0.0, 0.0]]
    with pytest.raises(HardwareModelError, match=r"shape \(kernels, tiers\) = \(1, 2\)"):
        roofline(cpu, [1.0], "conv", [[0.0]], ok)
    with pytest.raises(HardwareModelError, match="write_bytes must be >= 0"):
        roofline(cpu, [1.0], "conv", ok, [[-1.0, 0.0]])
    with pytest.raises(HardwareModelError, match="flops"):
        roofline(cpu, [-1.0], "conv", ok, ok)
    with pytest.raises(HardwareModelError, match="unknown op class 'gemm'"):
        roofline(cpu, [1.0], ["gemm"], ok, ok)
    with pytest.raises(HardwareModelError, match="2 entries for 1 kernels"):
        roofline(cpu, [1.0], ["conv", "conv"], ok, ok)
    with pytest.raises(HardwareModelError, match="no peak FLOP/s for dtype 'fp16'"):
        roofline(cpu, [1.0], "conv", ok, ok, dtype="fp16")  # Cascade Lake has no FP16 units
    with pytest.raises(HardwareModelError, match="unknown overlap rule 'min'"):
        roofline(cpu, [1.0], "conv", ok, ok, overlap="min")
    with pytest.raises(HardwareModelError, match="placements"):
        placement_profile(cpu, 1.0, "conv", [1.0] * 21, [0.0] * 21)
    with pytest.raises(HardwareModelError, match="1-D of one length"):
        placement_profile(cpu, 1.0, "conv", [1.0, 2.0], [0.0])


def test_2lm_cache_traffic_times_through_the_roofline() -> None:
    """A streaming read that misses every block costs, per block (reference/hardware.md,
    Memory Mode): a DRAM read (tag and data), a PMM read, and a DRAM fill write."""
    p = load_preset("cascadelake-2lm")
    assert p.cache is not None
    state = new_cache_state(p.cache, 1 << 20)
    size = 4 << 30
    traffic = simulate_accesses(state, [0], [size], False)
    reads, writes = cache_traffic_by_tier(p, traffic)
    assert reads.tolist() == [[size, size]] and writes.tolist() == [[size, 0]]
    t = roofline(p, [0.0], "elementwise", reads, writes)
    per_byte = (1 / 104.6e9 + 1 / 76.8e9 + 1 / 37.6e9) / 0.8
    assert float(t.memory_s[0]) == pytest.approx(size * per_byte)
    with pytest.raises(HardwareModelError, match="has no hardware cache"):
        cache_traffic_by_tier(load_preset("cascadelake-optane"), traffic)
