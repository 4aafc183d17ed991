"""Recomputation in the placement MILP: which tensors may be dropped and made again, where, and
what a recompute needs and costs (the ``-rc`` formulations and ``remat``).

The network of each tensor gains a state with no copy (``gone``, reached by a *discard* that frees
its constrained tiers without a copy) and a *recompute* edge into the fastest tier
(:mod:`~tmsim.planners.milp.formulation.states`): the tensor's producer runs again just before a
kernel, after that kernel's synchronous copies, as the plan format defines it
(:mod:`tmsim.plans.values`). Its time, the producer's kernel time with every operand on the fastest
tier (:meth:`tmsim.cost.CostModel.recompute_s`), is added to the step; its inputs must then hold a
valid copy on the fastest tier (one row per recompute and input).

Which tensors: a tensor is a *candidate* when a forward kernel that updates nothing in place
produces it and no kernel updates it (so running the producer again gives the same value).
Weights, optimizer state and the step's inputs have no producer; tensors of the backward pass
and the update are left out: they live from their producer to a use soon after (a gradient
of the weights to the update), and running backward work again to keep fewer of them is what
the forward activations, which live across the whole backward pass, do far better.

Where: a candidate ``t`` with producer ``p`` may be made again at a *point*, a kernel ``k > p``:

- level 1: a kernel that uses ``t``, unless ``t`` was used (or made) at ``k - 1`` already:
  dropping it for no kernel in between frees nothing;
- level ``l + 1`` (up to ``depth``): ``k`` itself for an input ``u`` of a producer that may run
  again at ``k`` at level ``l``, when ``u`` is a candidate: a chain of producers run again one
  after another before the kernel, in step order. ``depth = 1`` is AutoTM's flows with one
  level of recomputation (an input must be stored, not itself recomputed); each level adds
  gadgets for the inputs of the level before, so the model grows with the depth.

Each input ``u`` of a producer that may run again at ``k`` gets a gadget at ``k`` (a *support*
gadget where it has none), where the model reads whether ``u`` is on the fastest tier then: at a
kernel with synchronous copies, in its state during the kernel (a synchronous fetch at ``k``
comes first); beside an asynchronous window kernel, in its state before it (an asynchronous
fetch lands after the kernel), or made again there itself. A point is left out when an input of
its producer is updated in place between the producer and the point, since the producer would
then read other data. A support gadget past the input's last use extends the input's network:
it may then be discarded at or after its last use, so that keeping it for nothing costs
nothing.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.candidates import Recomputable
from tmsim.planners.milp.formulation.gadgets import Formulation, GadgetKind, Gadgets
from tmsim.planners.milp.formulation.states import Catalogue, Kind

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def restrict_edges(
    allowed: BoolArray,
    cat: Catalogue,
    g: Gadgets,
    formulation: Formulation,
    rec: Recomputable | None,
) -> None:
    """Clear, in ``allowed`` [n_gadgets, n_edges], the edges of recomputation where they may
    not be: all of them without ``rec``; else a recompute except at a point, a discard before
    the tensor's ``discard_from``, and any edge into or out of ``gone`` for a tensor that is
    never discarded; in a formulation without copies a recompute except from ``gone``; and in
    ``remat`` every edge touching a tier other than the fastest."""
    kind = cat.edge_kind
    rc = kind == Kind.RECOMPUTE
    discard = kind == Kind.DISCARD
    gone = (cat.edge_src == cat.gone) | (cat.edge_dst == cat.gone)
    if cat.gone < 0 or rec is None:
        allowed[:, rc | discard | gone] = False
        return
    allowed[np.ix_(~g.may_recompute, rc)] = False
    early = g.kernel < rec.discard_from[g.tensor]
    # a discard beside a window kernel frees later what the gadget before could free
    allowed[np.ix_(early | (g.kind == GadgetKind.WINDOW), discard)] = False
    never = rec.discard_from[g.tensor] >= rec.n_kernels
    allowed[np.ix_(never, gone | rc)] = False
    if formulation.moves is Formulation.STATIC:
        allowed[:, rc & (cat.edge_src != cat.gone)] = False
    if formulation.fast_only:
        slow = np.asarray(cat.member[:, 1:].any(axis=1), dtype=bool)
        allowed[:, slow[cat.edge_src] | slow[cat.edge_dst]] = False


def recompute_seconds(
    cost: CostModel, g: Gadgets, edge_gadget: IntArray, is_rc: BoolArray
) -> FloatArray:
    """Per edge variable: the seconds of running its tensor's producer again with every
    operand on the fastest tier where the edge is a recompute (``is_rc``), else 0."""
    out = np.zeros(edge_gadget.size)
    cols = np.flatnonzero(is_rc)
    if cols.size == 0:
        return out
    producers = cost.graph.producers[g.tensor[edge_gadget[cols]]]
    ptr = cost.op_ptr
    memo: dict[int, float] = {}
    for i, p in zip(cols.tolist(), producers.tolist(), strict=True):
        if p not in memo:
            zeros = np.zeros(int(ptr[p + 1] - ptr[p]), dtype=np.int64)
            memo[p] = cost.recompute_s(p, zeros)
        out[i] = memo[p]
    return out


def recompute_rows(
    cost: CostModel,
    cat: Catalogue,
    g: Gadgets,
    edge_gadget: IntArray,
    edge_type: IntArray,
    edge_index: IntArray,
    count: int,
) -> sp.csr_matrix:
    """``A @ x <= 0``: one row per recompute variable and input of its producer, the
    recompute less the edges at the input's gadget at that kernel that leave a valid copy on
    the fastest tier for it to read (see the module documentation). ``edge_gadget`` /
    ``edge_type`` / ``edge_index`` are the model's edge variables; ``count`` its columns.
    Raises ``ValueError`` if an input has no gadget there (the gadgets do not match the
    points)."""
    graph = cost.graph
    n_k = len(graph.kernels)
    kind = cat.edge_kind
    cols = np.flatnonzero(kind[edge_type] == Kind.RECOMPUTE)
    has0 = cat.member[:, 0]
    pre = np.isin(kind, (Kind.STAY, Kind.FETCH, Kind.INVAL, Kind.FETCH_INVAL))
    sync_ok = np.flatnonzero(pre & has0[cat.edge_dst])
    async_ok = np.flatnonzero(pre & has0[cat.edge_src])
    made = np.flatnonzero(kind == Kind.RECOMPUTE)
    key = g.tensor * (n_k + 1) + g.kernel
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    rows: list[int] = []
    columns: list[int] = []
    values: list[float] = []
    row = 0
    for col in cols.tolist():
        gadget = int(edge_gadget[col])
        t, k = int(g.tensor[gadget]), int(g.kernel[gadget])
        p = int(graph.producers[t])
        for u in (index[name] for name in dict.fromkeys(graph.kernels[p].inputs)):
            at = int(np.searchsorted(key, u * (n_k + 1) + k))
            if at >= key.size or key[at] != u * (n_k + 1) + k:
                raise ValueError(f"input {u} of a recompute at kernel {k} has no gadget there")
            ok = async_ok if g.kind[at] == GadgetKind.WINDOW else sync_ok
            edges = edge_index[at, np.concatenate((ok, made))]
            edges = edges[edges >= 0]
            rows += [row] * (1 + edges.size)
            columns += [col, *edges.tolist()]
            values += [1.0] + [-1.0] * edges.size
            row += 1
    return sp.csr_matrix((values, (rows, columns)), shape=(row, count))


__all__ = ["recompute_rows", "recompute_seconds", "restrict_edges"]
