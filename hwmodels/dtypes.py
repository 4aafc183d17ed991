"""Dtype names as presets spell them, and the dtypes a peak may name."""

from __future__ import annotations

#: The dtypes of graphs, as :data:`tmsim.workload.tensors.DTYPE_BYTES` names them (hwmodels
#: does not import tmsim; a test holds the two lists equal).
GRAPH_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8", "int64", "int32", "int8", "uint8", "bool")
#: The dtypes kernels compute in: the floating-point dtypes of graphs (a kernel computes in the
#: dtype of its largest floating-point operand, :func:`tmsim.kernelwork.kernel_dtype`), so the
#: ones a FLOP is charged at.
COMPUTE_DTYPES = tuple(d for d in GRAPH_DTYPES if d.startswith(("fp", "bf")))
#: The dtypes a peak may name: those kernels compute in, and tf32, the math of fp32 products
#: on tensor cores (:class:`hwmodels.kernels.MathMode`), whose FLOPs are charged as fp32.
PEAK_DTYPES = (*COMPUTE_DTYPES[:2], "tf32", *COMPUTE_DTYPES[2:])

#: Alternative spellings of dtypes, mapped to the canonical short names used in presets.
_DTYPE_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
}


def canonical_dtype(dtype: str) -> str:
    """The preset spelling of ``dtype`` (``float32`` -> ``fp32``, ``bfloat16`` -> ``bf16``)."""
    d = dtype.lower()
    return _DTYPE_ALIASES.get(d, d)


def unknown_peak_dtype(dtype: str) -> str:
    """Why ``dtype`` may not have a peak ("" if it may): it is none of :data:`PEAK_DTYPES`
    in any spelling :func:`canonical_dtype` knows."""
    if canonical_dtype(dtype) in PEAK_DTYPES:
        return ""
    return f"unknown dtype {dtype!r} (no kernel computes in it); known: {', '.join(PEAK_DTYPES)}"
