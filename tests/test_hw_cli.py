"""``tmsim platforms`` and ``tmsim platform``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hwmodels import load_preset, preset_names
from tmsim.cli.main import main

PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"


def test_platforms_lists_every_preset_with_its_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["platforms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(preset_names())
    for line in lines:
        name, description = line.split(maxsplit=1)
        assert description == load_preset(name).description


@pytest.mark.parametrize("name", preset_names())
def test_platform_json_matches_the_preset(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["platform", name, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    p = load_preset(name)
    assert info["name"] == name
    assert [t["name"] for t in info["tiers"]] == list(p.tier_names)
    for entry, tier in zip(info["tiers"], p.tiers, strict=True):
        assert entry["capacity_bytes"] == tier.capacity_bytes
        assert entry["read_bw_bytes_per_s"] == tier.read_bw_bytes_per_s
        assert entry["write_bw_bytes_per_s"] == tier.write_bw_bytes_per_s
    assert info["kernel_tiers"] == list(p.kernel_tiers)
    assert len(info["copy_paths"]) == len(p.copy_paths)
    assert ("cache" in info) == (p.cache is not None)


def test_platform_prints_readably(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["platform", "cascadelake-optane"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cascadelake-optane: ")
    assert "DRAM: 192 GiB, read 104.6 GB/s, write 76.8 GB/s" in out
    assert "PMM: 1536 GiB, read 37.6 GB/s, write 12.5 GB/s" in out
    assert "PMM -> DRAM: sync 29 GB/s, async 1.726 GB/s" in out
    assert (
        "controller: 6 channels of 104.6 GB/s together, bus weights DRAM read 1 write 1.362" in out
    )
    # the fitted channel mechanisms, each where it is not neutral (no switch cost on DRAM)
    assert "PMM read 2.433 write 2.423 switch 1.946 read queue 1.389 write queue 0.866" in out
    assert "DRAM read 1 write 1.362 write queue 0.483 read delay 0.314 write delay 0.314;" in out
    assert "copy thread: DRAM read 7.38 GB/s write 4.31 GB/s; PMM read 2.88 GB/s" in out
    assert "DRAM -> PMM: sync 12 GB/s, async 2.648 GB/s" in out
    assert main(["platform", "cascadelake-2lm"]) == 0
    out = capsys.readouterr().out
    assert "cache: DRAM caches PMM, 192 GiB, 64 B lines, direct-mapped, write-back" in out


def test_platform_reads_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mine.toml"
    text = (PRESET_DIR / "v100-pcie3.toml").read_text()
    path.write_text(text.replace('name = "v100-pcie3"', 'name = "my-v100"'))
    assert main(["platform", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "my-v100"


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["platform", "no-such-platform"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tmsim: error: 'no-such-platform' is neither a platform preset")
    assert err.count("\n") == 1
    bad = tmp_path / "bad.toml"
    bad.write_text((PRESET_DIR / "a100-pcie4.toml").read_text().replace("cores = 108", ""))
    assert main(["platform", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"tmsim: error: platform {bad}: compute: missing field 'cores'\n"
