"""The one set of planner settings: every knob of every planner, with its default here.

Every planner takes a :class:`PlanSettings` and reads what concerns it; nothing is copied
field by field into per-planner options. ``tmsim plan``, ``tmsim compare``, sweeps and the
figures all build this value (capacity parsed once at the edge, :class:`~tmsim.capacity.Capacity`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from tmsim.errors import TmsimError

if TYPE_CHECKING:
    from tmsim.capacity import Capacity
    from tmsim.profiles import Profile

#: AutoTM's asynchronous window: kernels either side of a user where a copy may run.
AUTOTM_WINDOW = 15
#: The largest node limit: HiGHS holds it in a 32-bit integer.
MAX_NODE_LIMIT = 2**31 - 1
#: Default of ``lp_iterations``: above the 25k-65k iterations the asynchronous LPs take from
#: the zero point (:func:`~tmsim.planners.milp.chain.solve.starts_lp_at_zero`; Inception v4 b16
#: at 4:1 25k in 2.8 s, DenseNet-264 b512 at 4:1 65k in 9.2 s, Optane; Inception v4 b128 on the
#: RTX 2080 Ti 16k in 1.8 s, which took 100k and 106 s from HiGHS's own start), so that an LP
#: that needs more than some 30 s is left to HiGHS's branch and bound.
DEFAULT_LP_ITERATIONS = 200_000
#: Default of ``recompute_depth``: see :mod:`tmsim.planners.milp.formulation.recompute`.
DEFAULT_RECOMPUTE_DEPTH = 2
#: The widest asynchronous window: more kernels either side of a use than any zoo step has
#: (DenseNet-264's 3052), and the MILP's window gadgets grow with it.
MAX_WINDOW = 10_000
#: The deepest chain of producers the recomputing formulations run again before one kernel.
MAX_RECOMPUTE_DEPTH = 64
#: The largest count a setting takes: what the library's int64 arrays hold.
MAX_COUNT = 2**63 - 1
#: Each integer setting's range, inclusive, and why its low end is what it is (if it says
#: more than the range): the one check of these values, which the command line's options
#: take as their own (``PlanSettings.RANGES``).
INT_RANGES: dict[str, tuple[int, int, str]] = {
    "node_limit": (0, MAX_NODE_LIMIT, ""),
    "lp_iterations": (1, MAX_NODE_LIMIT, ""),
    "window": (
        1,
        MAX_WINDOW,
        "with no kernel either side the asynchronous formulation is the synchronous",
    ),
    "max_rounds": (1, MAX_COUNT, ""),
    "recompute_depth": (1, MAX_RECOMPUTE_DEPTH, ""),
    "offload_min_bytes": (0, MAX_COUNT, ""),
    "prefetch_ahead": (1, MAX_COUNT, ""),
}


@dataclass(frozen=True)
class PlanSettings:
    """Settings of every planner, with their defaults.

    Capacity (all planners):

    - ``capacity``: the fast tier's capacity (:class:`~tmsim.capacity.Capacity`, a ratio of
      the step's peak live bytes or a size); None: the fastest tier's own capacity. Slower
      tiers hold what their platform capacity allows.

    Kernel times (all planners):

    - ``profile``: measured kernel times (:class:`~tmsim.profiles.Profile`) that replace
      the roofline's wherever a plan puts a kernel's operands on a placement they list
      (:func:`~tmsim.profiles.cost_model`); plans record it (path and sha256). None: the
      roofline alone.

    The MILP formulations:

    - ``solver``: a cvxpy MILP solver name;
    - ``time_limit_s``: wall-clock cap of the solve (the incumbent is returned with its
      gap); None: no cap;
    - ``gap``: relative optimality gap at which the solver stops, in [0, 1];
    - ``node_limit``: most branch-and-bound nodes per solve (a limit on work: the solver
      stops at the same incumbent on a loaded machine as on an idle one); None: no limit;
    - ``lp_iterations``: most simplex iterations of the LP relaxation HiGHS solves before
      each MILP of up to 600k columns, then RINS around the warm start
      (:func:`~tmsim.planners.milp.solver.driver.run_highs`); a point within the gap of the LP's
      optimum ends the solve, and an LP that needs more iterations is left to HiGHS's
      branch and bound (an LP by interior point,
      :func:`~tmsim.planners.milp.chain.solve.lp_by_interior_point`, runs to its end, and the
      limit holds for the simplex of the vertex near it). None: the branch and bound alone;
    - ``window``: kernels either side of a user where asynchronous copies may run (1 to
      :data:`MAX_WINDOW`);
    - ``lp_bound``: also solve the LP relaxation and report its bound;
    - ``warm_start``: start each formulation from the solution of the one it contains,
      solved first (static: from the better of greedy and first-touch, on a GPU from
      what kernels use on the device and the rest on the host; async: from the sync
      solution with its copies moved beside neighbouring kernels where that helps). A
      solve that a limit stops before it finds a solution of its own returns its start,
      and says so in its status;
    - ``layout``: lay the fast-tier buffers out and, as AutoTM does, solve again with the
      limit lowered where the layout overflowed (without it only bytes are checked);
    - ``max_rounds``: most solves of that loop (>= 1);
    - ``recompute_depth``: in the formulations that recompute (``remat``, ``static-rc``,
      ``sync-rc``, ``async-rc``), the longest chain of producers run again before one kernel
      (1 to :data:`MAX_RECOMPUTE_DEPTH`; :mod:`tmsim.planners.milp.formulation.recompute`);
    - ``energy_weight_s_per_j``: seconds of step time one joule of the energy the plan
      decides is worth (>= 0; :mod:`tmsim.planners.milp.formulation.energy`): the objective
      becomes step time + this x energy; 0 (the default) plans for time alone. Needs a
      platform with an energy model;
    - ``host_kernels``: on a platform with a host compute, let the MILP run the kernels of
      the update phase on the host where that is faster
      (:mod:`tmsim.planners.milp.formulation.host`; not in ``static``, ``remat`` nor
      ``async-aware``, nor with an energy weight);
    - ``verbose``: the solver's log on stdout.

    ``vdnn``:

    - ``offload_min_bytes``: activations at least this large are offloaded first (>= 0);
    - ``offload_all``: offload every such activation even when memory would suffice
      (vDNN-all); otherwise only what it takes to fit (vDNN-dyn);
    - ``prefetch_ahead``: kernels between the start of an asynchronous prefetch and the
      kernel that needs the data (>= 1).

    Raises :class:`TmsimError` naming the field for a value out of range.
    """

    capacity: Capacity | None = None
    solver: str = "HIGHS"
    time_limit_s: float | None = 300.0
    gap: float = 0.01
    node_limit: int | None = None
    lp_iterations: int | None = DEFAULT_LP_ITERATIONS
    window: int = AUTOTM_WINDOW
    lp_bound: bool = False
    warm_start: bool = True
    layout: bool = True
    max_rounds: int = 10
    recompute_depth: int = DEFAULT_RECOMPUTE_DEPTH
    energy_weight_s_per_j: float = 0.0
    host_kernels: bool = True
    verbose: bool = False
    offload_min_bytes: int = 1 << 20
    offload_all: bool = False
    prefetch_ahead: int = 2
    profile: Profile | None = None
    #: the range of each integer setting (:data:`INT_RANGES`)
    RANGES: ClassVar[Mapping[str, tuple[int, int, str]]] = INT_RANGES

    def __post_init__(self) -> None:
        # the capacity's and profile's types are imported only where there is one to check:
        # the defaults are read by the command line's parsers, which import nothing heavy
        if self.capacity is not None:
            from tmsim.capacity import Capacity
        if self.profile is not None:
            from tmsim.profiles import Profile
        if self.capacity is not None and not isinstance(self.capacity, Capacity):
            raise TmsimError(f"capacity must be a Capacity, got {self.capacity!r}")
        if self.profile is not None and not isinstance(self.profile, Profile):
            raise TmsimError(f"profile must be a Profile (read_profile), got {self.profile!r}")
        if not (isinstance(self.solver, str) and self.solver.strip()):
            raise TmsimError(f"solver must be a solver name, got {self.solver!r}")
        t = self.time_limit_s
        if t is not None and not (isinstance(t, int | float) and math.isfinite(t) and t > 0):
            raise TmsimError(f"time_limit_s must be a finite number > 0 or None, got {t!r}")
        if not (isinstance(self.gap, int | float) and 0 <= self.gap <= 1):
            raise TmsimError(f"gap must be a number in [0, 1], got {self.gap!r}")
        w = self.energy_weight_s_per_j
        if isinstance(w, bool) or not (isinstance(w, int | float) and math.isfinite(w) and w >= 0):
            raise TmsimError(f"energy_weight_s_per_j must be a finite number >= 0, got {w!r}")
        for name, (low, high, why) in INT_RANGES.items():
            value = getattr(self, name)
            nullable = name in ("node_limit", "lp_iterations")
            if value is None and nullable:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                because = f" ({why})" if why and isinstance(value, int) and value < low else ""
                raise TmsimError(
                    f"{name} must be an integer from {low} to {high}"
                    f"{' or None' if nullable else ''}, got {value!r}{because}"
                )

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready data (the capacity as its text, the profile as
        :meth:`~tmsim.profiles.Profile.record`), as plans record them."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["capacity"] = None if self.capacity is None else str(self.capacity)
        out["profile"] = None if self.profile is None else self.profile.record()
        return out


__all__ = [
    "AUTOTM_WINDOW",
    "INT_RANGES",
    "MAX_NODE_LIMIT",
    "MAX_RECOMPUTE_DEPTH",
    "MAX_WINDOW",
    "PlanSettings",
]
