"""tmsim: planner and simulator for tensor movement in heterogeneous memory."""

__version__ = "0.1.0"
