"""Kernel times under a calibrated kernel model (:class:`~hwmodels.kernels.KernelModel`),
vectorized over kernels: the compute part of each (:func:`kernel_parts`) and the waits for
the host that issues them (:func:`dispatch_waits`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hwmodels.errors import HardwareModelError
from hwmodels.kernels import GEMM_FAMILIES, KernelFamily, KernelModel

FloatArray = npt.NDArray[np.float64]

#: Families in a fixed order: the index :class:`KernelWork` arrays use.
FAMILIES = tuple(KernelFamily)


@dataclass(frozen=True, slots=True)
class KernelWork:
    """What ``n`` kernels do, as :func:`kernel_parts` prices it: ``families`` [n];
    ``flops`` [n]; ``elements`` [n], of each kernel's largest operand; ``dtypes`` [n], the
    dtype each computes in; ``aligned`` [n], whether every GEMM dimension is a multiple of the
    tensor-core multiple (ignored for other families); ``units`` [n], the independent units
    each splits its work into (a batch norm's channels; 0: not known), or empty where no
    kernel's are known."""

    families: tuple[KernelFamily, ...]
    flops: tuple[float, ...]
    elements: tuple[float, ...]
    dtypes: tuple[str, ...]
    aligned: tuple[bool, ...]
    units: tuple[float, ...] = ()

    def family_index(self) -> npt.NDArray[np.int64]:
        """Each kernel's family as its index in :data:`FAMILIES` [n]."""
        return np.array([FAMILIES.index(f) for f in self.families], dtype=np.int64)


def kernel_parts(
    model: KernelModel, peak_flop_per_s: Mapping[str, float], work: KernelWork
) -> tuple[FloatArray, FloatArray]:
    """``(compute_s, passes)`` [n] of each kernel of ``work`` under ``model``.

    ``compute_s`` = fixed + work time for every kernel but the optimizer's (work time alone),
    the fixed time being the family's own or the device's ``fixed_s``. The work time of a GEMM
    is flops / (its family's compute efficiency x the peak of its math mode,
    :meth:`~hwmodels.kernels.MathModes.peak_dtype`, x ``unaligned_efficiency`` when not
    aligned on tensor cores, any math mode but fp32); of any other kernel, elements x its
    family's ``element_s``. ``passes`` is the family's, times ``saturation_units / units``
    for a kernel with known ``units`` below its family's ``saturation_units``.
    ``peak_flop_per_s`` maps canonical dtypes (and ``tf32``) to peaks; raises
    :class:`HardwareModelError` for a GEMM whose peak it lacks.
    """
    costs = [model.family(f) for f in FAMILIES]
    fam = work.family_index()
    passes = np.array([c.passes for c in costs])[fam]
    if work.units:
        need = np.array([c.saturation_units for c in costs])[fam]
        units = np.asarray(work.units, dtype=np.float64)
        short = (units > 0) & (need > units)
        passes = passes * np.where(short, need / np.where(short, units, 1.0), 1.0)
    element = np.array([c.element_s for c in costs])[fam]
    eff = np.array([c.compute_efficiency for c in costs])[fam]
    fixed = np.array([model.fixed_s if c.fixed_s is None else c.fixed_s for c in costs])[fam]
    gemm = np.array([f in GEMM_FAMILIES for f in work.families], dtype=bool)
    keys: dict[tuple[KernelFamily, str], str] = {}
    for f, dtype in set(zip(work.families, work.dtypes, strict=True)):
        if f in GEMM_FAMILIES:
            key = model.math.peak_dtype(f, dtype)
            if key not in peak_flop_per_s:
                raise HardwareModelError(
                    f"no peak FLOP/s for {key!r}, the math mode of a {f.value} kernel in "
                    f"{dtype}; known: {', '.join(peak_flop_per_s)}"
                )
            keys[f, dtype] = key
    key_of = [keys.get(pair, "") for pair in zip(work.families, work.dtypes, strict=True)]
    peak = np.array([peak_flop_per_s[k] if k else 1.0 for k in key_of])
    tensor_cores = np.array([k not in ("", "fp32") for k in key_of], dtype=bool)
    slowed = tensor_cores & ~np.asarray(work.aligned, dtype=bool)
    eff = eff * np.where(slowed, model.unaligned_efficiency, 1.0)
    flops = np.asarray(work.flops, dtype=np.float64)
    elements = np.asarray(work.elements, dtype=np.float64)
    busy = np.where(gemm, flops / (eff * peak), elements * element)
    optimizer = fam == FAMILIES.index(KernelFamily.OPTIMIZER)
    return busy + np.where(optimizer, 0.0, fixed), passes


def dispatch_waits(
    device_s: Sequence[float], dispatch_s: float, issued: Sequence[bool]
) -> list[float]:
    """How long the device waits for the host before each kernel: the host issues the
    kernels marked ``issued`` in order, ``dispatch_s`` each (the others cost it nothing: the
    optimizer's per-parameter kernels, one multi-tensor launch in PyTorch), starting with the
    step; kernel ``i`` starts at max(the end of kernel ``i - 1``, when it is issued) and runs
    ``device_s[i]``. The waits are >= 0; the step is ``sum(device_s) + sum(waits)``."""
    waits: list[float] = []
    end = issue = 0.0
    for busy, host in zip(device_s, issued, strict=True):
        if host:
            issue += dispatch_s
        wait = max(0.0, issue - end)
        waits.append(wait)
        end += wait + busy
    return waits
