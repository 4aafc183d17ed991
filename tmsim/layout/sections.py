"""Time cut into sections, and sums, maxima and minima over buffers' spans of sections.

Buffers live over inclusive kernel ranges ``[first, last]``. Cutting time at every ``first``
and every ``last + 1`` gives *sections*: runs of kernels where the same buffers are live.
Buffer ``i`` spans sections ``[start[i], stop[i])``. Everything here is vectorized (numpy)
and exact in int64.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

#: What :func:`cover_min` gives a section no span covers.
NONE = np.iinfo(np.int64).max
#: Integers below this are exact in float64.
EXACT_FLOAT = 1 << 53


def sections(first: IntArray, last: IntArray) -> tuple[IntArray, IntArray, int]:
    """``(start, stop, count)``: the sections each buffer spans and how many there are."""
    points = np.unique(np.concatenate((first, last + 1)))
    start = np.searchsorted(points, first).astype(np.int64)
    stop = np.searchsorted(points, last + 1).astype(np.int64)
    return start, stop, int(points.size) - 1


def span_sums(start: IntArray, stop: IntArray, values: IntArray, length: int) -> IntArray:
    """Per index ``j`` in ``[0, length)``, the sum of ``values[i]`` over ``start[i] <= j <
    stop[i]`` (empty spans add nothing)."""
    delta = np.zeros(length + 1, dtype=np.int64)
    keep = stop > start
    np.add.at(delta, start[keep], values[keep])
    np.add.at(delta, stop[keep], -values[keep])
    return np.cumsum(delta[:-1])


def span_max(values: IntArray, start: IntArray, stop: IntArray) -> IntArray:
    """``max(values[start[i]:stop[i]])`` for every ``i`` (spans must not be empty), from a
    sparse table of maxima over power-of-two blocks."""
    table = [values]
    while (1 << len(table)) <= values.size:
        prev, step = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-step], prev[step:]))
    level = floor_log2(stop - start)
    out = np.empty(start.size, dtype=np.int64)
    for lv in np.unique(level):
        sel = level == lv
        row = table[int(lv)]
        out[sel] = np.maximum(row[start[sel]], row[stop[sel] - (1 << lv)])
    return out


def cover_min(
    start: IntArray,
    stop: IntArray,
    values: IntArray,
    length: int,
    log2: IntArray | None = None,
) -> IntArray:
    """Per index ``j`` in ``[0, length)``, the least ``values[i]`` over ``start[i] <= j <
    stop[i]`` (spans must not be empty), :data:`NONE` where no span covers ``j``.
    ``log2``: :func:`floor_log2` of every span length, indexed by the length, where the
    caller keeps such a table (it is computed here otherwise).

    Each span is the union of two blocks of one power-of-two length; each block's value is
    written at its level, and levels are pushed down into the halves below them.
    """
    if start.size == 0:
        return np.full(length, NONE, dtype=np.int64)
    level = floor_log2(stop - start) if log2 is None else log2[stop - start]
    levels = int(level.max()) + 1
    rows = np.full((levels, length), NONE, dtype=np.int64)
    at = level * length
    blocks = np.concatenate((at + start, at + stop - (1 << level)))
    np.minimum.at(rows.reshape(-1), blocks, np.concatenate((values, values)))
    for lv in range(levels - 1, 0, -1):
        half = 1 << (lv - 1)
        below, row = rows[lv - 1], rows[lv]
        np.minimum(below, row, out=below)
        np.minimum(below[half:], row[: length - half], out=below[half:])
    out: IntArray = rows[0]
    return out


def floor_log2(values: IntArray) -> IntArray:
    """``floor(log2(v))`` of positive int64 values, exactly (no rounding of large values)."""
    if values.size and int(values.max()) < EXACT_FLOAT:
        # v = m * 2**e with m in [0.5, 1): floor(log2(v)) = e - 1, exact as v is in float64
        return (np.frexp(values.astype(np.float64))[1] - 1).astype(np.int64)
    out = np.zeros(values.size, dtype=np.int64)
    v = values.copy()
    for shift in (32, 16, 8, 4, 2, 1):
        big = v >= (1 << shift)
        out[big] += shift
        v[big] >>= shift
    return out
