"""A step timed from its kernels' bytes on each tier.

The timing half of the simulations that find a kernel's bytes on each tier themselves rather
than from a plan's operand tiers: the 2LM cache's traffic (:mod:`tmsim.sim.cache`), each
operand split by the tiers of its pages (:mod:`tmsim.sim.firsttouch`). :func:`time_traffic`
runs the step on SimPy as :func:`tmsim.sim.replay.replay` runs a plan's kernels:

- kernels run one after another in graph order. Kernel ``k`` first waits ``pre_s[k]`` (its
  launch overhead, and whatever else the caller charges before its traffic), then runs its
  body (:func:`tmsim.sim.body.kernel_body`): its memory traffic beside its compute floor
  (:attr:`tmsim.cost.CostModel.compute_s`), or one after the other under ``Overlap.SUM``;
- the traffic's memory time is :func:`memory_s`, the roofline of its bytes
  (:func:`hwmodels.roofline` adds the tiers' times, as the cost model does for operands), so a
  kernel whose operands are each on one tier gets the cost model's time;
- the traffic is one flow (``split=False``), capped so that alone it lasts that time, as a
  plan's kernel is (:func:`tmsim.sim.schedule.kernel_flow`: its own read/write mix is not
  charged, as the cost model does not charge it); or two (``split=True``), all its reads and
  all its writes, each capped so that alone it lasts that time, so that where they share a
  tier they pay its read/write mix, as a cache's fills and write-backs do.

``level`` is how much of the machine's sharing the flows see (:mod:`tmsim.levels`): ``none``
runs every flow at its cap (the step is the sum of :attr:`StepTimes.uncontended_s`);
``bandwidth`` shares tier device time and the platform's shared controllers
(:class:`~tmsim.sim.fluid.FluidModel`); ``controller`` adds the memory controller's channels
and the copy thread's model, as a plan's replay does at that level (with no copy running, a
kernel's compute floor stays a fixed delay there too).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import simpy

from hwmodels.opclass import OpClass, op_class
from hwmodels.timing import Overlap, roofline
from tmsim.cost import CostModel
from tmsim.levels import InterferenceLevel
from tmsim.sim.body import kernel_body
from tmsim.sim.fluid import Flow, FluidModel
from tmsim.sim.kernels import kernel_flow
from tmsim.sim.rates import ChannelUse
from tmsim.sim.threads import ThreadUse

FloatArray = npt.NDArray[np.float64]
Process = Generator[simpy.Event, Any, None]


@dataclass(frozen=True, eq=False)
class StepTimes:
    """When each kernel of a timed step ran [K] (``start_s``, ``end_s``, seconds from the
    step's start), its time with no contention (``uncontended_s``: ``pre_s`` plus the body of
    the cost model's rule), the step's end (``simulated_s``) and the SimPy events run."""

    start_s: FloatArray
    end_s: FloatArray
    uncontended_s: FloatArray
    simulated_s: float
    events: int


def memory_s(cost: CostModel, read_bytes: npt.ArrayLike, write_bytes: npt.ArrayLike) -> FloatArray:
    """Roofline memory time [K] of ``cost``'s kernels reading ``read_bytes`` and writing
    ``write_bytes`` [K, tiers] on its platform's tiers (every tier, the cache tier included):
    by op class, or, on a compute device with a calibrated kernel model, at each kernel's
    :attr:`~tmsim.cost.CostModel.memory_efficiency` of the tiers' kernel rates."""
    platform = cost.platform
    r = np.asarray(read_bytes, dtype=np.float64)
    w = np.asarray(write_bytes, dtype=np.float64)
    if platform.compute.kernels is not None:
        cores = platform.compute.cores
        rates = [platform.kernel_bw_bytes_per_s(t.name, cores) for t in platform.tiers]
        per_byte = r / np.array([rd for rd, _ in rates]) + w / np.array([wr for _, wr in rates])
        return np.asarray(per_byte.sum(axis=1) / cost.memory_efficiency, dtype=np.float64)
    # The memory time depends on neither the FLOPs nor their dtype; any dtype with a peak does.
    dtype = platform.compute.dtypes[0]
    classes = op_classes(cost)
    times = roofline(platform, np.zeros(r.shape[0]), list(classes), r, w, dtype=dtype)
    return times.memory_s


def body_s(compute_s: FloatArray, memory_s: FloatArray, serial: bool) -> FloatArray:
    """A kernel body's time by the cost model's rule: compute and memory one after the other
    (``serial``) or overlapped."""
    return compute_s + memory_s if serial else np.maximum(compute_s, memory_s)


def op_classes(cost: CostModel) -> list[OpClass]:
    """The op class of every kernel of ``cost``'s graph, in order."""
    return [op_class(k.op) for k in cost.graph.kernels]


def time_traffic(
    cost: CostModel,
    read_bytes: npt.ArrayLike,
    write_bytes: npt.ArrayLike,
    pre_s: npt.ArrayLike,
    *,
    split: bool,
    level: InterferenceLevel,
) -> StepTimes:
    """Time the step of ``cost``'s graph on its platform with kernel ``k`` reading
    ``read_bytes[k]`` and writing ``write_bytes[k]`` [K, tiers] after ``pre_s[k]`` seconds
    (see the module documentation for ``split`` and ``level``). Deterministic.
    """
    platform = cost.platform
    n_k = len(cost.graph.kernels)
    reads = np.asarray(read_bytes, dtype=np.int64).reshape(n_k, len(platform.tiers))
    writes = np.asarray(write_bytes, dtype=np.int64).reshape(n_k, len(platform.tiers))
    pre = np.asarray(pre_s, dtype=np.float64)
    mem_s = memory_s(cost, reads, writes)
    serial = cost.overlap is Overlap.SUM
    eff = cost.memory_efficiency
    cores = platform.compute.cores
    zero = np.zeros(len(platform.tiers), dtype=np.int64)
    flows: list[tuple[Flow, ...]] = []
    for k in range(n_k):
        m, e = float(mem_s[k]), float(eff[k])
        if split:
            pair = (
                kernel_flow(reads[k], zero, m, cores, e),
                kernel_flow(zero, writes[k], m, cores, e),
            )
            flows.append(pair)
        else:
            flows.append((kernel_flow(reads[k], writes[k], m, cores, e),))
    env = simpy.Environment()
    full = level is InterferenceLevel.CONTROLLER
    fluid = FluidModel(
        env,
        platform.tiers,
        shared=level is not InterferenceLevel.NONE,
        controllers=platform.controller_groups(),
        channel=ChannelUse.of(platform) if full else None,
        threads=ThreadUse.of(platform) if full else None,
    )
    start_s, end_s = np.zeros(n_k), np.zeros(n_k)
    proc = env.process(_step(env, fluid, flows, pre, cost.compute_s, serial, start_s, end_s))
    events = 0
    while not proc.processed:
        env.step()
        events += 1
    return StepTimes(
        start_s=start_s,
        end_s=end_s,
        uncontended_s=pre + body_s(cost.compute_s, mem_s, serial),
        simulated_s=float(env.now),
        events=events,
    )


def _step(
    env: simpy.Environment,
    fluid: FluidModel,
    flows: list[tuple[Flow, ...]],
    pre_s: FloatArray,
    floor_s: FloatArray,
    serial: bool,
    start_s: FloatArray,
    end_s: FloatArray,
) -> Process:
    """The kernels one after another; fills in ``start_s`` and ``end_s``."""
    for k, kernel in enumerate(flows):
        start_s[k] = env.now
        if pre_s[k] > 0:
            yield env.timeout(float(pre_s[k]))
        yield from kernel_body(env, fluid, kernel, float(floor_s[k]), serial)
        end_s[k] = env.now


__all__ = ["StepTimes", "body_s", "memory_s", "op_classes", "time_traffic"]
