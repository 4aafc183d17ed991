"""Every strategy by name: what it is, how it runs, where it applies, how figures draw it.

One registry serves ``tmsim plan`` (the planners), ``tmsim compare``, sweeps and the figures.
A strategy is a *planner* (a heuristic, or one of AutoTM's MILP formulations), whose plan is
validated and replayed, or a baseline managed by the hardware or the operating system that is
simulated directly (first touch by pages: the pool's pages in DRAM in the order they are
first touched; 2LM: the DRAM cache; unified memory: pages migrated on demand by the GPU
driver).

Where a strategy applies depends on which tiers kernels reach (:func:`applicable`):

- on a platform whose kernels reach a tier beyond the fastest (a CPU with DRAM and PMM):
  every strategy but ``vdnn`` and ``unified-memory``, and ``2lm`` only where the platform
  describes its memory mode;
- where kernels reach only the fastest tier (a GPU): ``all-fast``, ``vdnn``, the MILP
  formulations and ``unified-memory``;
- on a platform of one tier (an APU whose CPU and GPU share one memory): only what keeps
  every tensor in that tier, :data:`ONE_TIER` (``all-fast``, and the recomputing heuristics
  ``checkpoint`` and ``selective``): there is nothing to place or move;
- beside either, where the platform describes the host CPU beside its compute device (a GPU
  and its host, ``[host_compute]``): the runtime baselines ``zero-offload``,
  ``zero-infinity`` and ``save-on-cpu`` (:mod:`tmsim.planners.runtimes`). ``zero-infinity``
  also needs a tier behind the host (an NVMe drive); where there is none, its planner says so
  in one line (in ``tmsim compare``, as its row's error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING

from tmsim.errors import TmsimError

if TYPE_CHECKING:  # annotations only: the command line builds its parsers without hwmodels
    from hwmodels.platform import Platform


class Kind(StrEnum):
    """How a strategy runs: a heuristic planner, a MILP formulation, or a simulation."""

    HEURISTIC = "heuristic"
    MILP = "milp"
    SIMULATION = "simulation"


class Reach(StrEnum):
    """Where a strategy applies: platforms whose kernels reach a slower tier (``SLOW``), only
    the fastest tier (``FAST``), either (``ANY``), or platforms with a host compute beside
    their compute device (``HOST``)."""

    ANY = "any"
    SLOW = "slow"
    FAST = "fast"
    HOST = "host"


@dataclass(frozen=True, slots=True)
class Strategy:
    """One strategy: ``name``, ``kind``, ``reach`` (see :class:`Reach`), a one-line
    ``summary`` and the ``color`` every figure draws it in."""

    name: str
    kind: Kind
    reach: Reach
    summary: str
    color: str


_H, _M, _S = Kind.HEURISTIC, Kind.MILP, Kind.SIMULATION
_ANY, _SLOW, _FAST, _HOST = Reach.ANY, Reach.SLOW, Reach.FAST, Reach.HOST
_TABLE = (
    ("all-fast", _H, _ANY, "every tensor in the fastest tier, as large as the step needs"),
    ("all-slow", _H, _SLOW, "every tensor in the slowest tier kernels reach"),
    ("first-touch", _H, _SLOW, "NUMA first touch: tensors in creation order fill fast tiers"),
    ("first-touch-pages", _S, _SLOW, "NUMA first touch: the pool's pages, as first touched"),
    ("greedy", _H, _SLOW, "static placement by time saved per byte"),
    ("vdnn", _H, _FAST, "vDNN: activations offloaded between forward and backward uses"),
    ("zero-offload", _H, _HOST, "ZeRO-Offload: the optimizer step and its state on the host"),
    (
        "zero-infinity",
        _H,
        _HOST,
        "ZeRO-Infinity: the optimizer step on the host, its state on NVMe",
    ),
    ("save-on-cpu", _H, _HOST, "PyTorch save_on_cpu: saved activations copied to host and back"),
    ("checkpoint", _H, _ANY, "sqrt(N) segment checkpointing: activations recomputed, all fast"),
    ("selective", _H, _ANY, "outputs of cheap kernels (norms, element-wise) recomputed, all fast"),
    ("static", _M, _ANY, "AutoTM's MILP: every tensor stays where it is created"),
    ("sync", _M, _ANY, "AutoTM's MILP: blocking copies at a tensor's users"),
    ("async", _M, _ANY, "AutoTM's MILP: copies also beside kernels near a tensor's users"),
    ("async-aware", _M, _ANY, "async, each copy charged what interference makes it cost"),
    ("remat", _M, _ANY, "recomputation alone: all in the fastest tier, dropped tensors made again"),
    ("static-rc", _M, _ANY, "static, and dropped tensors made again before a later use"),
    ("sync-rc", _M, _ANY, "sync, and dropped tensors made again before a later use"),
    ("async-rc", _M, _ANY, "async, and dropped tensors made again before a later use"),
    ("2lm", _S, _SLOW, "memory mode: the fastest tier a hardware cache of the next"),
    ("unified-memory", _S, _FAST, "CUDA managed memory: pages migrate on demand"),
)
#: The colour of each strategy in every figure (the hardware-managed baselines share one).
_COLORS = {
    "all-fast": "#4d4d4d",
    "all-slow": "#bababa",
    "first-touch": "#e08214",
    "first-touch-pages": "#b35806",
    "greedy": "#fdb863",
    "vdnn": "#80cdc1",
    "zero-offload": "#35978f",
    "zero-infinity": "#01665e",
    "save-on-cpu": "#c7eae5",
    "checkpoint": "#c51b7d",
    "selective": "#f1b6da",
    "static": "#8073ac",
    "sync": "#2166ac",
    "async": "#1b7837",
    "async-aware": "#5aae61",
    "remat": "#de77ae",
    "static-rc": "#b2abd2",
    "sync-rc": "#4393c3",
    "async-rc": "#a6dba0",
    "2lm": "#b2182b",
    "unified-memory": "#b2182b",
}

#: Every strategy, in the order tables list them.
STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {
        name: Strategy(name, kind, reach, summary, _COLORS[name])
        for name, kind, reach, summary in _TABLE
    }
)


def names(kind: Kind | None = None) -> tuple[str, ...]:
    """Names of every strategy (of ``kind``, if given), in table order."""
    return tuple(s.name for s in STRATEGIES.values() if kind is None or s.kind is kind)


def strategy(name: str) -> Strategy:
    """The strategy called ``name``; raises :class:`TmsimError` listing the known ones."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise TmsimError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None


def kernels_reach_slow(platform: Platform) -> bool:
    """Whether kernels on ``platform`` reach an addressable tier beyond the fastest."""
    fastest = platform.addressable_tiers[0].name
    return any(t != fastest for t in platform.kernel_tiers)


#: The strategies of a platform of one tier: those that keep every tensor in the fastest tier
#: and need no other (the MILP needs two tiers to choose between).
ONE_TIER = ("all-fast", "checkpoint", "selective")


def applicable(platform: Platform) -> tuple[str, ...]:
    """The strategies that apply to ``platform`` (see the module documentation), in table
    order; on a platform of one tier, :data:`ONE_TIER`. Raises :class:`TmsimError` for a
    platform in memory mode (a hardware cache hides its fastest tier: compare the flat
    platform)."""
    if platform.cache is None and len(platform.tiers) == 1:
        return ONE_TIER
    if platform.cache is not None or len(platform.addressable_tiers) < 2:
        raise TmsimError(
            f"platform {platform.name!r}: strategies need two addressable tiers (for a platform "
            "in memory mode, use the flat one: the 2lm strategy simulates its cache)"
        )
    reach = Reach.SLOW if kernels_reach_slow(platform) else Reach.FAST
    reaches = (Reach.ANY, reach, Reach.HOST) if platform.host_compute else (Reach.ANY, reach)
    out = [s.name for s in STRATEGIES.values() if s.reach in reaches]
    if platform.memory_mode is None and "2lm" in out:
        out.remove("2lm")
    return tuple(out)


#: What a strategy of each reach needs of a platform, for the message of :func:`check_applies`.
_NEEDS = {
    Reach.SLOW: "kernels that reach a slower tier (a CPU with several memories)",
    Reach.FAST: "kernels that reach the fastest tier alone (a GPU)",
    Reach.HOST: "a host CPU that runs kernels beside the device ([host_compute])",
}


def check_applies(name: str, platform: Platform) -> None:
    """Raise :class:`TmsimError` saying what strategy ``name`` needs unless it is one of
    :func:`applicable`'s for ``platform`` (and as :func:`strategy` and :func:`applicable`
    raise)."""
    chosen = strategy(name)
    if name in applicable(platform):
        return
    if name == "2lm":
        needs = "a platform with a memory mode (a hardware cache of the slow tier)"
    else:
        needs = _NEEDS.get(chosen.reach, "another platform")
    raise TmsimError(
        f"strategy {name!r} does not apply to platform {platform.name!r}: it needs {needs}"
    )


#: Strategies :func:`compared_by_default` leaves out: the formulations that recompute, whose
#: solves take minutes where AutoTM's take seconds, and PyTorch's save_on_cpu (ask for them by
#: name). The ZeRO baselines run by default where they apply (a platform with a host CPU): the
#: MILP is measured against the runtimes that plan for such machines.
ON_REQUEST = frozenset({"remat", "static-rc", "sync-rc", "async-rc", "save-on-cpu"})


def compared_by_default(platform: Platform) -> tuple[str, ...]:
    """The strategies ``tmsim compare`` runs when none are named: :func:`applicable`'s but
    those of :data:`ON_REQUEST`. Raises as :func:`applicable`."""
    return tuple(name for name in applicable(platform) if name not in ON_REQUEST)


__all__ = [
    "ONE_TIER",
    "ON_REQUEST",
    "STRATEGIES",
    "Kind",
    "Reach",
    "Strategy",
    "applicable",
    "check_applies",
    "compared_by_default",
    "kernels_reach_slow",
    "names",
    "strategy",
]
