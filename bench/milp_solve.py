"""MILP size and solve time on the AutoTM paper's conventional workloads.

For Inception v4 (1024), VGG19 (2048), ResNet-200 (512) and DenseNet-264 (512) on
``cascadelake-optane`` at slow:fast ratios 1:1, 4:1 and 8:1, and each formulation: variables,
constraints, build and solve seconds, the gap reached, layout rounds and the predicted step
time beside all-DRAM. Environment variables: ``TMSIM_BENCH_FORMULATIONS`` (default
``static,sync``; add ``async``), ``TMSIM_BENCH_TIME_LIMIT_S`` (default 120),
``TMSIM_BENCH_WINDOW`` (async window, default 3).
"""

from __future__ import annotations

import os
import time

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.planners import PlanSettings, plan
from tmsim.workload.zoo import training_graph_of

WORKLOADS = (("inception_v4", 1024), ("vgg19", 2048), ("resnet200", 512), ("densenet264", 512))
RATIOS = ("1:1", "4:1", "8:1")


def main() -> None:
    formulations = os.environ.get("TMSIM_BENCH_FORMULATIONS", "static,sync").split(",")
    limit_s = float(os.environ.get("TMSIM_BENCH_TIME_LIMIT_S", "120"))
    window = int(os.environ.get("TMSIM_BENCH_WINDOW", "3"))
    platform = load_preset("cascadelake-optane")
    print(f"time limit {limit_s:.0f} s, gap 1%, async window {window}, HiGHS")
    header = (
        f"{'workload':16s} {'ratio':>5s} {'form':>6s} {'vars':>8s} {'rows':>8s} "
        f"{'build s':>8s} {'solve s':>8s} {'gap %':>6s} {'rounds':>6s} {'step s':>8s} "
        f"{'x DRAM':>7s} {'status':>10s}"
    )
    print(header)
    for name, batch in WORKLOADS:
        graph = training_graph_of(name, batch)
        fast = plan("all-fast", graph, platform).predicted_s
        for ratio in RATIOS:
            for formulation in formulations:
                settings = PlanSettings(
                    capacity=Capacity.parse(ratio), time_limit_s=limit_s, window=window
                )
                started = time.perf_counter()
                result = plan(formulation, graph, platform, settings)
                wall = time.perf_counter() - started
                s = result.stats
                assert s is not None
                print(
                    f"{graph.name:16s} {ratio:>5s} {formulation:>6s} {s.variables:8d} "
                    f"{s.constraints:8d} {s.build_s:8.2f} {s.solve_s:8.2f} "
                    f"{100 * s.gap:6.2f} {s.rounds:6d} {result.predicted_s:8.2f} "
                    f"{result.predicted_s / fast:7.3f} {s.status:>10s}  (wall {wall:.1f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
