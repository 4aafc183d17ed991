"""The energy a plan of the MILP spends where the binaries decide it, for the weighted objective
``time + lambda x energy`` (``PlanSettings.energy_weight_s_per_j``).

Two parts of a step's energy (:mod:`tmsim.energy`) depend on the plan:

- the bytes every kernel reads and writes on the tier each operand is accessed on (with the
  link it crosses to a tier behind a kernel link, :func:`tmsim.energy.byte_prices`): per operand,
  the energy on a reference tier (a constant) plus, for every other tier kernels reach, the
  difference to it times the operand's access expression on that tier (the same decomposition as the
  kernel-time rows, :func:`~tmsim.planners.milp.formulation.kernel_rows.time_rows`);
- every copy: its tensor's bytes read on the source tier, written on the destination tier and
  carried over the link between them.

Compute energy and static power do not depend on the plan's binaries (static power does on its
time, which the objective already weighs), so they are left out. The replay charges bytes
rounded to each tier's access granularity; these terms count them exactly.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tmsim.cost import CostModel
from tmsim.energy import byte_prices
from tmsim.planners.heuristics.placement import kernel_tiers
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.states import Catalogue

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def access_energy(
    cost: CostModel, access: dict[int, sp.csr_matrix], op_seg: IntArray, count: int
) -> tuple[float, FloatArray]:
    """``(constant, per_variable)``: the joules of every kernel's operand bytes are
    ``constant + per_variable @ x`` for the first ``count`` variables ``x``. Raises
    :class:`~tmsim.errors.TmsimError` when the platform has no energy model."""
    prices = byte_prices(cost.platform)
    read, write = prices.kernel_read, prices.kernel_write
    reach = kernel_tiers(cost.platform)
    ref = reach[-1]
    rb, wb = cost.op_read_bytes, cost.op_write_bytes
    constant = float(rb @ np.full(rb.size, read[ref]) + wb @ np.full(wb.size, write[ref]))
    per_variable = np.zeros(count)
    for tier in reach[:-1]:
        delta = rb * (read[tier] - read[ref]) + wb * (write[tier] - write[ref])
        per_variable += np.asarray(delta @ access[tier][op_seg]).ravel()[:count]
    return constant, per_variable


def copy_energy(
    cost: CostModel,
    cat: Catalogue,
    g: Gadgets,
    edge_gadget: IntArray,
    edge_type: IntArray,
    copies: Copies,
    count: int,
) -> FloatArray:
    """Joules of each variable's copy (0 for variables that copy nothing): its tensor's bytes
    read at the source tier, written at the destination and carried over their link."""
    prices = byte_prices(cost.platform)
    out = np.zeros(count)
    n_e = edge_gadget.size
    src = copies.source[:n_e]
    dst = cat.edge_add[edge_type]
    moving = np.flatnonzero((src >= 0) & (dst >= 0))
    nbytes = cost.graph.sizes_bytes[g.tensor[edge_gadget[moving]]].astype(np.float64)
    s, d = src[moving], dst[moving]
    out[moving] = nbytes * (prices.read[s] + prices.write[d] + prices.link[s, d])
    return out


__all__ = ["access_energy", "copy_energy"]
