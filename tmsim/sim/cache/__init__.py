"""The 2LM hardware DRAM cache: buffers laid out in the backing tier's addresses
(:mod:`.walk`), each kernel's accesses walked through the cache, and the replay of the step
with the cache's traffic (:mod:`.replay`) as a :class:`~.trace.CacheTrace`."""

from tmsim.sim.cache.replay import CacheReplayError, replay_cache
from tmsim.sim.cache.trace import CacheTrace

__all__ = ["CacheReplayError", "CacheTrace", "replay_cache"]
