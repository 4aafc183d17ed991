"""Pages of a memory pool given to tiers in the order they are first touched.

An operating system's first-touch policy backs a page of virtual memory with a physical page
when a thread first touches it, from the first NUMA node (here: tier) in its order that has a
free page, and the page keeps that backing until it is freed. :func:`first_touch` applies it
to a pool that is never freed (the memory plan's pool, reused step after step): it walks the
touches in order, cuts each into pages of ``page_bytes``, and gives every page touched for the
first time to the first tier with room; :class:`PageMap` is the outcome, and
:meth:`PageMap.bytes_by_tier` splits any address range by the tiers of its pages.

Free of SimPy and of the graph, so that a small case can be checked by hand. Pages are counted
in ranges (never one array entry per page), so a pool of hundreds of gigabytes in 4 KiB pages
costs what its touches cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmsim.errors import TmsimError
from tmsim.sim.addresses import RangeSet

IntArray = npt.NDArray[np.int64]

#: Default page: the 4 KiB base page of x86-64 (a 2 MiB huge page is ``2 << 20``).
DEFAULT_PAGE_BYTES = 4096


@dataclass(frozen=True, eq=False)
class PageMap:
    """Which tier each touched page took (see the module documentation).

    ``page_bytes``: the page size. ``starts_page`` and ``ends_page``: per tier, in the order of
    the ``tier_pages`` given to :func:`first_touch`, the sorted, disjoint half-open page ranges
    ``[start, end)`` that tier took (page ``p`` covers bytes ``[p * page_bytes, (p + 1) *
    page_bytes)``).
    """

    page_bytes: int
    starts_page: tuple[IntArray, ...]
    ends_page: tuple[IntArray, ...]

    @property
    def pages(self) -> tuple[int, ...]:
        """Pages each tier took."""
        return tuple(
            int((e - s).sum()) for s, e in zip(self.starts_page, self.ends_page, strict=True)
        )

    @property
    def touched_pages(self) -> int:
        """Pages touched (and given to some tier)."""
        return sum(self.pages)

    def bytes_by_tier(self, starts_bytes: npt.ArrayLike, lengths_bytes: npt.ArrayLike) -> IntArray:
        """Bytes of each range ``[start, start + length)`` [n] on the pages of each tier:
        [n, tiers], in the order of :attr:`pages`. A range's bytes on pages no touch reached
        are on no tier (the row then sums to less than its length)."""
        starts = np.asarray(starts_bytes, dtype=np.int64)
        ends = starts + np.asarray(lengths_bytes, dtype=np.int64)
        out = np.zeros((starts.size, len(self.starts_page)), dtype=np.int64)
        for i, (lo, hi) in enumerate(zip(self.starts_page, self.ends_page, strict=True)):
            lo_b, hi_b = lo * self.page_bytes, hi * self.page_bytes
            out[:, i] = _covered_below(ends, lo_b, hi_b) - _covered_below(starts, lo_b, hi_b)
        return out


def first_touch(
    starts_bytes: npt.ArrayLike,
    lengths_bytes: npt.ArrayLike,
    tier_pages: Sequence[int],
    page_bytes: int = DEFAULT_PAGE_BYTES,
) -> PageMap:
    """The pages of the touches ``[start, start + length)`` [n], taken in order, each page
    given at its first touch to the first tier of ``tier_pages`` (pages each tier may take,
    in the order tiers are tried) with a page left; within one touch, pages in increasing
    address order. Touches of no bytes touch nothing.

    Raises :class:`TmsimError` if ``page_bytes`` is not a positive integer, a count of
    ``tier_pages`` is negative, a touch has a negative start or length, or the touches reach
    more pages than the tiers take together (naming both counts).
    """
    if isinstance(page_bytes, bool) or not isinstance(page_bytes, int) or page_bytes <= 0:
        raise TmsimError(f"page_bytes must be a positive whole number, got {page_bytes!r}")
    room = [int(n) for n in tier_pages]
    if any(n < 0 for n in room):
        raise TmsimError(f"the pages each tier may take must be >= 0, got {room}")
    starts = np.asarray(starts_bytes, dtype=np.int64)
    lengths = np.asarray(lengths_bytes, dtype=np.int64)
    if starts.size and (starts.min() < 0 or lengths.min() < 0):
        raise TmsimError("first_touch: touches need a start and a length >= 0")
    first = starts // page_bytes
    last = -(-(starts + lengths) // page_bytes)  # one past the last page
    seen = RangeSet()
    new: list[tuple[int, int]] = []
    for a, e, n in zip(first.tolist(), last.tolist(), lengths.tolist(), strict=True):
        if n > 0:
            new += seen.add(a, e)
    lo = np.array([a for a, _ in new], dtype=np.int64)
    hi = np.array([e for _, e in new], dtype=np.int64)
    at = np.concatenate([[0], np.cumsum(hi - lo)])  # where each piece starts in the order
    if int(at[-1]) > sum(room):
        raise TmsimError(
            f"the touches reach {int(at[-1])} pages of {page_bytes} bytes; the tiers take "
            f"{sum(room)} together"
        )
    bounds = np.concatenate([[0], np.cumsum(room, dtype=np.int64)])
    starts_page, ends_page = [], []
    for i in range(len(room)):
        # each piece clipped to the tier's share [bounds[i], bounds[i + 1]) of the order
        a = np.maximum(at[:-1], bounds[i])
        e = np.minimum(at[1:], bounds[i + 1])
        keep = e > a
        s_page, e_page = lo[keep] + (a[keep] - at[:-1][keep]), lo[keep] + (e[keep] - at[:-1][keep])
        order = np.argsort(s_page, kind="stable")
        starts_page.append(s_page[order])
        ends_page.append(e_page[order])
    return PageMap(page_bytes, tuple(starts_page), tuple(ends_page))


def _covered_below(x: IntArray, lo: IntArray, hi: IntArray) -> IntArray:
    """Bytes of the sorted, disjoint ranges ``[lo, hi)`` below each address of ``x``."""
    if lo.size == 0:
        return np.zeros(x.size, dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(hi - lo)])
    i = np.searchsorted(lo, x, side="right") - 1  # the last range starting at or before x
    j = np.maximum(i, 0)
    inside = np.clip(x - lo[j], 0, hi[j] - lo[j])
    return np.where(i >= 0, before[j] + inside, 0).astype(np.int64)


__all__ = ["DEFAULT_PAGE_BYTES", "PageMap", "first_touch"]
