"""Fuzzing the platform reader: every platform TOML file either loads as a platform whose
every time is finite or fails with one line naming the file (Hypothesis).

A valid platform here: it round-trips through TOML; kernels reach its fastest addressable
tier; a cache line is a power of two; and every time it gives for a graph under the bound of
:mod:`tmsim.workload.tensors` (2**62 bytes, 2**62 FLOPs) is finite: each kernel tier's
roofline (on the host compute too, where there is one), each copy path's synchronous and asynchronous move, each tier's device time with
the compute device's cores writing, and a cost model of a real (small) training step.
"""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_graph_files import small_graph
from test_fuzz_mutations import OK, mutated_bytes, outcome

from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.presets import load_platform, platform_from_toml, platform_to_toml
from hwmodels.timing import MoveMode, move_time_s, roofline
from tmsim.cost import CostModel

PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"
PRESETS = (
    "cascadelake-optane",
    "cascadelake-2lm",
    "rtx2080ti-pcie3",
    "h100-host-nvme",
    "gh200",  # a kernel link
    "mi300a",  # one tier
)
DOCS = {n: tomllib.loads((PRESET_DIR / f"{n}.toml").read_text("utf-8")) for n in PRESETS}
BIG = 2**62
GRAPH = small_graph()


def platform_problem(p: Platform) -> str:
    """Why ``p`` is not a valid platform ("" if it is)."""
    if platform_from_toml(platform_to_toml(p), "round trip") != p:
        return "does not round-trip"
    fastest = p.addressable_tiers[0].name
    if fastest not in p.kernel_tiers:
        return f"kernels cannot reach the fastest tier {fastest!r}"
    for line in (getattr(p.cache, "line_bytes", 64), getattr(p.memory_mode, "line_bytes", 64)):
        if line & (line - 1):
            return f"a cache line of {line} bytes"
    n = len(p.tiers)
    for j, tier in enumerate(p.tiers):
        if tier.name not in p.kernel_tiers:
            continue
        unit = np.zeros((1, n))
        unit[0, j] = BIG
        for d in p.compute.dtypes:
            for reads, writes in ((unit, 0 * unit), (0 * unit, unit)):
                t = roofline(p, [BIG], "conv", reads, writes, dtype=d).time_s
                if not np.all(np.isfinite(t)):
                    return f"a kernel on tier {tier.name!r} in {d} takes {t[0]} s"
        device = tier.service_time_s(BIG, BIG, p.compute.cores)
        if not np.all(np.isfinite(device)):
            return f"tier {tier.name!r} serves 2**62 bytes in {device} s"
    host = p.host_compute
    for j, reach in enumerate(p.host_kernel_tier_mask()):
        unit = np.zeros((1, n))
        unit[0, j] = BIG
        for d in host.compute.dtypes if host is not None and reach else ():
            t = roofline(p, [BIG], "conv", unit, unit, dtype=d, host=True).time_s
            if not np.all(np.isfinite(t)):
                return f"a host kernel on tier {p.tiers[j].name!r} in {d} takes {t[0]} s"
    for path in p.copy_paths:
        for mode in MoveMode:
            t = move_time_s(p, BIG, path.src, path.dst, mode)
            if not np.all(np.isfinite(t)):
                return f"a {mode.value} move {path.src} -> {path.dst} takes {t} s"
    try:
        cost = CostModel(GRAPH, p)
    except HardwareModelError:
        return ""  # a platform without the graph's dtype: a clean refusal, checked below
    allowed = cost.tier_allowed
    per_byte = np.concatenate([cost.read_s_per_byte[:, allowed], cost.write_s_per_byte[:, allowed]])
    if not (np.all(np.isfinite(cost.compute_s)) and np.all(np.isfinite(per_byte))):
        return "the cost model of a small step is not finite"
    if not math.isfinite(cost.launch_s):
        return "the launch overhead is not finite"
    return ""


@st.composite
def platform_files(draw: st.DrawFn) -> bytes:
    """A preset's document with a few mutations: the generic ones, a kernel-tier list drawn
    from its tiers, or a cache line of any size."""
    name = draw(st.sampled_from(PRESETS))
    doc: dict[str, Any] = copy.deepcopy(DOCS[name])
    names = [t["name"] for t in doc["tiers"]]
    if draw(st.booleans()):
        doc["kernel_tiers"] = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    for table in ("cache", "memory_mode"):
        if table in doc and draw(st.booleans()):
            doc[table]["line_bytes"] = draw(st.sampled_from((1, 3, 32, 48, 64, 96, 4096)))
    return draw(mutated_bytes(doc, "toml"))


def check_platform_file(data: bytes, folder: Path) -> str:
    path = folder / "p.toml"
    path.write_bytes(data)
    return outcome(lambda: load_platform(str(path)), platform_problem, str(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_platforms")


@settings(max_examples=150, deadline=None)
@given(data=platform_files())
def test_fuzzed_platform_files_load_finite_or_fail_in_one_line(data: bytes, folder: Path) -> None:
    verdict = check_platform_file(data, folder)
    assert verdict.startswith(("clean", OK)), verdict


@pytest.mark.parametrize("name", PRESETS)
def test_the_presets_themselves_are_valid(name: str) -> None:
    assert platform_problem(load_platform(name)) == ""
