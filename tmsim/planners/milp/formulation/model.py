"""The placement MILP as built (:func:`~tmsim.planners.milp.formulation.build.build_model`): the
cvxpy problem, its variables, and what evaluating binaries and reading a plan back need."""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from tmsim.cost import BesideCosts
from tmsim.planners.milp.formulation.copies import Copies
from tmsim.planners.milp.formulation.gadgets import Gadgets
from tmsim.planners.milp.formulation.host_time import HostTerms
from tmsim.planners.milp.formulation.measured import MeasuredTerms
from tmsim.planners.milp.formulation.network import Variables
from tmsim.planners.milp.formulation.states import Catalogue
from tmsim.planners.milp.formulation.windows import Gaps


@dataclass(frozen=True)
class Model:
    """The problem, its variables, and what reading a solution back (or in) needs.

    ``c`` is bounded below by ``rows``: ``c >= const + (matrix @ x)`` for each pair, the
    first rows (the kernels' own times) plus ``measured.shifts[i] @ z`` where a profile
    measured kernel times (``z`` and ``measured``: :mod:`~tmsim.planners.milp.formulation.measured`;
    None without); the objective is ``sum(c) + sync_s @ x + energy_s @ x +
    energy_const_s`` (``sync_s``: the synchronous copies' and the recomputes' seconds;
    ``energy_s``, ``energy_const_s``: the weighted energy the binaries decide, zero without
    an energy weight); ``a_eq @ x == b_eq`` and ``a_ub @ x <= b_ub`` are the flow (the
    second: the order of the compact form's events, ``gaps``, and what each recompute
    reads, and the last ``cliques`` rows: tensors too large to share the fastest tier,
    :mod:`~tmsim.planners.milp.formulation.conflicts`) and
    ``0 <= u <= capacity`` the limit of each modelled tier (``tiers``) at each kernel, one
    block of ``n_kernels`` per tier (``u`` as :meth:`complete` gives it, in units of each
    tier's largest limit). ``op_state`` gives 1 + the state index of every operand.
    ``floor_s`` [n_kernels] is the least value of ``c`` whatever the binaries: each kernel
    with every operand on the tier it reads and writes fastest, or its least measured time.
    ``beside`` and ``forbidden``: see the module documentation (None without them).
    """

    problem: cp.Problem
    x: cp.Variable
    u: cp.Variable
    c: cp.Variable
    catalogue: Catalogue
    gadgets: Gadgets
    vars: Variables
    op_state: sp.csr_matrix
    tiers: tuple[int, ...]
    delta: sp.csr_matrix
    rows: tuple[tuple[np.ndarray, sp.csr_matrix | None], ...]
    copies: Copies
    variables: int
    constraints: int
    sync_s: np.ndarray
    a_eq: sp.csr_matrix
    b_eq: np.ndarray
    a_ub: sp.csr_matrix
    b_ub: np.ndarray
    gaps: Gaps
    capacity: np.ndarray
    cliques: int
    floor_s: np.ndarray
    energy_s: np.ndarray
    energy_const_s: float
    beside: BesideCosts | None = None
    #: binaries fixed at 0: copies that cannot run where they are offered
    forbidden: np.ndarray | None = None
    z: cp.Variable | None = None
    measured: MeasuredTerms | None = None
    #: the kernels the host may run and the step time they make (None: the host runs none)
    host: HostTerms | None = None
    #: per host candidate (the order of ``host.candidates``), its least device time, which
    #: ``floor_s`` counts as 0 (the host may take it)
    host_floor_s: np.ndarray | None = None

    @property
    def n_kernels(self) -> int:
        return int(self.delta.shape[0] // max(len(self.tiers), 1))

    def complete(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The continuous variables ``(u, c)`` that go with binaries ``x`` at the optimum
        (``z``, where there is one, is :meth:`MeasuredTerms.values`)."""
        n_k = self.n_kernels
        u = np.cumsum(np.reshape(self.delta @ x, (len(self.tiers), n_k)), axis=1).ravel()
        c = np.full(n_k, -np.inf)
        for value in self.row_values(x):
            c = np.maximum(c, value)
        return u, c

    def row_values(self, x: np.ndarray) -> list[np.ndarray]:
        """The right side of every row of ``rows`` [n_kernels] at binaries ``x``, the
        measured terms included."""
        z = self.measured.values(x) if self.measured is not None else None
        out = []
        for i, (const, matrix) in enumerate(self.rows):
            value = const + (matrix @ x if matrix is not None else 0.0)
            if z is not None and self.measured is not None and i < len(self.measured.shifts):
                value = value + self.measured.shifts[i] @ z
            out.append(np.asarray(value, dtype=np.float64))
        return out

    @property
    def lower_bound_s(self) -> float:
        """A lower bound of the objective at every solution: the sum of ``floor_s`` (copies
        only add to it) or, where the host may run kernels, :func:`two_stream_bound_s` of
        the device's and the host's least work."""
        base = float(self.floor_s.sum())
        if self.host is None or self.host_floor_s is None:
            return base
        return two_stream_bound_s(base, self.host_floor_s, self.host.candidates.seconds)

    def objective(self, x: np.ndarray) -> float:
        """The objective at binaries ``x``, with ``u`` and ``c`` at their optimum."""
        xf = np.asarray(x, dtype=np.float64)
        energy = self.energy_s @ xf + self.energy_const_s
        c = self.complete(xf)[1]
        if self.host is not None:
            return float(self.host.values(c, xf).t + energy)
        return float(c.sum() + self.sync_s @ xf + energy)

    def host_values(self, x: np.ndarray) -> dict[cp.Variable, np.ndarray]:
        """The values of the step-time variables of the host terms at binaries ``x`` (none
        without host terms), for a warm start."""
        if self.host is None:
            return {}
        xf = np.asarray(x, dtype=np.float64)
        v = self.host.values(self.complete(xf)[1], xf)
        h = self.host
        out = {h.p: v.p, h.f: v.f, h.r: v.r, h.t: np.asarray(v.t)}
        out.update(zip(h.s, v.s, strict=True))
        return out


def two_stream_bound_s(device_s: float, floor_s: np.ndarray, host_s: np.ndarray) -> float:
    """``min over h in [0, 1]^m of max(device_s + sum floor_s (1 - h), sum host_s h)``: the
    step can be no shorter than its device stream (``device_s`` of kernels only the device
    runs, and each candidate's least device time ``floor_s`` for the share it keeps) nor than
    its host stream (each candidate's ``host_s`` for the share the host takes), whatever the
    copies and the order. The fractional knapsack: candidates move to the host in order of
    device seconds saved per host second until the two streams meet."""
    floor = np.asarray(floor_s, dtype=np.float64)
    host = np.asarray(host_s, dtype=np.float64)
    device = device_s + float(floor.sum())
    spent = 0.0
    ratio = np.where(host > 0, floor / np.where(host > 0, host, 1.0), np.inf)
    for i in np.argsort(-ratio, kind="stable"):
        if device <= spent:
            break
        if host[i] <= 0:  # free on the host: the device keeps none of it
            device -= floor[i]
            continue
        # moving a share s of it: device - s floor = spent + s host
        s = min(1.0, (device - spent) / (floor[i] + host[i])) if floor[i] + host[i] > 0 else 1.0
        device -= s * floor[i]
        spent += s * host[i]
    return float(max(device, spent))


__all__ = ["Model", "two_stream_bound_s"]
