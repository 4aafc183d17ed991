"""The simulator: fluid bandwidth sharing on SimPy and the replay of plans as traces.

- :func:`replay` runs a plan's step and returns a :class:`Trace`;
- :func:`replay_cache` runs a graph's step in 2LM (a hardware DRAM cache of PMM) and returns a
  :class:`CacheTrace`;
- :class:`FluidModel` and :class:`Flow`: flows of bytes sharing memory tiers and links;
- :func:`save_trace` / :func:`load_trace`: traces as Parquet files.

The simulator emits records only; it neither plots nor writes files except in
:func:`save_trace`.
"""

from tmsim.sim.cache.replay import CacheReplayError, replay_cache
from tmsim.sim.cache.trace import CacheTrace
from tmsim.sim.fluid import Flow, FlowResult, FluidModel
from tmsim.sim.replay import replay
from tmsim.sim.trace import Record, Trace, TraceFileError, TraceFrames, load_trace, save_trace

__all__ = [
    "CacheReplayError",
    "CacheTrace",
    "Flow",
    "FlowResult",
    "FluidModel",
    "Record",
    "Trace",
    "TraceFileError",
    "TraceFrames",
    "load_trace",
    "replay",
    "replay_cache",
    "save_trace",
]
