"""Asynchronous window gadgets that can never pay off, found before the model is built.

On a two-tier platform a copy beside kernel ``k`` shortens nothing that the same copy made
synchronously at the neighbouring user would not, once it costs at least that much more
than the kernel can hide: taking it off kernel ``k`` lowers ``c_k`` by at least ``s_async -
U_k`` (``U_k`` the most time the kernel can take, so the most it can hide), while the
synchronous copy at the user costs ``s_sync``. So where ``s_async - U_k >= s_sync``:

- a *fetch* beside ``k`` (slow -> both) is replaced by staying slow until the next user and
  fetching there synchronously (or, where the path dropped the fast copy before that user,
  by not fetching at all): fast memory holds the tensor for fewer kernels, the slow tier
  the same;
- a *write* beside ``k`` (fast -> both, or fast -> slow) is replaced by the same write right
  after the previous user, where the tensor is in the fast tier alone all the way to ``k``
  (on two tiers nothing else leaves that state without an in-place update, and window
  kernels update nothing): fast memory holds it no longer, but the slow tier holds it from
  earlier, so this applies only where the slow tier's capacity is not modelled.

Replacing a copy like this never raises the objective nor breaks a limit, so some optimum
uses none of them: their edges are left out (``may_fetch`` / ``may_evict`` cleared), and a
window gadget left with neither is left out whole (the tensor's state carries across it). A
drop beside a window kernel then goes too, which loses nothing either: on two tiers the fast
copy it frees could have been dropped after the previous user (or not fetched).

Optane's copy thread is ~14x slower than its synchronous copies, so on ``cascadelake-optane``
this leaves out a quarter to a third of the window gadgets at a window of 15 (ResNet-50 b8:
7,055 of 28,264; Inception v4 b16: 16,256 of 47,674); on a GPU copies run at the same speed
either way and nothing is left out. With more than two tiers a copy may be one hop of a staged
move, and nothing is left out either.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hwmodels.timing import MoveMode
from tmsim.cost import CostModel
from tmsim.planners.milp.formulation.gadgets import GadgetKind, Gadgets


def prune_windows(
    cost: CostModel, gadgets: Gadgets, modelled: tuple[int, ...], ceiling_s: np.ndarray
) -> Gadgets:
    """``gadgets`` without the window copies that can never pay off (see the module doc);
    ``modelled``: the tiers whose capacity the model limits; ``ceiling_s`` [n_kernels]: the
    most time each kernel can take (:meth:`CostModel.kernel_time_range_s`). Unchanged on
    platforms with other than two tiers or without copy paths both ways."""
    platform = cost.platform
    if len(platform.tiers) != 2 or not (cost.has_path(0, 1) and cost.has_path(1, 0)):
        return gadgets
    window = gadgets.kind == GadgetKind.WINDOW
    t, k = gadgets.tensor, gadgets.kernel
    most_s = ceiling_s[k]

    def pays(src: int, dst: int) -> np.ndarray:
        hidden = cost.move_s(src, dst, MoveMode.ASYNC)[t] - most_s
        return np.asarray(hidden < cost.move_s(src, dst, MoveMode.SYNC)[t])

    may_fetch = gadgets.may_fetch & (~window | pays(1, 0))
    may_evict = gadgets.may_evict & (~window | (1 in modelled) | pays(0, 1))
    # a window gadget where a recompute reads the tensor or makes it stays: the model reads
    # the tensor's state there
    keep = ~window | may_fetch | may_evict | gadgets.may_recompute | gadgets.read_by_recompute
    unchanged = np.array_equal(may_fetch, gadgets.may_fetch) and np.array_equal(
        may_evict, gadgets.may_evict
    )
    if unchanged:
        return gadgets
    return replace(gadgets, may_fetch=may_fetch, may_evict=may_evict).select(keep)
