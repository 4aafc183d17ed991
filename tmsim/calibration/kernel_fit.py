"""A GPU's calibrated kernel model, fitted to eager per-op profiles of real training steps.

Data (``calibration/h200/``, measured on one NVIDIA H200 SXM on 2026-11-28 by
``h200_measure.py``; its README says how): ``results.json`` (streaming and matrix-product
rates, training steps) and ``ops_<config>.csv`` (every top-level ATen op of one profiled step
with its device time), beside the graphs ``tmsim import`` traces from the same models
(``graphs/<config>.json``).

Which number comes from where (:class:`~hwmodels.kernels.KernelModel` has the mechanisms):

- measured, read from ``results.json``: the stream rate (``a + b``, 2 reads and 1 write),
  the matrix-product peaks of bf16, fp32 and TF32 (8192-cube products);
- assumed: fp16's peak equals bf16's (the same tensor cores);
- fitted here, per kernel: the device's fixed cost per kernel, each family's passes and
  time per element (non-GEMM) or fraction of its math mode's peak (GEMM), the channels a
  batch norm needs to reach its memory rate (its saturation units), and the unaligned
  tensor-core efficiency, by least squares of the log ratio of predicted to measured device
  time over every sample :func:`~tmsim.calibration.op_profiles.line_up` makes of the four
  profiles (one kernel each where the graph and the profile pair up, a family's sum where
  they do not);
- fitted here, per step: the host's time to issue one op, by least squares of the log ratio
  of each measured step to the step its profiled ops make when the host issues them one
  after another and the device waits where the host falls behind: the gap between a step
  and its device time, from measured times alone (no model in it).

No workload's total is fitted: every parameter but the dispatch time is fitted to single
kernels or per-family sums, and the dispatch time to the measured ops of four steps. ``python -m
tmsim.calibration.kernel_fit [DIR]`` prints the fitted ``[compute.kernels]`` table and the
error of each family.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares, minimize_scalar

from hwmodels.kernel_time import FAMILIES, KernelWork, dispatch_waits, kernel_parts
from hwmodels.kernels import GEMM_FAMILIES, FamilyCost, KernelFamily, KernelModel, MathModes
from hwmodels.platform import Platform
from tmsim.calibration.op_profiles import EagerOp, Sample, line_up, read_eager_profile
from tmsim.cost import CostModel
from tmsim.errors import TmsimError
from tmsim.kernelwork import PER_CHANNEL, kernel_work
from tmsim.workload.files import load_graph
from tmsim.workload.graph import Graph

FloatArray = npt.NDArray[np.float64]

#: The profiled configurations of ``calibration/h200`` (profile ``ops_<name>.csv``, graph
#: ``graphs/<name>.json``, step ``results.json["training"][<name>]``).
H200_CONFIGS = ("resnet50_b32", "resnet50_b64", "gpt2_fp32_b8", "gpt2_bf16_b8")
#: Where the H200 data lives, from the repository's root.
H200_DIR = Path(__file__).resolve().parents[2] / "calibration" / "h200"
#: Bounds of the fitted parameters: fixed cost and dispatch time (s), passes, seconds per
#: element, fraction of peak.
FIXED_BOUNDS_S = (1e-7, 1e-4)
PASSES_BOUNDS = (0.25, 50.0)
ELEMENT_BOUNDS_S = (1e-16, 1e-9)
#: Bounds of a per-channel family's saturation units (channels).
SATURATION_BOUNDS = (1.0, 1e5)
EFFICIENCY_BOUNDS = (1e-3, 1.0)
DISPATCH_BOUNDS_S = (0.0, 1e-4)
#: The tensor-core alignment the fit assumes (elements).
TENSOR_CORE_MULTIPLE = 8


@dataclass(frozen=True)
class Measured:
    """What ``results.json`` measured: ``stream_bw_bytes_per_s``, ``peaks`` (dtype or
    ``tf32`` -> FLOP/s) and each configuration's ``step_s``."""

    stream_bw_bytes_per_s: float
    peaks: dict[str, float]
    step_s: dict[str, float]


def read_measured(path: str | Path) -> Measured:
    """The rates and steps of an ``h200_measure.py`` ``results.json``. Raises
    :class:`TmsimError` naming what is missing."""
    try:
        doc = json.loads(Path(path).read_text())
        hbm = doc["hbm"]
        peaks = {
            "bf16": hbm["matmul_bfloat16"]["TFLOPs"] * 1e12,
            "fp32": hbm["matmul_float32_tf32=False"]["TFLOPs"] * 1e12,
            "tf32": hbm["matmul_float32_tf32=True"]["TFLOPs"] * 1e12,
        }
        peaks["fp16"] = peaks["bf16"]  # assumed: the same tensor cores
        steps = {name: float(v["step_s"]) for name, v in doc["training"].items()}
        return Measured(float(hbm["add"]["GBps"]) * 1e9, peaks, steps)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TmsimError(f"{path}: not an h200_measure.py results file ({exc!r})") from None


def _work(
    profiles: Sequence[tuple[Graph, list[EagerOp]]], platform: Platform
) -> tuple[KernelWork, FloatArray]:
    """The kernels of every profiled graph, one after another, as one
    :class:`~hwmodels.kernel_time.KernelWork`, and the bytes each reads and writes."""
    works, nbytes = [], []
    for graph, _ in profiles:
        works.append(kernel_work(graph, TENSOR_CORE_MULTIPLE))
        cost = CostModel(graph, platform)
        weights = cost.op_read_bytes + cost.op_write_bytes
        nbytes.append(np.bincount(cost.op_kernel, weights=weights, minlength=len(graph.kernels)))
    fields = ("families", "flops", "elements", "dtypes", "aligned", "units")
    joined = (tuple(x for w in works for x in getattr(w, f)) for f in fields)
    return KernelWork(*joined), np.concatenate(nbytes).astype(np.float64)


@dataclass(frozen=True)
class KernelFit:
    """A fitted kernel model and how well it fits: ``model``; per family, the samples it was
    fitted to and the root mean square of their log errors (``rms_log``); ``samples``."""

    model: KernelModel
    samples: int
    per_family: dict[str, tuple[int, float]]


def fit_kernels(
    profiles: Sequence[tuple[Graph, list[EagerOp]]],
    measured: Measured,
    platform: Platform,
    dispatch_s: float,
    source: str = "",
) -> KernelFit:
    """The kernel model fitted to ``profiles`` (each a traced graph and the eager profile of
    the same step; module documentation), with ``measured``'s rates and ``dispatch_s``.
    ``platform`` is any platform with a peak for the graphs' dtypes (it gives operand bytes
    only). Deterministic. Raises :class:`TmsimError` where no sample pairs up."""
    samples: list[Sample] = []
    offsets = [0]
    for graph, ops in profiles:
        samples.extend(line_up(graph, ops))
        offsets.append(offsets[-1] + len(graph.kernels))
    if not samples:
        raise TmsimError("no profiled op pairs up with a kernel of its graph")
    work, nbytes = _work(profiles, platform)
    where = {id(g): offsets[i] for i, (g, _) in enumerate(profiles)}
    members = [np.array(s.kernels, dtype=np.int64) + where[id(s.graph)] for s in samples]
    seconds = np.array([s.seconds for s in samples])
    present = sorted({s.family for s in samples}, key=FAMILIES.index)
    # A GEMM on tensor cores (any math mode but fp32) that is not aligned.
    modes = MathModes()
    unaligned_at = [
        f in GEMM_FAMILIES and not a and modes.peak_dtype(f, d) != "fp32"
        for f, d, a in zip(work.families, work.dtypes, work.aligned, strict=True)
    ]
    unaligned = any(any(unaligned_at[i] for i in m) for m in members)
    # Parameters (logs): the fixed time, then per present family (passes, efficiency, fixed)
    # for GEMMs or (passes, element_s), and the saturation units of a per-channel family,
    # then the unaligned efficiency if any kernel is.
    layout: dict[KernelFamily, slice] = {}
    x0, lo, hi = [math.log(3e-6)], [math.log(FIXED_BOUNDS_S[0])], [math.log(FIXED_BOUNDS_S[1])]
    for fam in present:
        start: tuple[float, ...]
        bounds: tuple[tuple[float, float], ...]
        if fam in GEMM_FAMILIES:
            start = (1.5, 0.3, 3e-6)
            bounds = (PASSES_BOUNDS, EFFICIENCY_BOUNDS, FIXED_BOUNDS_S)
        elif fam in PER_CHANNEL:
            start = (1.5, 1e-12, 100.0)
            bounds = (PASSES_BOUNDS, ELEMENT_BOUNDS_S, SATURATION_BOUNDS)
        else:
            start = (1.5, 1e-12)
            bounds = (PASSES_BOUNDS, ELEMENT_BOUNDS_S)
        layout[fam] = slice(len(x0), len(x0) + len(start))
        x0 += [math.log(v) for v in start]
        lo += [math.log(b[0]) for b in bounds]
        hi += [math.log(b[1]) for b in bounds]
    if unaligned:
        x0.append(math.log(0.5))
        lo.append(math.log(EFFICIENCY_BOUNDS[0]))
        hi.append(math.log(EFFICIENCY_BOUNDS[1]))
    stream = measured.stream_bw_bytes_per_s

    def model_at(x: FloatArray) -> KernelModel:
        p = np.exp(x)
        costs = []
        for fam in FAMILIES:
            # A family the profiles never ran takes the element-wise family's cost.
            sl = layout.get(fam, layout.get(KernelFamily.ELEMENTWISE))
            if fam in GEMM_FAMILIES:
                passes, eff, fixed = (float(v) for v in p[sl]) if fam in layout else (1, 0.5, p[0])
                costs.append(FamilyCost(fam, passes, compute_efficiency=eff, fixed_s=fixed))
            elif sl is None:
                costs.append(FamilyCost(fam, passes=1.0))
            else:
                passes, element, *width = (float(v) for v in p[sl])  # width: per channel
                costs.append(
                    FamilyCost(fam, passes=passes, element_s=element, saturation_units=sum(width))
                )
        return KernelModel(
            stream_bw_bytes_per_s=stream,
            fixed_s=float(p[0]),
            dispatch_s=dispatch_s,
            families=tuple(costs),
            tensor_core_multiple=TENSOR_CORE_MULTIPLE,
            unaligned_efficiency=float(p[-1]) if unaligned else 1.0,
            source=source,
        )

    def errors(x: FloatArray) -> FloatArray:
        compute, passes = kernel_parts(model_at(x), measured.peaks, work)
        t = np.maximum(compute, passes * nbytes / stream)
        predicted = np.array([t[m].sum() for m in members])
        return np.asarray(np.log(predicted) - np.log(seconds))

    # Each sample weighs by its share of the measured time (squared residuals times seconds):
    # a step's time is its long kernels', and a thousand 2-us kernels must not outvote them.
    weight = np.sqrt(seconds / seconds.mean())

    def residuals(x: FloatArray) -> FloatArray:
        return np.asarray(errors(x) * weight)

    solution = least_squares(residuals, np.array(x0), bounds=(np.array(lo), np.array(hi)))
    model = model_at(solution.x)
    log_errors = errors(solution.x)
    per_family = {}
    for fam in present:
        picked = [i for i, s in enumerate(samples) if s.family is fam]
        rms = float(np.sqrt(np.mean(log_errors[picked] ** 2)))
        per_family[fam.value] = (len(picked), rms)
    return KernelFit(model, len(samples), per_family)


def fit_dispatch(steps: Sequence[tuple[Sequence[float], float]]) -> float:
    """The host's time to issue one op (seconds) that best predicts each measured step from
    its profiled ops' device times, the host issuing them one after another and the device
    waiting where it falls behind (:func:`hwmodels.kernels.dispatch_waits`): least squares
    of the log ratio. ``steps``: (device times, measured step) pairs."""
    data = [(list(map(float, g)), float(s)) for g, s in steps]

    def loss(d: float) -> float:
        total = 0.0
        for g, s in data:
            step = sum(g) + sum(dispatch_waits(g, d, [True] * len(g)))
            total += math.log(step / s) ** 2
        return total

    result = minimize_scalar(
        loss, bounds=DISPATCH_BOUNDS_S, method="bounded", options={"xatol": 1e-9}
    )
    return float(result.x)


def fit_h200(directory: str | Path = H200_DIR, platform: Platform | None = None) -> KernelFit:
    """The H200's kernel model from ``directory`` (``calibration/h200``: module
    documentation)."""
    from hwmodels.presets import load_preset

    root = Path(directory)
    measured = read_measured(root / "results.json")
    base = platform if platform is not None else load_preset("h200-host-nvme")
    profiles = []
    steps = []
    for name in H200_CONFIGS:
        ops = read_eager_profile(root / f"ops_{name}.csv")
        profiles.append((load_graph(root / "graphs" / f"{name}.json"), ops))
        steps.append(([op.device_s for op in ops], measured.step_s[name]))
    dispatch = fit_dispatch(steps)
    source = "fitted by tmsim.calibration.kernel_fit to calibration/h200 (H200 SXM, 2026-11-28)"
    return fit_kernels(profiles, measured, base, dispatch, source)


def kernels_toml(model: KernelModel) -> str:
    """``model`` as a ``[compute.kernels]`` table (microseconds, nanoseconds, GB/s)."""
    lines = [
        "[compute.kernels]",
        f"stream_bw_GBps = {model.stream_bw_bytes_per_s / 1e9:.6g}",
        f"fixed_us = {model.fixed_s * 1e6:.6g}",
        f"dispatch_us = {model.dispatch_s * 1e6:.6g}",
        f'conv_fp32 = "{model.math.conv_fp32.value}"',
        f'matmul_fp32 = "{model.math.matmul_fp32.value}"',
        f"tensor_core_multiple = {model.tensor_core_multiple}",
        f"unaligned_efficiency = {model.unaligned_efficiency:.6g}",
        f'source = "{model.source}"',
        "",
        "[compute.kernels.families]",
    ]
    for f in model.families:
        if f.family in GEMM_FAMILIES:
            fixed = "" if f.fixed_s is None else f", fixed_us = {f.fixed_s * 1e6:.6g}"
            lines.append(
                f"{f.family.value} = {{ passes = {f.passes:.6g}, "
                f"compute_efficiency = {f.compute_efficiency:.6g}{fixed} }}"
            )
        else:
            width = f", saturation_units = {f.saturation_units:.6g}" if f.saturation_units else ""
            lines.append(
                f"{f.family.value} = {{ passes = {f.passes:.6g}, "
                f"element_ns = {f.element_s * 1e9:.6g}{width} }}"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the fitted table and each family's error; the argument is the data folder."""
    args = list(sys.argv[1:] if argv is None else argv)
    fit = fit_h200(args[0] if args else H200_DIR)
    print(kernels_toml(fit.model))
    print(f"# {fit.samples} samples; per family: samples, rms of log(predicted / measured)")
    for fam, (n, rms) in sorted(fit.per_family.items()):
        print(f"# {fam:22s} {n:4d} {rms:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
