"""The command line and the figures stand on the public API: ``tmsim`` (its ``__all__``),
``tmsim.api``, the figure contract ``tmsim.figures`` and the error types of ``tmsim.errors``,
besides their own modules.

What they still import from past it is listed here, file by file, as the work that is left:
the test fails on an import past the API that is not listed (a new reach past it) and on a
listed one that is gone (so the list only shrinks, and removing an entry is part of moving a
file onto the API).
"""

from __future__ import annotations

from pathlib import Path

from test_imports import imports, modules, room_of

ROOT = Path(__file__).resolve().parent.parent
#: What the command line and the figures may import of tmsim.
API_ROOMS = {"tmsim", "tmsim.api", "tmsim.figures", "tmsim.errors"}

#: Imports past the API that remain, by file (the work left to move them onto it).
DEBT: dict[str, set[str]] = {
    "tmsim/cli/args.py": {"tmsim.capacity", "tmsim.levels", "tmsim.planners.settings"},
    "tmsim/cli/compare.py": {"tmsim.capacity", "tmsim.comparison"},
    "tmsim/cli/graph.py": {
        "tmsim.workload.files",
        "tmsim.workload.graph",
        "tmsim.workload.training",
        "tmsim.workload.zoo",
    },
    "tmsim/cli/main.py": {"hwmodels.errors"},
    "tmsim/cli/plan.py": {
        "hwmodels.presets",
        "tmsim.capacity",
        "tmsim.cost",
        "tmsim.planners",
        "tmsim.plans.files",
        "tmsim.plans.layout",
        "tmsim.plans.validate",
        "tmsim.sim.beside",
        "tmsim.workload.identity",
    },
    "tmsim/cli/platform.py": {"hwmodels"},
    "tmsim/cli/reproduce.py": {"tmsim.jsonio", "tmsim.results"},
    "tmsim/cli/simulate.py": {
        "hwmodels.presets",
        "tmsim.cost",
        "tmsim.plans.files",
        "tmsim.plans.validate",
        "tmsim.plots",
        "tmsim.sim",
        "tmsim.sim.beside",
        "tmsim.sim.cache.walk",
        "tmsim.workload.files",
        "tmsim.workload.graph",
        "tmsim.workload.identity",
        "tmsim.workload.training",
        "tmsim.workload.zoo",
    },
    "tmsim/cli/sweep.py": {"tmsim.sweeps.engine", "tmsim.sweeps.spec", "tmsim.sweeps.store"},
}


def reach_past() -> dict[str, set[str]]:
    """Per file of ``tmsim/cli`` and ``experiments``, the tmsim and hwmodels modules it imports
    that are not the public API nor its own room."""
    out: dict[str, set[str]] = {}
    for module, path in modules():
        src = room_of(module)
        if src not in ("tmsim.cli", "experiments"):
            continue
        for target, _ in imports(path, module):
            top = target.split(".")[0]
            if top not in ("tmsim", "hwmodels"):
                continue
            if top == "tmsim" and room_of(target) in {*API_ROOMS, src}:
                continue
            out.setdefault(path.relative_to(ROOT).as_posix(), set()).add(target)
    return out


def test_the_cli_and_figures_reach_past_the_api_only_where_listed() -> None:
    found = reach_past()
    new = {f: sorted(t - DEBT.get(f, set())) for f, t in found.items() if t - DEBT.get(f, set())}
    gone = {f: sorted(t - found.get(f, set())) for f, t in DEBT.items() if t - found.get(f, set())}
    assert not new, f"new imports past the public API (use tmsim or tmsim.api): {new}"
    assert not gone, f"no longer imported: take them off DEBT: {gone}"
