"""The unified-memory driver value: its defaults, its validation, the GPU presets'
``[unified_memory]`` tables and the errors of a bad one."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from pathlib import Path

import pytest

import hwmodels.unified_memory
from hwmodels import (
    HardwareModelError,
    UnifiedMemory,
    load_platform,
    load_preset,
    platform_from_toml,
    platform_to_dict,
    preset_names,
)

MiB = 2**20
PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"
V100_TOML = (PRESET_DIR / "v100-pcie3.toml").read_text()
# The GPU presets whose kernels reach device memory only: the unified-memory baseline's.
GPUS = (
    "a100-pcie4",
    "h100-host-nvme",
    "h100-pcie5",
    "h200-host-nvme",
    "rtx2080ti-pcie3",
    "v100-pcie3",
)


def test_defaults_are_those_the_replay_always_used() -> None:
    # The defaults of tmsim's UnifiedMemoryParams, which these replace (pages.py, checked by
    # hand): 2 MiB pages, 45 us per fault, the full copy rate, free evictions beside their
    # copy, clean pages written back, LRU, no fault at first touch.
    d = UnifiedMemory()
    assert d.page_bytes == 2 * MiB == 2_097_152
    assert d.fault_s == 45e-6
    assert d.migration_bw_fraction == 1.0
    assert d.eviction_s == 0.0
    assert d.writeback_clean is True
    assert d.policy == "lru"
    assert d.alloc_fault is False
    assert d.source == ""


def test_every_default_is_documented_with_its_source() -> None:
    doc = hwmodels.unified_memory.__doc__ or ""
    for f in fields(UnifiedMemory):
        if f.name != "source":
            assert f"- ``{f.name}`` = " in doc, f.name


@pytest.mark.parametrize("name", preset_names())
def test_the_gpu_presets_carry_the_defaults(name: str) -> None:
    p = load_preset(name)
    if name not in GPUS:
        assert p.unified_memory is None
        assert "unified_memory" not in platform_to_dict(p)
        return
    assert p.unified_memory is not None and p.unified_memory.source
    assert p.unified_memory == replace(UnifiedMemory(), source=p.unified_memory.source)
    assert platform_to_dict(p)["unified_memory"] == {
        "page_bytes": 2 * MiB,
        "fault_s": 45e-6,
        "migration_bw_fraction": 1.0,
        "eviction_s": 0.0,
        "writeback_clean": True,
        "policy": "lru",
        "alloc_fault": False,
        "source": p.unified_memory.source,
    }


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"page_bytes": 0}, r"page_bytes must be a positive integer of at most 2\*\*62, got 0"),
        ({"page_bytes": 4096.0}, "page_bytes must be a positive integer .*, got 4096.0"),
        ({"page_bytes": True}, "page_bytes must be a positive integer .*, got True"),
        ({"fault_s": -1e-6}, "fault_s must be a number of 0 to 1 s, got -1e-06"),
        ({"fault_s": math.nan}, "fault_s must be a number of 0 to 1 s, got nan"),
        ({"eviction_s": math.inf}, "eviction_s must be a number of 0 to 1 s, got inf"),
        (
            {"migration_bw_fraction": 0.0},
            "migration_bw_fraction must be a number of 1e-6 to 1, got 0.0",
        ),
        ({"migration_bw_fraction": 1e-7}, "migration_bw_fraction must be .*, got 1e-07"),
        ({"migration_bw_fraction": 1.5}, "migration_bw_fraction must be .*, got 1.5"),
        (
            {"migration_bw_fraction": math.nan},
            "migration_bw_fraction must be a number of 1e-6 to 1",
        ),
        ({"writeback_clean": 1}, "writeback_clean must be true or false"),
        ({"alloc_fault": None}, "alloc_fault must be true or false"),
        ({"policy": "random"}, "policy must be one of lru, fifo, got 'random'"),
        ({"source": 3}, "source must be a string"),
    ],
)
def test_validation_names_the_field(change: dict[str, object], match: str) -> None:
    with pytest.raises(HardwareModelError, match=f"^unified_memory: {match}") as info:
        UnifiedMemory(**change)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_platform_validation_of_the_driver() -> None:
    gpu = load_preset("v100-pcie3")
    with pytest.raises(HardwareModelError, match="unified_memory must be a UnifiedMemory"):
        replace(gpu, unified_memory={"page_bytes": MiB})


def test_units_and_defaults_in_the_file() -> None:
    text = V100_TOML.replace("page_MiB = 2 ", "page_KiB = 64 ").replace(
        "fault_s = 45e-6 ", "fault_us = 20 "
    )
    text = text.replace("eviction_s = 0.0 ", "eviction_ns = 500 ")
    driver = platform_from_toml(text, "f").unified_memory
    assert driver is not None
    assert driver.page_bytes == 64 * 1024
    assert driver.fault_s == pytest.approx(20e-6, rel=1e-15)
    assert driver.eviction_s == pytest.approx(500e-9, rel=1e-15)
    table = V100_TOML[V100_TOML.index("[unified_memory]") :]
    bare = V100_TOML.replace(table, "[unified_memory]\n")
    assert platform_from_toml(bare, "f").unified_memory == UnifiedMemory()


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("page_MiB = 2 ", "page_MiB = 0 ", "page_MiB must be a finite number > 0, got 0"),
        ("page_MiB = 2 ", "page_MiB = 1e-7 ", "page is not a whole number of bytes"),
        ("page_MiB = 2 ", "page_MB = 2 ", "page_MB: unknown unit"),
        ("page_MiB = 2 ", "page_MiB = 2\npage_bytes = 2097152", "page given twice"),
        ("fault_s = 45e-6 ", "fault_us = -45 ", "fault_us must be a finite number >= 0, got -45"),
        ("fault_s = 45e-6 ", 'fault_s = "45us" ', "fault_s must be a number, got string"),
        ("eviction_s = 0.0 ", "eviction_s = -1.0 ", "eviction_s must be a finite number >= 0"),
        (
            "migration_bw_fraction = 1.0 ",
            "migration_bw_fraction = 1.5 ",
            "migration_bw_fraction must lie in (0, 1], got 1.5",
        ),
        ("writeback_clean = true", "writeback_clean = 1", "writeback_clean must be true or false"),
        ("alloc_fault = false", 'alloc_fault = "no"', "alloc_fault must be true or false"),
        ('policy = "lru"', 'policy = "mru"', "policy must be one of lru, fifo, got 'mru'"),
        ('policy = "lru"', "policy = 1", "policy must be a string, got integer"),
        ("alloc_fault = false", "alloc_fault = false\nprefetch = 1", "unknown field(s) prefetch"),
    ],
)
def test_bad_unified_memory_tables_name_the_file_and_key(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = V100_TOML[: V100_TOML.index("[unified_memory]")]
    text += V100_TOML[len(text) :].replace(old, new, 1)  # an edit inside [unified_memory] only
    assert text != V100_TOML
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(HardwareModelError) as info:
        load_platform(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: unified_memory: ") and "\n" not in message
    assert expected in message
