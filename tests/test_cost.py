"""The cost model: agreement with hwmodels' roofline, closed forms, measured tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hwmodels.presets import load_preset
from hwmodels.timing import roofline
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.profiles import read_profile
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

CPU = load_preset("cascadelake-optane")


def test_kernel_times_equal_hwmodels_roofline_under_random_placements() -> None:
    graph = training_graph_of("resnet50", 2)
    cost = CostModel(graph, CPU)
    rng = np.random.default_rng(7)
    tiers = rng.integers(0, 2, size=cost.op_tensor.size)
    n_k = len(graph.kernels)
    reads = np.zeros((n_k, 2))
    writes = np.zeros((n_k, 2))
    np.add.at(reads, (cost.op_kernel, tiers), cost.op_read_bytes)
    np.add.at(writes, (cost.op_kernel, tiers), cost.op_write_bytes)
    from hwmodels.opclass import op_class

    classes = [op_class(k.op) for k in graph.kernels]
    flops = [k.flops for k in graph.kernels]
    expected = roofline(CPU, flops, classes, reads, writes).time_s
    np.testing.assert_allclose(cost.kernel_times_s(tiers), expected, rtol=1e-12)


def test_operand_bytes_by_role(mlp: Graph) -> None:
    cost = CostModel(mlp, CPU)
    # fc1 reads x (100) and w1 (12) and writes h1 (20), in operand order x, w1, h1
    assert cost.op_read_bytes[:3].tolist() == [100, 12, 0]
    assert cost.op_write_bytes[:3].tolist() == [0, 0, 20]


def test_memory_bound_kernel_slows_by_the_bandwidth_ratio(mlp: Graph) -> None:
    cost = CostModel(mlp, CPU)
    fast = cost.memory_s(np.zeros(cost.op_tensor.size, dtype=np.int64))
    slow_x = np.zeros(cost.op_tensor.size, dtype=np.int64)
    slow_x[0] = 1  # x, read by fc1
    delta = cost.memory_s(slow_x)[0] - fast[0]
    dram, pmm = CPU.tiers
    efficiency = CPU.compute.efficiency("matmul").memory
    assert delta == pytest.approx(
        100 / efficiency * (1 / pmm.read_bw_bytes_per_s - 1 / dram.read_bw_bytes_per_s)
    )


def test_move_time_is_latency_plus_bytes_over_the_path_rate(mlp: Graph) -> None:
    cost = CostModel(mlp, CPU)
    path = CPU.copy_path("PMM", "DRAM")
    # a copy's first byte: PMM's idle read latency 305 ns, DRAM's write latency 86.9 ns
    # (Yang et al., FAST 2020, Fig. 2, as the preset gives them)
    latency = 305e-9 + 86.9e-9
    assert CPU.copy_latency_s("PMM", "DRAM") == pytest.approx(latency, rel=1e-12)
    np.testing.assert_allclose(
        cost.move_s(1, 0, "sync"), latency + mlp.sizes_bytes / path.sync_bw_bytes_per_s
    )
    np.testing.assert_allclose(
        cost.move_s(1, 0, "async"), latency + mlp.sizes_bytes / path.async_bw_bytes_per_s
    )
    assert cost.has_path(0, 1) and cost.has_path(1, 0)


def test_measured_table_overrides_only_its_placement(mlp: Graph, tmp_path: Path) -> None:
    csv = tmp_path / "measured.csv"
    csv.write_text("kernel,placement,seconds\nfc2,PMM|DRAM|DRAM,0.5\n")
    table = read_profile(csv).table(mlp, CPU)
    assert table == {(1, (1, 0, 0)): 0.5}
    cost = CostModel(mlp, CPU, measured=table)
    plain = CostModel(mlp, CPU)
    tiers = np.zeros(cost.op_tensor.size, dtype=np.int64)
    assert cost.kernel_times_s(tiers).tolist() == plain.kernel_times_s(tiers).tolist()
    tiers[3] = 1  # fc2's first operand, h1, on PMM
    times = cost.kernel_times_s(tiers)
    assert times[1] == 0.5
    assert times[0] == plain.kernel_times_s(tiers)[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kernel,seconds\nfc1,1\n", "missing column(s) placement"),
        ("kernel,placement,seconds\nfc9,DRAM,1\n", ":2: unknown kernel 'fc9'"),
        ("kernel,placement,seconds\nfc1,DRAM,1\n", "has 3 operands, placement lists 1"),
        ("kernel,placement,seconds\nfc1,DRAM|HBM|DRAM,1\n", "unknown tier 'HBM'"),
        ("kernel,placement,seconds\nfc1,DRAM|DRAM|DRAM,-2\n", "seconds must be a positive number"),
        (
            "kernel,placement,seconds\nfc1,DRAM|DRAM|DRAM,fast\n",
            "seconds must be a positive number",
        ),
    ],
)
def test_bad_measured_tables(mlp: Graph, tmp_path: Path, text: str, message: str) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text(text)
    with pytest.raises(TmsimError) as info:
        read_profile(csv).table(mlp, CPU)
    assert message in str(info.value) and str(csv) in str(info.value)


def _bypassing_checks(platform: object, path: tuple[str | int, ...], value: float) -> None:
    """Set a field of a frozen hardware value the way no validated constructor would."""
    node = platform
    for key in path[:-1]:
        node = node[key] if isinstance(key, int) else getattr(node, key)  # type: ignore[index]
    object.__setattr__(node, str(path[-1]), value)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (("tiers", 1, "read_bw_bytes_per_s"), "reading a byte on tier 'PMM' on platform"),
        (("tiers", 0, "write_bw_bytes_per_s"), "writing a byte on tier 'DRAM' on platform"),
        (("compute", "launch_overhead_s"), "the launch overhead on platform"),
        (("compute", "efficiencies", 1, "compute"), "kernel 'fc1': its compute time on"),
    ],
)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_times_that_would_not_be_finite_are_refused_naming_the_kernel(
    mlp: Graph, path: tuple[str | int, ...], message: str
) -> None:
    platform = load_preset("cascadelake-optane")  # a fresh copy: its values get broken here
    value = 0.0 if path[-1] == "compute" else (math.inf if "launch" in path[-1] else 5e-324)
    _bypassing_checks(platform, path, value)
    with pytest.raises(TmsimError, match=message) as info:
        CostModel(mlp, platform)
    assert "\n" not in str(info.value)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_moves_that_would_not_be_finite_are_refused_naming_the_tensor(mlp: Graph) -> None:
    platform = load_preset("cascadelake-optane")
    _bypassing_checks(platform, ("copy_paths", 1, "sync_bw_bytes_per_s"), 5e-324)  # DRAM->PMM
    cost = CostModel(mlp, platform)
    with pytest.raises(TmsimError, match="tensor 'x': a sync copy from 'DRAM' to 'PMM'"):
        cost.move_s(0, 1, "sync")
    assert np.all(np.isfinite(cost.move_s(0, 1, "async")))
