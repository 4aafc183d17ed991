"""Platform, Compute and CopyPath values: lookups and validation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hwmodels import (
    ClassEfficiency,
    CopyPath,
    DramCache,
    HardwareModelError,
    MemoryTier,
    OpClass,
    Platform,
    load_preset,
)

GB = 1e9


@pytest.fixture(scope="module")
def cpu() -> Platform:
    return load_preset("cascadelake-optane")


def test_lookups(cpu: Platform) -> None:
    assert cpu.tier("PMM").name == "PMM"
    assert cpu.tier_index("DRAM") == 0 and cpu.tier_index("PMM") == 1
    assert cpu.copy_path("PMM", "DRAM").sync_bw_bytes_per_s == 29 * GB
    down = 1 / (1 / 7.38 + 1 / 4.13) * GB  # the copy thread's idle DRAM -> PMM rate
    assert cpu.copy_path("DRAM", "PMM").bw_bytes_per_s(asynchronous=True) == pytest.approx(down)
    assert cpu.kernel_tier_mask() == (True, True)
    assert cpu.addressable_tiers == cpu.tiers
    gpu = load_preset("h100-pcie5")
    assert gpu.kernel_tier_mask() == (True, False)
    two_lm = load_preset("cascadelake-2lm")
    assert two_lm.kernel_tier_mask() == (False, True)
    assert [t.name for t in two_lm.addressable_tiers] == ["PMM"]
    with pytest.raises(HardwareModelError, match="no tier 'HBM'; tiers are DRAM, PMM"):
        cpu.tier("HBM")
    with pytest.raises(HardwareModelError, match="no copy path from 'device' to 'device'"):
        gpu.copy_path("device", "device")


def test_compute_lookups(cpu: Platform) -> None:
    c = cpu.compute
    assert c.dtypes == ("fp32", "fp64")
    assert c.peak("float32") == c.peak("fp32")
    assert c.efficiency("conv") == ClassEfficiency(OpClass.CONV, 0.65, 0.8)
    assert c.efficiency(OpClass.ELEMENTWISE).memory == 0.8
    with pytest.raises(HardwareModelError, match="unknown op class 'gemm'"):
        c.efficiency("gemm")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"tiers": ()}, "no memory tiers"),
        ({"name": " "}, "name must be a non-empty string"),
        ({"kernel_tiers": ()}, "kernel_tiers is empty"),
        ({"kernel_tiers": ("DRAM", "DRAM")}, "lists a tier twice"),
        ({"kernel_tiers": ("NVM",)}, "kernel_tiers names unknown tier 'NVM'"),
        ({"kernel_tiers": ("PMM",)}, "kernels cannot reach the fastest tier 'DRAM'"),
        ({"shared_controllers": (("DRAM",),)}, "two or more tiers"),
        ({"shared_controllers": (("DRAM", "NVM"),)}, "unknown tier 'NVM'"),
        ({"shared_controllers": (("DRAM", "PMM"), ("PMM", "DRAM"))}, "more than one shared"),
    ],
)
def test_platform_validation(cpu: Platform, change: dict[str, object], match: str) -> None:
    with pytest.raises(HardwareModelError, match=match):
        replace(cpu, **change)  # type: ignore[arg-type]


def test_shared_controllers_as_indices_and_through_toml(cpu: Platform) -> None:
    from hwmodels.serialize import platform_from_dict, platform_to_dict

    assert cpu.shared_controllers == () and cpu.controller_groups() == ()
    joint = replace(cpu, shared_controllers=(("PMM", "DRAM"),))
    assert joint.controller_groups() == ((1, 0),)
    assert platform_from_dict(platform_to_dict(joint), "test") == joint


def test_tier_and_path_validation(cpu: Platform) -> None:
    dram, pmm = cpu.tiers
    with pytest.raises(HardwareModelError, match=r"duplicate tier name\(s\) DRAM"):
        replace(cpu, tiers=(dram, replace(pmm, name="DRAM")))
    with pytest.raises(HardwareModelError, match="ordered fastest first"):
        replace(cpu, tiers=(pmm, dram))
    path = CopyPath("PMM", "NVM", 1.0, 1.0)
    with pytest.raises(HardwareModelError, match="names unknown tier 'NVM'"):
        replace(cpu, copy_paths=(*cpu.copy_paths, path))
    twice = cpu.copy_paths[0]
    with pytest.raises(HardwareModelError, match="two copy paths 'PMM' -> 'DRAM'"):
        replace(cpu, copy_paths=(*cpu.copy_paths, twice))
    one_way_duplex = replace(cpu.copy_paths[0], duplex=True)
    with pytest.raises(HardwareModelError, match="disagree on duplex"):
        replace(cpu, copy_paths=(one_way_duplex, cpu.copy_paths[1]))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("DRAM", "DRAM", 1.0, 1.0), "same tier"),
        (("DRAM", "PMM", 0.0, 1.0), "sync_bw_bytes_per_s must be a number of 1 to 1e21 per"),
        (("DRAM", "PMM", 1.0, -2.0), "async_bw_bytes_per_s must be a number of 1 to 1e21 per"),
        (("DRAM", "PMM", 5e-324, 1.0), "sync_bw_bytes_per_s must be .*, got 5e-324$"),
        (("DRAM", "PMM", 1.0, 1e22), "async_bw_bytes_per_s must be .*, got 1e[+]22$"),
        (("DRAM", "PMM", 1.0, 1.0, 0), "copy_engines must be an integer of 1 to 2[*][*]24"),
        (("DRAM", "PMM", 1.0, 1.0, 10**400), "copy_engines must be .*, got about 2[*][*]1328$"),
        (("", "PMM", 1.0, 1.0), "src must be a non-empty tier name"),
    ],
)
def test_copy_path_validation(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(HardwareModelError, match=match):
        CopyPath(*args)  # type: ignore[arg-type]


def test_compute_validation(cpu: Platform) -> None:
    c = cpu.compute
    with pytest.raises(HardwareModelError, match="missing"):
        replace(c, efficiencies=c.efficiencies[:2])
    with pytest.raises(HardwareModelError, match="listed twice"):
        replace(c, peak_flop_per_s=(("fp32", 1.0), ("fp32", 2.0)))
    with pytest.raises(HardwareModelError, match="lists no dtype"):
        replace(c, peak_flop_per_s=())
    with pytest.raises(HardwareModelError, match=r"peak_flop_per_s\[fp32\]"):
        replace(c, peak_flop_per_s=(("fp32", 0.0),))
    with pytest.raises(HardwareModelError, match=r"cores must be an integer of 1 to 2\*\*24"):
        replace(c, cores=0)
    with pytest.raises(HardwareModelError, match="launch_overhead_s"):
        replace(c, launch_overhead_s=-1.0)
    with pytest.raises(HardwareModelError, match=r"memory must be a number of 1e-6 to 1"):
        ClassEfficiency(OpClass.NORM, 0.5, 0.0)


def test_cache_validation() -> None:
    dram = MemoryTier("DRAM", 1 << 30, 100 * GB, 80 * GB)
    pmm = MemoryTier("PMM", 1 << 40, 40 * GB, 12 * GB)
    compute = load_preset("cascadelake-optane").compute
    cache = DramCache("DRAM", "PMM", 1 << 30)
    ok = Platform("ok", (dram, pmm), compute, (), ("PMM",), cache)
    assert ok.cache == cache
    with pytest.raises(HardwareModelError, match="exceeds tier 'DRAM'"):
        replace(ok, cache=DramCache("DRAM", "PMM", 2 << 30))
    with pytest.raises(HardwareModelError, match="cannot be a kernel tier"):
        replace(ok, kernel_tiers=("DRAM", "PMM"))
    with pytest.raises(HardwareModelError, match="cannot be a copy endpoint"):
        replace(ok, copy_paths=(CopyPath("PMM", "DRAM", 1.0, 1.0),))
    with pytest.raises(HardwareModelError, match="cache_tier names unknown tier 'HBM'"):
        replace(ok, cache=DramCache("HBM", "PMM", 1 << 20))


def test_kernels_must_reach_the_fastest_addressable_tier() -> None:
    """A GPU whose kernels reach only the host would leave the device (the tier a capacity
    ratio limits and every planner fills first) unusable; only 2LM hides the fastest tier."""
    gpu = load_preset("rtx2080ti-pcie3")
    with pytest.raises(HardwareModelError) as info:
        replace(gpu, kernel_tiers=("host",))
    message = str(info.value)
    assert "kernels cannot reach the fastest tier 'device' (kernel_tiers: host)" in message
    assert "\n" not in message
    two_lm = load_preset("cascadelake-2lm")  # the cache hides DRAM; PMM is the fastest left
    assert two_lm.addressable_tiers[0].name == "PMM" and two_lm.kernel_tiers == ("PMM",)
    assert replace(gpu, kernel_tiers=("host", "device")).kernel_tiers == ("host", "device")


def test_both_directions_rate_is_checked() -> None:
    from hwmodels import CopyPath, HardwareModelError

    assert CopyPath("a", "b", 1e9, 1e9, both_bw_bytes_per_s=8e8).both_bw_bytes_per_s == 8e8
    with pytest.raises(HardwareModelError, match="both_bw_bytes_per_s must be"):
        CopyPath("a", "b", 1e9, 1e9, both_bw_bytes_per_s=0.0)
    with pytest.raises(HardwareModelError, match="is for a duplex path"):
        CopyPath("a", "b", 1e9, 1e9, duplex=False, both_bw_bytes_per_s=8e8)
