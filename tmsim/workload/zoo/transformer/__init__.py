"""GPT-2 and LLaMA training steps for the zoo, by name.

Each entry is a function ``(batch, seq_len=..., dtype="fp16", attention=..., layers=None)
-> Graph`` building the whole step (forward, loss, backward, Adam) directly, without the
CNN zoo's :class:`~tmsim.workload.layers.Network`: ``batch`` is the micro-batch in
sequences, ``seq_len`` the tokens per sequence (default: the model's context, 1024 for
GPT-2 and 2048 for LLaMA), ``dtype`` the 16-bit type of mixed precision (or ``fp32``),
``attention`` ``"materialized"`` or ``"fused"`` (default: GPT-2 materialized, as GPT-2 and
Megatron-LM ran it, LLaMA fused, as it is trained today) and ``layers`` the number of
blocks (None: the model's own; fewer make small graphs of the same blocks).

:func:`arguments_of` reads back, from a graph, the arguments that built it, so a plan of a
zoo transformer records how to build its graph again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from tmsim.workload.graph import Graph
from tmsim.workload.zoo.transformer.model import TOKEN_TABLE, TOKENS, training_step
from tmsim.workload.zoo.transformer.shapes import (
    DEFAULT_DTYPE,
    GPT2_CONTEXT,
    GPT2_LARGE,
    GPT2_MEDIUM,
    GPT2_SMALL,
    GPT2_XL,
    LLAMA_7B,
    LLAMA_13B,
    LLAMA_CONTEXT,
    SHAPES,
    Attention,
    TransformerShape,
    parameter_count,
    step_options,
)

_MATERIALIZED = Attention.MATERIALIZED.value
_FUSED = Attention.FUSED.value


class TransformerFn(Protocol):
    """Signature shared by every transformer entry of the zoo."""

    def __call__(
        self,
        batch: int,
        seq_len: int = ...,
        dtype: str = ...,
        attention: str = ...,
        layers: int | None = ...,
    ) -> Graph: ...


def transformer_graph(
    shape: TransformerShape,
    batch: int,
    seq_len: int | None = None,
    dtype: str = DEFAULT_DTYPE,
    attention: str | None = None,
    layers: int | None = None,
) -> Graph:
    """The training step of ``shape`` (``seq_len`` None: its context; ``attention`` None:
    its default). Raises :class:`~tmsim.errors.GraphError` for options out of range
    (:func:`~tmsim.workload.zoo.transformer.shapes.step_options`) or a step too large for
    a graph."""
    opts = step_options(
        shape,
        batch,
        shape.context if seq_len is None else seq_len,
        dtype,
        shape.attention.value if attention is None else attention,
        layers,
    )
    return training_step(shape, opts)


def gpt2_small(
    batch: int,
    seq_len: int = GPT2_CONTEXT,
    dtype: str = DEFAULT_DTYPE,
    attention: str = _MATERIALIZED,
    layers: int | None = None,
) -> Graph:
    """GPT-2 small (124,439,808 parameters) training step."""
    return transformer_graph(GPT2_SMALL, batch, seq_len, dtype, attention, layers)


def gpt2_medium(
    batch: int,
    seq_len: int = GPT2_CONTEXT,
    dtype: str = DEFAULT_DTYPE,
    attention: str = _MATERIALIZED,
    layers: int | None = None,
) -> Graph:
    """GPT-2 medium (354,823,168 parameters) training step."""
    return transformer_graph(GPT2_MEDIUM, batch, seq_len, dtype, attention, layers)


def gpt2_large(
    batch: int,
    seq_len: int = GPT2_CONTEXT,
    dtype: str = DEFAULT_DTYPE,
    attention: str = _MATERIALIZED,
    layers: int | None = None,
) -> Graph:
    """GPT-2 large (774,030,080 parameters) training step."""
    return transformer_graph(GPT2_LARGE, batch, seq_len, dtype, attention, layers)


def gpt2_xl(
    batch: int,
    seq_len: int = GPT2_CONTEXT,
    dtype: str = DEFAULT_DTYPE,
    attention: str = _MATERIALIZED,
    layers: int | None = None,
) -> Graph:
    """GPT-2 XL (1,557,611,200 parameters) training step."""
    return transformer_graph(GPT2_XL, batch, seq_len, dtype, attention, layers)


def llama_7b(
    batch: int,
    seq_len: int = LLAMA_CONTEXT,
    dtype: str = DEFAULT_DTYPE,
    attention: str = _FUSED,
    layers: int | None = None,
) -> Graph:
    """LLaMA-7B (6,738,415,616 parameters) training step."""
    return transformer_graph(LLAMA_7B, batch, seq_len, dtype, attention, layers)


def llama_13b(
    batch: int,
    seq_len: int = LLAMA_CONTEXT,
    dtype: str = DEFAULT_DTYPE,
    attention: str = _FUSED,
    layers: int | None = None,
) -> Graph:
    """LLaMA-13B (13,015,864,320 parameters) training step."""
    return transformer_graph(LLAMA_13B, batch, seq_len, dtype, attention, layers)


TRANSFORMERS: Mapping[str, TransformerFn] = {
    "gpt2_small": gpt2_small,
    "gpt2_medium": gpt2_medium,
    "gpt2_large": gpt2_large,
    "gpt2_xl": gpt2_xl,
    "llama_7b": llama_7b,
    "llama_13b": llama_13b,
}
#: The shape behind each entry.
SHAPE_OF: Mapping[str, TransformerShape] = {s.name: s for s in SHAPES}


def arguments_of(name: str, graph: Graph) -> dict[str, Any] | None:
    """The arguments of entry ``name`` (``batch``, ``seq_len``, ``dtype``, ``attention``,
    ``layers``) that would build ``graph``, read from its tokens, its token table and its
    kernels; None where the graph does not look like a step of that entry. The caller
    checks the guess by building it and comparing fingerprints."""
    shape = SHAPE_OF.get(name)
    if shape is None:
        return None
    try:
        tokens, table = graph.tensor(TOKENS), graph.tensor(TOKEN_TABLE[shape.family])
    except KeyError:
        return None
    if len(tokens.shape) != 2:
        return None
    ops = [k.op for k in graph.kernels]
    norms = sum(op in ("layer_norm", "rms_norm") for op in ops)
    layers = (norms - 1) // 2  # two per block and the final one
    fused = "flash_attention_bmm" in ops
    return {
        "batch": tokens.shape[0],
        "seq_len": tokens.shape[1],
        "dtype": table.dtype,
        "attention": (Attention.FUSED if fused else Attention.MATERIALIZED).value,
        "layers": None if layers == shape.layers else layers,
    }


__all__ = [
    "SHAPE_OF",
    "TRANSFORMERS",
    "TransformerFn",
    "arguments_of",
    "gpt2_large",
    "gpt2_medium",
    "gpt2_small",
    "gpt2_xl",
    "llama_7b",
    "llama_13b",
    "parameter_count",
    "transformer_graph",
]
