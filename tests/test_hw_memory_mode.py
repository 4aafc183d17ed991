"""Memory mode: the value, the platform it builds (against tmsim.comparison's older function and
by hand), its errors, and the ``[memory_mode]`` table of a platform file."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from hwmodels import (
    DramCache,
    HardwareModelError,
    MemoryMode,
    Platform,
    load_platform,
    load_preset,
    platform_from_toml,
    platform_to_dict,
)

GiB = 2**30
PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"
OPTANE_TOML = (PRESET_DIR / "cascadelake-optane.toml").read_text()
CPU = load_preset("cascadelake-optane")
MODE = CPU.memory_mode
assert MODE is not None
# reference/hardware.md, Memory Mode (as cascadelake-2lm's [cache]): 64 B lines, direct-mapped,
# write-back, write-allocate, a miss adds about 70 ns (Moon et al., J. KIISE 2020).
SOURCE = "reference/hardware.md, Memory Mode (2LM); Moon et al., J. KIISE 2020 (miss latency)"


def test_the_optane_preset_carries_the_2lm_cache_parameters() -> None:
    assert MemoryMode(64, 1, True, True, 70e-9, SOURCE) == MODE
    cache = load_preset("cascadelake-2lm").cache
    assert cache is not None
    for name in ("line_bytes", "associativity", "write_back", "write_allocate", "source"):
        assert getattr(MODE, name) == getattr(cache, name), name
    assert MODE.miss_latency_s == cache.miss_latency_s  # the same bits, read the same way
    assert MODE.set_bytes == 64
    # The GPUs and the machine already in memory mode describe none.
    assert load_preset("v100-pcie3").memory_mode is None
    assert load_preset("cascadelake-2lm").memory_mode is None


def test_the_platform_in_memory_mode_by_hand() -> None:
    mm = CPU.in_memory_mode(10_000)  # 156 whole 64-byte lines
    assert mm.cache == DramCache(
        cache_tier="DRAM",
        backing_tier="PMM",
        capacity_bytes=156 * 64,
        line_bytes=64,
        associativity=1,
        write_back=True,
        write_allocate=True,
        miss_latency_s=70e-9,
        source=f"memory mode of cascadelake-optane at 9984 bytes: {SOURCE}",
    )
    assert mm.name == "cascadelake-optane-2lm"
    assert mm.kernel_tiers == ("PMM",) and mm.copy_paths == ()
    assert [t.name for t in mm.addressable_tiers] == ["PMM"]
    assert (mm.tiers, mm.compute, mm.memory_mode) == (CPU.tiers, CPU.compute, MODE)


# tmsim.comparison.memory_mode_platform, before it became Platform.in_memory_mode, took the line, associativity,
# policies and miss latency from the cascadelake-2lm preset's cache and rounded the capacity
# down to 64-byte sets; checked against it field by field for these capacities (all equal
# but ``source``, which named the preset it loaded).
@pytest.mark.parametrize(
    ("cache_bytes", "capacity_bytes"),
    [(64, 64), (127, 64), (10_000, 9984), (3 * GiB + 5, 3 * GiB), (192 * GiB, 192 * GiB)],
)
def test_same_cache_as_the_2lm_preset_at_any_capacity(
    cache_bytes: int, capacity_bytes: int
) -> None:
    two_lm = load_preset("cascadelake-2lm").cache
    assert two_lm is not None
    cache = CPU.in_memory_mode(cache_bytes).cache
    assert cache == replace(
        two_lm,
        capacity_bytes=capacity_bytes,
        source=f"memory mode of cascadelake-optane at {capacity_bytes} bytes: {two_lm.source}",
    )


def cache_of(platform: Platform) -> DramCache:
    assert platform.cache is not None
    return platform.cache


def test_capacity_rounds_down_to_whole_sets() -> None:
    four_way = replace(CPU, memory_mode=replace(MODE, associativity=4))  # 256-byte sets
    sizes = (256, 1000, 1024, 1279)
    capacity = [cache_of(four_way.in_memory_mode(n)).capacity_bytes for n in sizes]
    assert capacity == [256, 768, 1024, 1024]
    assert cache_of(four_way.in_memory_mode(1000)).associativity == 4
    with pytest.raises(HardwareModelError, match=r"255-byte cache is smaller than one set \(256"):
        four_way.in_memory_mode(255)


@pytest.mark.parametrize(
    ("platform", "cache_bytes", "match"),
    [
        (replace(CPU, memory_mode=None), 2**20, "no memory mode"),
        (load_preset("a100-pcie4"), 2**20, "'a100-pcie4': no memory mode"),
        (CPU.in_memory_mode(2**20), 2**20, "needs two addressable tiers.* it has 1"),
        (CPU, 63, "a 63-byte cache is smaller than one set"),
        (CPU, 0, "a 0-byte cache is smaller than one set"),
        (CPU, -64, "smaller than one set"),
        (CPU, 193 * GiB, "cache capacity_bytes 207232172032 exceeds tier 'DRAM'"),
    ],
)
def test_errors_are_one_line(platform: Platform, cache_bytes: int, match: str) -> None:
    with pytest.raises(HardwareModelError, match=match) as info:
        platform.in_memory_mode(cache_bytes)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"line_bytes": 0},
            "memory_mode: line_bytes must be a power of two of at most 2[*][*]62, got 0$",
        ),
        ({"line_bytes": 64.0}, "memory_mode: line_bytes must be a power of two"),
        ({"line_bytes": 48}, "memory_mode: line_bytes must be a power of two .*, got 48$"),
        ({"line_bytes": 2**63}, "memory_mode: line_bytes must be a power of two .*, got 9223"),
        (
            {"associativity": True},
            "memory_mode: associativity must be an integer of 1 to 2[*][*]24",
        ),
        (
            {"associativity": 2**25},
            "memory_mode: associativity must be an integer of 1 to 2[*][*]24",
        ),
        ({"write_back": 1}, "memory_mode: write_back must be true or false"),
        ({"write_allocate": "yes"}, "memory_mode: write_allocate must be true or false"),
        ({"miss_latency_s": -1e-9}, "memory_mode: miss_latency_s must be a number of 0 to 1 s"),
        ({"miss_latency_s": math.inf}, "memory_mode: miss_latency_s must be a number of 0 to 1 s"),
        ({"miss_latency_s": 2.0}, "memory_mode: miss_latency_s must be a number of 0 to 1 s"),
        ({"source": None}, "memory_mode: source must be a string"),
    ],
)
def test_memory_mode_validation_names_the_field(change: dict[str, object], match: str) -> None:
    with pytest.raises(HardwareModelError, match=match):
        replace(MODE, **change)


def test_platform_validation_of_the_memory_mode() -> None:
    two_lm = load_preset("cascadelake-2lm")
    assert replace(two_lm, memory_mode=MODE).memory_mode == MODE  # in memory mode, may carry it
    with pytest.raises(HardwareModelError, match="memory_mode must be a MemoryMode"):
        replace(CPU, memory_mode=load_preset("cascadelake-2lm").cache)
    with pytest.raises(HardwareModelError, match="memory_mode needs two tiers"):
        replace(CPU, tiers=CPU.tiers[:1], copy_paths=(), kernel_tiers=("DRAM",))


def test_the_table_is_written_in_si_and_omitted_when_none() -> None:
    assert platform_to_dict(CPU)["memory_mode"] == {
        "line_bytes": 64,
        "associativity": 1,
        "write_back": True,
        "write_allocate": True,
        "miss_latency_s": 70e-9,
        "source": SOURCE,
    }
    assert "memory_mode" not in platform_to_dict(load_preset("cascadelake-2lm"))


def test_units_and_defaults_in_the_file() -> None:
    p = platform_from_toml(
        OPTANE_TOML.replace("miss_latency_ns = 70", "miss_latency_us = 0.5"), "f"
    )
    assert p.memory_mode == replace(MODE, miss_latency_s=0.5e-6)
    table = OPTANE_TOML[OPTANE_TOML.index("[memory_mode]") :]
    bare = OPTANE_TOML.replace(table, "[memory_mode]\n")
    assert platform_from_toml(bare, "f").memory_mode == MemoryMode()  # DramCache's defaults
    scalar = OPTANE_TOML.replace(table, "").replace("kernel_tiers", "memory_mode = 3\nkernel_tiers")
    with pytest.raises(HardwareModelError, match=r"^f: memory_mode: must be a table, got integer"):
        platform_from_toml(scalar, "f")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("line_bytes = 64 ", "line_bytes = 0 ", "memory_mode: line_bytes must be >= 1, got 0"),
        ("associativity = 1 ", "associativity = 1.5 ", "associativity must be an integer"),
        ("write_back = true", "write_back = 1", "memory_mode: write_back must be true or false"),
        ("miss_latency_ns = 70", "miss_latency_ns = -70", "miss_latency_ns must be a finite"),
        ("miss_latency_ns = 70", "miss_latency_ps = 70", "miss_latency_ps: unknown unit"),
        ("miss_latency_ns = 70", "miss_latency_ns = 70\nmiss_latency_s = 7e-8", "given twice"),
        ("write_back = true", "write_back = true\nways = 2", "memory_mode: unknown field(s) ways"),
    ],
)
def test_bad_memory_mode_tables_name_the_file_and_key(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = OPTANE_TOML[: OPTANE_TOML.index("[memory_mode]")]
    text += OPTANE_TOML[len(text) :].replace(old, new, 1)  # an edit inside [memory_mode] only
    assert text != OPTANE_TOML
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(HardwareModelError) as info:
        load_platform(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert expected in message
