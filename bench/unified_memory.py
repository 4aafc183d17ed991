"""Speed of the unified-memory replay (tmsim.sim.unified.replay) on AutoTM's GPU workloads.

The paper's GPU set on rtx2080ti-pcie3 (11 GiB device): Inception v4 at batch 64/128/256,
ResNet-200 at 32/64/128, DenseNet-264 at 32/64/128, VGG19 at 64/128, replayed with contention
under cudaMallocManaged with the preset's driver parameters (its ``[unified_memory]`` table:
2 MiB pages, 45 us per fault, LRU), as a first step (everything starts on the host) and as a
steady-state step (weights and optimizer state where the previous step left them). Beside: the
all-device time (the all-fast plan replayed, as if the device had room for everything) and the
vDNN-style offload plan at the device's capacity, for scale. Printed per row: replay wall
seconds (the page model and SimPy together), simulated step seconds, the ratio to all-device,
faults (pages), GB migrated in and out, the peak live bytes of the graph and the peak device
bytes in use (GB = 1e9 bytes).
"""

from __future__ import annotations

import time

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.planners import PlanSettings, plan
from tmsim.sim import replay
from tmsim.sim.unified.replay import replay_unified
from tmsim.workload.zoo import training_graph_of

WORKLOADS = (
    *(("inception_v4", b) for b in (64, 128, 256)),
    *(("resnet200", b) for b in (32, 64, 128)),
    *(("densenet264", b) for b in (32, 64, 128)),
    *(("vgg19", b) for b in (64, 128)),
)
GB = 1e9


def main() -> None:
    gpu = load_preset("rtx2080ti-pcie3")
    device = gpu.tiers[0].capacity_bytes
    print(
        f"{'workload':18s} {'live GB':>7s} {'step':>6s} {'replay s':>8s} {'events':>7s} "
        f"{'sim s':>8s} {'dev s':>7s} {'x dev':>6s} {'faults':>7s} {'in GB':>6s} "
        f"{'out GB':>6s} {'res GB':>7s} {'vdnn s':>7s}"
    )
    for name, batch in WORKLOADS:
        graph = training_graph_of(name, batch)
        all_device = replay(plan("all-fast", graph, gpu), graph, gpu).simulated_s
        try:
            vdnn = plan("vdnn", graph, gpu, PlanSettings(capacity=Capacity.of_bytes(device)))
            vdnn_s = f"{replay(vdnn, graph, gpu).simulated_s:7.3f}"
        except TmsimError:
            vdnn_s = f"{'none':>7s}"
        for warm in (False, True):
            t0 = time.perf_counter()
            u = replay_unified(graph, gpu, warm=warm)
            seconds = time.perf_counter() - t0
            c = u.counters
            print(
                f"{graph.name:18s} {graph.peak_live_bytes / GB:7.2f} "
                f"{'steady' if warm else 'first':>6s} {seconds:8.3f} {u.trace.events:>7,d} "
                f"{c.simulated_s:8.3f} {all_device:7.3f} {c.simulated_s / all_device:6.2f} "
                f"{c.fault_pages:>7,d} {c.migrated_in_bytes / GB:6.1f} "
                f"{c.migrated_out_bytes / GB:6.1f} {c.device_peak_bytes / GB:7.2f} {vdnn_s}"
            )
