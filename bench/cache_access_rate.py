"""Speed of the 2LM cache state machine (hwmodels.cachesim), in block accesses per second.

The target is 10^8 block accesses in under a minute. Three workloads:

- ``tensors``: the cascadelake-2lm cache (192 GiB, direct-mapped) at 4 KiB blocks, replaying
  reads and writes of tensor-sized ranges (1 MB to 400 MB) scattered over a 650 GB address
  space (the size of AutoTM's large networks), 10^8 block accesses in all;
- ``short``: the same cache, 10^6 accesses of 1 to 64 blocks each (the batched path);
- ``4-way``: a 4-way LRU cache of 16 GiB at 4 KiB blocks, tensor-sized ranges, 2 x 10^7
  block accesses.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from hwmodels import DramCache, load_preset, new_cache_state, simulate_accesses

Accesses = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]


def _tensor_workload(rng: np.random.Generator, total_blocks: int, block: int) -> Accesses:
    sizes = []
    left = total_blocks
    while left > 0:
        n = min(left, int(rng.integers(1_000_000, 400_000_000)) // block)
        sizes.append(n)
        left -= n
    lengths = np.array(sizes, dtype=np.int64) * block
    starts = rng.integers(0, 650 * 10**9, lengths.size) // block * block
    writes = rng.random(lengths.size) < 0.4
    return starts, lengths, writes


def _run(label: str, cache: DramCache, block: int, accesses: Accesses) -> None:
    starts, lengths, writes = accesses
    state = new_cache_state(cache, block)
    t0 = time.perf_counter()
    traffic = simulate_accesses(state, starts, lengths, writes)
    seconds = time.perf_counter() - t0
    totals = traffic.total()
    blocks = totals["hits"] + totals["misses"]
    print(
        f"{label:8s} {blocks:>12,d} block accesses in {len(starts):>9,d} accesses: "
        f"{seconds:6.2f} s, {blocks / seconds / 1e6:7.1f} M block accesses/s "
        f"(hit rate {totals['hits'] / blocks:.3f})"
    )


def main() -> None:
    rng = np.random.default_rng(0)
    cache = load_preset("cascadelake-2lm").cache
    assert cache is not None
    block = 4096
    print(f"cascadelake-2lm cache: {cache.capacity_bytes / 2**30:g} GiB, {block} B blocks")
    _run("tensors", cache, block, _tensor_workload(rng, 10**8, block))

    n = 10**6
    lengths = rng.integers(1, 65, n) * block
    starts = rng.integers(0, 650 * 10**9, n) // block * block
    _run("short", cache, block, (starts, lengths, rng.random(n) < 0.4))

    assoc = DramCache("DRAM", "PMM", 16 * 2**30, 64, associativity=4)
    _run("4-way", assoc, block, _tensor_workload(rng, 2 * 10**7, block))
