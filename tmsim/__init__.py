"""tmsim: planner and simulator for tensor movement in heterogeneous memory.

The public API is the names of :data:`__all__`, each imported when first used (``import
tmsim`` itself loads nothing heavy). From a zoo model to a plan, its replay and a table of
every strategy:

>>> import tmsim
>>> g = tmsim.graph("vgg19", batch=16)
>>> p = tmsim.platform("cascadelake-optane")
>>> plan = tmsim.plan(g, p, "sync", fast="4:1", time_limit_s=None)
>>> run = tmsim.simulate(plan, g, p)
>>> run.step_time_s >= plan.predicted_s * 0.99
True
>>> table = tmsim.compare(g, p, ["all-fast", "all-slow", "sync"], fast="4:1")
>>> table.set_index("strategy").slowdown["all-fast"]
np.float64(1.0)

- :func:`graph`, :func:`platform`: the inputs (:data:`MODELS`, :data:`PRESETS`);
  :func:`import_torch` traces a PyTorch model's training step into a graph (needs the
  ``torch`` extra);
- :func:`plan` (a :class:`Plan`; strategies in :data:`STRATEGIES`, those that apply to a
  platform :func:`applicable`), :func:`plan_chain`
  (AutoTM's MILP formulations solved as one chain), :func:`simulate` (a :class:`Run`),
  :func:`fast_limit` (the fast tier's bytes at a capacity), :func:`validate` (the
  independent validator's :class:`Validation`); a run's ``energy`` is a
  :class:`StepEnergy` where the platform prices bytes and FLOPs;
- :func:`read_profile` reads measured kernel times (a :class:`Profile`), which ``plan``,
  ``compare``, ``simulate`` and ``validate`` take as ``profile=``;
- :func:`compare`, :func:`plan_table` (the same rows for plans made already), :func:`sweep`:
  DataFrames with units in the column names and the
  provenance in ``DataFrame.attrs``;
- :func:`figure` draws a figure of ``tmsim reproduce`` from its table (:func:`read_table`);
- :func:`save` writes a graph, plan, platform or run's trace, :func:`load_plan` and
  :func:`load_graph` read a plan and a graph, :func:`graph_of` builds a plan's graph again;
- :func:`simulate_cache` replays a step in 2LM memory mode (a :class:`CacheRun`);
- :func:`memory_reuse`: a step's memory with no reuse, in-place updates, shared dead
  buffers and both, against each allocator's pool (a :class:`MemoryReuse`);
- bad input raises :class:`TmsimError` with a one-line message.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it (the names of ``__all__`` but ``__version__``).
_SOURCES: dict[str, str] = {
    "graph": "tmsim.api.inputs",
    "platform": "tmsim.api.inputs",
    "MODELS": "tmsim.api.inputs",
    "PRESETS": "tmsim.api.inputs",
    "plan": "tmsim.api.runs",
    "plan_chain": "tmsim.api.runs",
    "fast_limit": "tmsim.api.runs",
    "simulate": "tmsim.api.runs",
    "validate": "tmsim.api.runs",
    "Validation": "tmsim.plans.validate",
    "Run": "tmsim.api.runs",
    "compare": "tmsim.api.tables",
    "sweep": "tmsim.api.sweeps",
    "plan_table": "tmsim.api.tables",
    "figure": "tmsim.api.figures",
    "figure_names": "tmsim.api.figures",
    "read_table": "tmsim.api.figures",
    "write_table": "tmsim.api.figures",
    "save": "tmsim.api.files",
    "load_graph": "tmsim.api.inputs",
    "import_torch": "tmsim.api.torchimport",
    "calibrate": "tmsim.api.calibrate",
    "profile": "tmsim.api.torchimport",
    "graph_of": "tmsim.api.graphs",
    "simulate_cache": "tmsim.api.cache",
    "CacheRun": "tmsim.api.cache",
    "load_plan": "tmsim.api.files",
    "STRATEGIES": "tmsim.strategies",
    "Strategy": "tmsim.strategies",
    "applicable": "tmsim.strategies",
    "Graph": "tmsim.workload.graph",
    "Platform": "hwmodels.platform",
    "Plan": "tmsim.plans.values",
    "Capacity": "tmsim.capacity",
    "PlanSettings": "tmsim.planners.settings",
    "InterferenceLevel": "tmsim.levels",
    "TmsimError": "tmsim.errors",
    "memory_reuse": "tmsim.api.memory",
    "MemoryReuse": "tmsim.layout.reuse",
    "read_profile": "tmsim.api.measured",
    "Profile": "tmsim.api.measured",
    "StepEnergy": "tmsim.energy",
}

__all__ = [
    "MODELS",
    "PRESETS",
    "STRATEGIES",
    "CacheRun",
    "Capacity",
    "Graph",
    "InterferenceLevel",
    "MemoryReuse",
    "Plan",
    "PlanSettings",
    "Platform",
    "Profile",
    "Run",
    "StepEnergy",
    "Strategy",
    "TmsimError",
    "Validation",
    "__version__",
    "applicable",
    "calibrate",
    "compare",
    "fast_limit",
    "figure",
    "figure_names",
    "graph",
    "graph_of",
    "import_torch",
    "load_graph",
    "load_plan",
    "memory_reuse",
    "plan",
    "plan_chain",
    "plan_table",
    "platform",
    "profile",
    "read_profile",
    "read_table",
    "save",
    "simulate",
    "simulate_cache",
    "sweep",
    "validate",
    "write_table",
]

if TYPE_CHECKING:
    from hwmodels.platform import Platform
    from tmsim.api.cache import CacheRun, simulate_cache
    from tmsim.api.calibrate import calibrate
    from tmsim.api.figures import figure, figure_names, read_table, write_table
    from tmsim.api.files import load_plan, save
    from tmsim.api.graphs import graph_of
    from tmsim.api.inputs import MODELS, PRESETS, graph, load_graph, platform
    from tmsim.api.measured import Profile, read_profile
    from tmsim.api.memory import memory_reuse
    from tmsim.api.runs import Run, fast_limit, plan, plan_chain, simulate, validate
    from tmsim.api.sweeps import sweep
    from tmsim.api.tables import compare, plan_table
    from tmsim.api.torchimport import import_torch, profile
    from tmsim.capacity import Capacity
    from tmsim.energy import StepEnergy
    from tmsim.errors import TmsimError
    from tmsim.layout.reuse import MemoryReuse
    from tmsim.levels import InterferenceLevel
    from tmsim.planners.settings import PlanSettings
    from tmsim.plans.validate import Validation
    from tmsim.plans.values import Plan
    from tmsim.strategies import STRATEGIES, Strategy, applicable
    from tmsim.workload.graph import Graph


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use."""
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'tmsim' has no attribute {name!r}")
    return getattr(importlib.import_module(source), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
