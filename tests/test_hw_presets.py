"""Presets against their published numbers; TOML round trip; every bad-file error."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmodels import (
    DramCache,
    HardwareModelError,
    load_platform,
    load_preset,
    platform_from_toml,
    platform_to_dict,
    platform_to_toml,
    preset_descriptions,
    preset_names,
    save_platform,
)

GB = 1e9
GiB = 2**30
PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"


def test_the_presets_are_all_there() -> None:
    assert preset_names() == (
        "a100-pcie4",
        "cascadelake-2lm",
        "cascadelake-optane",
        "gh200",
        "h100-host-nvme",
        "h100-pcie5",
        "h200-host-nvme",
        "mi300a",
        "rtx2080ti-pcie3",
        "spr-ddr5-cxl",
        "v100-pcie3",
        "xeonmax-cache",
        "xeonmax-flat",
    )
    assert all(preset_descriptions().values())


def test_cascadelake_optane_headline_numbers() -> None:
    """reference/hardware.md, Cascade Lake socket with Optane DC PMM (Yang et al., FAST 2020):
    6 x 32 GB DDR4-2666 and 6 x 256 GB Optane per socket; sequential read 104.6 / 37.6 GB/s
    (24 threads); ntstore 76.8 GB/s (DRAM, 24 threads) and 12.5 GB/s peak (Optane); idle
    latency random read 101 / 305 ns, write 87 / 90 ns; granularity 64 / 256 B.
    AutoTM (darchr/AutoTM abstractoptimizer.jl): PMM->DRAM 29 GB/s and DRAM->PMM 12 GB/s
    synchronous; asynchronous: one thread's rates (Yang et al. Fig. 4, 1 thread: read 2.88 /
    7.38, ntstore 4.13 / 4.31 GB/s), a read plus a write per byte: 1.726 and 2.648 GB/s
    (AutoTM measured 2.0 and 2.5)."""
    p = load_preset("cascadelake-optane")
    assert p.tier_names == ("DRAM", "PMM")
    assert p.kernel_tiers == ("DRAM", "PMM")  # every tier on a CPU with PMM
    assert p.cache is None
    dram, pmm = p.tiers
    assert dram.capacity_bytes == 6 * 32 * GiB
    assert pmm.capacity_bytes == 6 * 256 * GiB
    assert (dram.read_bw_bytes_per_s, pmm.read_bw_bytes_per_s) == (104.6 * GB, 37.6 * GB)
    assert (dram.write_bw_bytes_per_s, pmm.write_bw_bytes_per_s) == (76.8 * GB, 12.5 * GB)
    # 02-best_case_latency.csv: 101.5 / 305.0 ns random read, 86.9 / 90.4 ns write
    assert dram.read_latency_s == pytest.approx(101.5e-9)
    assert pmm.read_latency_s == pytest.approx(305e-9)
    assert dram.write_latency_s == pytest.approx(86.9e-9)
    assert pmm.write_latency_s == pytest.approx(90.4e-9)
    assert (dram.access_granularity_bytes, pmm.access_granularity_bytes) == (64, 256)
    rates = {(c.src, c.dst): (c.sync_bw_bytes_per_s, c.async_bw_bytes_per_s) for c in p.copy_paths}
    up, down = 1 / (1 / 2.88 + 1 / 4.31) * GB, 1 / (1 / 7.38 + 1 / 4.13) * GB
    assert rates == {
        ("PMM", "DRAM"): (29 * GB, pytest.approx(up, rel=1e-12)),
        ("DRAM", "PMM"): (12 * GB, pytest.approx(down, rel=1e-12)),
    }
    assert p.compute.cores == 24
    # 24 cores x 2.4 GHz x 2 AVX-512 FMA units x 16 FP32 lanes x 2 FLOP
    assert p.compute.peak("fp32") == pytest.approx(24 * 2.4e9 * 2 * 16 * 2)
    assert p.compute.peak("fp64") == pytest.approx(p.compute.peak("fp32") / 2)


def test_cascadelake_2lm_is_the_same_machine_in_memory_mode() -> None:
    """reference/hardware.md, Memory Mode: DRAM is a direct-mapped, write-back cache with
    64 B lines in front of the PMM; only the PMM is visible; a miss adds about 70 ns
    (Moon et al., J. KIISE 2020)."""
    app_direct = load_preset("cascadelake-optane")
    p = load_preset("cascadelake-2lm")
    assert p.tiers == app_direct.tiers and p.compute == app_direct.compute
    assert p.kernel_tiers == ("PMM",)
    assert [t.name for t in p.addressable_tiers] == ["PMM"]
    assert p.copy_paths == ()
    assert p.cache == DramCache(
        cache_tier="DRAM",
        backing_tier="PMM",
        capacity_bytes=192 * GiB,
        line_bytes=64,
        associativity=1,
        write_back=True,
        write_allocate=True,
        miss_latency_s=70e-9,
        source=p.cache.source if p.cache else "",
    )


# reference/hardware.md, "GPUs and links": memory, FP32, FP16 tensor (dense), the measured
# pinned PCIe rate (AutoTM uses 12 GB/s for PCIe 3), copy engines; the device bandwidth is a
# measured BabelStream triad (the sources are in tests/test_preset_measurements.py; the
# datasheet's 616, 900, 1555 and 3350 GB/s stay in the presets' comments). The H100's peaks
# are the fp32 and bf16 matrix products measured on an H200, the same Hopper GPU
# (calibration/h200/results.json), which its calibrated kernel model is a fraction of.
GPU_TABLE = {
    "rtx2080ti-pcie3": (11, 555.7, 13.4, 53.8, 12.0, 3),
    "v100-pcie3": (16, 836.9, 15.7, 125, 12.0, 6),
    "a100-pcie4": (40, 1377.4, 19.5, 312, 24.8, 3),
    "h100-pcie5": (80, 2970, 50.9, 779, 55.0, 3),
}


@pytest.mark.parametrize("name", sorted(GPU_TABLE))
def test_gpu_headline_numbers(name: str) -> None:
    mem_gib, bw, fp32, fp16, link, engines = GPU_TABLE[name]
    p = load_preset(name)
    device, host = p.tiers
    assert (device.name, host.name) == ("device", "host")
    assert p.kernel_tiers == ("device",)  # kernels access device memory only
    assert device.capacity_bytes == mem_gib * GiB
    assert device.read_bw_bytes_per_s == device.write_bw_bytes_per_s == pytest.approx(bw * GB)
    assert p.compute.peak("fp32") == pytest.approx(fp32 * 1e12)
    assert p.compute.peak("fp16") == pytest.approx(fp16 * 1e12)
    assert len(p.copy_paths) == 2
    for path in p.copy_paths:
        assert path.sync_bw_bytes_per_s == path.async_bw_bytes_per_s == link * GB
        assert path.copy_engines == engines
        assert path.duplex  # one H2D and one D2H copy run at full rate together
    assert {(c.src, c.dst) for c in p.copy_paths} == {("host", "device"), ("device", "host")}
    if p.compute.kernels is None:
        # "about 5 to 10 us launch overhead on a GPU" (reference/hardware.md, Kernel cost)
        assert p.compute.launch_overhead_s == pytest.approx(5e-6)
    else:  # the kernel model's fixed and dispatch times take its place
        assert p.compute.launch_overhead_s == 0.0


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_cites_its_sources(name: str) -> None:
    p = load_preset(name)
    assert p.source and p.compute.source and all(t.source for t in p.tiers)
    assert all(c.source for c in p.copy_paths)
    assert p.cache is None or p.cache.source
    text = (PRESET_DIR / f"{name}.toml").read_text()
    assert text.count("#") >= 10  # the numbers carry comments with their provenance


@pytest.mark.parametrize("name", preset_names())
def test_presets_round_trip(name: str) -> None:
    p = load_preset(name)
    assert platform_from_toml(platform_to_toml(p), "x.toml") == p
    # and writes every optional table it has: the GPUs' drivers, the CPUs' memory modes, the
    # superchip's kernel link; the CXL socket and the APU have none
    optional = {"cache", "memory_mode", "unified_memory", "kernel_links"}
    tables = optional & set(platform_to_dict(p))
    others = {
        "cascadelake-2lm": {"cache"},
        "cascadelake-optane": {"memory_mode"},
        "xeonmax-cache": {"cache"},
        "xeonmax-flat": {"memory_mode"},
        "spr-ddr5-cxl": set(),
        "gh200": {"kernel_links"},
        "mi300a": set(),
    }
    assert tables == others.get(name, {"unified_memory"})


def test_a_copied_and_edited_preset_loads_the_same_way(tmp_path: Path) -> None:
    text = (PRESET_DIR / "cascadelake-optane.toml").read_text()
    edited = text.replace("capacity_GiB = 192", "capacity_GiB = 96").replace(
        'name = "cascadelake-optane"', 'name = "half-dram"'
    )
    path = tmp_path / "mine.toml"
    path.write_text(edited)
    p = load_platform(str(path))
    assert p.name == "half-dram"
    assert p.tier("DRAM").capacity_bytes == 96 * GiB
    assert p.tier("PMM") == load_preset("cascadelake-optane").tier("PMM")
    assert load_platform(path) == p  # a Path works too
    saved = tmp_path / "saved.toml"
    save_platform(p, saved)
    assert load_platform(saved) == p


def test_units_in_key_names_convert_to_si(tmp_path: Path) -> None:
    base = (PRESET_DIR / "cascadelake-optane.toml").read_text()
    text = base.replace("capacity_GiB = 192", "capacity_GB = 200").replace(
        "read_bw_GBps = 104.6", "read_bw_MBps = 104600"
    )
    text = text.replace("launch_overhead_us = 2.0", "launch_overhead_ns = 2500")
    p = platform_from_toml(text, "units.toml")
    assert p.tier("DRAM").capacity_bytes == 200 * 10**9
    assert p.tier("DRAM").read_bw_bytes_per_s == pytest.approx(104.6e9)
    assert p.compute.launch_overhead_s == pytest.approx(2.5e-6)


# --- Hypothesis round trip ----------------------------------------------------------------


OPTANE = (PRESET_DIR / "cascadelake-optane.toml").read_text()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # not TOML
        (lambda t: t + "\nthis is = = not toml\n", "not valid TOML"),
        # missing field
        (lambda t: t.replace("read_bw_GBps = 37.6", ""), "tiers[1] (PMM): missing field read_bw"),
        (
            lambda t: t.replace('name = "cascadelake-optane"\n', ""),
            "platform: missing field 'name'",
        ),
        (lambda t: t.replace("cores = 24", ""), "compute: missing field 'cores'"),
        (
            lambda t: t.replace(
                "[compute.efficiency]\nconv = { compute = 0.65, memory = 0.8 }\n",
                "[compute.efficiency]\n",
            ),
            "missing field 'conv'",
        ),
        # wrong type
        (
            lambda t: t.replace("capacity_GiB = 192", 'capacity_GiB = "192"'),
            "tiers[0] (DRAM): capacity_GiB must be a number, got string",
        ),
        (lambda t: t.replace("cores = 24", "cores = 24.5"), "cores must be an integer, got number"),
        (
            lambda t: t.replace("duplex = false", "duplex = 0", 1),
            "copy_paths[0]: duplex must be true or false",
        ),
        (
            lambda t: t.replace('kernel_tiers = ["DRAM", "PMM"]', "kernel_tiers = 3"),
            "kernel_tiers must be an array",
        ),
        # bad value
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_GBps = -37.6"),
            "tiers[1] (PMM): read_bw_GBps must be a finite number > 0, got -37.6",
        ),
        (lambda t: t.replace("capacity_GiB = 192", "capacity_GiB = 0"), "capacity_GiB must be"),
        (
            lambda t: t.replace("capacity_GiB = 192", "capacity_GiB = 1e-10"),
            "capacity is not a whole number of bytes",
        ),
        (
            lambda t: t.replace("sync_bw_GBps = 29.0", "sync_bw_GBps = 0"),
            "copy_paths[0]: sync_bw_GBps must be a finite number > 0",
        ),
        (lambda t: t.replace("mix_exponent = 8.0", "mix_exponent = 0"), "mix_exponent must be"),
        (
            lambda t: t.replace("conv = { compute = 0.65", "conv = { compute = 1.5"),
            "compute.efficiency.conv: compute must lie in (0, 1], got 1.5",
        ),
        (lambda t: t.replace("fp64 = 1.8432", "float64 = 1.8432"), "should be spelled 'fp64'"),
        # unknown tier
        (
            lambda t: t.replace('src = "PMM"', 'src = "NVM"\nasync_bw_GBps = 2.0'),
            "copy path 'NVM' -> 'DRAM' names unknown tier 'NVM'",
        ),
        (
            lambda t: t.replace('kernel_tiers = ["DRAM", "PMM"]', 'kernel_tiers = ["HBM"]'),
            "kernel_tiers names unknown tier 'HBM'",
        ),
        # unknown field, ambiguous unit, duplicate tier, order, path twice
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_GBs = 37.6"),
            "tiers[1] (PMM): read_bw_GBs: unknown unit (give one of read_bw_bytes_per_s",
        ),
        (
            lambda t: t.replace("cores = 24", "cores = 24\ncolour = 'red'"),
            "compute: unknown field(s) colour",
        ),
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_GBps = 37.6\nread_bw_MBps = 1"),
            "read_bw given twice",
        ),
        (lambda t: t.replace('name = "PMM"', 'name = "DRAM"'), "duplicate tier name(s) DRAM"),
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_GBps = 376"),
            "tiers must be ordered fastest first",
        ),
        (
            lambda t: t.replace('src = "DRAM"\ndst = "PMM"', 'src = "PMM"\ndst = "DRAM"'),
            "two copy paths 'PMM' -> 'DRAM'",
        ),
        (
            lambda t: t.replace("kernel_tiers = [", "cache = 3\nkernel_tiers = ["),
            "cache: must be a table, got integer",
        ),
        # numbers no float holds, or times no machine takes, and text that is not TOML
        (
            lambda t: t.replace("cores = 24", "cores = " + "9" * 5000),
            "not valid TOML: an integer with too many digits",
        ),
        (
            lambda t: t.replace("cores = 24", "cores = " + "[" * 100_000 + "]" * 100_000),
            "not valid TOML: arrays or tables nested too deeply",
        ),
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_GBps = " + "9" * 400),
            "tiers[1] (PMM): read_bw_GBps must be a finite number > 0, got about 2**1328",
        ),
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_GBps = 1e300"),
            "tiers[1] (PMM): read_bw_GBps = 1e+300 is out of range (not finite in SI units)",
        ),
        (
            lambda t: t.replace("read_bw_GBps = 37.6", "read_bw_bytes_per_s = 5e-324"),
            "tier 'PMM': read_bw_bytes_per_s must be a number of 1 to 1e21 per second",
        ),
        (
            lambda t: t.replace("capacity_GiB = 192", "capacity_TiB = 1e300"),
            "capacity_TiB = 1e+300 is out of range (not finite in bytes)",
        ),
        (
            lambda t: t.replace("capacity_GiB = 192", "capacity_GiB = " + "9" * 30),
            "tier 'DRAM': capacity_bytes must be a positive integer of at most 2**62",
        ),
        (
            lambda t: t.replace("write_latency_ns = 90.4", "write_latency_s = 3600"),
            "tier 'PMM': write_latency_s must be a number of 0 to 1 s, got 3600",
        ),
        (
            lambda t: t.replace("launch_overhead_us = 2.0", "launch_overhead_s = 1e308"),
            "launch_overhead_s must be a number of 0 to 1 s, got 1e+308",
        ),
        (
            lambda t: t.replace("conv = { compute = 0.65", "conv = { compute = 5e-324"),
            "compute efficiency conv: compute must be a number of 1e-6 to 1, got 5e-324",
        ),
        (
            lambda t: t.replace("mix_penalty = 1.0", "mix_penalty = 1e308"),
            "mix_penalty must be a number of 0 to 1e6, got 1e+308",
        ),
        (
            lambda t: t.replace(
                "write_falloff_onset_writers = 8", "write_falloff_onset_writers = " + "9" * 400
            ),
            "write_falloff_onset_writers must be an integer of 0 to 2**24",
        ),
        (
            lambda t: t.replace('kernel_tiers = ["DRAM", "PMM"]', 'kernel_tiers = ["PMM"]'),
            "kernels cannot reach the fastest tier 'DRAM' (kernel_tiers: PMM)",
        ),
        (
            lambda t: t.replace("line_bytes = 64 ", "line_bytes = 48 "),
            "memory_mode: line_bytes must be a power of two of at most 2**62, got 48",
        ),
    ],
)
def test_bad_files_get_one_line_errors_naming_file_and_field(
    tmp_path: Path, edit: object, expected: str
) -> None:
    path = tmp_path / "bad.toml"
    text = edit(OPTANE)  # type: ignore[operator]
    assert text != OPTANE
    path.write_text(text)
    with pytest.raises(HardwareModelError) as info:
        load_platform(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_cache_validation_in_files() -> None:
    two_lm = (PRESET_DIR / "cascadelake-2lm.toml").read_text()
    cases = {
        'kernel_tiers = ["PMM"]': ('kernel_tiers = ["PMM", "DRAM"]', "cannot be a kernel tier"),
        "capacity_GiB = 192            # all": ("capacity_GiB = 384 #", "exceeds tier 'DRAM'"),
        'backing_tier = "PMM"': ('backing_tier = "SSD"', "cache backing_tier names unknown"),
        # 192 GiB is a multiple of 48 bytes, but no cache has a 48-byte line
        "line_bytes = 64 ": ("line_bytes = 48 ", "cache: line_bytes must be a power of two"),
        "copy_paths = []": (
            'copy_paths = [{src = "DRAM", dst = "PMM", sync_bw_GBps = 1, async_bw_GBps = 1}]',
            "cannot be a copy endpoint",
        ),
    }
    for old, (new, expected) in cases.items():
        assert old in two_lm, old
        with pytest.raises(HardwareModelError, match=expected) as info:
            platform_from_toml(two_lm.replace(old, new), "2lm.toml")
        assert str(info.value).startswith("2lm.toml: ")


def test_unknown_names_and_files(tmp_path: Path) -> None:
    with pytest.raises(HardwareModelError, match="neither a platform preset"):
        load_platform("cascadelake")
    with pytest.raises(HardwareModelError, match="neither a platform preset"):
        load_platform(str(tmp_path / "missing.toml"))
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(HardwareModelError, match="not UTF-8"):
        load_platform(str(binary))
