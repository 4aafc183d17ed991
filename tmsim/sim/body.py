"""A kernel's body on the fluid model: its memory flows and its compute floor."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, Protocol

import simpy

from tmsim.sim.flows import LOSS_CAUSES, Flow, FlowResult, Losses, Role
from tmsim.sim.fluid import FluidModel
from tmsim.sim.trace import Record


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
    a fixed delay, so that a copy thread (:mod:`tmsim.sim.threads`) can slow its compute: by
    sharing a core with it, or by taking a core from the kernels' pool.

    Returns the results of its flows (the floor's too when it is a flow), in order of start.
    """
    done: list[simpy.Event] = []
    if floor_s > 0:
        if floor_flow:
            done.append(fluid.transfer(floor_as_flow(floor_s, len(fluid.tiers))))
        else:
            done.append(env.timeout(floor_s))
        if serial:
            yield done[0]
    done += [fluid.transfer(f) for f in flows]
    if done:
        yield done[0] if len(done) == 1 else env.all_of(done)
    return [e.value for e in done if isinstance(e.value, FlowResult)]


def kernel_losses(results: Sequence[FlowResult], serial: bool, delay_s: float) -> Losses:
    """A kernel's delay past its uncontended time (``delay_s``) split by cause, in proportion
    to the losses of the flows that made it: all of ``results`` if they ran one after another
    (``serial``), else the one that ended last. (A compute floor run as a fixed delay never
    delays a kernel, so it need not be among them.) Nothing for no delay or no loss."""
    if delay_s <= 0 or not results:
        return Losses()
    if serial:
        lost = sum((r.losses for r in results), Losses())
    else:
        lost = max(results, key=lambda r: r.end_s).losses
    total = lost.total_s
    return lost.scaled(delay_s / total) if total > 0 else Losses()


def floor_as_flow(floor_s: float, n_tiers: int) -> Flow:
    """A compute floor of ``floor_s`` seconds as a flow (role ``FLOOR``) that uses no
    resource: that many units at a cap of 1 per second."""
    zeros = (0.0,) * n_tiers
    return Flow(float(floor_s), zeros, zeros, 1.0, role=Role.FLOOR)


class SideBody(Protocol):
    """What a kernel run beside the device's stream says of itself (a host kernel's or a
    recompute's spec)."""

    @property
    def read_bytes(self) -> tuple[int, ...]: ...
    @property
    def write_bytes(self) -> tuple[int, ...]: ...
    @property
    def kernel_s(self) -> float: ...


def side_record(
    kind: str,
    name: str,
    kernel: int,
    phase: str,
    start_s: float,
    env: simpy.Environment,
    body: SideBody,
    lost: Losses,
) -> Record:
    """The record of a host kernel or recompute that ran from ``start_s`` to now, having
    lost ``lost`` to interference."""
    return Record(
        kind=kind,
        name=name,
        kernel=kernel,
        phase=phase,
        src="",
        dst="",
        start_s=start_s,
        end_s=float(env.now),
        read_bytes=body.read_bytes,
        write_bytes=body.write_bytes,
        uncontended_s=body.kernel_s,
        fast_resident_bytes=-1,
        **(lost_fields(lost) if lost.total_s else {}),
    )


def lost_fields(losses: Losses) -> dict[str, float]:
    """A record's ``lost_*_s`` fields for ``losses``."""
    return {f"lost_{c}_s": v for c, v in zip(LOSS_CAUSES, losses.astuple(), strict=True)}


__all__ = [
    "SideBody",
    "floor_as_flow",
    "kernel_body",
    "kernel_losses",
    "lost_fields",
    "side_record",
]
