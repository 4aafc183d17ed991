"""Imports point one way: every module's imports checked against the room map of the
architecture guide (``docs/guides/architecture.rst``).

Each module belongs to a room (a top-level package, or a sub-package or module of ``tmsim``);
:data:`ALLOWED` says which rooms each room may import, so a forbidden arrow (hwmodels ->
tmsim, sim -> planners, the validator -> planners, the library -> experiments ...) fails
here the moment it appears, whether the import sits at the top of a module or inside a
function. Third-party packages that are one room's business are held to it as well.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BASE = {"tmsim.errors", "tmsim.jsonio", "tmsim.intervals", "tmsim.levels"}
WORKLOAD = {*BASE, "tmsim.workload"}
COST = {
    *WORKLOAD,
    "hwmodels",
    "tmsim.kernelwork",
    "tmsim.cost",
    "tmsim.capacity",
    "tmsim.profiles",
}
PLAN = {*COST, "tmsim.plans"}
LAID = {*PLAN, "tmsim.layout"}
#: The MILP wing's three rooms: a MIP driver on HiGHS that knows no tensors, the formulation
#: as a cvxpy problem, and the chain that solves the formulations in order from warm starts.
SOLVER = "tmsim.planners.milp.solver"
FORMULATION = "tmsim.planners.milp.formulation"
CHAIN = "tmsim.planners.milp.chain"
MILP = "tmsim.planners.milp"

#: Room -> the rooms it may import (its own room is always allowed).
ALLOWED: dict[str, set[str]] = {
    "hwmodels": set(),
    "tmsim": set(),
    "tmsim.errors": set(),
    "tmsim.jsonio": set(),
    "tmsim.intervals": set(),
    "tmsim.levels": {"tmsim.errors"},
    "tmsim.workload": BASE,
    # a graph's kernels as a calibrated kernel model prices them
    "tmsim.kernelwork": {*WORKLOAD, "hwmodels"},
    "tmsim.cost": {*WORKLOAD, "hwmodels", "tmsim.kernelwork"},
    "tmsim.capacity": {*WORKLOAD, "hwmodels"},
    # measured kernel times: read at the edge, resolved into the cost model's table
    "tmsim.profiles": {*WORKLOAD, "hwmodels", "tmsim.cost"},
    "tmsim.strategies": {*BASE, "hwmodels"},
    "tmsim.plans": COST,
    # memory layout and reuse: addresses from live ranges; it reads plans, never changes them
    "tmsim.layout": PLAN,
    # the planners' heuristics, settings and runtimes; the MILP wing enters through its front
    "tmsim.planners": {*LAID, "tmsim.energy", "tmsim.strategies", "tmsim.sim", MILP},
    # the wing's front: the chain's entry points and the formulations' names
    MILP: {*BASE, "tmsim.planners", CHAIN, FORMULATION},
    SOLVER: BASE,
    FORMULATION: {*LAID, "tmsim.energy", "tmsim.planners"},
    # the async-aware MILP prices copies on the replay's own model; sim never imports planners
    CHAIN: {
        *LAID,
        "tmsim.energy",
        "tmsim.planners",
        "tmsim.sim",
        "tmsim.strategies",
        SOLVER,
        FORMULATION,
    },
    "tmsim.sim": LAID,
    # a replayed step's energy: the trace's bytes, the graph's FLOPs, the platform's prices
    "tmsim.energy": {*COST, "tmsim.sim"},
    "tmsim.comparison": {
        *PLAN,
        "tmsim.energy",
        "tmsim.planners",
        "tmsim.sim",
        "tmsim.strategies",
    },
    "tmsim.calibration": {*COST, "tmsim.sim"},
    "tmsim.results": BASE,
    "tmsim.plots": {*BASE, "tmsim.sim"},
    "tmsim.figures": {*BASE, "tmsim.results"},
    "tmsim.sweeps": {
        *PLAN,
        "tmsim",
        "tmsim.comparison",
        "tmsim.planners",
        "tmsim.results",
        "tmsim.strategies",
    },
    "tmsim.api": {
        *PLAN,
        "tmsim.calibration",
        "tmsim.energy",
        "tmsim.comparison",
        "tmsim.figures",
        "tmsim.planners",
        "tmsim.plots",
        "tmsim.results",
        "tmsim.sim",
        "tmsim.strategies",
        "tmsim.sweeps",
    },
    "tmsim.cli": {
        *PLAN,
        "tmsim.energy",
        "tmsim",
        "tmsim.api",
        "tmsim.comparison",
        "tmsim.figures",
        "tmsim.planners",
        "tmsim.plots",
        "tmsim.results",
        "tmsim.sim",
        "tmsim.strategies",
        "tmsim.sweeps",
    },
}
# outside the wing, what may import the planners may import the wing's front (never its rooms),
# and what may import plans may import their layout
for _room, _allowed in ALLOWED.items():
    if not _room.startswith(MILP):
        if "tmsim.planners" in _allowed:
            _allowed.add(MILP)
        if "tmsim.plans" in _allowed and _room != "tmsim.plans":
            _allowed.add("tmsim.layout")
# the package's top level re-exports the public names (imported when first used)
ALLOWED["tmsim"] = {r for r in ALLOWED if r.startswith("tmsim.") and r != "tmsim.cli"} | {
    "hwmodels"
}
ALLOWED["experiments"] = {r for r in ALLOWED if r.startswith("tmsim") and r != "tmsim.cli"} | {
    "hwmodels"
}

#: Third-party packages that belong to some rooms only.
THIRD_PARTY: dict[str, set[str]] = {
    "matplotlib": {"tmsim.plots", "tmsim.api", "experiments"},
    "cvxpy": {"tmsim.planners", SOLVER, FORMULATION, CHAIN, "tmsim.sweeps"},
    "highspy": {SOLVER},
    "simpy": {"tmsim.sim"},
    "dask": {"tmsim.sweeps"},
    "distributed": {"tmsim.sweeps"},
    # the optional PyTorch importer (tmsim/workload/torchimport) alone traces models; the
    # machine's calibration measures a CUDA device through it
    "torch": {"tmsim.workload", "tmsim.calibration"},
    "torchvision": {"tmsim.workload"},
}


def room_of(module: str) -> str:
    """``tmsim.planners.heuristics.greedy`` -> ``tmsim.planners``; the MILP wing's rooms one
    level deeper (``tmsim.planners.milp.formulation.build`` -> ``tmsim.planners.milp.formulation``);
    ``hwmodels.tiers`` -> ``hwmodels``."""
    parts = module.split(".")
    if parts[:3] == ["tmsim", "planners", "milp"]:
        return ".".join(parts[:4])
    return ".".join(parts[:2]) if parts[0] == "tmsim" and len(parts) > 1 else parts[0]


def modules() -> Iterator[tuple[str, Path]]:
    for package in ("tmsim", "hwmodels", "experiments"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield name.removesuffix(".__init__"), path


def imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every module ``path`` imports (absolute names, relative ones resolved), with its line;
    also the string given to ``importlib.import_module`` or ``__import__``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base, node.lineno
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value, node.lineno
                elif isinstance(arg, ast.JoinedStr):
                    head = arg.values[0] if arg.values else None
                    if isinstance(head, ast.Constant) and isinstance(head.value, str):
                        yield head.value.rstrip("."), node.lineno


def arrows() -> list[tuple[str, str, str, int]]:
    """(room, imported room or package, file, line) of every import of the project."""
    out = []
    for module, path in modules():
        src = room_of(module)
        for target, line in imports(path, module):
            out.append((src, room_of(target), str(path.relative_to(ROOT)), line))
    return out


def test_every_module_belongs_to_a_room_of_the_map() -> None:
    rooms = {room_of(m) for m, _ in modules()}
    assert rooms <= set(ALLOWED), sorted(rooms - set(ALLOWED))


def test_imports_point_down_the_room_map() -> None:
    ours = set(ALLOWED)
    bad = [
        f"{file}:{line}: {src} imports {dst}"
        for src, dst, file, line in arrows()
        if dst in ours and dst != src and dst not in ALLOWED[src]
    ]
    assert not bad, "\n".join(bad)


def test_third_party_packages_stay_in_their_rooms() -> None:
    bad = [
        f"{file}:{line}: {src} imports {dst}"
        for src, dst, file, line in arrows()
        if dst in THIRD_PARTY and src not in THIRD_PARTY[dst]
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("source", "module", "forbidden"),
    [
        ("from tmsim.planners import plan\n", "hwmodels.tiers", "tmsim.planners"),
        (
            "from tmsim.comparison import compare\n",
            "tmsim.planners.milp.chain.plan",
            "tmsim.comparison",
        ),
        ("import tmsim.planners.assemble\n", "tmsim.sim.replay", "tmsim.planners"),
        ("from tmsim.planners.settings import PlanSettings\n", "tmsim.plans.validate", ""),
        ("def f():\n    from experiments import REGISTRY\n", "tmsim.cli.reproduce", ""),
        ("import importlib\nimportlib.import_module(f'experiments.{x}')\n", "tmsim.figures", ""),
        ("from ..planners import plan\n", "tmsim.sim.replay", "tmsim.planners"),
    ],
)
def test_a_forbidden_arrow_is_caught(
    tmp_path: Path, source: str, module: str, forbidden: str
) -> None:
    path = tmp_path / "mod.py"
    path.write_text(source, encoding="utf-8")
    found = [room_of(t) for t, _ in imports(path, module)]
    src = room_of(module)
    assert any(d in ALLOWED and d != src and d not in ALLOWED[src] for d in found), found
    if forbidden:
        assert forbidden in found
