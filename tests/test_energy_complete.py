"""An ``[energy]`` table prices everything a step can be charged for: every tier, every copy
path, both directions of every kernel link, and every dtype the compute device (and the host
CPU) has a peak for (tf32 aside: kernels are charged at the dtype they compute in). A table
that leaves one out is refused, naming what it leaves out, rather than charging it 0 J."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

import tmsim
from hwmodels import (
    HardwareModelError,
    load_preset,
    platform_from_dict,
    platform_to_dict,
    preset_names,
)
from tmsim.energy import step_energy

PJ = 1e-12
PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"


def _doc(name: str) -> dict[str, Any]:
    return copy.deepcopy(platform_to_dict(load_preset(name)))


def _refused(doc: dict[str, Any]) -> str:
    with pytest.raises(HardwareModelError) as info:
        platform_from_dict(doc, "bad.toml")
    message = str(info.value)
    assert message.startswith("bad.toml: ") and "\n" not in message
    return message


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_energy_table_is_complete(name: str) -> None:
    """Every tier priced, and every copy path, or none where the file says ``links = []``
    (the CPU presets: copies between the DIMMs of one socket cross no link of their own)."""
    p = load_preset(name)
    if p.energy is None:
        return
    assert all(p.energy.tier(t) is not None for t in p.tier_names)
    priced = [p.energy.link(c.src, c.dst) is not None for c in p.copy_paths]
    assert all(priced) or not p.energy.links
    raw = tomllib.loads((PRESET_DIR / f"{name}.toml").read_text("utf-8"))
    assert "links" in raw["energy"] or not p.copy_paths


def test_copy_paths_need_links_given_even_if_none() -> None:
    doc = _doc("cascadelake-optane")
    assert doc["energy"]["links"] == []
    del doc["energy"]["links"]
    message = _refused(doc)
    assert "energy: missing field 'links'" in message and "links = []" in message


@pytest.mark.parametrize(
    ("part", "index", "missing"),
    [
        ("tiers", 1, "tier host"),
        ("links", 0, "link host->device"),
        ("flop", "fp16_J_per_flop", "dtype fp16"),
        ("host_flop", "fp64_J_per_flop", "host dtype fp64"),
    ],
)
def test_a_partial_energy_table_is_refused_naming_what_it_leaves_out(
    part: str, index: int | str, missing: str
) -> None:
    doc = _doc("gh200")
    del doc["energy"][part][index]
    message = _refused(doc)
    assert "energy" in message and missing in message
    assert "give 0 where it costs nothing" in message


def test_every_missing_entry_is_named_at_once() -> None:
    doc = _doc("h100-host-nvme")
    doc["energy"]["tiers"] = [t for t in doc["energy"]["tiers"] if t["name"] == "device"]
    doc["energy"]["flop"] = {"fp32_J_per_flop": 1e-11}
    message = _refused(doc)
    for what in ("tier host", "tier nvme", "dtype fp16", "dtype bf16"):
        assert what in message
    assert "tf32" not in message  # kernels in TF32 are charged as fp32


def test_a_table_without_flops_is_refused() -> None:
    doc = _doc("cascadelake-2lm")
    del doc["energy"]["flop"]
    assert re.search(r"dtype fp32, dtype fp64", _refused(doc))


def test_the_host_table_is_needed_only_with_a_host_cpu() -> None:
    doc = _doc("h100-pcie5")
    assert "host_compute" not in doc and "host_flop" not in doc["energy"]
    assert platform_from_dict(doc, "ok.toml").energy is not None


GB = 10**9


def _nvme_linked(energy_links: list[dict[str, Any]]) -> dict[str, Any]:
    """h100-host-nvme whose GPU loads from the NVMe drive directly (a kernel link with no
    copy path between the drive and the device)."""
    doc = _doc("h100-host-nvme")
    doc["kernel_tiers"] = ["device", "nvme"]
    doc["kernel_links"] = [
        {"tier": "nvme", "read_bw_bytes_per_s": 5 * GB, "write_bw_bytes_per_s": 3 * GB}
    ]
    doc["energy"]["links"] += energy_links
    return doc


def test_a_kernel_link_needs_its_price_both_ways() -> None:
    message = _refused(_nvme_linked([]))
    assert "kernel link nvme->device" in message and "kernel link device->nvme" in message
    half = [{"src": "nvme", "dst": "device", "energy_J_per_byte": 8e-12}]
    assert "kernel link device->nvme" in _refused(_nvme_linked(half))


def test_a_kernel_links_price_is_charged_without_a_copy_path() -> None:
    both = [
        {"src": "nvme", "dst": "device", "energy_J_per_byte": 50 * PJ},
        {"src": "device", "dst": "nvme", "energy_J_per_byte": 70 * PJ},
    ]
    p = platform_from_dict(_nvme_linked(both), "ok.toml")
    g = tmsim.graph("vgg19", batch=1)
    made = tmsim.plan(g, p, "all-slow")
    run = tmsim.simulate(made, g, p, interference="none")
    e = step_energy(run.trace, g, p)
    nvme = p.tier_index("nvme")
    read = sum(r.read_bytes[nvme] for r in run.trace.records)
    written = sum(r.write_bytes[nvme] for r in run.trace.records)
    assert read > 0 and written > 0
    assert e.link_j["nvme->device"] == pytest.approx(read * 50 * PJ)
    assert e.link_j["device->nvme"] == pytest.approx(written * 70 * PJ)


def test_an_energy_link_that_is_neither_a_path_nor_a_kernel_link_is_refused() -> None:
    doc = _doc("h100-host-nvme")
    doc["energy"]["links"].append({"src": "nvme", "dst": "device", "energy_J_per_byte": 1e-12})
    assert "no copy path or kernel link nvme->device" in _refused(doc)
