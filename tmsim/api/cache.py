"""The hardware DRAM cache (2LM, Optane's memory mode): a step replayed with the fast tier as
a cache of the slow one, which needs no plan.

:func:`simulate_cache` replays a graph's step on a platform with a cache (the
``cascadelake-2lm`` preset) and returns a :class:`CacheRun`: the step time, the hit rate, the
cache's traffic on each tier, and the trace as :class:`tmsim.Run` has it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from hwmodels.display import SummaryRow, gigabytes, html_table, text_table
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from tmsim.api.inputs import expect
from tmsim.api.runs import check_inputs
from tmsim.api.traces import draw_timeline
from tmsim.errors import TmsimError
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel, parse_level
from tmsim.sim import CacheTrace, replay_cache
from tmsim.workload.graph import Graph

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class CacheRun:
    """One step replayed in 2LM: ``details`` is the replay's record
    (:class:`tmsim.sim.CacheTrace`: the cache simulated, the block it was walked in, whether
    the step is the warm second one, per-kernel hits, misses, fills and write-backs).

    ``step_time_s`` is the simulated step, ``hit_rate`` the share of blocks accessed that hit;
    ``records`` is one row per kernel with its counters and traffic per tier.
    """

    details: CacheTrace

    @property
    def step_time_s(self) -> float:
        """The simulated step time."""
        return self.details.simulated_s

    @property
    def hit_rate(self) -> float:
        """Hits over blocks accessed in the step."""
        return self.details.hit_rate

    @property
    def records(self) -> pd.DataFrame:
        """One row per kernel (:meth:`CacheTrace.to_frame`)."""
        return self.details.to_frame()

    def summary(self) -> dict[str, Any]:
        """Step totals as JSON-ready values (:meth:`CacheTrace.totals`): counters in blocks
        and bytes, ``hit_rate``, the times ``simulated_s``, ``all_backing_s`` and
        ``all_cache_s`` (every operand on the backing or on the cache tier, no cache), and
        bytes read and written on each tier."""
        return self.details.totals()

    def timeline(
        self, path: str | os.PathLike[str] | None = None, *, title: str | None = None
    ) -> Figure:
        """The step as a Gantt chart with the cache's valid bytes beneath; also saved to
        ``path`` (``.png``, ``.pdf`` or ``.svg``) when given. Raises :class:`TmsimError` for
        another suffix or a path that cannot be written."""
        return draw_timeline(self.details.trace, path, title)

    def perfetto(self, path: str | os.PathLike[str]) -> Path:
        """Write the step as a Chrome trace-event file for ui.perfetto.dev
        (:mod:`tmsim.sim.perfetto`: its kernels on the compute track). Returns the path;
        raises :class:`TmsimError` for a path that cannot be written."""
        from tmsim.sim.perfetto import save_trace_events, trace_events

        return save_trace_events(path, [trace_events(self.details.trace, label="2lm")])

    def summary_rows(self) -> list[SummaryRow]:
        """Headline numbers as ``(label, value)`` text."""
        s = self.summary()
        near, far = s["cache_tier"], s["backing_tier"]
        return [
            ("graph", s["graph"]),
            ("platform", s["platform"]),
            ("step", "second, warm cache" if s["warm"] else "first, cold cache"),
            ("simulated step", f"{s['simulated_s']:.6g} s"),
            (f"all-{far} step", f"{s['all_backing_s']:.6g} s"),
            (f"all-{near} step", f"{s['all_cache_s']:.6g} s"),
            ("hit rate", f"{s['hit_rate']:.4f}"),
            (
                f"{far} traffic",
                f"read {gigabytes(s['backing_read_bytes'])}, "
                f"written {gigabytes(s['backing_write_bytes'])}",
            ),
        ]

    def __repr__(self) -> str:
        return text_table("2LM run", self.summary_rows())

    def _repr_html_(self) -> str:
        return html_table("2LM run", self.summary_rows())


def simulate_cache(
    graph: Graph,
    platform: Platform,
    *,
    block_bytes: int | None = None,
    interference: InterferenceLevel | str = DEFAULT_LEVEL,
    warm: bool = True,
) -> CacheRun:
    """Replay ``graph``'s step on ``platform``'s hardware cache (2LM): every tensor in the
    backing tier, every access through the cache, walked in blocks of ``block_bytes`` (a
    multiple of the cache line; default a page, less for a small cache). ``warm``: report the
    second of two steps (steady state), else the first from an empty cache.
    ``interference``: ``none`` runs each kernel at its roofline rate, any other level shares
    the tiers between a kernel's reads and writes.

    Raises :class:`TmsimError` for a platform without a cache and a bad block size.

    >>> import tmsim
    >>> g = tmsim.graph("vgg19", batch=2)
    >>> run = simulate_cache(g, tmsim.platform("cascadelake-2lm"))
    >>> 0 <= run.hit_rate <= 1, run.step_time_s > 0
    (True, True)
    """
    check_inputs(graph, platform)
    if block_bytes is not None:
        expect(block_bytes, int, "block_bytes", "a whole number of bytes")
    expect(warm, bool, "warm", "True or False")
    level = parse_level(interference)
    try:
        return CacheRun(
            replay_cache(
                graph,
                platform,
                block_bytes=block_bytes,
                level=level,
                warm=warm,
            )
        )
    except HardwareModelError as exc:
        raise TmsimError(str(exc)) from None


__all__ = ["CacheRun", "simulate_cache"]
