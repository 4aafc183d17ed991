"""Two-tier results recorded before the planners learned K tiers, and how to measure them now.

``tests/data/two_tier_record.json`` was first recorded with the code of commit be5cfb8 (two
tiers hard-wired, ``FAST, SLOW = 0, 1``), and the K-tier planners gave the same record (commit
612c2c8). It was then recorded again (``python tests/two_tier_record.py``) when copies began
to pay their per-transfer latency, which changed the MILP's costs and so some of its plans,
and again when the asynchronous model gained its copy cut and left out the window copies that
can never pay off (its problem changed; its optimum did not, as the exhaustive search of
tests/test_milp_tightening.py checks, but a solve stopped at the 1% gap may pick another plan
within it). The Optane cases were recorded again (``python tests/two_tier_record.py optane``)
when the preset's asynchronous copy rates became its copy thread's idle rates (1.73 and 2.65
GB/s instead of AutoTM's 2.0 and 2.5), and again when rates on a mixing tier became a
converged fixed point (bisection where the plain iteration cycled: only the 2LM replays moved,
by up to 0.5%). It was recorded again when the asynchronous windows became copy events between
a tensor's uses (the compact form: another problem with the same optimum, exhaustive search
checks), when statuses began to say that a plan is only within the gap of its last layout
round's bound (``optimal in layout round N``) and when a layout round's solve began to stop
once its point is within the gap of the first round's bound. It was recorded again when the
fast-tier layout learned an exact search (where the heuristics overflowed, the first round's
plan now lays out: every changed plan is faster, by up to 9%, and needs one round) and when
the compact form stopped letting a fetch read a slow copy a write-drop beside the same kernel
was still making (the asynchronous problems changed), and when the MILP gained clique rows
for tensors too large to share the fastest tier (the problems of the VGG19 Optane case
changed; none of its plans or times did), and when every kernel gained the roofline's cut
(:func:`tmsim.planners.milp.formulation.kernel_rows.memory_cut_rows`: every MILP problem changed, its optimum not,
as exhaustive search checks; a solve stopped at the gap may pick another plan within it),
and when the copy rows gained their thresholds (:func:`tmsim.planners.milp.formulation.kernel_rows.
threshold_rows`: the asynchronous problems changed, their optimum not, as exhaustive search
checks; a solve stopped at the gap may pick another plan within it), and when a HiGHS run
whose solution was not the point it reported began to run again without its start (the
VGG19 Optane case: static 0.42901 -> 0.42839 s, async now sync's plan, 0.4187583 against
its own 0.4187567 s before, both within the gap), and when it stopped doing so where the two
differ by a millionth or less, HiGHS's tolerances (that case's async plan its own again).
The GPU cases were recorded again (``python tests/two_tier_record.py rtx2080ti``) when the
RTX 2080 Ti's memory took its measured rates (BabelStream triad 555.7 GB/s for the 616 of its
datasheet) and a measured pointer-chase latency.
The Optane cases were recorded again when the channel's device switch became a turnaround
between one device's reads and the other's writes, refitted with a prior on the queue shares
(``tmsim.calibration.channel_fit``).
Each record holds, by the same measurements as :func:`measure`, for each
case of :data:`CASES`: the AutoTM paper's conventional and GPU models at batch 2, on the
Optane preset at 4:1 (PMM:DRAM) and on the RTX 2080 Ti with device memory at three quarters
of the step's peak. Per strategy it holds the plan's predicted step time, the simulated time
with and without contention, the number of moves and a digest of the plan (or the error the
strategy raised); per MILP formulation also a digest of the problem HiGHS is handed at the
first round (its costs, matrix, right-hand side and binaries). MILP solves stop at the 1%
gap or after :data:`NODE_LIMIT` branch-and-bound nodes, whichever comes first (a limit on
work, not on time); a formulation whose solve took longer than 90 s then has its problem
digest only (``skipped``). ``2lm`` and ``unified-memory`` are the simulated baselines.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cvxpy as cp
import numpy as np

from hwmodels.platform import Platform
from hwmodels.presets import load_preset
from tmsim.capacity import Capacity, fast_limit_bytes
from tmsim.comparison import CompareSettings, compare
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.levels import InterferenceLevel
from tmsim.planners import PLANNERS, PlanSettings, plan
from tmsim.planners.milp.formulation.build import build_model
from tmsim.planners.milp.formulation.gadgets import Formulation
from tmsim.plans.values import Plan
from tmsim.sim import replay
from tmsim.workload.graph import Graph
from tmsim.workload.zoo import training_graph_of

DATA = Path(__file__).parent / "data" / "two_tier_record.json"
MODELS = ("inception_v4", "vgg19", "resnet200", "densenet264")
PLATFORMS = (("cascadelake-optane", "4:1"), ("rtx2080ti-pcie3", "1:3"))
CASES = tuple(f"{m}/{p}/{r}" for m in MODELS for p, r in PLATFORMS)
BATCH = 2
NODE_LIMIT = 100
MILP = ("static", "sync", "async")


def plan_digest(p: Plan) -> str:
    """A hash of what a plan decides: operand tiers, initial tiers, residency, moves."""
    doc = {
        "planner": p.planner,
        "fast_limit_bytes": p.fast_limit_bytes,
        "operand_tiers": [list(t) for t in p.operand_tiers],
        "initial_tiers": sorted((k, list(v)) for k, v in p.initial_tiers.items()),
        "residency": sorted([r.tensor, r.tier, r.first, r.last] for r in p.residency),
        "moves": sorted([m.tensor, m.src, m.dst, m.kernel, m.mode.value] for m in p.moves),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def problem_digest(problem: cp.Problem) -> str:
    """A hash of the data cvxpy hands HiGHS: costs, constraint matrix, right-hand side and
    which columns are binary."""
    data, _, _ = problem.get_problem_data(cp.HIGHS)
    h = hashlib.sha256()
    a = data["A"].tocsc()
    binaries = np.asarray(data.get("bool_vars_idx", []))
    for arr in (data["c"], a.indptr, a.indices, a.data, data["b"], binaries):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()[:16]


def setup(case: str) -> tuple[Graph, Platform, PlanSettings]:
    """The graph, platform and planner settings of ``case``."""
    model, platform, ratio = case.split("/")
    # HiGHS's branch and bound alone, as when the record was made (an LP and RINS first give
    # other plans within the same gap: the record is of the problems, not of the search)
    settings = PlanSettings(
        capacity=Capacity.parse(ratio),
        time_limit_s=None,
        gap=0.01,
        window=1,
        node_limit=NODE_LIMIT,
        lp_iterations=None,
    )
    return training_graph_of(model, BATCH), load_preset(platform), settings


def milp_problem(case: str, formulation: str) -> str:
    """The digest of the first-round problem of MILP ``formulation`` for ``case``."""
    graph, plat, settings = setup(case)
    limit = fast_limit_bytes(graph, plat, settings.capacity)
    limits = np.full(len(graph.kernels), limit, dtype=np.int64)
    built = build_model(CostModel(graph, plat), 1, Formulation(formulation), limits, relax=False)
    return problem_digest(built.problem)


def measure(case: str, strategies: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:
    """The record of ``case`` (see the module documentation), for ``strategies`` (default:
    every one recorded)."""
    graph, plat, settings = setup(case)
    cache = "2lm" if plat.kernel_tier_mask()[1] else "unified-memory"
    out: dict[str, dict[str, Any]] = {}
    for name in strategies or (*PLANNERS, cache):
        entry: dict[str, Any] = {}
        if name == cache:
            row = compare(graph, plat, CompareSettings(plan=settings, strategies=(cache,)))[0]
            out[name] = {"simulated_s": row.simulated_s, "moved_bytes": row.moved_bytes}
            continue
        if name in MILP:
            entry["problem"] = milp_problem(case, name)
        try:
            p = plan(name, graph, plat, settings)
        except TmsimError as exc:
            out[name] = {**entry, "error": type(exc).__name__}
            continue
        entry.update(
            predicted_s=p.predicted_s,
            simulated_s=replay(p, graph, plat, level="bandwidth").simulated_s,
            uncontended_s=replay(p, graph, plat, level=InterferenceLevel.NONE).simulated_s,
            moves=len(p.moves),
            digest=plan_digest(p),
        )
        if p.stats is not None:
            entry["status"] = p.stats.status
        out[name] = entry
    return out


def recorded() -> dict[str, dict[str, dict[str, Any]]]:
    """The recorded cases."""
    data: dict[str, dict[str, dict[str, Any]]] = json.loads(DATA.read_text())
    return data


def main(only: Sequence[str] = ()) -> None:
    """Measure every case again with this code (or those whose name contains one of ``only``)
    and rewrite the record (after a change that is meant to move two-tier results; say why in
    the commit). MILP solves the record marks as skipped stay skipped, with their problem
    digest measured again."""
    record = recorded()
    for case in CASES:
        if only and not any(word in case for word in only):
            continue
        old = record.get(case, {})
        skipped = {n for n, e in old.items() if "skipped" in e}
        solved = tuple(n for n in old if n not in skipped) or None
        entry = measure(case, solved)
        for name in sorted(skipped):
            entry[name] = {"problem": milp_problem(case, name), "skipped": old[name]["skipped"]}
        record[case] = entry
        print(case, flush=True)
    DATA.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
