"""Time to a proven gap for every MILP formulation, against kernel count.

The AutoTM paper's conventional workloads on ``cascadelake-optane`` at slow:fast ratios 1:1,
4:1 and 8:1, and its GPU workloads on ``rtx2080ti-pcie3`` at the device's own capacity. Per
workload one MILP chain (static, then sync from it, then async from that, as ``tmsim
compare`` runs it) and per formulation: kernels, variables, constraints, the seconds until
the plan was returned (build and solve, the formulations it was started from included), the
gap proven at the end, the bound and the objective, and how the solve ended. A plan whose
status is ``optimal`` reached the gap asked for (1%) in the time shown.

Environment variables: ``TMSIM_BENCH_SETS`` (default ``conventional,gpu``),
``TMSIM_BENCH_FORMULATIONS`` (default ``static,sync,async``; the chain stops at the last),
``TMSIM_BENCH_TIME_LIMIT_S`` (cap of one chain, default 120), ``TMSIM_BENCH_WINDOW``
(async window, default AutoTM's 15).
"""

from __future__ import annotations

import os
import time

from experiments.common import CONVENTIONAL, GPU_WORKLOADS
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain import plan_milp_chain
from tmsim.workload.zoo import training_graph_of

RATIOS = ("1:1", "4:1", "8:1")


def _cases(sets: list[str]) -> list[tuple[str, str, int, str | None]]:
    """(preset, model, batch, ratio) of every chain the chosen sets hold."""
    out: list[tuple[str, str, int, str | None]] = []
    if "conventional" in sets:
        for model, batch in CONVENTIONAL:
            out += [("cascadelake-optane", model, batch, ratio) for ratio in RATIOS]
    if "gpu" in sets:
        out += [("rtx2080ti-pcie3", model, batch, None) for model, batch in GPU_WORKLOADS]
    return out


def main() -> None:
    sets = os.environ.get("TMSIM_BENCH_SETS", "conventional,gpu").split(",")
    formulations = os.environ.get("TMSIM_BENCH_FORMULATIONS", "static,sync,async").split(",")
    limit_s = float(os.environ.get("TMSIM_BENCH_TIME_LIMIT_S", "120"))
    window = int(os.environ.get("TMSIM_BENCH_WINDOW", "15"))
    print(f"chain cap {limit_s:.0f} s, gap 1%, async window {window}, HiGHS")
    print(
        f"{'platform':18s} {'workload':18s} {'ratio':>5s} {'kernels':>7s} {'form':>6s} "
        f"{'vars':>7s} {'rows':>7s} {'time s':>7s} {'gap %':>6s} {'bound':>9s} "
        f"{'objective':>9s} {'nodes':>6s}  status"
    )
    for preset, model, batch, ratio in _cases(sets):
        graph = training_graph_of(model, batch)
        settings = PlanSettings(
            capacity=Capacity.parse(ratio) if ratio else None, time_limit_s=limit_s, window=window
        )
        started = time.perf_counter()
        try:
            plans = plan_milp_chain(graph, load_preset(preset), settings, formulations[-1])
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
                f"{100 * s.gap:6.2f} {s.bound:9.4f} {s.objective:9.4f} {s.nodes:6d}  {s.status}",
                flush=True,
            )
        print(f"  (chain wall {wall:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
