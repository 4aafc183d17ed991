"""What training runtimes do with memory, as plans: the baselines of the systems that offload
to a GPU's host.

- :mod:`.zero`: ZeRO-Offload (the optimizer step on the host CPU, its state in host memory)
  and ZeRO-Infinity (the same with the optimizer state on NVMe), whose plans run kernels on
  the platform's host compute (:attr:`~tmsim.plans.values.Plan.host_kernels`);
- :mod:`.save_on_cpu`: PyTorch's ``save_on_cpu`` (every tensor saved for the backward pass
  copied to the host and back).

Every planner has the heuristics' signature, ``plan_<name>(graph, platform, settings=None)
-> Plan``; :data:`REGISTRY` maps each strategy name to its planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tmsim.planners.heuristics import Planner
from tmsim.planners.runtimes.save_on_cpu import SAVE_ON_CPU, plan_save_on_cpu
from tmsim.planners.runtimes.zero import (
    ZERO_INFINITY,
    ZERO_OFFLOAD,
    plan_zero_infinity,
    plan_zero_offload,
)

#: The runtime baselines by strategy name (read-only), in the order of :mod:`tmsim.strategies`.
REGISTRY: Mapping[str, Planner] = MappingProxyType(
    {
        ZERO_OFFLOAD: plan_zero_offload,
        ZERO_INFINITY: plan_zero_infinity,
        SAVE_ON_CPU: plan_save_on_cpu,
    }
)

__all__ = ["REGISTRY", "plan_save_on_cpu", "plan_zero_infinity", "plan_zero_offload"]
