"""The placement MILP as a cvxpy problem, and reading a plan back from its solution.

Constraints, as a few sparse-matrix blocks (no per-row cvxpy objects):

- flow conservation: ``A_eq x = b_eq``;
- fast-tier capacity in difference form: ``u_k - u_{k-1} = (bytes arriving at k) - (bytes
  leaving after k - 1)`` with ``0 <= u_k <= limit_k``, in units of the limit itself so the
  coefficients stay near 1 (in bytes HiGHS stalls; in GB tiny graphs drown in its
  tolerance);
- kernel cost ``c_k >= compute_k + launch``, ``c_k >= memory_k(x) + launch`` (the roofline;
  ``c_k >=`` their sum with the ``sum`` overlap rule), ``c_k >=`` the asynchronous copies
  beside kernel ``k``;
- objective: ``sum_k c_k +`` the synchronous copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from hwmodels.timing import MoveMode, Overlap
from tmsim.cost import CostModel, IndexMove
from tmsim.plan.values import Plan, SolverStats
from tmsim.planners.assemble import FAST, SLOW, assemble_plan
from tmsim.planners.milp.network import (
    Edge,
    Formulation,
    Gadgets,
    Variables,
    build_flow,
    build_gadgets,
    build_segments,
    build_variables,
    move_costs,
)


@dataclass(frozen=True)
class Model:
    """The problem, its variables, and what reading a solution back (or in) needs.

    ``c`` is bounded below by ``rows``: ``c >= const + (matrix @ x)`` for each pair; the
    objective is ``sum(c) + sync_s @ x``; ``a_eq @ x == b_eq`` is the flow and
    ``0 <= u <= capacity`` the fast-memory limit per kernel (``u`` as :meth:`complete` gives
    it, in units of the largest limit).
    """

    problem: cp.Problem
    x: cp.Variable
    u: cp.Variable
    c: cp.Variable
    gadgets: Gadgets
    vars: Variables
    op_flag: sp.csr_matrix
    delta: sp.csr_matrix
    rows: tuple[tuple[np.ndarray, sp.csr_matrix | None], ...]
    move_kernel: np.ndarray
    move_async: np.ndarray
    variables: int
    constraints: int
    sync_s: np.ndarray
    a_eq: sp.csr_matrix
    b_eq: np.ndarray
    capacity: np.ndarray

    def complete(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The continuous variables ``(u, c)`` that go with binaries ``x`` at the optimum."""
        u = np.cumsum(self.delta @ x)
        c = np.full(u.size, -np.inf)
        for const, matrix in self.rows:
            c = np.maximum(c, const + (matrix @ x if matrix is not None else 0.0))
        return u, c

    def objective(self, x: np.ndarray) -> float:
        """The objective at binaries ``x``, with ``u`` and ``c`` at their optimum."""
        xf = np.asarray(x, dtype=np.float64)
        return float(self.complete(xf)[1].sum() + self.sync_s @ xf)


def build_model(
    cost: CostModel,
    window: int,
    formulation: Formulation,
    limits: np.ndarray,
    gpu: bool,
    relax: bool,
) -> Model:
    """The MILP (or, with ``relax``, its LP relaxation) and what reading it back needs."""
    graph = cost.graph
    n_k = len(graph.kernels)
    gad = build_gadgets(cost, formulation, window)
    var = build_variables(cost, gad, formulation, gpu)
    flow = build_flow(cost, gad, var)
    seg = build_segments(cost, gad, var)
    seconds, move_kernel, is_async = move_costs(cost, gad, var)
    n = var.count
    x = cp.Variable(n) if relax else cp.Variable(n, boolean=True)
    u = cp.Variable(n_k)
    c = cp.Variable(n_k)

    # capacity, difference form: rows k get +size*flag at a segment's start, - after its end
    unit = float(max(int(limits.max()), 1))
    scaled = sp.diags(graph.sizes_bytes[seg.tensor] / unit) @ seg.expr
    n_seg = seg.tensor.size
    arrive = sp.csr_matrix((np.ones(n_seg), (seg.start, np.arange(n_seg))), shape=(n_k + 1, n_seg))
    leave = sp.csr_matrix((np.ones(n_seg), (seg.end + 1, np.arange(n_seg))), shape=(n_k + 1, n_seg))
    delta = ((arrive - leave) @ scaled)[:n_k]
    diff = sp.eye(n_k) - sp.eye(n_k, k=-1)

    # kernel memory time as a function of each operand's fast flag
    op_seg = seg.covering(cost.op_tensor, cost.op_kernel, n_k)
    op_flag = seg.expr[op_seg]
    k = cost.op_kernel
    fast_s = cost.op_read_bytes * cost.read_s_per_byte[k, FAST] + (
        cost.op_write_bytes * cost.write_s_per_byte[k, FAST]
    )
    base_s = cost.compute_s + cost.launch_s
    constraints = [flow.a_eq @ x == flow.b_eq, diff @ u == delta @ x, u >= 0, u <= limits / unit]
    rows: list[tuple[np.ndarray, sp.csr_matrix | None]] = []
    if gpu:
        rows.append((cost.kernel_times_s(np.full(k.size, FAST, dtype=np.int64)), None))
    else:
        slow_s = cost.op_read_bytes * cost.read_s_per_byte[k, SLOW] + (
            cost.op_write_bytes * cost.write_s_per_byte[k, SLOW]
        )
        to_kernel = sp.csr_matrix((np.ones(k.size), (k, np.arange(k.size))), shape=(n_k, k.size))
        mem0 = to_kernel @ slow_s
        gain = to_kernel @ sp.diags(fast_s - slow_s) @ op_flag
        if cost.overlap is Overlap.MAX:
            rows += [(base_s, None), (mem0 + cost.launch_s, sp.csr_matrix(gain))]
        else:
            rows.append((base_s + mem0, sp.csr_matrix(gain)))
    sync_cost = np.where(is_async, 0.0, seconds)
    if is_async.any():
        beside = (seconds[is_async], (move_kernel[is_async], np.flatnonzero(is_async)))
        rows.append((np.zeros(n_k), sp.csr_matrix(beside, shape=(n_k, n))))
    for const, matrix in rows:
        constraints.append(c >= const + matrix @ x if matrix is not None else c >= const)
    if relax:
        constraints += [x >= 0, x <= 1]
    objective = cp.Minimize(cp.sum(c) + sync_cost @ x)
    problem = cp.Problem(objective, constraints)
    n_rows = flow.a_eq.shape[0] + 3 * n_k + n_k * len(rows)
    return Model(
        problem,
        x,
        u,
        c,
        gad,
        var,
        op_flag,
        sp.csr_matrix(delta),
        tuple(rows),
        move_kernel,
        is_async,
        n + 2 * n_k,
        n_rows,
        sync_cost,
        flow.a_eq,
        flow.b_eq,
        limits / unit,
    )


def extract_plan(
    cost: CostModel,
    model: Model,
    formulation: Formulation,
    options: dict[str, Any],
    limit: int,
    stats: SolverStats,
) -> Plan:
    """The plan a solved ``model`` describes (binaries rounded), through ``assemble_plan``."""
    x = np.asarray(model.x.value) > 0.5
    gad, var = model.gadgets, model.vars
    n_edges = var.edge_gadget.size
    on = np.flatnonzero(x[:n_edges])
    flags = np.asarray(model.op_flag @ x.astype(np.float64)).ravel()
    op_tiers = np.where(flags > 0.5, FAST, SLOW).astype(np.int64)
    moves: list[IndexMove] = []
    drops: dict[tuple[int, int], list[int]] = {}
    for i in on:
        e = Edge(int(var.edge_type[i]))
        g = int(var.edge_gadget[i])
        t = int(gad.tensor[g])
        if e in (Edge.FETCH, Edge.FETCH_INVAL, Edge.WRITE, Edge.WRITE_DROP):
            src, dst = (SLOW, FAST) if e in (Edge.FETCH, Edge.FETCH_INVAL) else (FAST, SLOW)
            mode = MoveMode.ASYNC if model.move_async[i] else MoveMode.SYNC
            moves.append(IndexMove(t, src, dst, int(model.move_kernel[i]), mode))
        if e in (Edge.WRITE_DROP, Edge.DROP):
            drops.setdefault((t, FAST), []).append(int(gad.kernel[g]))
    states = x[n_edges:]
    tiers_of = {0: (FAST,), 1: (FAST, SLOW), 2: (SLOW,)}
    initial = {
        int(t): tiers_of[int(s)]
        for t, s in zip(var.init_tensor[states], var.init_state[states], strict=True)
    }
    return assemble_plan(
        cost,
        f"milp-{formulation.value}",
        limit,
        op_tiers,
        initial,
        moves,
        drops,
        options,
        stats,
    )
