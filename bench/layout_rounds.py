"""What the fast-tier layout costs AutoTM's loop: layout rounds, solve time and step time,
with the heuristics' layout (before) and with the exact search after them (after).

The MILP counts bytes; its plan's fast-tier buffers then get addresses, and where the layout
overflows the limit the chain lowers the limit there and solves again (AutoTM's loop,
:mod:`tmsim.planners.milp.chain.rounds`). ``old`` lays out with first fit, best fit and first fit by
start alone (:func:`~tmsim.layout.fast_tier.overflow_bytes` with ``node_limit=0``); ``new`` adds
the search of :mod:`tmsim.layout.packing` when none of them fits, with its default node limit.
Both run side by side on the same chains.

Sets: ``conventional`` (the AutoTM paper's conventional workloads on ``cascadelake-optane``
at slow:fast ratios 1:1, 4:1 and 8:1) and ``gpu`` (its GPU workloads on ``rtx2080ti-pcie3``
at the device's own capacity). Per chain and formulation: rounds (1 means the first plan laid
out), ``lay s`` (seconds in the layout checks of this formulation's plans), ``solve s`` (build
and solve seconds, those of the formulations it was started from included, as the plan's
statistics count them), the predicted step time and how the solve ended; then per set and
formulation, old and new: the chains whose loop fired, the rounds and seconds in all, and the
geometric mean of the step times, new over old.

Environment variables: ``TMSIM_BENCH_SETS`` (default ``conventional,gpu``),
``TMSIM_BENCH_FORMULATION`` (the chain's last formulation, default ``sync``: static, then
sync from it), ``TMSIM_BENCH_NODE_LIMIT`` (branch-and-bound nodes per solve, default 1000, so
that a loaded machine solves the same problems to the same plans), ``TMSIM_BENCH_TIME_LIMIT_S``
(a safety cap per chain, default 900; a chain that reaches it says so in its status).
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from unittest import mock

import numpy as np
import numpy.typing as npt

from experiments.common import CONVENTIONAL, GPU_WORKLOADS
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.errors import TmsimError
from tmsim.layout.fast_tier import overflow_bytes
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain import plan as chain
from tmsim.plans.values import Plan
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

RATIOS = ("1:1", "4:1", "8:1")
#: The layouts compared: search nodes allowed after the heuristics (None: the default, up to
#: :data:`tmsim.layout.addresses.NODES_PER_BUFFER` per buffer).
LAYOUTS: dict[str, int | None] = {"old": 0, "new": None}


@dataclass
class _Clock:
    """Seconds spent in the layout check, per planner name of the plan laid out."""

    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Row:
    rounds: int
    layout_s: float
    solve_s: float
    predicted_s: float
    status: str


@contextmanager
def _layout(node_limit: int | None, clock: _Clock) -> Iterator[None]:
    """The chain lays out with ``node_limit`` search nodes, timed into ``clock``."""
    inner = functools.partial(overflow_bytes, node_limit=node_limit)

    def timed(plan: Plan, *args: object, **kwargs: object) -> npt.NDArray[np.int64]:
        started = time.perf_counter()
        try:
            return inner(plan, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            spent = time.perf_counter() - started
            clock.seconds[plan.planner] = clock.seconds.get(plan.planner, 0.0) + spent

    with mock.patch.object(chain, "overflow_bytes", timed):
        yield


def _cases(sets: list[str]) -> list[tuple[str, str, str | None]]:
    """(preset, workload, ratio) of every chain of the chosen sets, graphs built lazily."""
    out: list[tuple[str, str, str | None]] = []
    if "conventional" in sets:
        for model, batch in CONVENTIONAL:
            out += [("cascadelake-optane", f"{model}:{batch}", r) for r in RATIOS]
    if "gpu" in sets:
        out += [("rtx2080ti-pcie3", f"{m}:{b}", None) for m, b in GPU_WORKLOADS]
    return out


def _run(
    graph: Graph, preset: str, settings: PlanSettings, last: str, node_limit: int | None
) -> tuple[dict[str, _Row | str], float]:
    """Per formulation its figures (or why it has no plan), and the chain's wall seconds."""
    clock = _Clock()
    started = time.perf_counter()
    with _layout(node_limit, clock):
        plans = chain.plan_milp_chain(graph, load_preset(preset), settings, last)
    wall = time.perf_counter() - started
    rows: dict[str, _Row | str] = {}
    for formulation, result in plans.items():
        if isinstance(result, TmsimError):
            rows[formulation.value] = str(result).splitlines()[0][:70]
            continue
        s = result.stats
        assert s is not None
        laid = clock.seconds.get(f"milp-{formulation.value}", 0.0)
        rows[formulation.value] = _Row(
            s.rounds, laid, s.build_s + s.solve_s, result.predicted_s, s.status
        )
    return rows, wall


def _summary(name: str, found: dict[str, list[tuple[_Row, _Row]]]) -> None:
    for formulation, pairs in found.items():
        for which, pick in (("old", 0), ("new", 1)):
            rows = [p[pick] for p in pairs]
            fired = sum(r.rounds > 1 for r in rows)
            print(
                f"  {name:12s} {formulation:6s} {which}: loop fired in {fired} of {len(rows)}, "
                f"{sum(r.rounds for r in rows)} rounds, "
                f"layout {sum(r.layout_s for r in rows):.1f} s, "
                f"build and solve {sum(r.solve_s for r in rows):.1f} s"
            )
        ratios = [new.predicted_s / old.predicted_s for old, new in pairs]
        worse = sum(x > 1 + 1e-9 for x in ratios)
        better = sum(x < 1 - 1e-9 for x in ratios)
        print(
            f"  {name:12s} {formulation:6s} step time new/old: geomean {_geomean(ratios):.4f}, "
            f"min {min(ratios, default=math.nan):.4f}; {better} faster, {worse} slower"
        )


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def main() -> None:
    sets = os.environ.get("TMSIM_BENCH_SETS", "conventional,gpu").split(",")
    last = os.environ.get("TMSIM_BENCH_FORMULATION", "sync")
    nodes = int(os.environ.get("TMSIM_BENCH_NODE_LIMIT", "1000"))
    cap_s = float(os.environ.get("TMSIM_BENCH_TIME_LIMIT_S", "900"))
    print(
        f"chain up to {last}, {nodes} solver nodes per solve, gap 1%, HiGHS; new layout: "
        "the default search budget (5 nodes per buffer, 10,000 to 30,000)"
    )
    print(
        f"{'platform':18s} {'workload':16s} {'ratio':>5s} {'form':>6s} {'layout':>6s} "
        f"{'rounds':>6s} {'lay s':>6s} {'solve s':>8s} {'step s':>10s}  status"
    )
    by_set: dict[str, dict[str, list[tuple[_Row, _Row]]]] = {}
    for preset, workload, ratio in _cases(sets):
        model, batch = workload.split(":")
        graph = training_graph_of(model, int(batch))
        settings = PlanSettings(
            capacity=Capacity.parse(ratio) if ratio else None,
            time_limit_s=cap_s,
            node_limit=nodes,
        )
        results = {name: _run(graph, preset, settings, last, n) for name, n in LAYOUTS.items()}
        found = by_set.setdefault("gpu" if ratio is None else "conventional", {})
        for formulation in results["old"][0]:
            pair = []
            for name, (rows, wall) in results.items():
                row = rows[formulation]
                head = f"{preset:18s} {graph.name:16s} {ratio or '-':>5s} {formulation:>6s} "
                if isinstance(row, str):
                    print(f"{head}{name:>6s}  no plan: {row}", flush=True)
                    continue
                print(
                    f"{head}{name:>6s} {row.rounds:6d} {row.layout_s:6.1f} {row.solve_s:8.1f} "
                    f"{row.predicted_s:10.5f}  {row.status} (chain wall {wall:.1f} s)",
                    flush=True,
                )
                pair.append(row)
            if len(pair) == 2:
                found.setdefault(formulation, []).append((pair[0], pair[1]))
    print("summary")
    for name, found in by_set.items():
        _summary(name, found)


if __name__ == "__main__":
    main()
