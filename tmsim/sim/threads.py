"""Copy threads in the fluid model: rates that fall with loaded latency, cores shared with kernels.

:class:`ThreadUse` applies a platform's :class:`hwmodels.copythread.CopyThread` to the flows of
one instant (:class:`tmsim.sim.fluid.FluidModel` calls it at every rate update):

- :meth:`ThreadUse.core_caps`: with a shared core, while a copy thread (:attr:`Role.THREAD`)
  and a kernel (:attr:`Role.KERNEL`) both run, the thread's cap takes
  :meth:`~hwmodels.copythread.CopyThread.thread_core_factor` and every kernel flow's
  :meth:`~hwmodels.copythread.CopyThread.kernel_core_factor`;
- :meth:`ThreadUse.loaded_caps`: a thread's cap divided by the latency factor of the busiest
  resource it uses, counting only the other flows' load there (a thread alone runs at its idle
  rate). Links are not counted: a copy's link is the path's own rate limit, not a queue.

The rates depend on the caps and the caps on the rates, so the fluid model iterates the two to
a fixed point. Pure functions of their arguments.
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

    @classmethod
    def of(cls, platform: Platform) -> ThreadUse | None:
        """The copy thread of ``platform``, or None if it has none."""
        return None if platform.copy_thread is None else cls(platform.copy_thread)

    @property
    def shared_core(self) -> bool:
        """Whether the thread takes a core a kernel's thread runs on."""
        return self.thread.core == "shared"

    def core_caps(self, caps: Sequence[float], roles: Sequence[Role]) -> list[float]:
        """``caps`` after core sharing: unchanged unless the core is shared and a thread and a
        kernel flow are both among ``roles``."""
        out = list(caps)
        if not (self.shared_core and Role.THREAD in roles and Role.KERNEL in roles):
            return out
        kernel, thread = self.thread.kernel_core_factor(), self.thread.thread_core_factor()
        for f, role in enumerate(roles):
            if role is Role.KERNEL:
                out[f] *= kernel
            elif role is Role.THREAD:
                out[f] *= thread
        return out

    def loaded_caps(
        self,
        caps: Sequence[float],
        roles: Sequence[Role],
        uses: Sequence[Uses],
        rates: Sequence[float],
        capacities: Sequence[float],
        unqueued: Container[int] = (),
    ) -> list[float]:
        """Each thread flow's cap in ``caps`` over the latency factor of the busiest resource
        it uses (not in ``unqueued``), at the load the other flows put there at ``rates``;
        other flows keep their caps."""
        load = [0.0] * len(capacities)
        for row, r in zip(uses, rates, strict=True):
            for res, a in row:
                load[res] += a * r
        out = list(caps)
        for f, role in enumerate(roles):
            if role is not Role.THREAD:
                continue
            busiest = 0.0
            for res, a in uses[f]:
                if res not in unqueued:
                    busiest = max(busiest, (load[res] - a * rates[f]) / capacities[res])
            out[f] = caps[f] / self.thread.latency_factor(busiest)
        return out


__all__ = ["ThreadUse"]
