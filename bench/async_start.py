"""The asynchronous MILP's first incumbent: what moving sync copies into windows gains, and at
what cost.

For the paper's GPU workloads that oversubscribe ``rtx2080ti-pcie3`` and two Optane workloads
at 4:1: the sync MILP is solved (1% gap, 120 s), its solution lifted into the async model
(window 3) and :func:`tmsim.planners.milp.chain.overlap.overlap_copies` run on it. Printed: model
size, seconds to build the async model's arrays and cvxpy expressions (cvxpy compiles them for
the solver only when it solves), to lift and to overlap, and the objective (predicted step
seconds) of the lifted sync solution and of the overlapped one.
"""

from __future__ import annotations

import time

import numpy as np

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity, fast_limit_bytes
from tmsim.cost import CostModel
from tmsim.planners.milp.chain.overlap import overlap_copies
from tmsim.planners.milp.chain.solve import solve, solver_options
from tmsim.planners.milp.chain.starts import lift
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.workload.zoo import training_graph_of

POINTS = (
    ("rtx2080ti-pcie3", "inception_v4", 128, None),
    ("rtx2080ti-pcie3", "resnet200", 64, None),
    ("rtx2080ti-pcie3", "densenet264", 64, None),
    ("cascadelake-optane", "vgg19", 16, "4:1"),
    ("cascadelake-optane", "resnet200", 512, "4:1"),
)
WINDOW = 3


def main() -> None:
    print(f"sync MILP at 1% gap (120 s cap), async window {WINDOW}, HiGHS")
    print(
        f"{'platform':20s} {'workload':18s} {'async vars':>10s} {'build s':>8s} {'lift s':>7s} "
        f"{'overlap s':>9s} {'sync obj s':>10s} {'start obj s':>11s} {'gain %':>7s} {'moved':>6s}"
    )
    for preset, name, batch, ratio in POINTS:
        graph = training_graph_of(name, batch)
        platform = load_preset(preset)
        cost = CostModel(graph, platform)
        limit = fast_limit_bytes(graph, platform, None if ratio is None else Capacity.parse(ratio))
        limits = np.full(len(graph.kernels), limit, dtype=np.int64)
        sync = build_model(cost, WINDOW, Formulation.SYNC, limits, relax=False)
        solve(sync, "HIGHS", solver_options("HIGHS", 0.01, 120.0), False)
        started = time.perf_counter()
        model = build_model(cost, WINDOW, Formulation.ASYNC, limits, relax=False)
        built = time.perf_counter()
        start = lift(sync, np.asarray(sync.x.value) > 0.5, model)
        lifted = time.perf_counter()
        assert start is not None
        better = overlap_copies(model, start, WINDOW)
        done = time.perf_counter()
        before, after = model.objective(start), model.objective(better)
        print(
            f"{preset:20s} {graph.name:18s} {model.vars.count:10d} {built - started:8.2f} "
            f"{lifted - built:7.2f} {done - lifted:9.2f} {before:10.4f} {after:11.4f} "
            f"{100 * (1 - after / before):7.2f} {int((start != better).sum()):6d}",
            flush=True,
        )


if __name__ == "__main__":
    main()
