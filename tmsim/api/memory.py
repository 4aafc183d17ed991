"""Memory planning as the CSE599G1 lecture on memory optimisation teaches it (University of
Washington, 2017): a training step's memory with no reuse, with in-place updates where the
consumer is the last user, with the sharing of dead buffers, and with both.

:func:`memory_reuse` gives, for each of the four schemes, the liveness lower bound, the pool
of each static allocator and the memory of the lecture's own tag algorithm, as a
:class:`~tmsim.layout.reuse.MemoryReuse` (:mod:`tmsim.layout.reuse` says what counts: weights
and optimizer state in a region of their own in every scheme, every size aligned).
"""

from __future__ import annotations

from tmsim.api.inputs import expect
from tmsim.errors import TmsimError
from tmsim.layout.addresses import DEFAULT_ALIGNMENT_BYTES
from tmsim.layout.reuse import MemoryReuse
from tmsim.layout.reuse import memory_reuse as plan_reuse
from tmsim.workload.graph import Graph


def memory_reuse(graph: Graph, *, alignment_bytes: int = DEFAULT_ALIGNMENT_BYTES) -> MemoryReuse:
    """``graph``'s memory under each reuse scheme (``no-reuse``, ``in-place``, ``shared``,
    ``shared+in-place``), every size rounded up to ``alignment_bytes`` (default 64): per
    scheme its buffers, ``bound_bytes`` (the peak over kernels of the bytes live there, which
    no layout beats), ``pools_bytes`` (each allocator strategy's pool), ``pool_bytes`` (the
    smallest) and ``tags_bytes`` (the lecture's tag algorithm); and the in-place pairs.

    Raises :class:`TmsimError` for a ``graph`` that is not a :class:`tmsim.Graph` and an
    ``alignment_bytes`` that is not a positive whole number.

    >>> import tmsim
    >>> g = tmsim.graph("vgg19", batch=2)
    >>> reuse = tmsim.memory_reuse(g, alignment_bytes=1)
    >>> [s.scheme.value for s in reuse.schemes]
    ['no-reuse', 'in-place', 'shared', 'shared+in-place']
    >>> reuse.scheme("no-reuse").bound_bytes == int(g.sizes_bytes.sum())
    True
    >>> reuse.scheme("shared").bound_bytes == g.peak_live_bytes
    True
    >>> len(reuse.in_place), reuse.in_place[0].kernel
    (38, 'block1/relu1.fwd')
    >>> best = reuse.scheme("shared+in-place")
    >>> best.bound_bytes <= best.pool_bytes <= best.tags_bytes
    True
    """
    expect(graph, Graph, "graph", "a Graph (from tmsim.graph)")
    expect(alignment_bytes, int, "alignment_bytes", "a whole number of bytes >= 1")
    if alignment_bytes < 1:
        raise TmsimError(
            f"alignment_bytes must be a whole number of bytes >= 1, got {alignment_bytes}"
        )
    return plan_reuse(graph, alignment_bytes)


__all__ = ["MemoryReuse", "memory_reuse"]
