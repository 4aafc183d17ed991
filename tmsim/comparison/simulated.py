"""The rows of the strategies that are simulations, not plans: ``2lm`` (the hardware DRAM
cache), ``first-touch-pages`` (the operating system's first touch, page by page) and
``unified-memory`` (CUDA managed memory)."""

from __future__ import annotations

from hwmodels.platform import Platform
from tmsim.comparison.rows import CompareSettings, Replays, Row
from tmsim.cost import CostModel
from tmsim.energy import energy_fields
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
    out = replay_cache(graph, mm, block_bytes=s.cache_block_bytes, contention=s.contention)
    if replays is not None:
        replays["2lm"] = (out.trace, None)
    totals = out.totals()
    return Row(
        strategy="2lm",
        planner="2lm",
        status="simulated",
        simulated_s=out.simulated_s,
        moved_bytes=float(totals["backing_read_bytes"] + totals["backing_write_bytes"]),
        fast_peak_bytes=float(max((r.fast_resident_bytes for r in out.trace.records), default=0)),
        fast_limit_bytes=float(limit),
        valid=True,
        hit_rate=float(totals["hit_rate"]),
        **energy_fields(out.trace, graph, mm),
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
        contention=s.contention,
        level=s.level,
        cost=cost,
    )
    if replays is not None:
        replays["first-touch-pages"] = (out.trace, None)
    return Row(
        strategy="first-touch-pages",
        planner="first-touch-pages",
        status="simulated",
        predicted_s=out.trace.predicted_s,
        simulated_s=out.simulated_s,
        moved_bytes=0.0,
        fast_peak_bytes=float(out.fast_bytes),
        fast_limit_bytes=float(limit),
        valid=True,
        **energy_fields(out.trace, graph, platform),
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
    out = replay_unified(graph, platform, device_bytes=limit, contention=s.contention, warm=True)
    if replays is not None:
        replays["unified-memory"] = (out.trace, None)
    totals = out.totals()
    return Row(
        strategy="unified-memory",
        planner="unified-memory",
        status="simulated",
        simulated_s=out.simulated_s,
        moved_bytes=float(totals["migrated_in_bytes"] + totals["migrated_out_bytes"]),
        fast_peak_bytes=float(totals["device_peak_bytes"]),
        fast_limit_bytes=float(limit),
        valid=True,
        **energy_fields(out.trace, graph, platform),
    )


__all__ = ["row_2lm", "row_first_touch_pages", "row_unified"]
