"""``tmsim simulate --cache-mode``: the 2LM replay from the command line, JSON and files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_sim_cache import MiB, r50_replay, with_cache

from hwmodels.presets import save_platform
from tmsim.cli.main import main
from tmsim.sim import load_trace


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["simulate", *argv, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_cli_json_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The preset's 192 GiB cache, in 64 KiB blocks (3 M frames: quicker to set up than 4 KiB).
    info = run_json(capsys, "--cache-mode", "resnet50", "--batch", "8", "--block-bytes", "65536")
    assert info["platform"] == "cascadelake-2lm" and info["graph"] == "resnet50-b8"
    assert info["hit_rate"] == 1.0 and info["pmm_read_bytes"] == info["pmm_write_bytes"] == 0
    assert info["block_bytes"] == 65536 and info["warm"] is True
    for key in (
        "simulated_s",
        "dram_read_bytes",
        "dram_write_bytes",
        "misses",
        "writebacks",
        "all_backing_s",
        "all_cache_s",
    ):
        assert key in info
    toml = tmp_path / "small.toml"
    save_platform(with_cache(128 * MiB), toml)
    trace, png = tmp_path / "t.parquet", tmp_path / "t.png"
    small = run_json(
        capsys,
        "--cache-mode",
        "resnet50",
        "--batch",
        "8",
        "--platform",
        str(toml),
        "--trace",
        str(trace),
        "--timeline",
        str(png),
    )
    expected = r50_replay(8, 128 * MiB).totals()
    for key in ("simulated_s", "hit_rate", "misses", "writebacks", "pmm_read_bytes"):
        assert small[key] == expected[key]
    assert load_trace(trace).simulated_s == small["simulated_s"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert (
        main(
            [
                "simulate",
                "--cache-mode",
                "resnet50",
                "--batch",
                "8",
                "--platform",
                str(toml),
                "--cold",
                "--block-bytes",
                "8192",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "first step, cold cache" in text and "8192 B blocks" in text and "hit rate" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan.json", "--cache-mode", "resnet50", "--batch", "2"], "not both or neither"),
        ([], "give a plan file or --cache-mode MODEL"),
        (["--cache-mode", "resnet50"], "needs --batch N"),
        (["--cache-mode", "nosuchnet", "--batch", "2"], "unknown model 'nosuchnet'"),
        (
            ["--cache-mode", "resnet50", "--batch", "2", "--platform", "cascadelake-optane"],
            "platform 'cascadelake-optane' has no hardware cache",
        ),
        (
            ["--cache-mode", "resnet50", "--batch", "2", "--block-bytes", "100"],
            "multiple of the cache line (64 bytes), got 100",
        ),
        (["--cache-mode", "resnet50", "--batch", "2", "--model", "resnet50"], "--model names"),
        (["plan.json", "--model", "resnet50", "--block-bytes", "4096"], "--cache-mode only"),
    ],
)
def test_cli_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("tmsim: error: ")
