"""The AutoTM paper's figures and our own studies, one module each (see
:class:`tmsim.figures.FigureModule` for the contract every module follows and
:mod:`experiments.common` for what they share).

:data:`FIGURES` lists the modules in the order ``tmsim reproduce`` runs them;
:func:`figure_module` imports one by name; :data:`REGISTRY` holds both and is what
``pyproject.toml`` declares in the ``tmsim.figures`` entry-point group, so that
``tmsim reproduce`` finds the figures without tmsim importing this package.
"""

from __future__ import annotations

import importlib
from typing import cast

from tmsim.figures import FigureModule, FigureRegistry

#: Figure module names, in the order ``tmsim reproduce`` runs them.
FIGURES: tuple[str, ...] = (
    "conventional",  # slowdown against all-DRAM, four workloads, PMM:DRAM ratios
    "large",  # ~650 GB workloads: static and sync against 2LM
    "gpu",  # GPU: sync, async, all-fast oracle against unified memory
    "interference_calibration",  # the interference model against measured co-runs and mixes
    "async_sync",  # asynchronous against synchronous, with and without contention
    "sensitivity",  # async/sync as each assumed interference parameter spans its range
    "price_performance",  # memory cost against slowdown (DRAM 2.1x the price of PMM per GB)
    "prediction",  # planner prediction against simulation with contention
    "prediction_gpu",  # predicted against measured step time on a real GPU (an H200)
    "solve_time",  # MILP solve time against graph size
    "memory_planning",  # the lecture's memory planning: reuse schemes against the liveness bound
    "recompute",  # keep, move or recompute: step time against the fast-memory budget
    "modern",  # today's machines: a transformer step's slowdown and energy against capacity
    "dominance",  # the best MILP plan beside every baseline on the same budget
)


def figure_module(name: str) -> FigureModule:
    """The figure module ``experiments.<name>``; raises ``KeyError`` listing the known ones."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r}; figures are {', '.join(FIGURES)}")
    # Each module defines what FigureModule lists; tests/test_cli_reproduce.py checks it.
    return cast(FigureModule, importlib.import_module(f"experiments.{name}"))


#: The figures as ``tmsim reproduce`` sees them (the ``tmsim.figures`` entry point).
REGISTRY = FigureRegistry(FIGURES, figure_module)

__all__ = ["FIGURES", "REGISTRY", "figure_module"]
