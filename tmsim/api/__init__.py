"""The public API's modules: :mod:`~tmsim.api.inputs` (graphs, platforms, capacities),
:mod:`~tmsim.api.runs` (plans and their replays) and :mod:`~tmsim.api.tables` (comparisons and
sweeps). ``import tmsim`` re-exports their names; import them from there."""
