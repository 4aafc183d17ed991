"""Gadgets: the kernels at which each tensor may change location, per MILP formulation.

AutoTM's formulations differ only in where a tensor may move: *static*, at its producer
(where it is created in one tier and stays); *synchronous*, also at every user (blocking
copies just before or after the kernel); *asynchronous*, also at the kernels within a window
of a user (copies beside those kernels). A window gadget before a use may fetch the tensor,
one after a use (or its production) may evict it; a kernel within both windows may do both.

The formulations that also recompute (:mod:`tmsim.planners.milp.formulation.recompute`) add
*support* gadgets: an input of a producer that may run again at kernel ``k`` gets a gadget at ``k``,
where the model reads whether the input is in the fastest tier then, and a tensor that may be
recomputed gets its users as gadgets even where nothing else may move (``static-rc``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel

if TYPE_CHECKING:
    from tmsim.planners.milp.formulation.candidates import Recomputable

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Formulation(StrEnum):
    """Where tensors may move: AutoTM's three formulations, and the asynchronous one charging
    copies what interference makes them cost (``async-aware``: the same gadgets as
    ``async``; :mod:`tmsim.sim.beside`); and the formulations that may also drop a tensor and
    run its producer again before a later use: ``static-rc``, ``sync-rc``, ``async-rc`` (each
    moving as the formulation without ``-rc``) and ``remat`` (recomputation alone: every
    tensor in the fastest tier, nothing moves)."""

    STATIC = "static"
    SYNC = "sync"
    ASYNC = "async"
    ASYNC_AWARE = "async-aware"
    REMAT = "remat"
    STATIC_RC = "static-rc"
    SYNC_RC = "sync-rc"
    ASYNC_RC = "async-rc"

    @property
    def asynchronous(self) -> bool:
        """Whether copies may run beside kernels (window gadgets)."""
        return self.moves in (Formulation.ASYNC, Formulation.ASYNC_AWARE)

    @property
    def recomputes(self) -> bool:
        """Whether tensors may be dropped and recomputed."""
        return self in (
            Formulation.REMAT,
            Formulation.STATIC_RC,
            Formulation.SYNC_RC,
            Formulation.ASYNC_RC,
        )

    @property
    def moves(self) -> Formulation:
        """The formulation without recomputation whose copies this one may make (``static``
        for ``remat``: nothing moves)."""
        return _MOVES.get(self, self)

    @property
    def fast_only(self) -> bool:
        """Whether every tensor must stay in the fastest tier (``remat``)."""
        return self is Formulation.REMAT


_MOVES = {
    Formulation.REMAT: Formulation.STATIC,
    Formulation.STATIC_RC: Formulation.STATIC,
    Formulation.SYNC_RC: Formulation.SYNC,
    Formulation.ASYNC_RC: Formulation.ASYNC,
}


class GadgetKind(IntEnum):
    """What a gadget is: the producer, a user, a kernel in a user's window, or a kernel where
    a producer reading the tensor may run again (support, with recomputation)."""

    CREATE = 0
    USER = 1
    WINDOW = 2
    SUPPORT = 3


@dataclass(frozen=True)
class Gadgets:
    """Gadgets sorted by (tensor, kernel): ``tensor``, ``kernel``, ``kind``, ``updates``
    (the kernel updates the tensor in place), ``uses`` (the kernel reads or writes it),
    ``first``/``last`` (first/last gadget of its tensor), ``may_fetch``/``may_evict``
    (whether copies towards faster / slower tiers may happen there), ``may_recompute``
    (whether the tensor's producer may run again there, just before the kernel) and
    ``read_by_recompute`` (whether a producer that may run again there reads the tensor);
    the last two all False without recomputation."""

    tensor: IntArray
    kernel: IntArray
    kind: IntArray
    updates: BoolArray
    uses: BoolArray
    first: BoolArray
    last: BoolArray
    may_fetch: BoolArray
    may_evict: BoolArray
    may_recompute: BoolArray
    read_by_recompute: BoolArray

    def select(self, keep: BoolArray) -> Gadgets:
        """The gadgets ``keep`` (a mask, in order), with ``first``/``last`` set anew."""
        tensor = self.tensor[keep]
        first = np.ones(tensor.size, dtype=bool)
        first[1:] = tensor[1:] != tensor[:-1]
        last = np.ones(tensor.size, dtype=bool)
        last[:-1] = tensor[:-1] != tensor[1:]
        return Gadgets(
            tensor,
            self.kernel[keep],
            self.kind[keep],
            self.updates[keep],
            self.uses[keep],
            first,
            last,
            self.may_fetch[keep],
            self.may_evict[keep],
            self.may_recompute[keep],
            self.read_by_recompute[keep],
        )


_UPDATE, _FETCH_WINDOW, _EVICT_WINDOW, _RECOMPUTE, _READ = 1, 2, 4, 8, 16


def build_gadgets(
    cost: CostModel,
    formulation: Formulation,
    window: int,
    recompute: Recomputable | None = None,
) -> Gadgets:
    """The gadgets of every tensor under ``formulation`` (``window`` kernels for async).

    An asynchronous window gadget before a use may fetch the tensor, one after a use (or its
    production) may evict it; a kernel within both windows may do both. With ``recompute``
    (where the formulation recomputes): every user of a tensor that may be discarded is a
    gadget, the support gadgets are added, and ``may_recompute`` marks the points where the
    tensor may be made again (a support gadget at a kernel that also uses or is near a use of
    its tensor keeps that gadget's kind).
    """
    graph = cost.graph
    n_k = len(graph.kernels)
    op_t, op_k = cost.op_tensor, cost.op_kernel
    produced = graph.producers[op_t] == op_k
    # an operand both read and written is an in-place update (outputs are never inputs)
    upd = (cost.op_read_bytes > 0) & (cost.op_write_bytes > 0)
    static = formulation.moves is Formulation.STATIC
    keep = produced if static else np.ones(op_t.size, dtype=bool)
    if recompute is not None:
        keep = keep | recompute.at_users[op_t]
    t_parts = [op_t[keep]]
    k_parts = [op_k[keep]]
    kind_parts = [np.where(produced[keep], GadgetKind.CREATE, GadgetKind.USER)]
    flag_parts = [np.where(upd[keep] & (not static), _UPDATE, 0)]
    if recompute is not None:
        t_parts += [recompute.support_tensor, recompute.point_tensor]
        k_parts += [recompute.support_kernel, recompute.point_kernel]
        kind_parts += [
            np.full(recompute.support_tensor.size, GadgetKind.SUPPORT),
            np.full(recompute.point_tensor.size, GadgetKind.SUPPORT),
        ]
        flag_parts += [
            np.full(recompute.support_tensor.size, _READ),
            np.full(recompute.point_tensor.size, _RECOMPUTE),
        ]
    window = min(window, n_k)  # a wider window reaches no further kernel
    if formulation.asynchronous and window > 0:
        lo, hi = graph.live_first, graph.live_last
        offsets = np.concatenate((np.arange(-window, 0), np.arange(1, window + 1)))
        wt = np.repeat(op_t, offsets.size)
        wk = (op_k[:, None] + offsets[None, :]).ravel()
        wflag = np.tile(np.where(offsets < 0, _FETCH_WINDOW, _EVICT_WINDOW), op_t.size)
        inside = (wk >= lo[wt]) & (wk <= hi[wt]) & (wk >= 0) & (wk < n_k)
        t_parts.append(wt[inside])
        k_parts.append(wk[inside])
        kind_parts.append(np.full(int(inside.sum()), GadgetKind.WINDOW))
        flag_parts.append(wflag[inside])
    t_all = np.concatenate(t_parts)
    k_all = np.concatenate(k_parts)
    kind_all = np.concatenate(kind_parts).astype(np.int64)
    flag_all = np.concatenate(flag_parts).astype(np.int64)
    # One gadget per (tensor, kernel): the smallest kind wins (CREATE < USER < WINDOW); the
    # flags of all entries for the same (tensor, kernel) are merged.
    order = np.lexsort((kind_all, k_all, t_all))
    t_all, k_all, kind_all, flag_all = t_all[order], k_all[order], kind_all[order], flag_all[order]
    key = t_all * (n_k + 1) + k_all
    new = np.ones(key.size, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    group = np.cumsum(new) - 1
    flags = np.zeros(int(new.sum()), dtype=np.int64)
    np.bitwise_or.at(flags, group, flag_all)
    t_g, k_g, kind_g = t_all[new], k_all[new], kind_all[new]
    first = np.ones(t_g.size, dtype=bool)
    first[1:] = t_g[1:] != t_g[:-1]
    last = np.ones(t_g.size, dtype=bool)
    last[:-1] = t_g[:-1] != t_g[1:]
    window_g = kind_g == GadgetKind.WINDOW
    sync_copies = ~window_g & ((kind_g != GadgetKind.SUPPORT) | (not static))
    return Gadgets(
        t_g,
        k_g,
        kind_g,
        (flags & _UPDATE) > 0,
        (kind_g == GadgetKind.CREATE) | (kind_g == GadgetKind.USER),
        first,
        last,
        sync_copies | ((flags & _FETCH_WINDOW) > 0),
        sync_copies | ((flags & _EVICT_WINDOW) > 0),
        (flags & _RECOMPUTE) > 0,
        (flags & _READ) > 0,
    )
