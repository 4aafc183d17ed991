"""A kernel's body on the fluid model: its memory flows and its compute floor."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import simpy

from tmsim.sim.flows import Flow, FlowResult, Losses, Role
from tmsim.sim.fluid import FluidModel


def kernel_body(
    env: simpy.Environment,
    fluid: FluidModel,
    flows: Sequence[Flow],
    floor_s: float,
    serial: bool,
    floor_flow: bool = False,
) -> Generator[simpy.Event, Any, list[FlowResult]]:
    """A kernel's body after its launch: its memory ``flows`` and its compute floor
    (``floor_s`` seconds), one after the other (``serial``: the floor first) or together (the
    body ends when all have). Every replay runs kernels through this one rule.

    With ``floor_flow`` the floor is a flow of the kernel (:func:`floor_as_flow`) rather than
    a fixed delay, so that a copy thread sharing the kernel's cores
    (:mod:`tmsim.sim.threads`) can slow its compute as well as its memory traffic.

    Returns the results of its flows (the floor's too when it is a flow), in order of start.
    """
    floor: list[simpy.Event] = []
    if floor_s > 0:
        if floor_flow:
            floor.append(fluid.transfer(floor_as_flow(floor_s, len(fluid.tiers))))
        else:
            floor.append(env.timeout(floor_s))
    first: list[simpy.Event] = []
    if serial and floor:
        first = [floor.pop()]
        yield first[0]
    done = [fluid.transfer(f) for f in flows] + floor
    if done:
        yield done[0] if len(done) == 1 else env.all_of(done)
    return [e.value for e in first + done if isinstance(e.value, FlowResult)]


def kernel_losses(
    results: Sequence[FlowResult],
    serial: bool,
    delay_s: float,
    floor_end_s: float = 0.0,
    floor_stretch_s: float = 0.0,
) -> Losses:
    """A kernel's delay past its uncontended time (``delay_s``) split by cause, in proportion
    to the losses of what made it: all of ``results`` if they ran one after another
    (``serial``), else the one that ended last. A compute floor run as a fixed delay ending
    at ``floor_end_s`` counts as ending last when no flow ended after it; its
    ``floor_stretch_s`` (a core given to a copy thread) is a loss to the core. Nothing for no
    delay or no loss."""
    if delay_s <= 0:
        return Losses()
    stretch = Losses(core_s=floor_stretch_s)
    if serial:
        lost = sum((r.losses for r in results), stretch)
    else:
        last = max(results, key=lambda r: r.end_s, default=None)
        lost = stretch if last is None or floor_end_s >= last.end_s else last.losses
    total = lost.total_s
    return lost.scaled(delay_s / total) if total > 0 else Losses()


def floor_as_flow(floor_s: float, n_tiers: int) -> Flow:
    """A compute floor of ``floor_s`` seconds as a kernel flow that uses no resource: that
    many units at a cap of 1 per second."""
    zeros = (0.0,) * n_tiers
    return Flow(float(floor_s), zeros, zeros, 1.0, role=Role.KERNEL)


__all__ = ["floor_as_flow", "kernel_body", "kernel_losses"]
