"""The Optane preset as it was before its memory controller's mechanisms were fitted (its TOML
keeps that controller in a comment): demand arbitration, strict PMM-write priority, one fitted
PMM read weight (2.24), an assumed write weight (7.7), no queueing delay, and a PMM whose reads
and writes take the device in turn (no write overlap). The hand computations of those rules
(the demand share, the write drain, the copy thread's own loaded latency) run on it."""

from __future__ import annotations

from dataclasses import replace

from hwmodels.controller import BusWeight, MemoryController
from hwmodels.platform import Platform
from hwmodels.presets import load_preset

GB = 1e9


def optane_before() -> Platform:
    """``cascadelake-optane`` with the controller and PMM before the fit (see above)."""
    cpu = load_preset("cascadelake-optane")
    return replace(
        cpu,
        tiers=tuple(
            replace(t, interference=replace(t.interference, write_overlap=0.0)) for t in cpu.tiers
        ),
        controller=MemoryController(
            104.6 * GB,
            (BusWeight("DRAM", 1.0, 1.362), BusWeight("PMM", 2.24, 7.7)),
            arbitration="demand",
            write_priority=1.0,
            priority_tiers=("PMM",),
        ),
    )
