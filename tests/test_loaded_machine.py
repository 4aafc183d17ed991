"""Plans do not depend on how loaded the machine is: a chain whose solves end at their gap
(no wall-clock limit binds) gives the same plans with both cores busy as on an idle machine,
since HiGHS's settings are deterministic and the chain's threads see only what the
formulations they contain gave. (``tests/test_milp.py`` checks a node-limited solve under
load in the quick suite.)"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hwmodels.presets import load_preset
from tmsim.capacity import Capacity
from tmsim.planners import PlanSettings
from tmsim.planners.milp.chain.plan import plan_milp_chain
from tmsim.plans.values import Plan
from tmsim.workload.zoo import training_graph_of


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


@contextmanager
def _busy(processes: int) -> Iterator[None]:
    """``processes`` processes spinning on the CPU while the block runs."""
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    spinners = [context.Process(target=_spin, args=(stop,), daemon=True) for _ in range(processes)]
    for p in spinners:
        p.start()
    try:
        yield
    finally:
        stop.set()
        for p in spinners:
            p.join(10)
            if p.is_alive():
                p.terminate()


def _what_counts(plan: Plan | Exception) -> tuple[Any, ...]:
    """A plan without its seconds of build and solve (which depend on the load)."""
    assert isinstance(plan, Plan), plan
    assert plan.stats is not None
    s = plan.stats
    plan_part = (plan.operand_tiers, plan.residency, plan.moves, plan.recomputes, plan.predicted_s)
    return (*plan_part, s.objective, s.bound, s.status, s.nodes)


@pytest.mark.slow  # its spinning processes would slow every test running beside it
def test_a_busy_machine_gives_the_same_plans_as_an_idle_one() -> None:
    graph = training_graph_of("vgg19", 2)
    platform = load_preset("cascadelake-optane")
    settings = PlanSettings(capacity=Capacity.parse("4:1"), time_limit_s=None)
    idle = plan_milp_chain(graph, platform, settings, "async")
    with _busy(2):
        busy = plan_milp_chain(graph, platform, settings, "async")
    assert list(idle) == list(busy)
    for formulation, plan in idle.items():
        assert _what_counts(plan) == _what_counts(busy[formulation]), formulation
