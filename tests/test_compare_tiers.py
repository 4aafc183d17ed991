"""``tmsim compare`` on the three-tier preset (H100, host DRAM, an NVMe drive): every strategy
runs, every plan is valid and replays to its prediction, and the drive takes what the host
cannot hold."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from tiny_graphs import MB, tiny_step

from hwmodels.paths import CopyPath
from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cli.main import main
from tmsim.comparison import CompareSettings, Row, compare
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.plans.validate import validate

PRESET = load_preset("h100-host-nvme")
SETTINGS = PlanSettings(capacity=Capacity.of_bytes(170 * MB), window=2, gap=1e-9, time_limit_s=None)


def _rows(platform: Platform, contention: bool) -> dict[str, Row]:
    level = DEFAULT_LEVEL if contention else InterferenceLevel.NONE
    settings = CompareSettings(plan=SETTINGS, level=level)
    return {r.strategy: r for r in compare(tiny_step(), platform, settings)}


def test_the_preset_has_three_tiers_and_reaches_the_drive_through_the_host() -> None:
    assert PRESET.tier_names == ("device", "host", "nvme")
    assert PRESET.kernel_tiers == ("device",)
    paths = {(p.src, p.dst) for p in PRESET.copy_paths}
    assert paths == {("host", "device"), ("device", "host"), ("nvme", "host"), ("host", "nvme")}
    # Samsung PM9A3 U.2 7.68 TB: 6.5 GB/s read, 3.5 GB/s write (heise.de/-4720224)
    nvme = PRESET.tier("nvme")
    assert (nvme.capacity_bytes, nvme.read_bw_bytes_per_s) == (7_680_000_000_000, 6.5e9)
    assert nvme.write_bw_bytes_per_s == 3.5e9
    assert PRESET.copy_path("host", "nvme").sync_bw_bytes_per_s == 3.5e9
    assert not PRESET.copy_path("host", "nvme").duplex


@pytest.mark.parametrize("contention", [False, True])
def test_every_strategy_runs_on_the_three_tier_preset(contention: bool) -> None:
    rows = _rows(PRESET, contention)
    assert list(rows) == [
        "all-fast",
        "vdnn",
        "zero-offload",  # by default where a host CPU runs kernels
        "zero-infinity",
        "checkpoint",
        "selective",
        "static",
        "sync",
        "async",
        "async-aware",
        "unified-memory",
    ]
    assert "nothing moves" in rows["static"].error  # 180 MB live at f3, 170 MB of device
    for name in ("all-fast", "vdnn", "sync", "async"):
        r = rows[name]
        assert r.valid and not r.error, (name, r.error)
        if not contention:
            assert r.simulated_s == pytest.approx(r.predicted_s, rel=1e-9), name
    assert rows["async"].predicted_s <= rows["sync"].predicted_s * (1 + 1e-9)


def test_the_drive_takes_what_a_small_host_cannot_hold() -> None:
    """With 15 MB of host DRAM the 20 MB weight cannot wait there while the activations fill
    the device; with a GPUDirect Storage path it waits on the drive."""
    tiers = (PRESET.tiers[0], replace(PRESET.tiers[1], capacity_bytes=15 * MB), PRESET.tiers[2])
    gds = tuple(CopyPath(a, b, 6.5e9, 6.5e9) for a, b in (("nvme", "device"), ("device", "nvme")))
    # no energy table: the preset's does not price the drive's new links, which a table must
    platform = replace(
        PRESET, name="h100-gds", tiers=tiers, copy_paths=PRESET.copy_paths + gds, energy=None
    )
    graph = tiny_step()
    for name in ("sync", "async"):
        p = plan(name, graph, platform, SETTINGS)
        assert validate(p, graph, platform).ok
        assert any(r.tier == "nvme" for r in p.residency), name
        assert not any(r.tier == "host" for r in p.residency), name


def test_the_command_line_compares_on_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", "resnet50", "--batch", "2", "--platform", "h100-host-nvme", "--json"]
    wanted = "all-fast,vdnn,static,unified-memory"
    assert main([*argv, "--fast-bytes", "1GB", "--strategies", wanted, "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["strategy"] for r in rows] == wanted.split(",")
    assert all(r["valid"] and not r["error"] for r in rows)
