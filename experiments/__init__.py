"""The AutoTM paper's figures and our own studies, one module each (see
:mod:`experiments.common` for the contract every module follows).

:data:`FIGURES` lists the modules in the order ``tmsim reproduce`` runs them;
:func:`figure_module` imports one by name.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: Figure module names, in the order ``tmsim reproduce`` runs them.
FIGURES: tuple[str, ...] = (
    "conventional",  # slowdown against all-DRAM, four workloads, PMM:DRAM ratios
    "large",  # ~650 GB workloads: static and sync against 2LM
    "gpu",  # GPU: sync, async, all-fast oracle against unified memory
    "async_sync",  # asynchronous against synchronous, with and without contention
    "cost",  # cost against performance (DRAM 2.1x the price of PMM per GB)
    "prediction",  # planner prediction against simulation with contention
    "solve_time",  # MILP solve time against graph size
)


def figure_module(name: str) -> ModuleType:
    """The figure module ``experiments.<name>``; raises ``KeyError`` listing the known ones."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure {name!r}; figures are {', '.join(FIGURES)}")
    return importlib.import_module(f"experiments.{name}")


__all__ = ["FIGURES", "figure_module"]
