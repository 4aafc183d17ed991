"""``tmsim calibrate`` / :func:`tmsim.calibrate`: the machine at hand as a platform file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import tmsim
from hwmodels import load_platform
from tmsim.calibration.machine import LinkRates, MachineRates, MemoryRates, best_s
from tmsim.calibration.machine_toml import calibrated_platform, platform_toml
from tmsim.cli.main import main
from tmsim.errors import TmsimError

GB = 1e9


@pytest.fixture(scope="module")
def here(tmp_path_factory: pytest.TempPathFactory) -> tuple[tmsim.Platform, Path]:
    out = tmp_path_factory.mktemp("calibrate") / "here.toml"
    return tmsim.calibrate(out, device="cpu", quick=True), out


def test_the_cpu_is_one_host_tier_that_reads_back(here: tuple[tmsim.Platform, Path]) -> None:
    platform, out = here
    assert load_platform(out) == platform
    assert platform.tier_names == ("host",)
    assert platform.kernel_tiers == ("host",)
    host = platform.tiers[0]
    # Any machine this runs on streams between 100 MB/s and 10 TB/s and multiplies fp32
    # matrices at 1 GFLOP/s to 1 PFLOP/s.
    for rate in (host.read_bw_bytes_per_s, host.write_bw_bytes_per_s):
        assert 1e8 < rate < 1e13
    assert 1e9 < platform.compute.peak("fp32") < 1e15
    assert platform.compute.peak("fp64") > 0
    assert host.capacity_bytes >= 1 << 28
    assert 0 < platform.compute.launch_overhead_s < 1e-3


def test_every_number_says_where_it_came_from(here: tuple[tmsim.Platform, Path]) -> None:
    """Each numeric key is commented measured or assumed on its line or in the comment
    just above its table."""
    _, out = here
    lines = out.read_text().splitlines()
    context = ""
    for line in lines:
        if line.startswith("#"):
            context = line
            continue
        key, eq, value = line.partition("=")
        if not eq or value.strip().startswith('"') or key.strip() in ("name", "kernel_tiers"):
            if line.startswith("["):
                context = context if line.endswith("]") else ""
            continue
        said = (line + " " + context).lower()
        assert "measured" in said or "assumed" in said, line


def rates(cuda: bool) -> MachineRates:
    host = MemoryRates(100 * GB, 50 * GB, 120 * GB, 64 << 30)
    base = MachineRates(
        host=host,
        host_peaks={"fp32": 2e12, "fp64": 1e12},
        host_launch_s=1e-6,
        host_cores=16,
        host_name="Test CPU",
        day="2026-11-28",
        array_bytes=1 << 20,
        matmul_n=64,
    )
    if not cuda:
        return base
    return dataclasses.replace(
        base,
        device=MemoryRates(4000 * GB, 4100 * GB, 8000 * GB, 80 << 30),
        device_peaks={"bf16": 700e12, "fp16": 700e12, "fp32": 50e12, "tf32": 380e12},
        device_launch_s=4e-6,
        links=LinkRates(55 * GB, 54 * GB, 10 * GB, 14 * GB, 46 * GB, 46 * GB),
        device_name="Test GPU",
        device_cores=132,
    )


def test_a_cuda_machine_is_written_with_its_links() -> None:
    """The CUDA half is written from rates measured elsewhere (no GPU here): the device tier
    first, the pinned rates as the copy paths with their rate both ways at once (as the
    presets write it), the pageable rates as comments."""
    platform, text = calibrated_platform(rates(cuda=True), "gpu-box")
    assert platform.tier_names == ("device", "host")
    assert platform.kernel_tiers == ("device",)
    assert platform.tier("device").read_bw_bytes_per_s == 4000 * GB
    assert platform.copy_path("host", "device").sync_bw_bytes_per_s == 55 * GB
    assert platform.copy_path("device", "host").async_bw_bytes_per_s == 54 * GB
    assert platform.compute.peak("tf32") == 380e12
    assert platform.compute.cores == 132
    assert "both_bw: measured, both directions at once" in text
    assert platform.copy_path("host", "device").both_bw_bytes_per_s == 46 * GB
    assert platform.copy_path("device", "host").both_bw_bytes_per_s == 46 * GB
    assert platform.compute.launch_overhead_s == pytest.approx(4e-6)


def test_a_cpu_machine_from_given_rates_by_hand() -> None:
    platform, _ = calibrated_platform(rates(cuda=False), "box")
    assert platform.tiers[0].read_bw_bytes_per_s == 100 * GB
    assert platform.tiers[0].write_bw_bytes_per_s == 50 * GB
    assert platform.compute.peak("fp32") == 2e12
    assert platform.compute.cores == 16
    assert 'name = "box"' in platform_toml(rates(cuda=False), "box")


def test_best_s_takes_the_least_of_its_runs() -> None:
    calls = []
    assert best_s(lambda: calls.append(1), repeats=3) > 0
    assert len(calls) == 4  # one untimed, three timed


def test_profile_and_calibrate_plan_together(
    here: tuple[tmsim.Platform, Path], tmp_path: Path
) -> None:
    """A profile measured on the CPU (every operand on ``host``) plans on the calibrated
    platform: all on the host, the step is the profile's sum."""
    torch = pytest.importorskip("torch")
    platform, _ = here
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    graph, prof = tmsim.profile(model, (4, 16), tmp_path / "p.csv", loss="sum", repeats=1)
    plan = tmsim.plan(graph, platform, "all-fast", profile=prof)
    assert plan.predicted_s == pytest.approx(sum(e.seconds for e in prof.entries), rel=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "a b"}, "name must be letters"),
        ({"device": "tpu"}, "device must be auto, cpu or cuda"),
        ({"quick": "yes"}, "quick must be True or False"),
    ],
)
def test_bad_arguments_are_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TmsimError, match=message):
        tmsim.calibrate(**kwargs)  # type: ignore[arg-type]


def test_an_unwritable_file_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(TmsimError, match="cannot write"):
        tmsim.calibrate(tmp_path / "no" / "here.toml", device="cpu", quick=True)
    assert not (tmp_path / "no").exists()


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "h.toml"
    assert main(["calibrate", "--out", str(out), "--device", "cpu", "--quick"]) == 0
    assert "host:" in capsys.readouterr().out
    assert load_platform(out).name == "this-machine"
