"""The memory planning algorithm of the CSE599G1 lecture on memory optimisation: storage tags
drawn from a box of free tags, kernel by kernel.

The lecture (University of Washington, 2017, "Memory Planning Algorithm", steps 1 to 5) walks
the graph in execution order. Each new value gets a *tag*, a piece of memory: one taken from
the box of free tags when one fits, else a new one; when a value's last consumer has run, its
tag goes back in the box for later values to reuse. A value written in place keeps the tag of
the input it overwrites (the lecture's step 5), which callers express by handing in one buffer
for both (:func:`tmsim.layout.reuse.transient_buffers`). Tags are never split or merged, so
the memory is the sum of the tags' sizes, each the largest buffer it ever held.

Which free tag a request takes is NNVM's rule (``GraphAllocator::Request`` in
``src/pass/plan_memory.cc`` of dmlc/nnvm, the pass MXNet runs), since the lecture does not
say: among the free tags no larger than ``match_range`` times the request, the smallest that
holds it (the earliest freed of equal ones); else, among those of at least the request over
``match_range`` (integer division), the largest smaller one (the latest freed of equal ones),
which then grows to the request; else a new tag. NNVM's ``match_range`` is 16.

At each kernel the buffers that start there are given tags first, largest first (NNVM's order
for a kernel's outputs; by index on a tie), then the buffers whose last kernel it is go back
in the box, by index: a buffer's tag is held over its whole inclusive live range, so two
buffers live at one kernel never share a tag.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmsim.errors import TmsimError

IntArray = npt.NDArray[np.int64]

#: NNVM's default ``match_range`` (its ``NNVM_EXEC_MATCH_RANGE``).
DEFAULT_MATCH_RANGE = 16


@dataclass(frozen=True)
class Tags:
    """Buffer ``b`` holds tag ``tag_of[b]``; tag ``t`` is ``tag_bytes[t]`` bytes (the largest
    buffer it held). Tags are numbered in the order they were created."""

    tag_of: IntArray
    tag_bytes: IntArray

    @property
    def pool_bytes(self) -> int:
        """The memory the tags take: the sum of their sizes."""
        return int(self.tag_bytes.sum())

    @property
    def offsets_bytes(self) -> IntArray:
        """Each buffer's offset when the tags are laid end to end in their order."""
        starts = np.concatenate(([0], np.cumsum(self.tag_bytes)[:-1])).astype(np.int64)
        return starts[self.tag_of] if self.tag_of.size else np.zeros(0, dtype=np.int64)


def plan_tags(
    sizes_bytes: npt.ArrayLike,
    first: npt.ArrayLike,
    last: npt.ArrayLike,
    match_range: int = DEFAULT_MATCH_RANGE,
) -> Tags:
    """Tags for buffers of ``sizes_bytes`` live over kernels ``[first, last]`` (inclusive), by
    the algorithm of the module's docstring.

    Raises :class:`~tmsim.errors.TmsimError` for arrays of different lengths, a non-positive
    size, a negative first kernel, ``first > last``, or a ``match_range`` below 1 (1 reuses a
    free tag of exactly the requested size only).
    """
    if isinstance(match_range, bool) or not isinstance(match_range, int) or match_range < 1:
        raise TmsimError(f"match_range must be a whole number >= 1, got {match_range!r}")
    size = np.asarray(sizes_bytes, dtype=np.int64)
    lo = np.asarray(first, dtype=np.int64)
    hi = np.asarray(last, dtype=np.int64)
    if not (size.shape == lo.shape == hi.shape) or size.ndim != 1:
        raise TmsimError("sizes, first and last must be 1-D arrays of one length")
    if np.any(size <= 0):
        raise TmsimError(f"buffer {int(np.argmax(size <= 0))}: size must be positive")
    if np.any(lo < 0):
        raise TmsimError(f"buffer {int(np.argmax(lo < 0))}: first kernel is negative")
    if np.any(lo > hi):
        raise TmsimError(f"buffer {int(np.argmax(lo > hi))}: first kernel after last kernel")
    n = size.size
    tag_of = np.full(n, -1, dtype=np.int64)
    tag_bytes: list[int] = []
    # The box: (tag size, release number, tag), sorted; the release number orders equal sizes.
    box: list[tuple[int, int, int]] = []
    released = 0
    starts = np.lexsort((np.arange(n), -size, lo))
    ends = np.lexsort((np.arange(n), hi))
    s = e = 0
    for k in np.unique(np.concatenate((lo, hi))):
        while s < n and lo[starts[s]] == k:
            b = int(starts[s])
            tag_of[b] = _request(box, tag_bytes, int(size[b]), match_range)
            s += 1
        while e < n and hi[ends[e]] == k:
            t = int(tag_of[ends[e]])
            bisect.insort(box, (tag_bytes[t], released, t))
            released += 1
            e += 1
    return Tags(tag_of, np.asarray(tag_bytes, dtype=np.int64))


def _request(box: list[tuple[int, int, int]], tag_bytes: list[int], need: int, scale: int) -> int:
    """Take a tag for ``need`` bytes out of ``box`` (growing it if smaller), or make one."""
    mid = bisect.bisect_left(box, (need, -1, -1))
    if mid < len(box) and box[mid][0] <= need * scale:
        _, _, tag = box.pop(mid)
        return tag
    if mid > 0 and box[mid - 1][0] >= need // scale:
        _, _, tag = box.pop(mid - 1)
        tag_bytes[tag] = need
        return tag
    tag_bytes.append(need)
    return len(tag_bytes) - 1


__all__ = ["DEFAULT_MATCH_RANGE", "Tags", "plan_tags"]
