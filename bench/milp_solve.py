"""Time to a proven gap for every MILP formulation, against kernel count.

The AutoTM paper's conventional workloads on ``cascadelake-optane`` at slow:fast ratios 1:1,
4:1 and 8:1, and its GPU workloads on ``rtx2080ti-pcie3`` at the device's own capacity. Per
workload one MILP chain (static, then sync from it, then async from that, as ``tmsim
compare`` runs it) and per formulation: kernels, variables, constraints, the seconds until
the plan was returned, the gap proven at the end, the bound and the objective, and how the
solve ended. ``time s`` is the work: build and solve seconds summed over the formulation and
those it was started from (formulations solved at once and LPs solved ahead,
:mod:`tmsim.planners.milp.chain.ahead`, each count their own, so it can exceed the wall
clock); ``at s`` is the wall clock from the chain's start to the plan's hand-over. A plan whose
status is ``optimal`` reached the gap asked for (1%) in the time shown. ``first s`` is the
time to the chain's first valid plan: its smallest formulation stopped at once, which returns
its warm start (on CPUs a heuristic's placement laid out below the limit by first fit, on
GPUs every tensor fetched for its uses), timed once the previous workload's plans and models
are released and collected, as in a process that plans one workload (the collector would
otherwise scan them inside the timing: 0.1 to 0.2 s per full collection after large chains).

The ``modern`` set plans today's transformer steps on GPUs with a host tier: LLaMA-7B at batch 1
on ``h100-host-nvme`` and on ``gh200``, GPT-2 medium at batch 8 on ``h100-pcie5``, each at the
device's own capacity (the host may run the optimizer where the platform has a host compute,
:mod:`tmsim.planners.milp.formulation.host`), up to the formulation asked for (async by
default; ``async-rc`` through ``TMSIM_BENCH_FORMULATIONS``).

The ``scale`` set plans the synchronous formulation of ResNets of growing depth (bottleneck
blocks per stage scaled from ResNet-200's 3, 24, 36, 3 up to about four times its kernels:
ResNet-752, 8.2k kernels, the size of a graph four times the largest conventional one) at
batch 64 on Optane at 4:1, so that solve time against kernel count can be read off.

Environment variables: ``TMSIM_BENCH_SETS`` (default ``conventional,gpu,scale``; ``modern``
on request),
``TMSIM_BENCH_FORMULATIONS`` (default ``static,sync,async``; the chain stops at the last),
``TMSIM_BENCH_TIME_LIMIT_S`` (cap of one chain, default 120), ``TMSIM_BENCH_WINDOW``
(async window, default AutoTM's 15), ``TMSIM_BENCH_WORKLOADS`` (graph names to keep, such as
``densenet264-b512,resnet200-b64``; default all).
"""

from __future__ import annotations

import gc
import os
import time

from experiments.common import CONVENTIONAL, GPU_WORKLOADS
from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain.plan import plan_milp, plan_milp_chain
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.workload.graph import Graph
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import training_graph_of
from tmsim.workload.zoo.resnet import bottleneck_resnet

RATIOS = ("1:1", "4:1", "8:1")

#: Bottleneck blocks per stage of the scale set's ResNets: ResNet-200's, then deeper ones.
SCALE_BLOCKS: tuple[tuple[int, ...], ...] = (
    (3, 24, 36, 3),
    (3, 48, 72, 3),
    (3, 72, 108, 3),
    (3, 100, 144, 3),
)


#: The modern set: (preset, zoo model, batch).
MODERN: tuple[tuple[str, str, int], ...] = (
    ("h100-host-nvme", "llama_7b", 1),
    ("gh200", "llama_7b", 1),
    ("h100-pcie5", "gpt2_medium", 8),
)


def _cases(sets: list[str]) -> list[tuple[str, Graph, str | None, str]]:
    """(preset, graph, ratio, last formulation) of every chain the chosen sets hold."""
    last = os.environ.get("TMSIM_BENCH_FORMULATIONS", "static,sync,async").split(",")[-1]
    out: list[tuple[str, Graph, str | None, str]] = []
    if "conventional" in sets:
        for model, batch in CONVENTIONAL:
            graph = training_graph_of(model, batch)
            out += [("cascadelake-optane", graph, ratio, last) for ratio in RATIOS]
    if "gpu" in sets:
        out += [
            ("rtx2080ti-pcie3", training_graph_of(model, batch), None, last)
            for model, batch in GPU_WORKLOADS
        ]
    if "modern" in sets:
        out += [
            (preset, training_graph_of(model, batch), None, last) for preset, model, batch in MODERN
        ]
    if "scale" in sets:
        for blocks in SCALE_BLOCKS:
            graph = training_graph(bottleneck_resnet(blocks, 64))
            out.append(("cascadelake-optane", graph, "4:1", "sync"))
    keep = os.environ.get("TMSIM_BENCH_WORKLOADS")
    if keep:
        names = set(keep.split(","))
        out = [case for case in out if case[1].name in names]
    return out


def _first_plan_s(graph: Graph, platform: Platform, settings: PlanSettings) -> float:
    """Seconds until the chain's smallest formulation returns a valid plan when stopped at
    once (static on CPUs; sync where nothing fits statically)."""
    quick = PlanSettings(capacity=settings.capacity, time_limit_s=1e-3, window=settings.window)
    started = time.perf_counter()
    for formulation in ("static", "sync"):
        try:
            plan_milp(graph, platform, quick, formulation)
            break
        except TmsimError:
            continue
    return time.perf_counter() - started


def main() -> None:
    sets = os.environ.get("TMSIM_BENCH_SETS", "conventional,gpu,scale").split(",")
    limit_s = float(os.environ.get("TMSIM_BENCH_TIME_LIMIT_S", "120"))
    window = int(os.environ.get("TMSIM_BENCH_WINDOW", "15"))
    print(f"chain cap {limit_s:.0f} s, gap 1%, async window {window}, HiGHS")
    print(
        f"{'platform':18s} {'workload':18s} {'ratio':>5s} {'kernels':>7s} {'form':>6s} "
        f"{'vars':>7s} {'rows':>7s} {'time s':>7s} {'at s':>6s} {'gap %':>6s} {'bound':>9s} "
        f"{'objective':>9s} {'nodes':>6s} {'first s':>7s}  status"
    )
    for preset, graph, ratio, last in _cases(sets):
        settings = PlanSettings(
            capacity=Capacity.parse(ratio) if ratio else None, time_limit_s=limit_s, window=window
        )
        platform = load_preset(preset)
        gc.collect()  # the previous workload's models
        first_s = _first_plan_s(graph, platform, settings)
        started = time.perf_counter()
        at_s: dict[Formulation, float] = {}

        def handed(
            f: Formulation, _: object, began: float = started, into: dict[Formulation, float] = at_s
        ) -> None:
            into[f] = time.perf_counter() - began

        try:
            plans = plan_milp_chain(graph, platform, settings, last, solved=handed)
        except TmsimError as exc:
            print(f"{preset:18s} {graph.name:18s} {ratio or '-':>5s}  {exc}", flush=True)
            continue
        wall = time.perf_counter() - started
        for formulation, result in plans.items():
            head = (
                f"{preset:18s} {graph.name:18s} {ratio or '-':>5s} {len(graph.kernels):7d} "
                f"{formulation.value:>6s}"
            )
            if isinstance(result, TmsimError):
                print(f"{head}  no plan: {result}", flush=True)
                continue
            s = result.stats
            assert s is not None
            print(
                f"{head} {s.variables:7d} {s.constraints:7d} {s.build_s + s.solve_s:7.1f} "
                f"{at_s.get(formulation, float('nan')):6.1f} {100 * s.gap:6.2f} {s.bound:9.4f} "
                f"{s.objective:9.4f} {s.nodes:6d} "
                f"{first_s:7.2f}  {s.status}",
                flush=True,
            )
        print(f"  (chain wall {wall:.1f} s)", flush=True)
        del plans


if __name__ == "__main__":
    main()
