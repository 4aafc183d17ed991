"""CUDA unified memory: page residency, faults and evictions (:mod:`.pages`, free of SimPy)
and the replay of a step that migrates pages on demand (:mod:`.replay`)."""

from tmsim.sim.unified.replay import UnifiedTrace, replay_unified

__all__ = ["UnifiedTrace", "replay_unified"]
