"""How much memory a training step needs without reuse, with the sharing of dead buffers, with
in-place updates and with both: the patterns of static memory planning.

The patterns are those of the CSE599G1 lecture on memory optimisation (University of
Washington, 2017; the same planner as MXNet's): allocate every intermediate result its own
memory (space linear in the number of operations); *normal sharing*, where a buffer whose
value is no longer needed is recycled for a later one; *in-place*, where an operation stores
its result in its input, which "we can only do if the result op is the only consumer of the
current value".

Four schemes, each a set of buffers with inclusive kernel live ranges:

- :attr:`Scheme.NO_REUSE`: every tensor has its own buffer for the whole step;
- :attr:`Scheme.IN_PLACE`: each output written in place (:func:`in_place_pairs`) shares its
  input's buffer; otherwise as no reuse: every buffer is held for the whole step;
- :attr:`Scheme.SHARED`: every tensor has its own buffer, live over its live range
  (:attr:`tmsim.workload.graph.Graph.live_first` to ``live_last``), and buffers never live at
  the same kernel may share addresses;
- :attr:`Scheme.SHARED_IN_PLACE`: both: the buffers of the in-place scheme, each live from
  the first kernel of its tensors to the last of them, shared as in the shared scheme.

For each scheme, the *liveness lower bound* is the peak over kernels of the bytes of the
buffers live there: no layout can use less. The *pool* is what the static allocator
:func:`tmsim.layout.addresses.plan_memory` gives with each strategy of
:data:`~tmsim.layout.addresses.SMALLEST_OF`; the best is the smallest (the first listed on a tie).
Beside them, the lecture's own allocation algorithm (:func:`tmsim.layout.tags.plan_tags`:
whole storage tags from a box of free ones, never split) gives the memory a framework that
plans as the lecture teaches would take.

Persistent tensors (weights and optimizer state, :data:`PERSISTENT_ROLES`) outlive the step:
they keep their own buffers in every scheme, are never shared nor overwritten in place, and
are laid out in a region of their own beside the pool of the other buffers, as frameworks keep
parameters apart from activations. Every number here includes them (the region's size is
:attr:`MemoryReuse.persistent_bytes`), so the shared scheme's bound is the graph's peak live
bytes. Graph inputs (the data batch, its labels) are buffers like activations: live from
kernel 0 to their last user, then free for reuse, and open to being overwritten in place.

Every size is rounded up to ``alignment_bytes`` first, so the bound, the pools and the sum
without reuse count the same bytes (with ``alignment_bytes=1`` they count exact bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from tmsim.errors import TmsimError
from tmsim.intervals import occupancy
from tmsim.layout.addresses import DEFAULT_ALIGNMENT_BYTES, SMALLEST_OF, Strategy, plan_memory
from tmsim.layout.tags import plan_tags
from tmsim.workload.graph import PERSISTENT_ROLES, Graph, Phase

IntArray = npt.NDArray[np.int64]


class Scheme(StrEnum):
    """Which reuse a memory plan allows (see the module's docstring)."""

    NO_REUSE = "no-reuse"
    IN_PLACE = "in-place"
    SHARED = "shared"
    SHARED_IN_PLACE = "shared+in-place"


#: Which kernels may write an output into an input's buffer, by the op and phase the graph
#: records: ``(op, phase) -> ((input position, output position), ...)`` in order of
#: preference. Each is an element-wise map once any reduction over its inputs is done (the
#: batch-norm statistics, the sums of its backward pass, the softmax's row maximum and sum),
#: so the output's element ``i`` can replace the input's element ``i``:
#:
#: - ``relu``: ``y = max(x, 0)`` into ``x``;
#: - ``add``: ``a + b`` into either summand; ``accumulate``: the sum of two partial gradients
#:   into either;
#: - ``batch_norm``: ``y`` (scale and shift of the normalised ``x``) into ``x``;
#: - ``softmax_cross_entropy`` forward: the probabilities (output 1) into the logits;
#:   backward: ``d_logits = probs - onehot(labels)`` into the probabilities;
#: - ``relu_backward``: ``dx = dy * (y > 0)`` into ``dy`` or ``y``;
#: - ``batch_norm_backward``: ``dx`` into ``dy`` or the saved input ``x``.
#:
#: Not in place: convolutions, linear layers and their backward kernels (an output element
#: reads a window or a row of the input), pooling (the output has another size), ``concat``
#: and ``concat_backward`` (copies between buffers of different sizes; making them views of
#: one buffer is a different optimisation), ``sgd_momentum`` (it already updates the
#: persistent tensors in place), and every op this table does not name (a graph file's ops).
IN_PLACE_RULES: Mapping[tuple[str, Phase], tuple[tuple[int, int], ...]] = {
    ("relu", Phase.FORWARD): ((0, 0),),
    ("add", Phase.FORWARD): ((0, 0), (1, 0)),
    ("batch_norm", Phase.FORWARD): ((0, 0),),
    ("softmax_cross_entropy", Phase.FORWARD): ((0, 1),),
    ("softmax_cross_entropy", Phase.BACKWARD): ((0, 0),),
    ("relu_backward", Phase.BACKWARD): ((0, 0), (1, 0)),
    ("batch_norm_backward", Phase.BACKWARD): ((0, 0), (1, 0)),
    ("accumulate", Phase.BACKWARD): ((0, 0), (1, 0)),
}


@dataclass(frozen=True, slots=True)
class InPlace:
    """Kernel ``kernel`` writes its output tensor ``output`` into the buffer of its input
    tensor ``input`` (all three by name)."""

    kernel: str
    input: str
    output: str


@dataclass(frozen=True)
class Buffers:
    """The non-persistent buffers of a scheme: buffer ``b`` holds ``sizes_bytes[b]`` bytes
    (aligned) from kernel ``first[b]`` to ``last[b]`` inclusive; ``buffer_of[t]`` is the
    buffer of tensor ``t`` (indexed like ``Graph.tensors``), ``-1`` for a persistent one."""

    sizes_bytes: IntArray
    first: IntArray
    last: IntArray
    buffer_of: IntArray


@dataclass(frozen=True)
class SchemeMemory:
    """One scheme's memory, persistent region included: ``buffers`` (persistent ones
    included), ``bound_bytes`` (the liveness lower bound), ``pools_bytes`` (the pool each
    allocator strategy gives) and ``tags_bytes`` (the memory of the lecture's tags,
    :func:`tmsim.layout.tags.plan_tags`). Every pool and ``tags_bytes`` is at least
    ``bound_bytes``."""

    scheme: Scheme
    buffers: int
    bound_bytes: int
    pools_bytes: Mapping[Strategy, int]
    tags_bytes: int

    @property
    def strategy(self) -> Strategy:
        """The strategy of the smallest pool (the first of :data:`SMALLEST_OF` on a tie)."""
        return min(self.pools_bytes, key=lambda s: (self.pools_bytes[s], SMALLEST_OF.index(s)))

    @property
    def pool_bytes(self) -> int:
        """The smallest pool of any strategy."""
        return self.pools_bytes[self.strategy]


@dataclass(frozen=True)
class MemoryReuse:
    """A graph's memory under each scheme, in the order of :class:`Scheme`.

    ``persistent_bytes``: the aligned bytes of weights and optimizer state (in every
    scheme's numbers); ``in_place``: the outputs the in-place schemes write into an input's
    buffer, in kernel order.
    """

    graph: str
    alignment_bytes: int
    persistent_bytes: int
    schemes: tuple[SchemeMemory, ...]
    in_place: tuple[InPlace, ...]

    def scheme(self, scheme: Scheme | str) -> SchemeMemory:
        """The entry of ``scheme``; raises ``ValueError`` for a name that is not a scheme."""
        wanted = Scheme(scheme)
        return next(s for s in self.schemes if s.scheme is wanted)


#: The schemes whose buffers are merged by in-place writes.
_MERGED = frozenset({Scheme.IN_PLACE, Scheme.SHARED_IN_PLACE})


def _aligned(graph: Graph, alignment_bytes: int) -> IntArray:
    return -(-graph.sizes_bytes // alignment_bytes) * alignment_bytes


def _persistent(graph: Graph) -> npt.NDArray[np.bool_]:
    return np.fromiter(
        (t.role in PERSISTENT_ROLES for t in graph.tensors), bool, len(graph.tensors)
    )


def in_place_pairs(graph: Graph) -> tuple[InPlace, ...]:
    """Every output that may be written into an input's buffer, in kernel order.

    Kernel ``k`` writes output ``o`` into input ``i`` when: its ``(op, phase)`` lists the
    pair of their positions in :data:`IN_PLACE_RULES`; ``i`` is not persistent; ``k`` is the
    last kernel that reads ``i`` (in a static schedule every earlier user has finished, so
    ``k`` is its only consumer still to come: the lecture's condition, "the only consumer of
    the current value", with its algorithm's reference count of the consumers yet to run, as
    NNVM's ``PlanMemory`` checks it); ``i`` and ``o`` have
    the same size in bytes and the same dtype (so the merged buffer is no larger than
    either, and no kernel's live bytes can rise); and neither ``i`` nor ``o`` is in another
    pair of ``k`` (the first pair in the rule's order wins). An input may be a tensor that
    itself took an earlier tensor's buffer: chains are allowed, as the lecture's example
    does (``exp(a * b + 3)``: the add and the exp both in place).
    """
    persistent = _persistent(graph)
    last = graph.live_last
    out: list[InPlace] = []
    for k, kern in enumerate(graph.kernels):
        rules = IN_PLACE_RULES.get((kern.op, kern.phase), ())
        taken_in: set[str] = set()
        taken_out: set[str] = set()
        for i_pos, o_pos in rules:
            if i_pos >= len(kern.inputs) or o_pos >= len(kern.outputs):
                continue
            src, dst = kern.inputs[i_pos], kern.outputs[o_pos]
            if src in taken_in or dst in taken_out:
                continue
            s, d = graph.tensor_index(src), graph.tensor_index(dst)
            a, b = graph.tensors[s], graph.tensors[d]
            if persistent[s] or int(last[s]) != k:
                continue
            if a.size_bytes != b.size_bytes or a.dtype != b.dtype:
                continue
            taken_in.add(src)
            taken_out.add(dst)
            out.append(InPlace(kern.name, src, dst))
    return tuple(out)


def transient_buffers(
    graph: Graph,
    in_place: tuple[InPlace, ...] = (),
    alignment_bytes: int = DEFAULT_ALIGNMENT_BYTES,
) -> Buffers:
    """The non-persistent buffers of ``graph``: one per tensor over its live range, except
    that each output of ``in_place`` (pairs of :func:`in_place_pairs`, in any order) shares
    its input's buffer, live from the first of them to the last, as large as the largest.
    Sizes are rounded up to ``alignment_bytes``. Raises ``KeyError`` for a pair naming a
    tensor ``graph`` lacks and :class:`~tmsim.errors.TmsimError` for a pair with a
    persistent tensor, whose kernel does not produce its output or is not the last to read
    its input, or that writes over an input or an output a second time."""
    n = len(graph.tensors)
    persistent = _persistent(graph)
    aligned = _aligned(graph, alignment_bytes)
    # Each tensor starts as its own buffer; an in-place output joins its input's buffer,
    # which may itself have joined an earlier one (a chain): follow the links to the root.
    parent = np.arange(n, dtype=np.int64)
    overwritten: set[int] = set()
    for pair in in_place:
        i, o = graph.tensor_index(pair.input), graph.tensor_index(pair.output)
        if persistent[i] or persistent[o]:
            raise TmsimError(f"in-place pair {pair}: persistent tensors keep their own buffers")
        k = int(graph.producers[o])
        if (
            k < 0
            or graph.kernels[k].name != pair.kernel
            or pair.input not in graph.kernels[k].inputs
        ):
            raise TmsimError(
                f"in-place pair {pair}: kernel {pair.kernel!r} does not read "
                f"{pair.input!r} and produce {pair.output!r}"
            )
        if int(graph.live_last[i]) != k:
            raise TmsimError(f"in-place pair {pair}: {pair.input!r} is read after it")
        if parent[o] != o or i in overwritten:
            raise TmsimError(f"in-place pair {pair}: a tensor in it is in another pair already")
        parent[o] = i
        overwritten.add(i)
    owner = parent.copy()
    # Each link points to a tensor read by the output's producer, so to an earlier one: no
    # cycle, and halving the distance to the root each pass ends within log2(n) + 1 passes.
    for _ in range(n):
        step = owner[owner]
        if np.array_equal(step, owner):
            break
        owner = step
    kept = np.flatnonzero(~persistent)
    roots, buffer_of_kept = np.unique(owner[kept], return_inverse=True)
    nb = roots.size
    first = np.full(nb, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(nb, -1, dtype=np.int64)
    size = np.zeros(nb, dtype=np.int64)
    np.minimum.at(first, buffer_of_kept, graph.live_first[kept])
    np.maximum.at(last, buffer_of_kept, graph.live_last[kept])
    np.maximum.at(size, buffer_of_kept, aligned[kept])
    buffer_of = np.full(n, -1, dtype=np.int64)
    buffer_of[kept] = buffer_of_kept
    return Buffers(size, first, last, buffer_of)


def _scheme(
    scheme: Scheme, buffers: Buffers, n_kernels: int, persistent: int, n_persistent: int
) -> SchemeMemory:
    count = buffers.sizes_bytes.size + n_persistent
    if scheme in (Scheme.NO_REUSE, Scheme.IN_PLACE) or buffers.sizes_bytes.size == 0:
        # Every buffer live at every kernel: any allocator stacks them, the bound is their sum.
        total = persistent + int(buffers.sizes_bytes.sum())
        return SchemeMemory(scheme, count, total, dict.fromkeys(SMALLEST_OF, total), total)
    sizes, first, last = buffers.sizes_bytes, buffers.first, buffers.last
    peak = int(occupancy(first, last, sizes, n_kernels).max())
    # The sizes are aligned already; alignment 1 keeps the allocator from padding them again.
    pools = {s: persistent + plan_memory(sizes, first, last, s, 1).pool_bytes for s in SMALLEST_OF}
    tags = persistent + plan_tags(sizes, first, last).pool_bytes
    return SchemeMemory(scheme, count, persistent + peak, pools, tags)


def memory_reuse(graph: Graph, alignment_bytes: int = DEFAULT_ALIGNMENT_BYTES) -> MemoryReuse:
    """``graph``'s memory under every :class:`Scheme`, each size rounded up to
    ``alignment_bytes`` (see the module's docstring for what counts). Raises
    :class:`~tmsim.errors.TmsimError` unless ``alignment_bytes`` is a positive integer.

    In time: per sharing scheme, three runs of the allocator (O(buffers^2) element work
    each) and one of the lecture's tags (O(buffers^2) at worst, in list moves); one to two
    seconds for each of the largest zoo graphs (VGG416, DenseNet-264: 4,172 and 5,042
    tensors).
    """
    if isinstance(alignment_bytes, bool) or not isinstance(alignment_bytes, int):
        raise TmsimError(
            f"alignment_bytes must be a whole number of bytes, got {alignment_bytes!r}"
        )
    if alignment_bytes <= 0:
        raise TmsimError(f"alignment_bytes must be positive, got {alignment_bytes}")
    persistent = _persistent(graph)
    region = int(_aligned(graph, alignment_bytes)[persistent].sum())
    n_kernels, n_persistent = len(graph.kernels), int(persistent.sum())
    pairs = in_place_pairs(graph)
    own = transient_buffers(graph, (), alignment_bytes)
    merged = transient_buffers(graph, pairs, alignment_bytes)
    schemes = tuple(
        _scheme(s, merged if s in _MERGED else own, n_kernels, region, n_persistent) for s in Scheme
    )
    return MemoryReuse(graph.name, alignment_bytes, region, schemes, pairs)


__all__ = [
    "IN_PLACE_RULES",
    "Buffers",
    "InPlace",
    "MemoryReuse",
    "Scheme",
    "SchemeMemory",
    "in_place_pairs",
    "memory_reuse",
    "transient_buffers",
]
