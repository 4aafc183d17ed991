"""Counting the cache simulator's waves, for the tests that bound what a walk costs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import hwmodels.cachesim as cachesim


@contextlib.contextmanager
def counted_waves() -> Iterator[list[int]]:
    """Count the simulator's waves (one block access to each of a group of sets) meanwhile;
    the count is the list's one element."""
    real = cachesim.wave
    count = [0]

    def wave(*args: Any) -> Any:
        count[0] += 1
        return real(*args)

    cachesim.wave = wave  # type: ignore[assignment]
    try:
        yield count
    finally:
        cachesim.wave = real  # type: ignore[assignment]
