"""No surprises in a platform file: a kernel link onto the kernels' own tier, a peak of a dtype
no kernel computes in, and one field overridden in two units are each refused in one line
naming what is wrong, rather than read into a platform that answers wrongly."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

import tmsim
from hwmodels import HardwareModelError, KernelLink, load_preset, platform_from_toml, preset_names
from hwmodels.compute import Compute
from tmsim.cli.main import main
from tmsim.errors import TmsimError
from tmsim.kernelwork import kernel_dtype
from tmsim.workload.graph import Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.tensors import DTYPE_BYTES

PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"
GH200 = (PRESET_DIR / "gh200.toml").read_text()
NVME = (PRESET_DIR / "h100-host-nvme.toml").read_text()
GB = 10**9


def _refused(text: str) -> str:
    """The one-line message ``bad.toml: ...`` the reader gives for ``text``."""
    with pytest.raises(HardwareModelError) as info:
        platform_from_toml(text, "bad.toml")
    message = str(info.value)
    assert message.startswith("bad.toml: ") and "\n" not in message
    return message


# --- 1. kernel links: never onto the kernels' own tier, and kernels' rates fastest first ----
def _link(tier: str, gbps: float) -> str:
    return f'[[kernel_links]]\ntier = "{tier}"\nread_bw_GBps = {gbps}\nwrite_bw_GBps = {gbps}\n\n'


@pytest.mark.parametrize("gbps", [100.0, 4000.0, 10000.0])
def test_a_kernel_link_onto_the_device_tier_is_refused(gbps: float) -> None:
    """On the GH200 the GPU sits on its HBM: a link onto it (slower than the host's link,
    as fast as the HBM or faster) describes nothing, and a slow one would make the fast tier
    slower for kernels than the slow one."""
    text = GH200.replace("[[kernel_links]]\n", _link("device", gbps) + "[[kernel_links]]\n", 1)
    message = _refused(text)
    assert "kernel link to 'device'" in message
    assert "kernels sit on it" in message


def test_the_link_onto_the_device_tier_is_refused_from_python_too() -> None:
    gh = load_preset("gh200")
    with pytest.raises(HardwareModelError, match="kernel link to 'device'"):
        replace(gh, kernel_links=(KernelLink("device", 1e11, 1e11), *gh.kernel_links))


def test_kernels_reach_the_tiers_fastest_first_through_their_links() -> None:
    """Three tiers kernels reach: a link onto the host slower than the NVMe drive behind it
    would make the middle tier the slowest for kernels."""
    text = NVME.replace('kernel_tiers = ["device"]', 'kernel_tiers = ["device", "host", "nvme"]')
    assert text != NVME
    slow = text.replace("[compute]\n", _link("host", 1.0) + "[compute]\n", 1)
    message = _refused(slow)
    assert "kernel link to 'host'" in message and "'nvme'" in message
    assert "fastest first" in message
    fine = text.replace("[compute]\n", _link("host", 64.0) + "[compute]\n", 1)
    p = platform_from_toml(fine, "fine.toml")
    assert p.kernel_bw_bytes_per_s("host", 1)[0] == 64 * GB


# --- 2. a peak names a dtype kernels compute in ---------------------------------------------
def test_an_unknown_peak_dtype_is_refused_by_name() -> None:
    message = _refused(GH200.replace("bf16 = 779.0", "bf16 = 779.0\nfp42 = 1.0", 1))
    assert "compute.peak_TFLOPs" in message and "'fp42'" in message
    assert "fp64, fp32, tf32, fp16, bf16, fp8" in message


def test_an_integer_peak_is_refused_too_no_kernel_computes_in_it() -> None:
    message = _refused(GH200.replace("fp64 = 3.55", "fp64 = 3.55\nint8 = 100.0", 1))
    assert "host_compute.peak_TFLOPs" in message and "'int8'" in message


def test_an_unknown_peak_dtype_is_refused_from_python_too() -> None:
    c = load_preset("gh200").compute
    with pytest.raises(HardwareModelError, match=re.escape("unknown dtype 'fp42'")):
        replace(c, peak_flop_per_s=(*c.peak_flop_per_s, ("fp42", 1e12)))


def test_the_known_dtypes_are_those_of_graphs() -> None:
    """hwmodels keeps its own list (it does not import tmsim): the dtypes of graphs, and of
    those the ones kernels compute in, which with tf32 are the ones a peak may name."""
    from hwmodels.dtypes import COMPUTE_DTYPES, GRAPH_DTYPES, PEAK_DTYPES

    assert tuple(DTYPE_BYTES) == GRAPH_DTYPES
    chosen = set()
    for dtype in DTYPE_BYTES:
        g = Graph(
            "one",
            [Tensor("a", 8, Role.INPUT, dtype), Tensor("b", 8, Role.ACTIVATION, dtype)],
            [Kernel("k", "relu", ("a",), ("b",), Phase.FORWARD)],
        )
        chosen.add(kernel_dtype(g, 0))
    assert set(COMPUTE_DTYPES) == chosen
    assert (*COMPUTE_DTYPES[:2], "tf32", *COMPUTE_DTYPES[2:]) == PEAK_DTYPES
    for name in preset_names():
        p = load_preset(name)
        computes = [p.compute, *([p.host_compute.compute] if p.host_compute else [])]
        assert all(d in PEAK_DTYPES for c in computes for d in c.dtypes)


def test_compute_accepts_every_known_dtype() -> None:
    from hwmodels.dtypes import PEAK_DTYPES

    c = load_preset("gh200").compute
    wide = replace(c, peak_flop_per_s=tuple((d, 1e12) for d in PEAK_DTYPES))
    assert isinstance(wide, Compute) and wide.dtypes == PEAK_DTYPES


# --- 5. one field, two overrides --------------------------------------------------------------
GIB = "tiers.DRAM.capacity_GiB"
BYTES = "tiers.DRAM.capacity_bytes"


@pytest.mark.parametrize(
    "overrides",
    [
        {GIB: 96, BYTES: 5},
        {BYTES: 5, GIB: 96},
        {"tiers.0.capacity_GiB": 96, BYTES: 5},
        {"tiers.DRAM.read_bw_GBps": 90.0, "tiers.0.read_bw_bytes_per_s": 9e10},
        {"tiers.0.capacity_GiB": 96, GIB: 97},
    ],
)
def test_one_field_set_twice_is_refused_naming_both_keys(overrides: dict[str, float]) -> None:
    for source in ("cascadelake-optane", load_preset("cascadelake-optane")):
        with pytest.raises(TmsimError) as info:
            tmsim.platform(source, overrides)
        message = str(info.value)
        assert "\n" not in message
        for key in overrides:
            assert key in message


def test_the_hardware_models_name_the_clash() -> None:
    from hwmodels.docpaths import override_clash
    from hwmodels.serialize import platform_to_dict

    doc = platform_to_dict(load_preset("cascadelake-optane"))
    assert override_clash(doc, [GIB, "tiers.PMM.capacity_GiB", "compute.cores"]) is None
    clash = override_clash(doc, ["compute.cores", BYTES, GIB])
    assert clash is not None and BYTES in clash and GIB in clash
    assert override_clash(doc, ["tiers.XPM.capacity_GiB", GIB]) is None  # a bad path: later


def test_distinct_fields_still_override() -> None:
    p = tmsim.platform("cascadelake-optane", {GIB: 96, "tiers.PMM.capacity_bytes": 10**12})
    assert p.tier("DRAM").capacity_bytes == 96 * 2**30
    assert p.tier("PMM").capacity_bytes == 10**12


def test_the_command_line_refuses_the_clash_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["plan", "vgg19", "--batch", "1", "--mode", "all-fast"]
    code = main([*argv, "--set", f"{GIB}=96", "--set", f"{BYTES}=5"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and GIB in err and BYTES in err
