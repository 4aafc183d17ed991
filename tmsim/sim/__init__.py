"""The simulator: fluid bandwidth sharing on SimPy and the replay of plans as traces.

- :func:`replay` runs a plan's step and returns a :class:`Trace`;
- :class:`FluidModel` and :class:`Flow`: flows of bytes sharing memory tiers and links;
- :func:`save_trace` / :func:`load_trace`: traces as Parquet files.

The simulator emits records only; it neither plots nor writes files except in
:func:`save_trace`.
"""

from tmsim.sim.fluid import Flow, FlowResult, FluidModel
from tmsim.sim.replay import replay
from tmsim.sim.trace import Record, Trace, TraceFileError, TraceFrames, load_trace, save_trace

__all__ = [
    "Flow",
    "FlowResult",
    "FluidModel",
    "Record",
    "Trace",
    "TraceFileError",
    "TraceFrames",
    "load_trace",
    "replay",
    "save_trace",
]
