"""Platforms of every shape survive a TOML round trip exactly (Hypothesis)."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodels import (
    ClassEfficiency,
    Compute,
    CopyPath,
    DramCache,
    Interference,
    MemoryMode,
    MemoryTier,
    OpClass,
    Platform,
    UnifiedMemory,
    platform_from_toml,
    platform_to_toml,
)

GB = 1e9
GiB = 2**30
PRESET_DIR = Path(__file__).parents[1] / "hwmodels" / "presets"


names = st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=8)
positive = st.floats(1.0, 1e15, allow_nan=False, allow_infinity=False)  # rates per second
nonneg = st.one_of(st.just(0.0), st.floats(1e-12, 1.0))  # latencies, seconds
free_text = st.text(max_size=30)


@st.composite
def platforms(draw: st.DrawFn) -> Platform:
    tier_names = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    read_bws = sorted(draw(st.lists(positive, min_size=len(tier_names), max_size=3)), reverse=True)
    tiers = tuple(
        MemoryTier(
            name=n,
            capacity_bytes=draw(st.integers(1, 2**62)),  # beyond float precision
            read_bw_bytes_per_s=bw,
            write_bw_bytes_per_s=draw(positive),
            read_latency_s=draw(nonneg),
            write_latency_s=draw(nonneg),
            access_granularity_bytes=draw(st.integers(1, 4096)),
            interference=Interference(
                draw(st.floats(0, 10)),
                draw(st.floats(0.01, 20)),
                draw(st.floats(0, 1)),
                draw(st.integers(0, 64)),
            ),
            source=draw(free_text),
        )
        for n, bw in zip(tier_names, read_bws, strict=False)
    )
    cache = None
    visible = list(tier_names)
    if len(tiers) >= 2 and draw(st.booleans()):
        line = draw(st.sampled_from([32, 64, 128]))
        ways = draw(st.sampled_from([1, 2, 4]))
        cap = line * ways * draw(st.integers(1, 2**20))
        holder = tiers[0]
        tiers = (MemoryTier(holder.name, max(cap, holder.capacity_bytes), 1e15, 1.0), *tiers[1:])
        cache = DramCache(
            tier_names[0],
            tier_names[1],
            cap,
            line,
            ways,
            draw(st.booleans()),
            draw(st.booleans()),
            draw(nonneg),
            draw(free_text),
        )
        visible = visible[1:]
    pairs = [(a, b) for a in visible for b in visible if a != b]
    chosen = draw(st.lists(st.sampled_from(pairs), min_size=1, unique=True)) if pairs else []
    duplex = draw(st.booleans())
    paths = tuple(
        CopyPath(a, b, draw(positive), draw(positive), draw(st.integers(1, 8)), duplex)
        for a, b in chosen
    )
    all_dtypes = ["fp32", "fp16", "bf16", "fp64", "tf32", "fp8"]
    dtypes = draw(st.lists(st.sampled_from(all_dtypes), min_size=1, unique=True))
    efficiency = st.floats(1e-3, 1.0)
    compute = Compute(
        name=draw(free_text),
        peak_flop_per_s=tuple((d, draw(positive)) for d in dtypes),
        efficiencies=tuple(ClassEfficiency(c, draw(efficiency), draw(efficiency)) for c in OpClass),
        launch_overhead_s=draw(nonneg),
        cores=draw(st.integers(1, 512)),
        source=draw(free_text),
    )
    # Kernels reach the fastest visible tier, and perhaps others.
    others = draw(st.lists(st.sampled_from(visible[1:]), unique=True)) if visible[1:] else []
    kernel_tiers = [visible[0], *others]
    sizes, ways = st.integers(1, 2**40), st.integers(1, 16)
    lines = st.integers(0, 40).map(lambda e: 2**e)
    mode = st.builds(MemoryMode, lines, ways, st.booleans(), st.booleans(), nonneg, free_text)
    policy = st.sampled_from(["lru", "fifo"])
    fraction = st.floats(1e-6, 1.0)
    flags = st.booleans()
    driver = st.builds(
        UnifiedMemory, sizes, nonneg, fraction, nonneg, flags, policy, flags, free_text
    )
    return Platform(
        name=draw(names),
        tiers=tiers,
        compute=compute,
        copy_paths=paths,
        kernel_tiers=tuple(kernel_tiers),
        cache=cache,
        description=draw(free_text),
        source=draw(free_text),
        memory_mode=draw(st.none() | mode) if len(tiers) >= 2 else None,
        unified_memory=draw(st.none() | driver),
    )


@settings(max_examples=60, deadline=None)
@given(platforms())
def test_toml_round_trip(p: Platform) -> None:
    assert platform_from_toml(platform_to_toml(p), "rt.toml") == p


# --- every bad-file error -----------------------------------------------------------------
