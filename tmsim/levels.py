"""Interference levels of the replay: how much of the machine's sharing it models.

- ``none``: every kernel and copy at its own uncontended rate, the cost model's world (the
  simulated step equals the plan's prediction, but where the host memory's floor,
  :mod:`tmsim.plans.hostmem`, holds a plan with host kernels above its two streams: a floor
  of sharing, which this level leaves out);
- ``bandwidth``: kernels and copies share tier device time, links and copy engines max-min
  fairly, with the tiers' read/write mix and write falloff (:mod:`tmsim.sim.fluid`);
- ``controller``: ``bandwidth`` plus the platform's memory controller
  (:class:`hwmodels.controller.MemoryController`): channel time by traffic type, writes that
  drain first, shares in proportion to demand. On a platform without a controller it is the
  ``bandwidth`` level.
"""

from __future__ import annotations

from enum import StrEnum

from tmsim.errors import TmsimError


class InterferenceLevel(StrEnum):
    """See the module documentation."""

    NONE = "none"
    BANDWIDTH = "bandwidth"
    CONTROLLER = "controller"

    @classmethod
    def parse(cls, text: str) -> InterferenceLevel:
        """The level named ``text`` (:func:`parse_level`)."""
        return parse_level(text)

    @classmethod
    def default(cls) -> InterferenceLevel:
        """The level replays use unless told otherwise (:data:`DEFAULT_LEVEL`).

        >>> InterferenceLevel.default().value
        'controller'
        """
        return DEFAULT_LEVEL


#: The level ``simulate``, ``compare``, sweeps and figures use unless told otherwise: the full
#: model (on a platform without a memory controller or copy thread it is ``bandwidth``).
DEFAULT_LEVEL = InterferenceLevel.CONTROLLER


def parse_level(text: str) -> InterferenceLevel:
    """The level named ``text`` (any case, surrounding spaces ignored). Raises
    :class:`~tmsim.errors.TmsimError` naming the levels for any other text."""
    key = text.strip().lower() if isinstance(text, str) else text
    try:
        return InterferenceLevel(key)
    except ValueError:
        names = ", ".join(level.value for level in InterferenceLevel)
        raise TmsimError(f"unknown interference level {text!r}; levels are {names}") from None


__all__ = ["DEFAULT_LEVEL", "InterferenceLevel", "parse_level"]
