"""Dtype names as presets spell them."""

from __future__ import annotations

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
