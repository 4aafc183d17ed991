"""Capacities: every accepted text form, exact sizes, clean errors, and a round trip."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodels.presets import load_preset
from tmsim.capacity import (
    MAX_BYTES,
    Capacity,
    CapacityError,
    fast_limit_bytes,
    parse_bytes,
    resolve_fast_limit,
)
from tmsim.workload.graph import Graph


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1000000", 1_000_000),
        ("3e9", 3_000_000_000),
        ("96GB", 96 * 10**9),
        ("24GiB", 24 * 2**30),
        ("24 GiB", 24 * 2**30),
        ("1.5TiB", 3 * 2**39),
        ("0.3GB", 300_000_000),  # exact in decimal, not 299999999.99999997
        ("512kB", 512_000),
        ("4KiB", 4096),
        ("7B", 7),
    ],
)
def test_sizes_parse_to_exact_byte_counts(text: str, size: int) -> None:
    assert parse_bytes(text) == size
    assert Capacity.parse(text) == Capacity.of_bytes(size)


def test_ratios_resolve_against_the_peak(mlp: Graph) -> None:
    cap = Capacity.parse("4:1")
    assert cap.ratio == (4.0, 1.0) and str(cap) == "4:1"
    assert cap.fast_bytes(1000) == 200  # one fifth
    assert Capacity.parse(" 1.5 : 0.5 ").fast_bytes(1000) == 250
    assert Capacity.parse("0:1").fast_bytes(1000) == 1000
    cpu = load_preset("cascadelake-optane")
    assert fast_limit_bytes(mlp, cpu, cap) == mlp.peak_live_bytes // 5
    assert fast_limit_bytes(mlp, cpu, None) == cpu.tiers[0].capacity_bytes
    assert fast_limit_bytes(mlp, cpu, Capacity.parse("24GiB")) == 24 * 2**30


def test_a_ratio_above_the_fast_tier_is_capped_and_a_size_refused(mlp: Graph) -> None:
    cpu = load_preset("cascadelake-optane")
    dram = cpu.tiers[0].capacity_bytes
    small = dataclasses.replace(
        cpu, tiers=(dataclasses.replace(cpu.tiers[0], capacity_bytes=20), *cpu.tiers[1:])
    )
    assert mlp.peak_live_bytes // 5 > 20
    limit, note = resolve_fast_limit(mlp, small, Capacity.parse("4:1"))
    assert limit == 20 and note is not None and "capped at the 20 bytes" in note
    assert resolve_fast_limit(mlp, cpu, Capacity.parse("4:1")) == (mlp.peak_live_bytes // 5, None)
    assert resolve_fast_limit(mlp, cpu, Capacity.of_bytes(dram)) == (dram, None)
    with pytest.raises(CapacityError, match=f"asked, but tier 'DRAM' .* holds {dram} bytes"):
        fast_limit_bytes(mlp, cpu, Capacity.of_bytes(dram + 1))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("4:0", "fast > 0"),
        ("-1:1", "neither a ratio"),
        ("1.5", "whole number"),
        ("0", "between 1 and"),
        ("1e30", "between 1 and"),
        ("1e9999999", "between 1 and"),
        ("24 gib", "units"),
        ("24XB", "units"),
        ("", "neither a ratio"),
        ("nan", "neither a ratio"),
        ("inf:1", "neither a ratio"),
    ],
)
def test_malformed_capacities_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(CapacityError, match=message):
        Capacity.parse(text)


def test_a_capacity_is_one_thing() -> None:
    with pytest.raises(CapacityError, match="exactly one"):
        Capacity()
    with pytest.raises(CapacityError, match="exactly one"):
        Capacity(ratio=(1.0, 1.0), size_bytes=10)
    with pytest.raises(CapacityError, match="whole number"):
        Capacity(size_bytes=True)
    with pytest.raises(CapacityError, match="between 1"):
        Capacity.of_bytes(MAX_BYTES + 1)


@given(st.integers(1, MAX_BYTES))
def test_sizes_round_trip_through_text(size: int) -> None:
    cap = Capacity.of_bytes(size)
    assert Capacity.parse(str(cap)) == cap


@given(st.integers(0, 64), st.integers(1, 64))
def test_ratios_round_trip_through_text(slow: int, fast: int) -> None:
    cap = Capacity.of_ratio(slow, fast)
    assert Capacity.parse(str(cap)) == cap


@given(st.text(max_size=12))
def test_any_text_is_a_capacity_or_a_clean_error(text: str) -> None:
    try:
        cap = Capacity.parse(text)
    except CapacityError as exc:
        assert "\n" not in str(exc)
        return
    assert (cap.ratio is None) != (cap.size_bytes is None)
