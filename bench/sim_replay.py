"""Speed of the plan replay (tmsim.sim.replay), in SimPy events per second and seconds.

Workloads: the conventional networks of the AutoTM paper on cascadelake-optane at a 4:1
slow:fast ratio (inception_v4 at batch 1024, vgg19 at 2048, resnet200 at 512, densenet264 at
512), each with its synchronous MILP plan (HiGHS, 1% gap, 120 s cap), replayed at the
interference levels ``none`` and the default (``controller``); then the vDNN plan of resnet200
at batch 512 (many asynchronous copies, so the fluid model shares bandwidth all the time) on
cascadelake-optane and rtx2080ti-pcie3. Planning time is printed beside, for scale; it is not
part of the replay figures.
"""

from __future__ import annotations

import time
import warnings

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.levels import DEFAULT_LEVEL, InterferenceLevel
from tmsim.planners import PlanSettings, plan
from tmsim.plans.values import Plan
from tmsim.sim import replay
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

WORKLOADS = (("inception_v4", 1024), ("vgg19", 2048), ("resnet200", 512), ("densenet264", 512))
RATIO = "4:1"


def _row(
    label: str, planner: str, plan_s: float, p: Plan, graph: Graph, platform: Platform
) -> None:
    for level in (InterferenceLevel.NONE, DEFAULT_LEVEL):
        t0 = time.perf_counter()
        trace = replay(p, graph, platform, level=level)
        seconds = time.perf_counter() - t0
        print(
            f"{label:22s} {planner:6s} {plan_s:7.1f} {len(trace.kernels()):>7,d} "
            f"{len(trace.moves()):>7,d} {level.value:>10s} {seconds:8.3f} "
            f"{trace.events:>8,d} {trace.events / seconds:>10,.0f} "
            f"{trace.simulated_s:10.4f} {trace.predicted_s:10.4f} "
            f"{trace.simulated_s / trace.predicted_s:8.5f}"
        )


def main() -> None:
    # HiGHS through cvxpy may warn that a time-limited solution "may be inaccurate".
    warnings.simplefilter("ignore", UserWarning)
    print(
        f"{'workload':22s} {'plan':6s} {'plan s':>7s} {'kernels':>7s} {'moves':>7s} "
        f"{'level':>10s} {'replay s':>8s} {'events':>8s} {'events/s':>10s} "
        f"{'sim s':>10s} {'pred s':>10s} {'sim/pred':>8s}"
    )
    cpu = load_preset("cascadelake-optane")
    settings = PlanSettings(capacity=Capacity.parse(RATIO), time_limit_s=120.0)
    for name, batch in WORKLOADS:
        graph = training_graph_of(name, batch)
        t0 = time.perf_counter()
        p = plan("sync", graph, cpu, settings)
        _row(f"{graph.name} cpu", "sync", time.perf_counter() - t0, p, graph, cpu)
    graph = training_graph_of("resnet200", 512)
    for label, platform in (("cpu", cpu), ("gpu", load_preset("rtx2080ti-pcie3"))):
        t0 = time.perf_counter()
        p = plan("vdnn", graph, platform, settings)
        _row(f"{graph.name} {label}", "vdnn", time.perf_counter() - t0, p, graph, platform)
