"""The public API's modules: :mod:`~tmsim.api.inputs` (graphs, platforms, capacities),
:mod:`~tmsim.api.runs` (plans and their replays), :mod:`~tmsim.api.graphs` (graph files and a
plan's graph), :mod:`~tmsim.api.cache` (the 2LM replay), :mod:`~tmsim.api.memory` (memory
reuse schemes against each allocator), :mod:`~tmsim.api.tables` (comparisons),
:mod:`~tmsim.api.sweeps` (sweeps, also step by step),
:mod:`~tmsim.api.summaries` (a plan's headline numbers), :mod:`~tmsim.api.figures` and
:mod:`~tmsim.api.points` (figures and their points), :mod:`~tmsim.api.files` (saving and
loading). ``import tmsim`` re-exports the names most scripts need; the command line and the
figures use these modules and nothing deeper."""
