"""The cost model: kernel and move times for one graph on one platform.

This is the "profile" AutoTM measured, computed from the hardware models. A kernel's operands
are its distinct tensors (:attr:`~tmsim.workload.graph.Graph.operand_csr`); an operand that is an
input is read once, an output written once, an in-place update read and written once, on the
tier where the plan places it. Kernel time is the roofline of :func:`hwmodels.timing.roofline`:
``combine(compute, sum over operands of bytes x seconds-per-byte of its tier) + launch``.
Because the memory part is linear in the placement, :attr:`read_s_per_byte` and
:attr:`write_s_per_byte` give the MILP its coefficients directly.

A measured table (:data:`MeasuredTable`, read from a profile file by :mod:`tmsim.profiles`)
overrides the roofline for the kernels and placements it lists.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from hwmodels.opclass import op_class
from hwmodels.platform import Platform
from hwmodels.timing import MoveMode, Overlap, move_time_s, roofline
from tmsim.errors import TmsimError
from tmsim.kernelwork import calibrated_parts, kernel_dtype
from tmsim.workload.graph import Graph

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: ``(kernel index, tier index of every operand)`` -> seconds.
MeasuredTable = Mapping[tuple[int, tuple[int, ...]], float]


class CostModel:
    """Kernel and move times of ``graph`` on ``platform``.

    Arrays (read-only, numpy): ``op_kernel``/``op_tensor`` [n_ops] give each operand's kernel
    and tensor; ``op_read_bytes``/``op_write_bytes`` [n_ops]; ``compute_s`` [n_kernels];
    ``read_s_per_byte``/``write_s_per_byte`` [n_kernels, n_tiers], ``inf`` on tiers the
    kernels may not access; ``memory_efficiency`` [n_kernels], the fraction of the tiers'
    rates each kernel's bytes reach; ``launch_s``. Where the platform's compute device has a
    calibrated kernel model (:attr:`hwmodels.compute.Compute.kernels`), compute times and
    memory efficiencies are that model's (:mod:`tmsim.kernelwork`), else the class
    roofline's. Every other time is finite: raises
    :class:`TmsimError` naming the kernel (and tier) where one is not (the ranges of
    :mod:`hwmodels` and the bounds of :class:`~tmsim.workload.graph.Graph` keep them finite,
    so this guards values built around their checks). Raises
    :class:`hwmodels.errors.HardwareModelError` if the platform's compute device has no peak
    for a dtype the graph computes in.
    """

    def __init__(
        self,
        graph: Graph,
        platform: Platform,
        overlap: Overlap = Overlap.MAX,
        measured: MeasuredTable | None = None,
    ) -> None:
        self.graph = graph
        self.platform = platform
        self.overlap = Overlap(overlap)
        self.measured: MeasuredTable = dict(measured or {})
        ptr, tensor = graph.operand_csr
        n_k, n_t = len(graph.kernels), len(platform.tiers)
        self.op_ptr = ptr
        self.op_tensor = tensor
        self.op_kernel = np.repeat(np.arange(n_k, dtype=np.int64), np.diff(ptr))
        reads = np.zeros(tensor.size)
        writes = np.zeros(tensor.size)
        index = {name: i for i, name in enumerate(t.name for t in graph.tensors)}
        for k, kern in enumerate(graph.kernels):
            read = {index[n] for n in kern.inputs + kern.updates}
            written = {index[n] for n in kern.outputs + kern.updates}
            for j in range(int(ptr[k]), int(ptr[k + 1])):
                t = int(tensor[j])
                reads[j] = graph.sizes_bytes[t] if t in read else 0
                writes[j] = graph.sizes_bytes[t] if t in written else 0
        self.op_read_bytes = reads
        self.op_write_bytes = writes
        classes = [op_class(k.op) for k in graph.kernels]
        dtypes = [kernel_dtype(graph, k) for k in range(n_k)]
        flops = np.array([k.flops for k in graph.kernels], dtype=np.float64)
        zero = np.zeros((n_k, n_t))
        allowed = np.array(platform.kernel_tier_mask())
        unit = np.where(allowed, 1.0, 0.0)[None, :].repeat(n_k, axis=0)
        model = platform.compute.kernels
        if model is None:
            base = roofline(
                platform, flops, classes, zero, zero, dtype=dtypes, overlap=self.overlap
            )
            self.compute_s = base.compute_s
            self.launch_s = float(base.launch_s)
            per_read = roofline(platform, flops, classes, unit, zero, dtype=dtypes).memory_by_tier_s
            per_write = roofline(
                platform, flops, classes, zero, unit, dtype=dtypes
            ).memory_by_tier_s
            eff = {c: platform.compute.efficiency(c).memory for c in set(classes)}
            self.memory_efficiency = np.array([eff[c] for c in classes], dtype=np.float64)
        else:
            moved = np.bincount(self.op_kernel, weights=reads + writes, minlength=n_k)
            kernel_bytes = moved.astype(np.float64)
            parts = calibrated_parts(graph, platform, model, kernel_bytes)
            self.compute_s = parts.compute_s
            self.launch_s = float(platform.compute.launch_overhead_s)
            self.memory_efficiency = parts.memory_efficiency
            cores = platform.compute.cores
            rates = [platform.kernel_bw_bytes_per_s(t.name, cores) for t in platform.tiers]
            read_bw = np.array([r for r, _ in rates])
            write_bw = np.array([w for _, w in rates])
            per_read = unit / read_bw[None, :] / parts.memory_efficiency[:, None]
            per_write = unit / write_bw[None, :] / parts.memory_efficiency[:, None]
        self.read_s_per_byte = np.where(allowed, per_read, np.inf)
        self.write_s_per_byte = np.where(allowed, per_write, np.inf)
        self.tier_allowed = allowed
        self._require_finite(per_read, per_write)
        for arr in (self.op_kernel, reads, writes, self.compute_s, self.memory_efficiency):
            arr.flags.writeable = False

    def _require_finite(self, per_read: FloatArray, per_write: FloatArray) -> None:
        where = f"on platform {self.platform.name!r}"
        if not math.isfinite(self.launch_s):
            raise TmsimError(f"the launch overhead {where} is not finite ({self.launch_s})")
        bad = np.flatnonzero(~np.isfinite(self.compute_s))
        if bad.size:
            kern = self.graph.kernels[int(bad[0])]
            raise TmsimError(
                f"kernel {kern.name!r}: its compute time {where} is not finite "
                f"({kern.flops} FLOPs in {self.compute_s[bad[0]]} s)"
            )
        for verb, per in (("reading", per_read), ("writing", per_write)):
            hit = np.argwhere(~np.isfinite(per) & self.tier_allowed[None, :])
            if hit.size:
                k, t = (int(x) for x in hit[0])
                raise TmsimError(
                    f"kernel {self.graph.kernels[k].name!r}: {verb} a byte on tier "
                    f"{self.platform.tier_names[t]!r} {where} takes {per[k, t]} s, not a "
                    "finite time"
                )

    # ------------------------------------------------------------------ kernels
    def operand_s(self, op_tiers: npt.ArrayLike) -> FloatArray:
        """Seconds each operand's reads and writes take when operand ``j`` is on tier
        ``op_tiers[j]`` (``inf`` on a tier kernels may not access, where it moves bytes)."""
        tiers = np.asarray(op_tiers, dtype=np.int64)
        k = self.op_kernel
        # Multiply only where bytes move: 0 bytes x inf (a tier kernels may not access) would
        # be nan, and a kernel on such a tier must cost inf, not nan.
        per_op = np.zeros(k.size)
        writes = np.zeros(k.size)
        read, written = self.op_read_bytes, self.op_write_bytes
        np.multiply(read, self.read_s_per_byte[k, tiers], out=per_op, where=read > 0)
        np.multiply(written, self.write_s_per_byte[k, tiers], out=writes, where=written > 0)
        return per_op + writes

    def memory_s(self, op_tiers: npt.ArrayLike) -> FloatArray:
        """Memory time of every kernel when operand ``j`` is on tier ``op_tiers[j]``."""
        return self._per_kernel(self.operand_s(op_tiers))

    def _per_kernel(self, per_op: FloatArray) -> FloatArray:
        """Per-operand seconds summed per kernel."""
        n_k = len(self.graph.kernels)
        return np.bincount(self.op_kernel, weights=per_op, minlength=n_k).astype(np.float64)

    def _roofline_s(self, memory_s: FloatArray, compute_factor: float = 1.0) -> FloatArray:
        """Kernel times from their memory times: compute (times ``compute_factor``) and
        memory overlapped (``max``) or added, plus the launch overhead."""
        compute = self.compute_s * compute_factor
        if self.overlap is Overlap.MAX:
            return np.maximum(compute, memory_s) + self.launch_s
        return compute + memory_s + self.launch_s

    def kernel_time_range_s(self) -> tuple[FloatArray, FloatArray]:
        """The least and the most time (seconds) each kernel can take over every placement
        of its operands on tiers kernels may access: the roofline's (each operand on the
        tier it is read and written fastest, resp. slowest), widened to take in every
        measured time of the kernel on such tiers."""
        n_ops = self.op_kernel.size
        reach = np.flatnonzero(self.tier_allowed)
        per_op = np.stack([self.operand_s(np.full(n_ops, t)) for t in reach])
        least = self._roofline_s(self._per_kernel(per_op.min(axis=0)))
        most = self._roofline_s(self._per_kernel(per_op.max(axis=0)))
        for (k, placement), seconds in self.measured.items():
            if all(self.tier_allowed[t] for t in placement):
                least[k] = min(least[k], seconds)
                most[k] = max(most[k], seconds)
        return least, most

    def kernel_times_s(self, op_tiers: npt.ArrayLike, compute_factor: float = 1.0) -> FloatArray:
        """Time of every kernel (seconds) under the operand placement ``op_tiers`` [n_ops],
        the roofline's compute part times ``compute_factor``.

        Measured entries replace the roofline where they cover the kernel and placement (as
        measured: ``compute_factor`` does not apply to them). A placement on a tier kernels
        may not access gives ``inf``.
        """
        tiers = np.asarray(op_tiers, dtype=np.int64)
        if tiers.shape != self.op_tensor.shape:
            raise TmsimError(f"op_tiers needs {self.op_tensor.size} entries, got {tiers.size}")
        times = self._roofline_s(self.memory_s(tiers), compute_factor)
        for (k, placement), seconds in self.measured.items():
            lo, hi = int(self.op_ptr[k]), int(self.op_ptr[k + 1])
            if tuple(int(x) for x in tiers[lo:hi]) == placement:
                times[k] = seconds
        return times

    def kernel_memory_s(self, kernel: int, tiers: npt.ArrayLike) -> float:
        """Memory time (seconds) of kernel ``kernel`` with its ``j``-th operand on tier
        ``tiers[j]`` (``inf`` on a tier kernels may not access, where it moves bytes)."""
        lo, hi = int(self.op_ptr[kernel]), int(self.op_ptr[kernel + 1])
        at = np.asarray(tiers, dtype=np.int64)
        if at.shape != (hi - lo,):
            raise TmsimError(f"kernel {kernel} has {hi - lo} operands, got {at.size} tiers")
        read, written = self.op_read_bytes[lo:hi], self.op_write_bytes[lo:hi]
        mem = 0.0
        for j in range(hi - lo):
            if read[j] > 0:
                mem += float(read[j] * self.read_s_per_byte[kernel, at[j]])
            if written[j] > 0:
                mem += float(written[j] * self.write_s_per_byte[kernel, at[j]])
        return mem

    def recompute_s(self, kernel: int, tiers: npt.ArrayLike, compute_factor: float = 1.0) -> float:
        """Time (seconds) of running kernel ``kernel`` again with its ``j``-th operand on tier
        ``tiers[j]`` (a recompute): the kernel's roofline under that placement (its compute
        part times ``compute_factor``), or its measured time where one covers it."""
        mem = self.kernel_memory_s(kernel, tiers)
        placement = (kernel, tuple(int(x) for x in np.asarray(tiers, dtype=np.int64)))
        if placement in self.measured:
            return float(self.measured[placement])
        compute = float(self.compute_s[kernel]) * compute_factor
        if self.overlap is Overlap.MAX:
            return max(compute, mem) + self.launch_s
        return compute + mem + self.launch_s

    # ------------------------------------------------------------------ moves
    def move_s(self, src: int, dst: int, mode: MoveMode | str) -> FloatArray:
        """Seconds to copy every tensor (indexed like ``graph.tensors``) from ``src`` to ``dst``.

        Tiers are platform indices. Raises :class:`hwmodels.HardwareModelError` if no copy
        path joins them, :class:`TmsimError` naming the tensor if a copy would not take a
        finite time.
        """
        names = self.platform.tier_names
        seconds = move_time_s(
            self.platform, self.graph.sizes_bytes, names[src], names[dst], MoveMode(mode)
        )
        bad = np.flatnonzero(~np.isfinite(seconds))
        if bad.size:
            t = int(bad[0])
            raise TmsimError(
                f"tensor {self.graph.tensors[t].name!r}: a {MoveMode(mode).value} copy from "
                f"{names[src]!r} to {names[dst]!r} on platform {self.platform.name!r} takes "
                f"{seconds[t]} s, not a finite time"
            )
        return seconds

    def has_path(self, src: int, dst: int) -> bool:
        """Whether the platform can copy from tier ``src`` to tier ``dst``."""
        names = self.platform.tier_names
        return any(p.src == names[src] and p.dst == names[dst] for p in self.platform.copy_paths)


@dataclass(frozen=True, slots=True)
class IndexMove:
    """A move in indices: tensor ``tensor`` from tier ``src`` to ``dst`` at kernel ``kernel``."""

    tensor: int
    src: int
    dst: int
    kernel: int
    mode: MoveMode


@dataclass(frozen=True, slots=True)
class IndexRecompute:
    """A recompute in indices: ``producer`` runs again just before kernel ``kernel``, its
    operands on ``tiers``, to make tensor ``tensor`` anew."""

    tensor: int
    kernel: int
    producer: int
    tiers: tuple[int, ...]


@dataclass(frozen=True)
class BesideCosts:
    """What an asynchronous copy beside each kernel costs under interference (computed by
    :func:`tmsim.sim.beside.beside_costs` from the replay's model).

    ``paths``: ``(src, dst)`` tier indices of the copy paths; per kernel and path [K, P]:
    ``copy_s_per_byte``, the seconds a copy takes per byte while beside the kernel (after its
    pair's per-transfer latency; ``inf`` where it cannot run there), and
    ``slow_s_per_byte``, the seconds the kernel is delayed per byte copied beside it. ``level``
    names the interference level they were computed at. ``compute_factor``: what every
    kernel's compute time is multiplied by once the plan copies beside any kernel on a path
    of ``stretching`` (a copy thread on a core of its own, taken from the kernels' pool:
    ``cores / (cores - 1)``; 1 where copies take no core from the kernels). ``measured_s``:
    the seconds measuring them took (not compared), which a plan built on them counts in its
    build seconds wherever they were measured.
    """

    paths: tuple[tuple[int, int], ...]
    copy_s_per_byte: FloatArray
    slow_s_per_byte: FloatArray
    level: str
    compute_factor: float = 1.0
    stretching: tuple[bool, ...] = ()
    measured_s: float = field(default=0.0, compare=False)

    def path(self, src: int, dst: int) -> int:
        """The index of path ``src -> dst``; raises :class:`TmsimError` for one not listed."""
        try:
            return self.paths.index((src, dst))
        except ValueError:
            raise TmsimError(f"no asynchronous copy costs for tiers {src} -> {dst}") from None


def step_time_s(
    cost: CostModel,
    op_tiers: npt.ArrayLike,
    moves: Iterable[IndexMove],
    beside: BesideCosts | None = None,
    recomputes: Iterable[IndexRecompute] = (),
) -> tuple[float, FloatArray]:
    """The predicted step time of a placement, its moves and its recomputes, and each
    kernel's share.

    Kernel ``k`` costs ``max(kernel time under op_tiers, sum of the asynchronous moves beside
    it)``; each synchronous move and each recompute (:meth:`CostModel.recompute_s`, its
    compute stretched as the kernels' is) adds its own time before its kernel. With
    ``beside``, an asynchronous move of ``b`` bytes on path ``p`` beside kernel ``k`` takes
    its latency plus ``b * copy_s_per_byte[k, p]`` and adds ``b * slow_s_per_byte[k, p]`` to
    the kernel's time, and once any such move is on a path of ``beside.stretching``, every
    kernel's compute takes ``beside.compute_factor`` of its time. Returns ``(total,
    per_kernel)`` where ``per_kernel`` [K + 1] holds kernel ``k``'s cost plus the synchronous
    moves and recomputes just before it (the last entry: the moves after the last kernel).
    """
    n_k = len(cost.graph.kernels)
    moves = list(moves)
    factor = 1.0
    if beside is not None and beside.compute_factor != 1.0:
        stretched = (
            m.mode is MoveMode.ASYNC and beside.stretching[beside.path(m.src, m.dst)] for m in moves
        )
        factor = beside.compute_factor if any(stretched) else 1.0
    kernel = cost.kernel_times_s(op_tiers, factor)
    async_s = np.zeros(n_k)
    sync_s = np.zeros(n_k + 1)
    cache: dict[tuple[int, int, MoveMode], FloatArray] = {}
    sizes = cost.graph.sizes_bytes
    names = cost.platform.tier_names
    for m in moves:
        key = (m.src, m.dst, m.mode)
        if key not in cache:
            cache[key] = cost.move_s(m.src, m.dst, m.mode)
        seconds = float(cache[key][m.tensor])
        if m.mode is not MoveMode.ASYNC:
            sync_s[m.kernel] += seconds
            continue
        if beside is not None and sizes[m.tensor] > 0:
            p = beside.path(m.src, m.dst)
            nbytes = float(sizes[m.tensor])
            latency = cost.platform.copy_latency_s(names[m.src], names[m.dst])
            seconds = latency + nbytes * float(beside.copy_s_per_byte[m.kernel, p])
            kernel[m.kernel] += nbytes * float(beside.slow_s_per_byte[m.kernel, p])
        async_s[m.kernel] += seconds
    for r in recomputes:
        sync_s[r.kernel] += cost.recompute_s(r.producer, r.tiers, factor)
    per = sync_s.copy()
    per[:n_k] += np.maximum(kernel, async_s)
    return float(per.sum()), per
