"""Gadgets: the kernels at which each tensor may change location, per MILP formulation.

AutoTM's formulations differ only in where a tensor may move: *static*, at its producer
(where it is created in one tier and stays); *synchronous*, also at every user (blocking
copies just before or after the kernel); *asynchronous*, also at the kernels within a window
of a user (copies beside those kernels). A window gadget before a use may fetch the tensor,
one after a use (or its production) may evict it; a kernel within both windows may do both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

import numpy as np
import numpy.typing as npt

from tmsim.cost import CostModel

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Formulation(StrEnum):
    """Where tensors may move: AutoTM's three formulations, and the asynchronous one charging
    copies what interference makes them cost (``async-aware``: the same gadgets as
    ``async``; :mod:`tmsim.sim.beside`)."""

    STATIC = "static"
    SYNC = "sync"
    ASYNC = "async"
    ASYNC_AWARE = "async-aware"

    @property
    def asynchronous(self) -> bool:
        """Whether copies may run beside kernels (window gadgets)."""
        return self in (Formulation.ASYNC, Formulation.ASYNC_AWARE)


class GadgetKind(IntEnum):
    """What a gadget is: the producer, a user, or a kernel in a user's window."""

    CREATE = 0
    USER = 1
    WINDOW = 2


@dataclass(frozen=True)
class Gadgets:
    """Gadgets sorted by (tensor, kernel): ``tensor``, ``kernel``, ``kind``, ``updates``
    (the kernel updates the tensor in place), ``uses`` (the kernel reads or writes it),
    ``first``/``last`` (first/last gadget of its tensor), ``may_fetch``/``may_evict``
    (whether copies towards faster / slower tiers may happen there)."""

    tensor: IntArray
    kernel: IntArray
    kind: IntArray
    updates: BoolArray
    uses: BoolArray
    first: BoolArray
    last: BoolArray
    may_fetch: BoolArray
    may_evict: BoolArray


_UPDATE, _FETCH_WINDOW, _EVICT_WINDOW = 1, 2, 4


def build_gadgets(cost: CostModel, formulation: Formulation, window: int) -> Gadgets:
    """The gadgets of every tensor under ``formulation`` (``window`` kernels for async).

    An asynchronous window gadget before a use may fetch the tensor, one after a use (or its
    production) may evict it; a kernel within both windows may do both.
    """
    graph = cost.graph
    n_k = len(graph.kernels)
    op_t, op_k = cost.op_tensor, cost.op_kernel
    produced = graph.producers[op_t] == op_k
    # an operand both read and written is an in-place update (outputs are never inputs)
    upd = (cost.op_read_bytes > 0) & (cost.op_write_bytes > 0)
    static = formulation is Formulation.STATIC
    keep = produced if static else np.ones(op_t.size, dtype=bool)
    t_parts = [op_t[keep]]
    k_parts = [op_k[keep]]
    kind_parts = [np.where(produced[keep], GadgetKind.CREATE, GadgetKind.USER)]
    flag_parts = [np.where(upd[keep] & (not static), _UPDATE, 0)]
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
    return Gadgets(
        t_g,
        k_g,
        kind_g,
        (flags & _UPDATE) > 0,
        ~window_g,
        first,
        last,
        ~window_g | ((flags & _FETCH_WINDOW) > 0),
        ~window_g | ((flags & _EVICT_WINDOW) > 0),
    )
