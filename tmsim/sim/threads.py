"""Copy threads in the fluid model: rates that fall with loaded latency, cores shared with kernels.

:class:`ThreadUse` applies a platform's :class:`hwmodels.copythread.CopyThread` to the flows of
one instant (:class:`tmsim.sim.fluid.FluidModel` calls it at every rate update):

- :meth:`ThreadUse.core_caps`: with a shared core, while a copy thread (:attr:`Role.THREAD`)
  and a kernel (:attr:`Role.KERNEL`, :attr:`Role.FLOOR`) both run, the thread's cap takes
  :meth:`~hwmodels.copythread.CopyThread.thread_core_factor` and every kernel flow's
  :meth:`~hwmodels.copythread.CopyThread.kernel_core_factor`; with a dedicated core, taken
  from the kernels' pool of ``cores``, every compute floor run as a flow takes
  ``(cores - 1) / cores`` of its cap (a single core is not given away);
- :meth:`ThreadUse.loaded_caps`: a thread's cap divided by the latency factor of the busiest
  resource it uses, at the load the other flows offer there (their caps: how full the queues
  are kept; a thread alone runs at its idle rate). Links are not counted: a copy's link is
  the path's own rate limit, not a queue.

Offered rather than achieved load keeps the caps a function of the flows present, not of the
rates they get, so no fixed point between the two is needed (an iteration on achieved load,
coupled with Optane's read/write mix, was found to cycle). Pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass

from hwmodels.copythread import CopyThread
from hwmodels.platform import Platform
from tmsim.sim.flows import Role
from tmsim.sim.sharing import Uses


@dataclass(frozen=True, slots=True)
class ThreadUse:
    """A platform's copy thread as the fluid model applies it (see the module documentation)."""

    thread: CopyThread
    cores: int = 1

    @classmethod
    def of(cls, platform: Platform) -> ThreadUse | None:
        """The copy thread of ``platform`` beside its compute device's cores, or None if it
        has none."""
        thread = platform.copy_thread
        return None if thread is None else cls(thread, platform.compute.cores)

    @property
    def shared_core(self) -> bool:
        """Whether the thread takes a core a kernel's thread runs on."""
        return self.thread.core == "shared"

    def core_caps(self, caps: Sequence[float], roles: Sequence[Role]) -> list[float]:
        """``caps`` after the cores are shared out (see the module documentation)."""
        out = list(caps)
        if not self.shared_core:
            if self.cores > 1:
                for f, role in enumerate(roles):
                    if role is Role.FLOOR:
                        out[f] *= (self.cores - 1) / self.cores
            return out
        if Role.THREAD not in roles or not (Role.KERNEL in roles or Role.FLOOR in roles):
            return out
        kernel, thread = self.thread.kernel_core_factor(), self.thread.thread_core_factor()
        for f, role in enumerate(roles):
            if role is Role.THREAD:
                out[f] *= thread
            elif role is not Role.OTHER:
                out[f] *= kernel
        return out

    def loaded_caps(
        self,
        caps: Sequence[float],
        roles: Sequence[Role],
        uses: Sequence[Uses],
        capacities: Sequence[float],
        unqueued: Container[int] = (),
    ) -> list[float]:
        """Each thread flow's cap in ``caps`` over the latency factor of the busiest resource
        it uses (not in ``unqueued``), at the load the other flows offer there (each at its
        cap, an infinite cap filling the resource); other flows keep their caps."""
        load = [0.0] * len(capacities)
        for row, c in zip(uses, caps, strict=True):
            for res, a in row:
                load[res] += a * c
        out = list(caps)
        for f, role in enumerate(roles):
            if role is not Role.THREAD:
                continue
            busiest = 0.0
            for res, a in uses[f]:
                if res not in unqueued:
                    busiest = max(busiest, (load[res] - a * caps[f]) / capacities[res])
            out[f] = caps[f] / self.thread.latency_factor(busiest)
        return out


__all__ = ["ThreadUse"]
