"""The rows of the strategies that are simulations, not plans: ``2lm`` (the hardware DRAM
cache), ``first-touch-pages`` (the operating system's first touch, page by page) and
``unified-memory`` (CUDA managed memory)."""

from __future__ import annotations

import math

from hwmodels.platform import Platform
from tmsim.comparison.rows import CompareSettings, Replays, Row
from tmsim.cost import CostModel
from tmsim.energy import energy_fields
from tmsim.sim.trace import Trace
from tmsim.workload.graph import Graph


def row_2lm(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    limit: int,
    replays: Replays | None = None,
) -> Row:
    from tmsim.sim.cache.replay import replay_cache

    mm = platform.in_memory_mode(limit)
    out = replay_cache(graph, mm, block_bytes=s.cache_block_bytes, level=s.level)
    totals = out.totals()
    return _simulated(
        "2lm",
        out.trace,
        graph,
        mm,
        limit,
        replays,
        moved_bytes=float(totals["backing_read_bytes"] + totals["backing_write_bytes"]),
        fast_peak_bytes=float(max((r.fast_resident_bytes for r in out.trace.records), default=0)),
        hit_rate=float(totals["hit_rate"]),
    )


def row_first_touch_pages(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    cost: CostModel,
    limit: int,
    replays: Replays | None = None,
) -> Row:
    from tmsim.sim.firsttouch.replay import replay_first_touch_pages

    out = replay_first_touch_pages(
        graph,
        platform,
        fast_limit_bytes=limit,
        page_bytes=s.page_bytes,
        level=s.level,
        cost=cost,
    )
    return _simulated(
        "first-touch-pages",
        out.trace,
        graph,
        platform,
        limit,
        replays,
        predicted_s=out.trace.predicted_s,
        moved_bytes=0.0,
        fast_peak_bytes=float(out.fast_bytes),
    )


def row_unified(
    graph: Graph,
    platform: Platform,
    s: CompareSettings,
    limit: int,
    replays: Replays | None = None,
) -> Row:
    from tmsim.sim.unified.replay import replay_unified

    # A steady-state step: weights and optimizer state start where the last step left them,
    # as in the planned strategies, whose persistent tensors end where they start.
    out = replay_unified(graph, platform, device_bytes=limit, level=s.level, warm=True)
    totals = out.totals()
    return _simulated(
        "unified-memory",
        out.trace,
        graph,
        platform,
        limit,
        replays,
        moved_bytes=float(totals["migrated_in_bytes"] + totals["migrated_out_bytes"]),
        fast_peak_bytes=float(totals["device_peak_bytes"]),
    )


def _simulated(
    name: str,
    trace: Trace,
    graph: Graph,
    platform: Platform,
    limit: int,
    replays: Replays | None,
    moved_bytes: float,
    fast_peak_bytes: float,
    predicted_s: float = math.nan,
    hit_rate: float = math.nan,
) -> Row:
    """The row of simulation ``name`` from its ``trace`` on ``platform`` (the machine it ran
    on, for the energy), at fast-tier ``limit``, with the figures :class:`Row` names; the
    trace goes into ``replays`` when it is given."""
    if replays is not None:
        replays[name] = (trace, None)
    return Row(
        strategy=name,
        planner=name,
        status="simulated",
        simulated_s=trace.simulated_s,
        fast_limit_bytes=float(limit),
        valid=True,
        predicted_s=predicted_s,
        moved_bytes=moved_bytes,
        fast_peak_bytes=fast_peak_bytes,
        hit_rate=hit_rate,
        **energy_fields(trace, graph, platform),
    )


__all__ = ["row_2lm", "row_first_touch_pages", "row_unified"]
