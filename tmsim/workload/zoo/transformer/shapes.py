"""Shapes of the zoo's decoder-only transformers, and the options of one training step.

Every number is a published configuration:

- GPT-2 small, medium, large and XL: layers and widths from Radford et al., "Language Models
  are Unsupervised Multitask Learners" (2019), Table 2; heads (12, 16, 20, 25), the
  1024 learned positions, the 50,257-token vocabulary, the inner MLP width (``n_inner``
  unset, so 4 x ``n_embd``), biases everywhere, tied input and output embeddings and dropout
  0.1 (``resid_pdrop``, ``embd_pdrop``, ``attn_pdrop``) from the Hugging Face
  ``openai-community/gpt2``, ``gpt2-medium``, ``gpt2-large`` and ``gpt2-xl`` ``config.json``.
- LLaMA 7B and 13B: width, heads and layers from Touvron et al., "LLaMA: Open and Efficient
  Foundation Language Models" (arXiv 2302.13971), Table 2 (4096/32/32 and 5120/40/40);
  the SwiGLU width (``intermediate_size`` 11008 and 13824, i.e. 2/3 x 4h rounded up to a
  multiple of 256), the 32,000-token vocabulary, the 2048-token context, RMSNorm, rotary
  embeddings, no biases, no dropout and untied embeddings (``tie_word_embeddings`` false)
  from the Hugging Face ``huggyllama/llama-7b`` and ``llama-13b`` ``config.json``.

:func:`parameter_count` is the closed form of those shapes; the graphs' own counts
(``Graph.params``) are tested against it and against the published totals.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tmsim.errors import GraphError
from tmsim.workload.tensors import MAX_GRAPH_BYTES, show_int


class Family(StrEnum):
    """The layer recipe a shape follows.

    - ``GPT2``: pre-LayerNorm blocks with biases, a fused QKV projection, a 4h GELU MLP,
      learned positions, dropout after the embeddings, the attention probabilities and each
      residual branch, and the output projection tied to the token embedding.
    - ``LLAMA``: pre-RMSNorm blocks without biases, separate Q, K, V projections with
      rotary embeddings on Q and K, a SwiGLU MLP, no dropout and a separate output projection.
    """

    GPT2 = "gpt2"
    LLAMA = "llama"


class Attention(StrEnum):
    """How the attention core runs.

    - ``MATERIALIZED``: scores, softmax and (GPT-2) dropout as separate kernels; the softmax
      output, the dropped-out probabilities and the dropout mask (a, s, s per sequence) are
      kept for the backward pass, as Korthikanti et al. count them.
    - ``FUSED``: one flash-style kernel (Dao et al., FlashAttention, NeurIPS 2022); no s x s
      tensor exists, only the softmax's log-sum-exp per query and head (fp32) is kept, and
      the backward kernel computes the probabilities again from it.
    """

    MATERIALIZED = "materialized"
    FUSED = "fused"


#: Element types a transformer step may be built in. ``fp16``/``bf16``: mixed precision
#: (16-bit weights, activations and gradients; fp32 master weights and Adam moments);
#: ``fp32``: single precision (the fp32 weights are the master copy).
STEP_DTYPES = ("fp16", "bf16", "fp32")
#: The default: fp16 mixed precision (Micikevicius et al., "Mixed Precision Training", ICLR
#: 2018), the 16-bit type every GPU preset lists a peak for; bf16 has the same size.
DEFAULT_DTYPE = "fp16"
#: Context length of GPT-2 (``n_positions``) and of LLaMA (``max_position_embeddings``).
GPT2_CONTEXT = 1024
LLAMA_CONTEXT = 2048


@dataclass(frozen=True, slots=True)
class TransformerShape:
    """A decoder-only transformer: ``layers`` blocks of width ``hidden`` with ``heads``
    attention heads and an MLP of inner width ``ffn``, over a ``vocab``-token vocabulary.

    ``context`` is the model's context length: GPT-2's learned position table has that many
    rows, which bounds the sequence; LLaMA's rotary embeddings have no table, and the context
    is only the default sequence length. ``attention`` is the default attention core.
    """

    name: str
    family: Family
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    context: int
    attention: Attention

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def learned_positions(self) -> bool:
        """Whether positions come from a learned table (GPT-2) rather than rotary embeddings."""
        return self.family is Family.GPT2

    @property
    def dropout(self) -> bool:
        """Whether the model trains with dropout (GPT-2: 0.1; LLaMA: none)."""
        return self.family is Family.GPT2

    @property
    def tied(self) -> bool:
        """Whether the output projection is the token embedding (GPT-2)."""
        return self.family is Family.GPT2


GPT2_VOCAB = 50257
LLAMA_VOCAB = 32000


def _gpt2(name: str, layers: int, hidden: int, heads: int) -> TransformerShape:
    family, attention = Family.GPT2, Attention.MATERIALIZED
    ffn = 4 * hidden
    return TransformerShape(
        name, family, layers, hidden, heads, ffn, GPT2_VOCAB, GPT2_CONTEXT, attention
    )


def _llama(name: str, layers: int, hidden: int, heads: int, ffn: int) -> TransformerShape:
    family, attention = Family.LLAMA, Attention.FUSED
    return TransformerShape(
        name, family, layers, hidden, heads, ffn, LLAMA_VOCAB, LLAMA_CONTEXT, attention
    )


GPT2_SMALL = _gpt2("gpt2_small", layers=12, hidden=768, heads=12)
GPT2_MEDIUM = _gpt2("gpt2_medium", layers=24, hidden=1024, heads=16)
GPT2_LARGE = _gpt2("gpt2_large", layers=36, hidden=1280, heads=20)
GPT2_XL = _gpt2("gpt2_xl", layers=48, hidden=1600, heads=25)
LLAMA_7B = _llama("llama_7b", layers=32, hidden=4096, heads=32, ffn=11008)
LLAMA_13B = _llama("llama_13b", layers=40, hidden=5120, heads=40, ffn=13824)
#: Every shape of the zoo, in registry order.
SHAPES: tuple[TransformerShape, ...] = (
    GPT2_SMALL,
    GPT2_MEDIUM,
    GPT2_LARGE,
    GPT2_XL,
    LLAMA_7B,
    LLAMA_13B,
)


def parameter_count(shape: TransformerShape, layers: int | None = None) -> int:
    """Trainable parameters of ``shape`` with ``layers`` blocks (None: its own count).

    GPT-2: per block 12h^2 + 13h (QKV and output projections, the 4h MLP, their biases, two
    LayerNorms), plus the token and position tables and the final LayerNorm; the output
    projection is the token table. LLaMA: per block 4h^2 + 3hf + 2h (Q, K, V, O; gate, up,
    down; two RMSNorm scales), plus the token table, the output projection and the final
    RMSNorm.
    """
    h, f, v = shape.hidden, shape.ffn, shape.vocab
    n = shape.layers if layers is None else layers
    if shape.family is Family.GPT2:
        block = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
        return n * block + v * h + shape.context * h + 2 * h
    block = 4 * h * h + 3 * h * f + 2 * h
    return n * block + 2 * v * h + h


@dataclass(frozen=True, slots=True)
class StepOptions:
    """What one training step of a shape is built with, checked: ``batch`` sequences
    (the micro-batch) of ``seq_len`` tokens, element type ``dtype``, the ``attention`` core
    and ``layers`` blocks."""

    batch: int
    seq_len: int
    dtype: str
    attention: Attention
    layers: int


def step_options(
    shape: TransformerShape,
    batch: int,
    seq_len: int,
    dtype: str,
    attention: str,
    layers: int | None,
) -> StepOptions:
    """Check and resolve the options of a step of ``shape`` (``layers`` None: its own).

    Raises :class:`GraphError` naming the model for a batch, sequence length or layer count
    that is not a positive integer below 2**62, a sequence longer than GPT-2's position
    table, a dtype outside :data:`STEP_DTYPES` and an unknown attention core.
    """
    where = f"model {shape.name!r}"
    for what, value in (("batch", batch), ("seq_len", seq_len), ("layers", layers)):
        if what == "layers" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < MAX_GRAPH_BYTES:
            shown = show_int(value) if isinstance(value, int) else repr(value)
            raise GraphError(f"{where}: {what} must be a positive integer below 2**62, got {shown}")
    if shape.learned_positions and seq_len > shape.context:
        raise GraphError(
            f"{where}: seq_len {seq_len} exceeds the {shape.context} learned positions"
        )
    if dtype not in STEP_DTYPES:
        raise GraphError(f"{where}: dtype must be one of {', '.join(STEP_DTYPES)}, got {dtype!r}")
    if attention not in tuple(Attention):
        known = ", ".join(a.value for a in Attention)
        raise GraphError(f"{where}: attention must be one of {known}, got {attention!r}")
    n = shape.layers if layers is None else layers
    return StepOptions(batch, seq_len, dtype, Attention(attention), n)


__all__ = [
    "DEFAULT_DTYPE",
    "GPT2_CONTEXT",
    "GPT2_LARGE",
    "GPT2_MEDIUM",
    "GPT2_SMALL",
    "GPT2_XL",
    "LLAMA_7B",
    "LLAMA_13B",
    "LLAMA_CONTEXT",
    "SHAPES",
    "STEP_DTYPES",
    "Attention",
    "Family",
    "StepOptions",
    "TransformerShape",
    "parameter_count",
    "step_options",
]
