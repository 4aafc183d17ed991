"""Every strategy for one workload on one platform: planned, validated, simulated, tabulated.

:func:`compare` is what ``tmsim compare`` runs, over the strategies of :mod:`tmsim.strategies`
that apply to the platform:

- the heuristic planners (``all-fast``, the oracle with as much fast memory as the step
  needs: where the fastest tier is smaller, on the same machine with that tier grown to the
  step's peak; ``all-slow``; ``first-touch``, the NUMA baseline; ``greedy``; ``vdnn``);
- ``static``, ``sync``, ``async``: AutoTM's MILP formulations, solved once as a chain
  (:func:`tmsim.planners.milp.plan_milp_chain`);
- ``first-touch-pages``: the NUMA baseline as the operating system runs it, the memory plan's
  pool given to the fast tier page by page in the order pages are first touched
  (:func:`tmsim.sim.firsttouch.replay_first_touch_pages`, at the compared capacity and
  interference level), on a platform whose kernels reach a slower tier;
- ``2lm``: the hardware DRAM cache (:func:`tmsim.sim.cache.replay_cache`), on a platform
  whose kernels reach a slower tier and that describes its memory mode: the fast tier, at the
  compared capacity, caches the next one (:meth:`hwmodels.Platform.in_memory_mode`);
- ``unified-memory``: CUDA managed memory (:func:`tmsim.sim.unified.replay_unified`, a
  steady-state step), on a platform whose kernels reach only the fast tier (a GPU).

Each planned strategy's plan is checked by :func:`tmsim.plans.validate.validate` and replayed by
:func:`tmsim.sim.replay`; the slowdown of every row is its simulated time over the simulated
time of ``all-fast``. A strategy that cannot run (no plan fits, the solver found none, the
platform cannot do it) gives a row with its error and no times rather than stopping the rest.
"""

from tmsim.comparison.rows import CompareSettings, Progress, Replays, Row, rows_frame
from tmsim.comparison.runner import compare, plan_row

__all__ = [
    "CompareSettings",
    "Progress",
    "Replays",
    "Row",
    "compare",
    "plan_row",
    "rows_frame",
]
