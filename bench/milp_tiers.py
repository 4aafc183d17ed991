"""What a third tier costs the MILP: model size and solve time, two tiers against three.

One workload (ResNet-50 at batch 64, about 5.7 GB of peak live bytes) on the H100 with host
memory (``h100-pcie5``) and on the same machine with an NVMe drive behind the host
(``h100-host-nvme``), with 2 GB of device memory; on the three-tier machine the host tier is
also shrunk to 3 GiB so that its capacity binds and the drive is used. For each formulation:
states and edge types of the catalogue, variables, constraints, build and solve seconds (a
node limit of 200, not a time limit, so the work is the same on a loaded machine), status,
predicted step time. Ratios of the three-tier figures over the two-tier ones show the growth.
"""

from __future__ import annotations

import time
from dataclasses import replace

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.planners import PlanSettings, plan
from tmsim.planners.milp.formulation.build import catalogue_of
from tmsim.workload.zoo import training_graph_of

MODEL, BATCH = "resnet50", 64
DEVICE = Capacity.parse("2GB")
HOST_BYTES = 3 * 2**30


def _platforms() -> list[Platform]:
    three = load_preset("h100-host-nvme")
    host = replace(three.tiers[1], capacity_bytes=HOST_BYTES)
    small = replace(three, name="h100-3gib-host-nvme", tiers=(three.tiers[0], host, three.tiers[2]))
    return [load_preset("h100-pcie5"), small]


def main() -> None:
    graph = training_graph_of(MODEL, BATCH)
    settings = PlanSettings(capacity=DEVICE, time_limit_s=None, node_limit=200, window=1)
    print(f"{graph.name}, {graph.peak_live_bytes / 1e9:.2f} GB peak; 2 GB device, window 1")
    print(
        f"{'platform':22s} {'form':>6s} {'states':>6s} {'edges':>5s} {'vars':>8s} "
        f"{'rows':>8s} {'build s':>8s} {'solve s':>8s} {'status':>22s} {'step s':>8s}"
    )
    sizes: dict[tuple[str, str], tuple[int, int, float]] = {}
    for platform in _platforms():
        cat = catalogue_of(CostModel(graph, platform))
        for formulation in ("static", "sync", "async"):
            started = time.perf_counter()
            try:
                result = plan(formulation, graph, platform, settings)
            except TmsimError as exc:
                print(f"{platform.name:22s} {formulation:>6s} error: {str(exc)[:60]}")
                continue
            wall = time.perf_counter() - started
            s = result.stats
            assert s is not None
            sizes[(platform.name, formulation)] = (s.variables, s.constraints, wall)
            print(
                f"{platform.name:22s} {formulation:>6s} {cat.n_states:6d} {cat.n_edges:5d} "
                f"{s.variables:8d} {s.constraints:8d} {s.build_s:8.2f} {s.solve_s:8.2f} "
                f"{s.status[:22]:>22s} {result.predicted_s:8.4f}"
            )
    names = [p.name for p in _platforms()]
    for formulation in ("static", "sync", "async"):
        two, three = sizes.get((names[0], formulation)), sizes.get((names[1], formulation))
        if two and three:
            print(
                f"{formulation}: three tiers / two: variables x{three[0] / two[0]:.2f}, "
                f"rows x{three[1] / two[1]:.2f}, wall x{three[2] / max(two[2], 1e-9):.2f}"
            )
