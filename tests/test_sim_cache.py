"""2LM replay (tmsim.sim.cache.replay): a tiny step checked by hand, a workload that fits in the cache
against all-DRAM, one several times larger, conservation of bytes and time, the steady state,
determinism, errors, Parquet, and the ``tmsim simulate --cache-mode`` command."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwmodels import (
    Overlap,
    cache_traffic_by_tier,
    new_cache_state,
    op_class,
    roofline,
    simulate_accesses,
)
from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import plan
from tmsim.sim import CacheReplayError, CacheTrace, load_trace, replay, replay_cache, save_trace
from tmsim.sim.addresses import step_accesses, step_layout
from tmsim.sim.cache.walk import default_block_bytes
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.zoo import training_graph_of

MM = load_preset("cascadelake-2lm")
AD = load_preset("cascadelake-optane")  # the same machine with DRAM and PMM as two tiers
LAUNCH_S = MM.compute.launch_overhead_s
MISS_S = 70e-9
EFF = 0.8  # memory efficiency of element-wise kernels on the preset
GiB, MiB = 2**30, 2**20


def with_cache(capacity_bytes: int) -> Platform:
    """cascadelake-2lm with a cache of ``capacity_bytes``."""
    assert MM.cache is not None
    return replace(MM, cache=replace(MM.cache, capacity_bytes=capacity_bytes))


def chain(flops: int = 0) -> Graph:
    """``a -> b -> c``, 1 KiB each: kernel 0 reads the input a and writes b, kernel 1 reads b
    and writes c. First fit lays them out at 0, 1024 and 2048 (a, an input, lives all step)."""
    f = Phase.FORWARD
    tensors = [
        Tensor("a", 1024, Role.INPUT),
        Tensor("b", 1024, Role.ACTIVATION),
        Tensor("c", 1024, Role.ACTIVATION),
    ]
    kernels = [
        Kernel("k0", "relu", ("a",), ("b",), f),
        Kernel("k1", "relu", ("b",), ("c",), f, flops),
    ]
    return Graph("chain", tensors, kernels)


def dram_s(read: float, write: float) -> float:
    return (
        read / MM.tier("DRAM").read_bw_bytes_per_s + write / float(MM.tier("DRAM").write_bw_at(24))
    ) / EFF


def pmm_s(read: float, write: float) -> float:
    return (
        read / MM.tier("PMM").read_bw_bytes_per_s + write / float(MM.tier("PMM").write_bw_at(24))
    ) / EFF


def counters(ct: CacheTrace) -> dict[str, list[int]]:
    return {n: getattr(ct, n).tolist() for n in ("hits", "misses", "fills", "writebacks")}


def tier_rows(ct: CacheTrace, label: str) -> list[tuple[int, ...]]:
    return [getattr(r, label) for r in ct.trace.records]


# ---------------------------------------------------------------------- by hand
def test_chain_thrashing_by_hand() -> None:
    # A 2 KiB cache: 32 sets of one 64 B line. a and c both map to sets 0-15, b to 16-31.
    g, p = chain(), with_cache(2048)
    assert step_layout(g).offsets_bytes.tolist() == [0, 1024, 2048]
    cold = replay_cache(g, p, warm=False, level=InterferenceLevel.NONE)
    # k0: reads a (16 misses, filled), writes b (16 misses, allocated without a read).
    # k1: reads b (16 hits), writes c over a (16 misses, a is clean: no write-back).
    assert counters(cold) == {
        "hits": [0, 16],
        "misses": [32, 16],
        "fills": [16, 0],
        "writebacks": [0, 0],
    }
    assert [r.fast_resident_bytes for r in cold.trace.records] == [2048, 2048]
    # Steady state: sets 0-15 start holding c (dirty), 16-31 b (dirty). k0's read of a evicts
    # c: 16 fills and 16 write-backs; its write of b hits. k1 as in the cold step.
    warm = replay_cache(g, p, level=InterferenceLevel.NONE)
    assert counters(warm) == {
        "hits": [16, 16],
        "misses": [16, 16],
        "fills": [16, 0],
        "writebacks": [16, 0],
    }
    assert warm.block_bytes == 64 and warm.hit_rate == 0.5
    # Every access reads DRAM (tag and data); fills and writes write it; PMM sees fills and
    # write-backs. Tiers are (DRAM, PMM).
    assert tier_rows(warm, "read_bytes") == [(2048, 1024), (2048, 0)]
    assert tier_rows(warm, "write_bytes") == [(2048, 1024), (1024, 0)]
    k0_s = LAUNCH_S + MISS_S + dram_s(2048, 2048) + pmm_s(1024, 1024)
    k1_s = LAUNCH_S + MISS_S + dram_s(2048, 1024)
    assert warm.simulated_s == pytest.approx(k0_s + k1_s, rel=1e-12)
    # With contention k0's reads and writes (3072 B each, same cap) share the PMM at a 1:1
    # mix, where Optane's mix factor is 2 and binds: k0's traffic takes twice its PMM time.
    on = replay_cache(g, p)
    k0_on_s = LAUNCH_S + MISS_S + 2 * pmm_s(1024, 1024)
    assert on.simulated_s == pytest.approx(k0_on_s + k1_s, rel=1e-9)
    assert counters(on) == counters(warm)


def test_chain_fitting_in_the_cache_by_hand() -> None:
    g, p = chain(), with_cache(4096)  # 64 sets: the 3 KiB pool never conflicts
    cold = replay_cache(g, p, warm=False)
    assert counters(cold) == {
        "hits": [0, 16],
        "misses": [32, 16],
        "fills": [16, 0],
        "writebacks": [0, 0],
    }
    assert [r.fast_resident_bytes for r in cold.trace.records] == [2048, 3072]
    warm = replay_cache(g, p)
    assert counters(warm) == {
        "hits": [32, 32],
        "misses": [0, 0],
        "fills": [0, 0],
        "writebacks": [0, 0],
    }
    assert tier_rows(warm, "read_bytes") == [(2048, 0), (2048, 0)]  # a write reads its tag
    assert tier_rows(warm, "write_bytes") == [(1024, 0), (1024, 0)]
    assert warm.simulated_s == pytest.approx(2 * (LAUNCH_S + dram_s(2048, 1024)), rel=1e-12)
    # The bounds: every operand in DRAM (no tag reads), every operand in PMM.
    assert warm.all_cache_s == pytest.approx(2 * (LAUNCH_S + dram_s(1024, 1024)), rel=1e-12)
    assert warm.all_backing_s == pytest.approx(2 * (LAUNCH_S + pmm_s(1024, 1024)), rel=1e-12)
    assert warm.trace.predicted_s == warm.all_backing_s
    assert [r.fast_resident_bytes for r in warm.trace.records] == [3072, 3072]


@pytest.mark.parametrize("overlap", [Overlap.MAX, Overlap.SUM])
def test_compute_floor(overlap: Overlap) -> None:
    # k1 computes for 1e6 / (0.5 x 3.6864 TFLOP/s) = 0.54 us, longer than its 52 ns of DRAM
    # traffic: with overlap the floor decides, without it the two add up.
    g, p = chain(flops=10**6), with_cache(4096)
    ct = replay_cache(g, p, cost=CostModel(g, p, overlap=overlap))
    compute_s = 1e6 / (0.5 * MM.compute.peak("fp32"))
    mem_s = dram_s(2048, 1024)
    body_s = max(compute_s, mem_s) if overlap is Overlap.MAX else compute_s + mem_s
    assert ct.trace.records[1].duration_s == pytest.approx(LAUNCH_S + body_s, rel=1e-9)
    assert ct.trace.records[0].duration_s == pytest.approx(LAUNCH_S + mem_s, rel=1e-9)


def test_to_frame_and_totals() -> None:
    warm = replay_cache(chain(), with_cache(2048))
    frame = warm.to_frame()
    assert frame["hits"].tolist() == [16, 16] and frame["writeback_bytes"].tolist() == [1024, 0]
    assert frame["read_bytes_PMM"].tolist() == [1024, 0]
    assert frame["accessed_bytes"].tolist() == [2048, 2048]
    assert (frame["duration_s"] > 0).all() and frame["name"].tolist() == ["k0", "k1"]
    t = warm.totals()
    assert (t["hits"], t["misses"], t["fills"], t["writebacks"]) == (32, 32, 16, 16)
    assert (t["pmm_read_bytes"], t["pmm_write_bytes"]) == (1024, 1024)
    assert (t["dram_read_bytes"], t["dram_write_bytes"]) == (4096, 3072)
    assert t["backing_read_bytes"] == t["pmm_read_bytes"] and t["hit_rate"] == 0.5
    assert t["simulated_s"] == warm.simulated_s and t["kernels"] == 2
    json.dumps(t)  # JSON-ready


# ---------------------------------------------------------------------- zoo workloads
@cache
def r50(batch: int) -> Graph:
    return training_graph_of("resnet50", batch)


@cache
def r50_replay(batch: int, cache_bytes: int, contention: bool = True) -> CacheTrace:
    level = DEFAULT_LEVEL if contention else InterferenceLevel.NONE
    return replay_cache(r50(batch), with_cache(cache_bytes), level=level)


def test_fitting_workload_runs_near_all_dram_speed() -> None:
    g = r50(2)  # a 0.44 GB pool in a 1 GiB cache
    ct = r50_replay(2, GiB)
    assert step_layout(g).pool_bytes < GiB
    assert ct.hit_rate == 1.0 and ct.misses.sum() == 0 and ct.tier_bytes("PMM") == (0, 0)
    # The cost model's bounds are those of App Direct plans on the same machine.
    fast = replay(plan("all-fast", g, AD), g, AD)
    slow = replay(plan("all-slow", g, AD), g, AD, level=InterferenceLevel.NONE)
    assert ct.all_cache_s == pytest.approx(fast.predicted_s, rel=1e-9)
    assert ct.all_backing_s == pytest.approx(slow.simulated_s, rel=1e-9)
    # All hits: all-DRAM speed but for the tag read of every write (and block rounding), a
    # fifth more on this memory-bound step, against 4.5 times as long with all of it in PMM.
    cost = CostModel(g, AD)
    read = np.bincount(cost.op_kernel, cost.op_read_bytes, len(g.kernels))
    written = np.bincount(cost.op_kernel, cost.op_write_bytes, len(g.kernels))
    zero = np.zeros_like(read)
    flops = np.array([k.flops for k in g.kernels], dtype=np.float64)
    classes = [op_class(k.op) for k in g.kernels]
    tagged = roofline(
        AD,
        flops,
        classes,
        np.stack([read + written, zero], axis=1),
        np.stack([written, zero], axis=1),
    ).time_s.sum()
    assert ct.simulated_s == pytest.approx(tagged, rel=2e-3)
    assert fast.simulated_s < ct.simulated_s < 1.25 * fast.simulated_s
    assert ct.simulated_s < 0.3 * ct.all_backing_s
    # Nothing on the PMM, so contention changes nothing.
    assert r50_replay(2, GiB, contention=False).simulated_s == pytest.approx(ct.simulated_s)


def test_workload_larger_than_the_cache_misses_and_writes_back() -> None:
    small = r50_replay(8, 128 * MiB)
    fits = r50_replay(8, 2 * GiB)
    assert step_layout(r50(8)).pool_bytes > 5 * 128 * MiB
    assert fits.hit_rate == 1.0
    assert small.hit_rate < 0.95 and small.misses.sum() > 0 and small.writebacks.sum() > 0
    pmm_read, pmm_write = small.tier_bytes("PMM")
    assert pmm_read > 0 and pmm_write > 0
    assert small.simulated_s > 1.3 * fits.simulated_s
    # The PMM's read/write mix only slows it down.
    assert small.simulated_s > r50_replay(8, 128 * MiB, contention=False).simulated_s


def test_bytes_are_the_cache_traffic() -> None:
    g, p = r50(8), with_cache(128 * MiB)
    ct = r50_replay(8, 128 * MiB)
    cost = CostModel(g, p)
    acc = step_accesses(g, cost, step_layout(g))
    assert MM.cache is not None
    state = new_cache_state(replace(MM.cache, capacity_bytes=128 * MiB), ct.block_bytes)
    simulate_accesses(state, acc.starts_bytes, acc.lengths_bytes, acc.is_write)
    traffic = simulate_accesses(state, acc.starts_bytes, acc.lengths_bytes, acc.is_write)
    reads, writes = cache_traffic_by_tier(p, traffic)
    n_k = len(g.kernels)
    for label, per_access in (("read_bytes", reads), ("write_bytes", writes)):
        per_kernel = np.zeros((n_k, 2))
        np.add.at(per_kernel, acc.kernel, per_access)
        assert np.array_equal(np.array(tier_rows(ct, label)), per_kernel)
    # The traffic rule, summed: every block accessed reads DRAM; fills and written blocks
    # write it; fills read PMM; dirty victims write it.
    b, t = ct.block_bytes, ct.totals()
    written = int((traffic.hits + traffic.misses)[acc.is_write].sum())
    assert t["dram_read_bytes"] == (t["hits"] + t["misses"]) * b
    assert t["dram_write_bytes"] == (t["fills"] + written) * b
    assert (t["pmm_read_bytes"], t["pmm_write_bytes"]) == (t["fills"] * b, t["writebacks"] * b)
    ops = np.bincount(cost.op_kernel, cost.op_read_bytes + cost.op_write_bytes, n_k)
    assert np.array_equal(ct.accessed_bytes, ops)


def test_time_without_contention_is_the_roofline_of_the_traffic() -> None:
    g, p = r50(8), with_cache(128 * MiB)
    ct = r50_replay(8, 128 * MiB, contention=False)
    cost = CostModel(g, p)
    flops = np.array([k.flops for k in g.kernels], dtype=np.float64)
    classes = [op_class(k.op) for k in g.kernels]
    reads, writes = np.array(tier_rows(ct, "read_bytes")), np.array(tier_rows(ct, "write_bytes"))
    times = roofline(p, flops, classes, reads, writes, dtype="fp32")
    expected = times.time_s + np.where(ct.misses > 0, MISS_S, 0.0)
    np.testing.assert_allclose(cost.compute_s, times.compute_s, rtol=1e-12)
    frame = ct.to_frame()
    np.testing.assert_allclose(frame["uncontended_s"], expected, rtol=1e-12)
    np.testing.assert_allclose(frame["duration_s"], expected, rtol=1e-9)
    assert ct.simulated_s == pytest.approx(expected.sum(), rel=1e-9)


def test_second_step_is_the_steady_state() -> None:
    # For a direct-mapped cache the state after one step is the state after every later one.
    g = r50(8)
    acc = step_accesses(g, CostModel(g, MM), step_layout(g))
    assert MM.cache is not None
    state = new_cache_state(replace(MM.cache, capacity_bytes=128 * MiB), 4096)
    steps = [
        simulate_accesses(state, acc.starts_bytes, acc.lengths_bytes, acc.is_write)
        for _ in range(3)
    ]
    assert steps[0].total() != steps[1].total()
    for name in ("hits", "fills", "writebacks"):
        assert np.array_equal(getattr(steps[1], name), getattr(steps[2], name))


def test_deterministic_and_saved_as_a_trace(tmp_path: Path) -> None:
    a = r50_replay(8, 128 * MiB)
    b = replay_cache(r50(8), with_cache(128 * MiB))
    assert a.trace == b.trace
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    path = tmp_path / "t.parquet"
    save_trace(a.trace, path)
    back = load_trace(path)
    assert back == a.trace and back.planner == "2lm"
    assert back.fast_limit_bytes == 128 * MiB


def test_default_block() -> None:
    assert MM.cache is not None
    assert default_block_bytes(MM.cache) == 4096  # 192 GiB: 50 M frames
    assert default_block_bytes(replace(MM.cache, capacity_bytes=2048)) == 64  # keeps its sets
    # A way that is not a whole number of blocks is simulated rounded down to one.
    odd = replay_cache(chain(), with_cache(4 * MiB + 64))
    assert odd.block_bytes == 4096 and odd.cache.capacity_bytes == 4 * MiB


# ---------------------------------------------------------------------- errors
def test_errors_name_the_platform() -> None:
    g = chain()
    with pytest.raises(CacheReplayError, match="'cascadelake-optane' has no hardware cache"):
        replay_cache(g, AD)
    with pytest.raises(CacheReplayError, match=r"'cascadelake-2lm'.*multiple of the cache line"):
        replay_cache(g, MM, block_bytes=100)
    with pytest.raises(CacheReplayError, match="larger than one way"):
        replay_cache(g, with_cache(2048), block_bytes=4096)
    with pytest.raises(TmsimError, match="another graph or platform"):
        replay_cache(g, MM, cost=CostModel(g, with_cache(2048)))


# ---------------------------------------------------------------------- CLI
