"""Speed of the 2LM replay (tmsim.sim.cache.replay.replay_cache), and the step times it predicts.

Workloads: AutoTM's large networks (650 to 840 GB, three to four times the 192 GiB DRAM cache
of cascadelake-2lm): resnet200 at batch 2560, vgg416 at 320, inception_v4 at 6144 and
densenet264 at 3072, each replayed warm (the second, steady-state step) at the default 4 KiB
block, with contention. Then resnet200 b2560 again: without contention, cold, and at coarser
blocks (the accuracy/speed knob). Beside every row, for scale: the cost model's step with every
operand in PMM (App Direct, no cache) and with every operand in DRAM (unlimited DRAM).
Graph construction is not part of the replay seconds.
"""

from __future__ import annotations

import time

from hwmodels.presets import load_preset
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.sim import replay_cache
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

WORKLOADS = (("resnet200", 2560), ("vgg416", 320), ("inception_v4", 6144), ("densenet264", 3072))
GB = 1e9


def _row(
    label: str,
    graph: Graph,
    *,
    block_bytes: int | None = None,
    level: InterferenceLevel = DEFAULT_LEVEL,
    warm: bool = True,
) -> None:
    platform = load_preset("cascadelake-2lm")
    t0 = time.perf_counter()
    ct = replay_cache(graph, platform, block_bytes=block_bytes, level=level, warm=warm)
    seconds = time.perf_counter() - t0
    t = ct.totals()
    blocks = t["hits"] + t["misses"]
    print(
        f"{label:34s} {seconds:8.2f} {blocks / 1e9:8.3f} {t['hit_rate']:8.4f} "
        f"{t['pmm_read_bytes'] / GB:8.1f} {t['pmm_write_bytes'] / GB:8.1f} "
        f"{t['simulated_s']:9.2f} {t['all_backing_s']:9.2f} {t['all_cache_s']:9.2f}"
    )


def main() -> None:
    print(
        f"{'workload (cascadelake-2lm)':34s} {'replay s':>8s} {'Gblocks':>8s} {'hit rate':>8s} "
        f"{'PMM rd GB':>8s} {'PMM wr GB':>8s} {'2LM s':>9s} {'all-PMM s':>9s} {'all-DRAM s':>9s}"
    )
    for name, batch in WORKLOADS:
        graph = training_graph_of(name, batch)
        _row(f"{graph.name} warm 4K", graph)
    graph = training_graph_of("resnet200", 2560)
    _row(f"{graph.name} warm 4K no contention", graph, level=InterferenceLevel.NONE)
    _row(f"{graph.name} cold 4K", graph, warm=False)
    for block in (16384, 65536, 1 << 20):
        _row(f"{graph.name} warm {block // 1024}K", graph, block_bytes=block)
    small = training_graph_of("resnet200", 256)
    _row(f"{small.name} warm 4K (fits)", small)
