"""Bracketed search for a fixed point ``x = g(x)`` of fractions, one coordinate at a time.

:class:`tmsim.sim.fluid.FluidModel` finds two quantities this way, because the rates depend on
them and they depend on the rates: the aggregate read fraction of a mixing tier (its mix
factor) and each tier's reads' and writes' shares of the bytes on a controller's channels
(its device-switch cost). Both lie in [0, 1] and so do their images, so ``g(0) >= 0`` and
``g(1) <= 1`` bracket a root of ``g(x) - x`` from the start. Every evaluation ``g(x)`` narrows the
bracket on the side its sign gives (``g(x) >= x``: the root lies at or above ``x``), and the
next guess is a plain (or damped) iteration step clamped into the bracket for the first rounds,
where it usually converges at once, then the bracket's midpoint. Bisection converges for any
continuous ``g`` of one coordinate, where plain iteration can cycle (a flow that drains first
taking a tier from a copy and giving it back), so the answer does not depend on where the
rounds stop once they reach :data:`BISECTION_ROUNDS`. With several coordinates each is narrowed
on its own residual, the others held at their current guesses.

Pure and deterministic: the guesses depend only on the values given, in their order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: Tolerance on a fixed point: its residual ``|g(x) - x|`` or its bracket's width.
TOL = 1e-10
#: Rounds of plain iteration before bisection.
ITERATED = 12
#: Rounds that reach :data:`TOL` whatever ``g`` does: the plain rounds, then 34 halvings of
#: [0, 1] (2 ** -34 < 1e-10).
BISECTION_ROUNDS = ITERATED + 34


class Bracket:
    """The bracket ``[lo[k], hi[k]]`` known to hold a root of ``g_k(x) - x_k`` for each key
    ``k`` (initially [0, 1])."""

    def __init__(self, keys: Iterable[int]) -> None:
        keys = tuple(keys)
        self.lo = dict.fromkeys(keys, 0.0)
        self.hi = dict.fromkeys(keys, 1.0)

    def narrow(self, x: Mapping[int, float], gx: Mapping[int, float]) -> bool:
        """Narrow every bracket by ``g(x)`` (``gx``) at the guess ``x``; return whether every
        coordinate has converged (residual or bracket within :data:`TOL`)."""
        for k in self.lo:
            if gx[k] >= x[k]:
                self.lo[k] = max(self.lo[k], x[k])
            else:
                self.hi[k] = min(self.hi[k], x[k])
        return all(abs(gx[k] - x[k]) <= TOL or self.hi[k] - self.lo[k] <= TOL for k in self.lo)

    def next(self, round_: int, step: Mapping[int, float]) -> dict[int, float]:
        """The guess after round ``round_`` (from 0): the plain iteration step ``step``
        clamped into the bracket in the first :data:`ITERATED` rounds, the midpoints after."""
        if round_ < ITERATED:
            return {k: min(max(step[k], self.lo[k]), self.hi[k]) for k in self.lo}
        return {k: 0.5 * (self.lo[k] + self.hi[k]) for k in self.lo}


__all__ = ["BISECTION_ROUNDS", "ITERATED", "TOL", "Bracket"]
