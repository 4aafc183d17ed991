"""The presets of today's machines (Sapphire Rapids with CXL memory, Xeon Max in flat and
cache mode, H200 with host DRAM and NVMe, GH200, MI300A) against their cited numbers; the
kernel link that lets GH200's GPU read host memory; the one-tier platform; and a small CNN
planned, validated and replayed on each with the strategies that apply to it."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tmsim
from hwmodels import (
    HardwareModelError,
    KernelLink,
    LinkEnergy,
    Platform,
    load_preset,
    platform_from_toml,
    platform_to_dict,
    platform_to_toml,
    preset_names,
    roofline,
)
from tmsim.cli.main import main
from tmsim.strategies import ONE_TIER, applicable

GB = 1e9
GiB = 2**30
PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"
MODERN = ("gh200", "h200-host-nvme", "mi300a", "spr-ddr5-cxl", "xeonmax-cache", "xeonmax-flat")


@pytest.fixture(scope="module")
def resnet() -> tmsim.Graph:
    """ResNet-50 at batch 2: 0.44 GB at its peak, 300-odd kernels."""
    return tmsim.graph("resnet50", batch=2)


# --- every preset is there -----------------------------------------------------------------


def test_the_modern_presets_are_listed_by_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(MODERN) <= set(preset_names())
    assert main(["platforms"]) == 0
    listed = dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines())
    for name in MODERN:
        assert listed[name] == load_preset(name).description


@pytest.mark.parametrize("name", MODERN)
def test_each_loads_round_trips_and_prints(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    p = load_preset(name)
    assert p.name == name
    assert platform_from_toml(platform_to_toml(p), "x.toml") == p
    assert main(["platform", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{name}: {p.description}")
    for tier in p.tiers:
        assert f"  {tier.name}: " in out


@pytest.mark.parametrize("name", MODERN)
def test_orderings_are_sane(name: str) -> None:
    """Fastest first, each slower tier at most half as fast for reads and at least as large;
    every rate and capacity of a new preset is a cited figure, never a default."""
    p = load_preset(name)
    tiers = p.addressable_tiers
    for fast, slow in itertools.pairwise(tiers):
        assert slow.read_bw_bytes_per_s <= fast.read_bw_bytes_per_s / 2
        assert slow.capacity_bytes >= fast.capacity_bytes
    for path in p.copy_paths:
        # no copy outruns the slower of its two ends
        ends = min(p.tier(path.src).read_bw_bytes_per_s, p.tier(path.dst).write_bw_bytes_per_s)
        assert path.async_bw_bytes_per_s <= path.sync_bw_bytes_per_s <= ends
    text = (PRESET_DIR / f"{name}.toml").read_text()
    assert text.count("#") >= 20  # the numbers carry their provenance
    assert p.source and p.compute.source and all(t.source for t in p.tiers)


# --- the numbers, against their sources ----------------------------------------------------


def test_spr_ddr5_cxl() -> None:
    """8 x DDR5-4800 (307.2 GB/s peak, meterpreter.org) at its STREAM rate, 80% of the peak,
    writes at 0.75 of reads (reference/next-capabilities.md 2.1); Micron CZ120: 256 GB, up to
    36 GB/s (MLC, 2:1, Tom's Hardware); 250 ns on SPR with an x8 CXL 2.0 expander (Intel CacheLib wiki), about
    twice local DRAM (Pond); Xeon Platinum 8470: 52 cores at 2.0 GHz, 2 AVX-512 FMA units."""
    p = load_preset("spr-ddr5-cxl")
    assert p.tier_names == ("DDR5", "CXL")
    assert p.kernel_tiers == ("DDR5", "CXL")  # CPU loads and stores reach CXL memory
    assert p.kernel_links == () and p.cache is None and p.memory_mode is None
    ddr5, cxl = p.tiers
    assert ddr5.capacity_bytes == 8 * 16 * GiB
    assert cxl.capacity_bytes == 256 * GiB
    assert (ddr5.read_bw_bytes_per_s, ddr5.write_bw_bytes_per_s) == (273.1 * GB, 204.8 * GB)
    # a STREAM triad (two reads per write) on them is 80% of the 8 x 4800e6 x 8 B peak
    triad = float(ddr5.effective_bw_bytes_per_s(2 / 3))
    assert triad == pytest.approx(0.8 * 8 * 4800e6 * 8, rel=1e-3)
    assert cxl.read_bw_bytes_per_s == cxl.write_bw_bytes_per_s == 36 * GB
    assert cxl.read_latency_s == pytest.approx(250e-9)
    assert cxl.read_latency_s == pytest.approx(2 * ddr5.read_latency_s)
    # the CZ120's rate beside one DDR5-4800 RDIMM's 38.4 GB/s peak: about one channel
    assert cxl.read_bw_bytes_per_s / (307.2 * GB / 8) == pytest.approx(36 / 38.4)
    assert p.compute.cores == 52
    assert p.compute.peak("fp32") == pytest.approx(52 * 2.0e9 * 2 * 16 * 2)
    assert p.compute.peak("fp64") == pytest.approx(p.compute.peak("fp32") / 2)
    rates = {(c.src, c.dst): (c.sync_bw_bytes_per_s, c.async_bw_bytes_per_s) for c in p.copy_paths}
    little = 16 * 64 / 250e-9  # 16 lines in flight over the CXL latency
    assert rates == {
        ("CXL", "DDR5"): (36 * GB, pytest.approx(little)),
        ("DDR5", "CXL"): (36 * GB, pytest.approx(little)),
    }
    assert all(not c.duplex and c.copy_engines == 1 for c in p.copy_paths)  # one helper thread


def test_xeonmax_flat() -> None:
    """Xeon Max 9480: 56 cores at 1.9 GHz; 4 x 16 GB HBM2e at its STREAM rate, 0.6-0.7 TB/s
    (about 1 TB/s peak); 8 x DDR5-4800 at Sapphire Rapids' (spr-ddr5-cxl)."""
    p = load_preset("xeonmax-flat")
    assert p.tier_names == ("HBM", "DDR5")
    assert p.kernel_tiers == ("HBM", "DDR5")  # flat mode: two NUMA nodes the cores reach
    hbm, ddr5 = p.tiers
    assert hbm.capacity_bytes == 4 * 16 * GiB
    assert hbm.read_bw_bytes_per_s == hbm.write_bw_bytes_per_s == 650 * GB
    assert ddr5.capacity_bytes == 512 * GiB
    spr = load_preset("spr-ddr5-cxl").tier("DDR5")
    assert (ddr5.read_bw_bytes_per_s, ddr5.write_bw_bytes_per_s) == (
        spr.read_bw_bytes_per_s,
        spr.write_bw_bytes_per_s,
    )
    assert 2 <= ddr5.capacity_bytes / hbm.capacity_bytes <= 64  # what cache mode allows (Lenovo)
    assert p.compute.cores == 56
    assert p.compute.peak("fp32") == pytest.approx(56 * 1.9e9 * 2 * 16 * 2)
    assert {(c.src, c.dst): c.sync_bw_bytes_per_s for c in p.copy_paths} == {
        ("DDR5", "HBM"): pytest.approx(0.8 * ddr5.read_bw_bytes_per_s),
        ("HBM", "DDR5"): pytest.approx(0.8 * ddr5.write_bw_bytes_per_s),
    }
    mode = p.memory_mode
    assert mode is not None
    assert (mode.line_bytes, mode.associativity, mode.write_back) == (64, 1, True)


def test_xeonmax_cache_is_the_flat_socket_in_caching_mode() -> None:
    flat, cache = load_preset("xeonmax-flat"), load_preset("xeonmax-cache")
    made = flat.in_memory_mode(64 * GiB)
    assert cache.tiers == flat.tiers == made.tiers
    assert cache.compute == flat.compute
    assert cache.kernel_tiers == made.kernel_tiers == ("DDR5",)
    assert cache.copy_paths == made.copy_paths == ()
    assert cache.cache is not None and made.cache is not None
    assert replace(cache.cache, source="") == replace(made.cache, source="")
    assert cache.cache.capacity_bytes == 64 * GiB  # the whole HBM caches the DDR5
    assert [t.name for t in cache.addressable_tiers] == ["DDR5"]


def test_h200_host_nvme() -> None:
    """H200: 141 GB HBM3e read at 4,375 GB/s as measured (4.8 TB/s peak), the H100 SXM5's GPU;
    PCIe 5 pinned 55 GB/s, 46.6 each way at once; a
    Sapphire Rapids DDR5 host; Samsung PM1743: 15.36 TB, 13 / 6.6 GB/s."""
    p = load_preset("h200-host-nvme")
    assert p.tier_names == ("device", "host", "nvme")
    assert p.kernel_tiers == ("device",)
    device, host, nvme = p.tiers
    assert device.capacity_bytes == 141 * GiB
    assert device.read_bw_bytes_per_s == device.write_bw_bytes_per_s == 4375 * GB
    spr = load_preset("spr-ddr5-cxl").tier("DDR5")  # the same channels, more DIMMs
    same = ("read_bw_bytes_per_s", "write_bw_bytes_per_s", "read_latency_s", "write_latency_s")
    assert all(getattr(host, f) == getattr(spr, f) for f in same)
    assert host.capacity_bytes == 8 * 64 * GiB
    assert nvme.capacity_bytes == 15_360_000_000_000
    assert (nvme.read_bw_bytes_per_s, nvme.write_bw_bytes_per_s) == (13 * GB, 6.6 * GB)
    rates = {(c.src, c.dst): c.sync_bw_bytes_per_s for c in p.copy_paths}
    assert rates == {
        ("host", "device"): 55 * GB,
        ("device", "host"): 55 * GB,
        ("nvme", "host"): 13 * GB,
        ("host", "nvme"): 6.6 * GB,
    }
    h100 = load_preset("h100-pcie5").compute
    # Measured on an H200 (calibration/h200/results.json), not the H100's datasheet peaks.
    assert dict(p.compute.peak_flop_per_s) == {
        "fp32": 50.9e12,
        "tf32": 398.5e12,
        "fp16": 779e12,
        "bf16": 779e12,
    }
    assert p.compute.kernels is not None
    assert p.compute.cores == h100.cores == 132
    assert p.unified_memory is not None  # the unified-memory baseline applies


def test_h100_host_nvme_now_has_a_sapphire_rapids_host() -> None:
    p = load_preset("h100-host-nvme")
    assert p.tier("host") == load_preset("h200-host-nvme").tier("host")
    host, spr = p.tier("host"), load_preset("spr-ddr5-cxl").tier("DDR5")
    assert (host.read_bw_bytes_per_s, host.write_bw_bytes_per_s) == (
        spr.read_bw_bytes_per_s,
        spr.write_bw_bytes_per_s,
    )


def test_gh200() -> None:
    """GH200: 96 GB HBM3 as measured (3,614.6 GB/s read, 3,704.8 written; 4 TB/s peak); 480 GB
    LPDDR5X (CPU STREAM 486 GB/s); NVLink-C2C 450 GB/s per direction, measured 375 host to
    device and 297 device to host, about 450 in all when both run; kernels reach both."""
    p = load_preset("gh200")
    assert p.tier_names == ("device", "host")
    assert p.kernel_tiers == ("device", "host")
    device, host = p.tiers
    assert device.capacity_bytes == 96 * GiB and host.capacity_bytes == 480 * GiB
    assert (device.read_bw_bytes_per_s, device.write_bw_bytes_per_s) == (3614.6 * GB, 3704.8 * GB)
    assert host.read_bw_bytes_per_s == host.write_bw_bytes_per_s == 486 * GB
    assert p.kernel_links == (KernelLink("host", 375 * GB, 297 * GB, p.kernel_links[0].source),)
    assert p.kernel_link("device") is None
    # the measured link is under the spec's 450 GB/s each way, and under the LPDDR5X
    assert 297 * GB < 375 * GB < 450 * GB < host.read_bw_bytes_per_s
    rates = {(c.src, c.dst): c.sync_bw_bytes_per_s for c in p.copy_paths}
    assert rates == {("host", "device"): 375 * GB, ("device", "host"): 297 * GB}
    both = {(c.src, c.dst): c.both_bw_bytes_per_s for c in p.copy_paths}
    assert both == {("host", "device"): 251.1 * GB, ("device", "host"): 198.9 * GB}
    assert sum(both.values()) == pytest.approx(450 * GB)  # half the 900 GB/s bidirectional
    assert p.compute.peak_flop_per_s == load_preset("h100-pcie5").compute.peak_flop_per_s
    assert p.unified_memory is None  # kernels reach the host: no managed-memory baseline


def test_mi300a() -> None:
    """MI300A: one 128 GB HBM3 pool at its BabelStream triad, 3,787.6 GB/s (5.3 TB/s peak), for
    CPU and GPU; 228 CUs; FP32 122.6, FP64
    61.3, FP16 and BF16 980.6 TFLOPS (AMD)."""
    p = load_preset("mi300a")
    assert p.tier_names == ("HBM",) and p.kernel_tiers == ("HBM",)
    assert p.copy_paths == () and p.cache is None and p.unified_memory is None
    hbm = p.tiers[0]
    assert hbm.capacity_bytes == 128 * GiB
    assert hbm.read_bw_bytes_per_s == hbm.write_bw_bytes_per_s == 3787.6 * GB
    assert p.compute.cores == 228
    peaks = {d: p.compute.peak(d) / 1e12 for d in ("fp32", "fp64", "fp16", "bf16")}
    assert peaks == pytest.approx({"fp32": 122.6, "fp64": 61.3, "fp16": 980.6, "bf16": 980.6})


# --- the kernel link -----------------------------------------------------------------------


def _memory_s(p: Platform, tier: str, read: float, write: float) -> float:
    n = len(p.tiers)
    r, w = np.zeros((1, n)), np.zeros((1, n))
    r[0, p.tier_index(tier)], w[0, p.tier_index(tier)] = read, write
    return float(roofline(p, [0.0], "elementwise", r, w).memory_s[0])


def test_kernels_reach_the_host_at_the_lesser_of_tier_and_link() -> None:
    gh = load_preset("gh200")
    eff = gh.compute.efficiency("elementwise").memory
    assert _memory_s(gh, "host", GB, 0) == pytest.approx(1 / (0.8 * 375))
    assert _memory_s(gh, "host", 0, GB) == pytest.approx(1 / (0.8 * 297))
    assert eff == 0.8
    assert gh.kernel_bw_bytes_per_s("host", gh.compute.cores) == (375 * GB, 297 * GB)
    # without the link the GPU would read LPDDR5X at the CPU's rate; the device is unlinked
    bare = replace(gh, kernel_links=())
    assert _memory_s(bare, "host", GB, 0) == pytest.approx(1 / (0.8 * 486))
    assert _memory_s(gh, "device", GB, GB) == _memory_s(bare, "device", GB, GB)
    # a link faster than the tier leaves the tier's rate
    wide = replace(gh, kernel_links=(KernelLink("host", 1e13, 1e13),))
    assert wide.kernel_bw_bytes_per_s("host", 1) == (486 * GB, 486 * GB)


def test_the_link_is_in_the_toml_and_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    gh = load_preset("gh200")
    assert platform_to_dict(gh)["kernel_links"] == [
        {
            "tier": "host",
            "read_bw_bytes_per_s": 375 * GB,
            "write_bw_bytes_per_s": 297 * GB,
            "source": gh.kernel_links[0].source,
        }
    ]
    assert "kernel_links" not in platform_to_dict(load_preset("h200-host-nvme"))
    assert main(["platform", "gh200"]) == 0
    assert "kernel link to host: read 375 GB/s, write 297 GB/s" in capsys.readouterr().out
    assert main(["platform", "gh200", "--json"]) == 0
    assert '"kernel_links"' in capsys.readouterr().out


def test_an_override_finds_the_link_by_its_tier() -> None:
    """Sweeps and ``tmsim.platform(overrides=...)`` name a kernel link by its tier: here the
    link at NVLink-C2C's spec rate, 450 GB/s each way (still under LPDDR5X's 486)."""
    spec = {"kernel_links.host.read_bw_GBps": 450.0, "kernel_links.0.write_bw_GBps": 450.0}
    p = tmsim.platform("gh200", overrides=spec)
    assert p.kernel_bw_bytes_per_s("host", 1) == (450 * GB, 450 * GB)


GH200 = (PRESET_DIR / "gh200.toml").read_text()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('tier = "host"\n', 'tier = "nvme"\n', "kernel link to 'nvme': kernels do not reach"),
        (
            'kernel_tiers = ["device", "host"]',
            'kernel_tiers = ["device"]',
            "kernel link to 'host': kernels do not reach that tier",
        ),
        ("read_bw_GBps = 375.0\n", "", "kernel_links[0]: missing field read_bw"),
        ("read_bw_GBps = 375.0\n", "read_bw_GBps = -1.0\n", "read_bw_GBps must be a finite"),
        ("read_bw_GBps = 375.0\n", "read_GBps = 375.0\n", "kernel_links[0]: missing field"),
        ("write_bw_GBps = 297.0\n", "write_bw_GBps = 297.0\nlanes = 8\n", "unknown field"),
        ("[[kernel_links]]\n", "[[kernel_links]]\nfoo = 1\n", "kernel_links[0]: unknown"),
        (
            "[[kernel_links]]\n",
            '[[kernel_links]]\ntier = "host"\nread_bw_GBps = 1.0\nwrite_bw_GBps = 1.0\n'
            "\n[[kernel_links]]\n",
            "two kernel links to tier 'host'",
        ),
    ],
)
def test_a_bad_link_is_one_line_naming_it(old: str, new: str, message: str) -> None:
    assert old in GH200
    with pytest.raises(HardwareModelError, match=re.escape(message)) as info:
        platform_from_toml(GH200.replace(old, new, 1), "bad.toml")
    assert str(info.value).startswith("bad.toml: ") and "\n" not in str(info.value)


def test_the_link_value_checks_itself() -> None:
    with pytest.raises(HardwareModelError, match="kernel link: tier must be a non-empty"):
        KernelLink("", 1e9, 1e9)
    with pytest.raises(HardwareModelError, match="write_bw_bytes_per_s must be a number of 1"):
        KernelLink("host", 1e9, 0.0)
    with pytest.raises(HardwareModelError, match="kernel_links must hold KernelLink"):
        replace(load_preset("gh200"), kernel_links=({"tier": "host"},))  # type: ignore[arg-type]


def test_memory_mode_keeps_the_link_to_the_backing_tier_and_its_price() -> None:
    flat = load_preset("xeonmax-flat")
    assert flat.energy is not None
    slow = KernelLink("DDR5", 100 * GB, 100 * GB)
    priced = (LinkEnergy("DDR5", "HBM", 1e-12), LinkEnergy("HBM", "DDR5", 2e-12))
    linked = replace(flat, kernel_links=(slow,), energy=replace(flat.energy, links=priced))
    cached = linked.in_memory_mode(64 * GiB)
    assert cached.kernel_links == (slow,)
    assert cached.energy is not None and cached.energy.links == priced  # the link's price
    # the HBM is the socket's own: no link onto it
    with pytest.raises(HardwareModelError, match="kernel link to 'HBM': kernels sit on it"):
        replace(linked, kernel_links=(KernelLink("HBM", 500 * GB, 500 * GB), slow))


def test_the_replay_runs_kernels_at_the_link_rate(resnet: tmsim.Graph) -> None:
    """All in host memory, a step's kernels read and write over NVLink-C2C: slower than with
    the GPU reading LPDDR5X at the CPU's rate, and the replay without interference matches
    the cost model's prediction."""
    gh = load_preset("gh200")
    linked = tmsim.plan(resnet, gh, "all-slow")
    bare = tmsim.plan(resnet, replace(gh, kernel_links=()), "all-slow")
    assert linked.predicted_s > bare.predicted_s * 1.1
    run = tmsim.simulate(linked, resnet, gh, interference="none")
    assert run.step_time_s == pytest.approx(linked.predicted_s, rel=1e-9)
    contended = tmsim.simulate(linked, resnet, gh)
    assert contended.step_time_s >= linked.predicted_s * (1 - 1e-9)


# --- the one-tier platform -----------------------------------------------------------------


def test_one_tier_leaves_nothing_to_place(resnet: tmsim.Graph) -> None:
    p = load_preset("mi300a")
    assert applicable(p) == ONE_TIER == ("all-fast", "checkpoint", "selective")
    with pytest.raises(tmsim.TmsimError, match="'sync' does not apply to platform 'mi300a'"):
        tmsim.plan(resnet, p, "sync")
    with pytest.raises(tmsim.TmsimError, match="does not apply to platform 'mi300a'"):
        tmsim.compare(resnet, p, ["greedy"])
    with pytest.raises(tmsim.TmsimError, match="two addressable tiers"):
        applicable(load_preset("xeonmax-cache"))  # memory mode: compare the flat socket


# --- a small CNN on each, with the strategies that apply ----------------------------------

#: Per preset: the fast tier's capacity (a ratio on CPUs; on GPUs less device memory than
#: ResNet-50 at batch 2 peaks at, so that something must move) and the strategies run.
RUNS = {
    "spr-ddr5-cxl": ("4:1", ["all-fast", "all-slow", "first-touch", "greedy", "static"]),
    "xeonmax-flat": ("4:1", ["all-fast", "all-slow", "greedy", "static", "sync", "2lm"]),
    "h200-host-nvme": ("0.3GB", ["all-fast", "vdnn", "sync", "unified-memory"]),
    "gh200": ("0.3GB", ["all-fast", "all-slow", "greedy", "static", "sync"]),
    "mi300a": (None, list(ONE_TIER)),
}


def _rows(table: pd.DataFrame) -> dict[str, pd.Series]:
    return {str(r["strategy"]): r for _, r in table.iterrows()}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_resnet50_plans_validates_and_replays(name: str, resnet: tmsim.Graph) -> None:
    fast, strategies = RUNS[name]
    p = load_preset(name)
    assert set(strategies) <= set(applicable(p))
    table = tmsim.compare(
        resnet, p, strategies, fast=fast, interference="none", time_limit_s=None, node_limit=200
    )
    rows = _rows(table)
    assert list(rows) == [s for s in tmsim.STRATEGIES if s in strategies]
    for s, r in rows.items():
        assert r["valid"] and not r["error"], (name, s, r["error"])
        assert math.isfinite(r["simulated_s"]) and r["simulated_s"] > 0, (name, s)
        if not math.isnan(r["predicted_s"]):  # a planner's plan: its replay is its prediction
            assert r["simulated_s"] == pytest.approx(r["predicted_s"], rel=1e-6), (name, s)
    base = rows["all-fast"]["simulated_s"]
    # a plan beats all-fast only by running update kernels on a host compute beside the device
    beside = {"sync", "async", "sync-rc", "async-rc"} if p.host_compute is not None else set()
    assert all(r["simulated_s"] >= base * (1 - 1e-9) for s, r in rows.items() if s not in beside)
    if "all-slow" in rows:  # a placement never does worse than putting everything slow
        worst = rows["all-slow"]["predicted_s"]
        assert all(rows[s]["predicted_s"] <= worst * (1 + 1e-9) for s in ("greedy", "static"))
    if "sync" in rows and "static" in rows:
        assert rows["sync"]["predicted_s"] <= rows["static"]["predicted_s"] * (1 + 1e-9)
    if "2lm" in rows:
        assert 0 < rows["2lm"]["hit_rate"] < 1  # a quarter-size cache misses


def test_the_cache_preset_replays_in_2lm(resnet: tmsim.Graph) -> None:
    """At 64 GiB the HBM cache holds all of ResNet-50 at batch 2: the warm step hits only,
    between the all-HBM and all-DDR5 steps."""
    run = tmsim.simulate_cache(resnet, load_preset("xeonmax-cache"))
    assert run.hit_rate == 1.0
    totals = run.summary()
    assert totals["all_cache_s"] <= run.step_time_s <= totals["all_backing_s"]
