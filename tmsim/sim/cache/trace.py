"""What a 2LM replay produced: the step's trace and the cache's per-kernel counters.

:class:`CacheTrace` is the value :func:`tmsim.sim.cache.replay.replay_cache` returns. Its ``trace``
is an ordinary :class:`~tmsim.sim.trace.Trace` (one kernel record per kernel, the bytes on each
tier being the cache's traffic), so it saves, loads and plots like any replay; the counters
beside it (hits, misses, fills, write-backs per kernel, in blocks) are what the cache state
machine reported. :meth:`CacheTrace.to_frame` gives them as a DataFrame, one row per kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from hwmodels.cache import DramCache
from tmsim.layout.addresses import Layout
from tmsim.sim.trace import Trace

IntArray = npt.NDArray[np.int64]

#: The per-kernel counters (in blocks), each with the name of its column in bytes.
COUNTERS = {
    "hits": "hit_bytes",
    "misses": "miss_bytes",
    "fills": "fill_bytes",
    "writebacks": "writeback_bytes",
}


@dataclass(frozen=True, eq=False)
class CacheTrace:
    """A replayed 2LM step (see :mod:`tmsim.sim.cache.replay` for the model).

    - ``trace``: the kernel records in execution order. ``planner`` is ``"2lm"``;
      ``read_bytes``/``write_bytes`` of a record are the cache's traffic on each tier (cache
      tier: every access, fills and written blocks; backing tier: fills and write-backs);
      ``uncontended_s`` is the kernel's time with contention off; ``fast_resident_bytes`` the
      bytes of the cache holding valid blocks once the kernel's accesses are done (exact for
      a direct-mapped write-allocate cache; for a set-associative one it counts one way per
      set touched, a lower bound); ``fast_limit_bytes`` is the cache's capacity; and
      ``predicted_s`` is :attr:`all_backing_s`.
    - ``cache``, ``block_bytes``: the cache simulated (each way rounded down to whole
      blocks, :func:`tmsim.sim.cache.walk.simulated_cache`) and the block it was walked in;
      ``warm``: whether the reported step is the second of two (steady state) or the first,
      from an empty cache.
    - ``layout``: the address (offset in the backing tier) of every tensor, indexed like the
      graph's tensors.
    - ``hits``, ``misses``, ``fills``, ``writebacks`` [K]: blocks per kernel
      (:class:`hwmodels.CacheTraffic`); ``accessed_bytes`` [K]: bytes the kernel's operands
      read and write, before rounding to blocks.
    - ``all_backing_s``, ``all_cache_s``: the step as the cost model times it with every
      operand on the backing tier and no cache (App Direct, all in PMM), and with every
      operand on the cache tier (all in DRAM, as if it were large enough): the two bounds
      2LM falls between when it neither thrashes nor pays for tag reads.
    """

    trace: Trace
    cache: DramCache
    block_bytes: int
    warm: bool
    layout: Layout
    hits: IntArray
    misses: IntArray
    fills: IntArray
    writebacks: IntArray
    accessed_bytes: IntArray
    all_backing_s: float
    all_cache_s: float

    @property
    def simulated_s(self) -> float:
        """The simulated step time (seconds)."""
        return self.trace.simulated_s

    @property
    def hit_rate(self) -> float:
        """Hits over blocks accessed in the step (1.0 for a step with no access)."""
        touched = int(self.hits.sum() + self.misses.sum())
        return int(self.hits.sum()) / touched if touched else 1.0

    def tier_bytes(self, tier: str) -> tuple[int, int]:
        """``(read, written)`` bytes of the whole step on ``tier`` (a name of the trace's
        tiers); raises ``ValueError`` for another name."""
        j = self.trace.tier_names.index(tier)
        ks = self.trace.records
        return sum(r.read_bytes[j] for r in ks), sum(r.write_bytes[j] for r in ks)

    def totals(self) -> dict[str, Any]:
        """Step totals as JSON-ready values.

        Counters in blocks and bytes (``hits``, ``hit_bytes``, ...), ``hit_rate``, times
        (``simulated_s``, ``all_backing_s``, ``all_cache_s``), and bytes read and written on
        the cache and backing tiers keyed by tier name, lower case
        (``dram_read_bytes``, ``pmm_write_bytes`` on the presets) and by role
        (``cache_read_bytes``, ``backing_write_bytes``).
        """
        t = self.trace
        out: dict[str, Any] = {
            "graph": t.graph,
            "platform": t.platform,
            "planner": t.planner,
            "interference": t.level,
            "warm": self.warm,
            "block_bytes": self.block_bytes,
            "cache_tier": self.cache.cache_tier,
            "backing_tier": self.cache.backing_tier,
            "cache_bytes": self.cache.capacity_bytes,
            "kernels": len(t.records),
            "simulated_s": t.simulated_s,
            "all_backing_s": self.all_backing_s,
            "all_cache_s": self.all_cache_s,
            "hit_rate": self.hit_rate,
        }
        for name, in_bytes in COUNTERS.items():
            blocks = int(getattr(self, name).sum())
            out[name] = blocks
            out[in_bytes] = blocks * self.block_bytes
        out["accessed_bytes"] = int(self.accessed_bytes.sum())
        for role, tier in (("cache", self.cache.cache_tier), ("backing", self.cache.backing_tier)):
            read, written = self.tier_bytes(tier)
            for key in (role, _key(tier)):
                out[f"{key}_read_bytes"] = read
                out[f"{key}_write_bytes"] = written
        out["events"] = t.events
        return out

    def to_frame(self) -> pd.DataFrame:
        """One row per kernel: ``kernel``, ``name``, ``phase``, ``start_s``, ``end_s``,
        ``duration_s``, ``uncontended_s``, the counters in blocks (``hits``, ``misses``,
        ``fills``, ``writebacks``) and in bytes (``hit_bytes``, ...), ``accessed_bytes``,
        ``read_bytes_<tier>`` and ``write_bytes_<tier>`` per tier, and
        ``fast_resident_bytes``."""
        recs = self.trace.records
        cols: dict[str, Any] = {
            "kernel": np.array([r.kernel for r in recs], dtype=np.int64),
            "name": [r.name for r in recs],
            "phase": [r.phase for r in recs],
            "start_s": np.array([r.start_s for r in recs], dtype=np.float64),
            "end_s": np.array([r.end_s for r in recs], dtype=np.float64),
        }
        cols["duration_s"] = cols["end_s"] - cols["start_s"]
        cols["uncontended_s"] = np.array([r.uncontended_s for r in recs], dtype=np.float64)
        for name in COUNTERS:
            cols[name] = getattr(self, name)
        for name, in_bytes in COUNTERS.items():
            cols[in_bytes] = getattr(self, name) * self.block_bytes
        cols["accessed_bytes"] = self.accessed_bytes
        n_t = len(self.trace.tier_names)
        for label in ("read_bytes", "write_bytes"):
            rows = np.array([getattr(r, label) for r in recs], dtype=np.int64).reshape(-1, n_t)
            for j, tier in enumerate(self.trace.tier_names):
                cols[f"{label}_{tier}"] = rows[:, j]
        cols["fast_resident_bytes"] = np.array(
            [r.fast_resident_bytes for r in recs], dtype=np.int64
        )
        return pd.DataFrame(cols)


def _key(tier: str) -> str:
    """A tier name as a JSON key prefix: lower case, runs of other characters as ``_``."""
    return re.sub(r"[^0-9a-z]+", "_", tier.lower()).strip("_")


__all__ = ["COUNTERS", "CacheTrace"]
