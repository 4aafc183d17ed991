"""Bytes held over inclusive kernel ranges, by difference arrays (O(n + kernels))."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


def occupancy(
    first: npt.ArrayLike, last: npt.ArrayLike, sizes_bytes: npt.ArrayLike, n_kernels: int
) -> IntArray:
    """Bytes held at each of ``n_kernels`` kernels by items of ``sizes_bytes`` held from kernel
    ``first[i]`` to ``last[i]`` inclusive (ranges must lie in ``[0, n_kernels)``)."""
    lo = np.asarray(first, dtype=np.int64)
    hi = np.asarray(last, dtype=np.int64)
    size = np.asarray(sizes_bytes, dtype=np.int64)
    delta = np.zeros(n_kernels + 1, dtype=np.int64)
    np.add.at(delta, lo, size)
    np.add.at(delta, hi + 1, -size)
    return np.cumsum(delta[:-1])
