"""The 2LM step as the cache sees it: addresses, accesses, and their walk through the cache.

The bookkeeping half of :func:`tmsim.sim.cache.replay.replay_cache`, free of SimPy so that it can be
checked by hand (see :mod:`tmsim.sim.cache.replay` for the model). The addresses and the
accesses are :mod:`tmsim.sim.addresses`' (:func:`~tmsim.sim.addresses.step_layout`,
:func:`~tmsim.sim.addresses.step_accesses`); :func:`walk_step` takes the accesses through
:func:`hwmodels.simulate_accesses` (after a warm-up step, by default), summed per kernel:
counters and bytes on each tier.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from hwmodels._checks import positive_int
from hwmodels.cache import DramCache
from hwmodels.cachesim import CacheTraffic, simulate_accesses
from hwmodels.cachestate import new_cache_state
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.timing import cache_traffic_by_tier
from tmsim.errors import TmsimError
from tmsim.sim.addresses import Accesses, RangeSet, per_kernel

IntArray = npt.NDArray[np.int64]

#: Default block: a 4 KiB page. On resnet200 at batch 2560 (650 GB, 6.4 TB of accesses a
#: step) against the 192 GiB cascadelake-2lm cache, a warm replay walks 3.1e9 blocks in about
#: 10 s (``python -m bench memory_mode_replay``), with hit rates within 1e-4 of a walk in 64 B
#: lines.
DEFAULT_BLOCK_BYTES = 4096
#: Most frames a default block may give a cache (about 0.6 GB of tags and dirty bits).
MAX_DEFAULT_FRAMES = 1 << 26
#: Fewest sets a default block leaves a small cache (a coarser walk would blur its conflicts).
MIN_DEFAULT_SETS = 1024


class CacheReplayError(TmsimError, ValueError):
    """A 2LM replay cannot run: no cache on the platform, or a bad block size. The message
    names the platform."""


@dataclass(frozen=True, eq=False)
class StepTraffic:
    """A step's walk through the cache, summed per kernel [K].

    ``cache``: the cache simulated (:func:`simulated_cache`); ``block_bytes``: its block;
    ``hits``, ``misses``, ``fills``, ``writebacks``: blocks (:class:`hwmodels.CacheTraffic`);
    ``read_bytes``/``write_bytes`` [K, tiers]: the cache's traffic on each tier
    (:func:`hwmodels.cache_traffic_by_tier`); ``accessed_bytes``: bytes of the kernel's
    accesses before rounding to blocks; ``resident_bytes``: bytes of the cache's sets holding
    a block once the kernel's accesses are done (every access allocates in a write-allocate
    cache, so this is the union of the sets touched so far, times the block: exact for a
    direct-mapped cache, and one way per set, a lower bound, for a set-associative one).
    """

    cache: DramCache
    block_bytes: int
    hits: IntArray
    misses: IntArray
    fills: IntArray
    writebacks: IntArray
    read_bytes: IntArray
    write_bytes: IntArray
    accessed_bytes: IntArray
    resident_bytes: IntArray


def cache_of(platform: Platform) -> DramCache:
    """``platform``'s 2LM cache. Raises :class:`CacheReplayError` naming the platform if it has
    none, or if the cache's backing tier is not a kernel tier."""
    cache = platform.cache
    if cache is None:
        raise CacheReplayError(
            f"platform {platform.name!r} has no hardware cache (no [cache] table): a 2LM "
            "replay needs a memory-mode platform such as cascadelake-2lm"
        )
    if cache.backing_tier not in platform.kernel_tiers:
        raise CacheReplayError(
            f"platform {platform.name!r}: the cache's backing tier {cache.backing_tier!r} is "
            "not a kernel tier, so the step has nowhere to run"
        )
    return cache


def default_block_bytes(cache: DramCache) -> int:
    """The block :func:`walk_step` walks ``cache`` in when given none.

    The largest line x 2^i up to :data:`DEFAULT_BLOCK_BYTES` that leaves one way of the cache
    at least :data:`MIN_DEFAULT_SETS` sets (never less than the line); then doubled while the
    cache would have more than :data:`MAX_DEFAULT_FRAMES` frames.
    """
    way = cache.capacity_bytes // cache.associativity
    block = cache.line_bytes
    while block * 2 <= DEFAULT_BLOCK_BYTES and way // (block * 2) >= MIN_DEFAULT_SETS:
        block *= 2
    while way // block * cache.associativity > MAX_DEFAULT_FRAMES:
        block *= 2
    return block


def simulated_cache(platform: Platform, block_bytes: int) -> DramCache:
    """``platform``'s cache as walked in blocks of ``block_bytes``: each way rounded down to
    whole blocks (at most one block less per way; unchanged where the block divides a way,
    as the default does on the presets).

    Raises :class:`CacheReplayError` naming the platform if it has no cache (:func:`cache_of`),
    or if the block is not a positive multiple of the cache line or is larger than one way.
    """
    cache = cache_of(platform)
    way = cache.capacity_bytes // cache.associativity
    where = f"platform {platform.name!r}"
    if not positive_int(block_bytes) or block_bytes % cache.line_bytes:
        raise CacheReplayError(
            f"{where}: block_bytes must be a positive multiple of the cache line "
            f"({cache.line_bytes} bytes), got {block_bytes!r}"
        )
    if block_bytes > way:
        raise CacheReplayError(
            f"{where}: block_bytes {block_bytes} is larger than one way of the cache ({way} bytes)"
        )
    capacity = way // block_bytes * block_bytes * cache.associativity
    return cache if capacity == cache.capacity_bytes else replace(cache, capacity_bytes=capacity)


def walk_step(
    platform: Platform, acc: Accesses, n_kernels: int, block_bytes: int | None, warm: bool
) -> StepTraffic:
    """Walk the accesses ``acc`` of a step of ``n_kernels`` kernels through ``platform``'s
    cache (as :func:`simulated_cache` rounds it) in blocks of ``block_bytes`` (default
    :func:`default_block_bytes`), from an empty cache; with ``warm``, walk them twice and
    report the second time.

    Raises :class:`CacheReplayError` naming the platform if it has no cache (see
    :func:`cache_of`), or the block is not a positive multiple of the line, is larger than a
    way, or gives more frames than :data:`hwmodels.cachestate.MAX_FRAMES`.
    """
    base = cache_of(platform)
    block = default_block_bytes(base) if block_bytes is None else block_bytes
    cache = simulated_cache(platform, block)
    try:
        state = new_cache_state(cache, block)
    except HardwareModelError as exc:  # too many frames
        raise CacheReplayError(f"platform {platform.name!r}: {exc}") from None
    if warm:
        simulate_accesses(state, acc.starts_bytes, acc.lengths_bytes, acc.is_write)
    traffic = simulate_accesses(state, acc.starts_bytes, acc.lengths_bytes, acc.is_write)
    n_t = len(platform.tiers)
    reads_t, writes_t = cache_traffic_by_tier(platform, traffic)
    reads, writes = np.zeros((n_kernels, n_t)), np.zeros((n_kernels, n_t))
    np.add.at(reads, acc.kernel, reads_t)
    np.add.at(writes, acc.kernel, writes_t)
    new_sets = _new_sets(traffic, acc, state.n_sets)
    if warm:  # the warm-up step touched every set this one touches
        resident = np.full(n_kernels, int(new_sets.sum()), dtype=np.int64)
    else:
        resident = np.cumsum(per_kernel(acc.kernel, new_sets, n_kernels))
    return StepTraffic(
        cache=cache,
        block_bytes=block,
        hits=per_kernel(acc.kernel, traffic.hits, n_kernels),
        misses=per_kernel(acc.kernel, traffic.misses, n_kernels),
        fills=per_kernel(acc.kernel, traffic.fills, n_kernels),
        writebacks=per_kernel(acc.kernel, traffic.writebacks, n_kernels),
        # Sums of whole blocks, exact in float64 below 2^53 bytes.
        read_bytes=np.rint(reads).astype(np.int64),
        write_bytes=np.rint(writes).astype(np.int64),
        accessed_bytes=per_kernel(acc.kernel, acc.lengths_bytes, n_kernels),
        resident_bytes=resident * block,
    )


def _new_sets(traffic: CacheTraffic, acc: Accesses, n_sets: int) -> IntArray:
    """Sets each access touches that no earlier access touched, accesses taken in order."""
    b = traffic.block_bytes
    first = acc.starts_bytes // b
    count = (acc.starts_bytes + acc.lengths_bytes + b - 1) // b - first
    new = np.zeros(first.size, dtype=np.int64)
    seen = RangeSet()
    for i, (f, c) in enumerate(zip(first.tolist(), count.tolist(), strict=True)):
        s0 = f % n_sets
        if c >= n_sets:
            pieces = [(0, n_sets)]
        elif s0 + c <= n_sets:
            pieces = [(s0, s0 + c)]
        else:  # the range wraps around the sets
            pieces = [(s0, n_sets), (0, s0 + c - n_sets)]
        new[i] = sum(e - a for piece in pieces for a, e in seen.add(*piece))
    return new


__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "MAX_DEFAULT_FRAMES",
    "MIN_DEFAULT_SETS",
    "CacheReplayError",
    "StepTraffic",
    "cache_of",
    "default_block_bytes",
    "simulated_cache",
    "walk_step",
]
