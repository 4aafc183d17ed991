"""One training step of a GPT-2 or LLaMA decoder: embeddings, blocks, head, loss, Adam.

Parameters are named after the Hugging Face modules (``wte``, ``layer3/attn.c_attn.weight``;
``embed_tokens``, ``layer3/self_attn.q_proj.weight``); block ``i``'s kernels and values
start with ``layer{i}/``. The graph's inputs are ``tokens`` and ``labels`` (``int64``,
``(b, s)``) and, for LLaMA, the rotary ``rope_table`` (cos and sin, ``(2, s, h / a)``).

GPT-2 block (pre-LayerNorm): ``ln_1``, the fused QKV projection ``attn.c_attn`` (written as
Q, K and V apart), the attention core, ``attn.c_proj``, dropout and the residual,
``ln_2``, ``mlp.c_fc``, GELU, ``mlp.c_proj``, dropout and the residual. What its backward
keeps is Korthikanti et al.'s ``s b h (34 + 5 a s / h)`` bytes (materialized attention;
``34 s b h`` plus the log-sum-exp, fused), plus each LayerNorm's fp32 statistics.

LLaMA block (pre-RMSNorm, no biases, no dropout): ``input_layernorm``, ``self_attn.q_proj``,
``k_proj`` and ``v_proj``, rotary embeddings on Q and K, the attention core,
``self_attn.o_proj``, the residual, ``post_attention_layernorm``, ``mlp.gate_proj`` and
``up_proj``, ``silu(gate) * up``, ``mlp.down_proj``, the residual: ``s b h (16 + 6 f / h)``
bytes kept with fused attention (the LLaMA-7B layer: about 32 s b h).

The loss is over every position (the shift of the labels by one token is not modelled; it
changes one position in ``s``). One step is one micro-batch: gradient accumulation over
several is not modelled.
"""

from __future__ import annotations

from tmsim.workload.graph import Graph, Role
from tmsim.workload.zoo.transformer import ops
from tmsim.workload.zoo.transformer.attention import attention
from tmsim.workload.zoo.transformer.builder import StepBuilder
from tmsim.workload.zoo.transformer.shapes import Family, StepOptions, TransformerShape

TOKENS = "tokens"
LABELS = "labels"
ROPE_TABLE = "rope_table"
TOKEN_DTYPE = "int64"
#: The token table of each family: the parameter whose dtype is the step's.
TOKEN_TABLE = {Family.GPT2: "wte", Family.LLAMA: "embed_tokens"}


def graph_name(shape: TransformerShape, opts: StepOptions) -> str:
    """``MODEL[-lL]-sS-ATTENTION-bB``: the layer count only where it is not the model's."""
    layers = f"-l{opts.layers}" if opts.layers != shape.layers else ""
    return f"{shape.name}{layers}-s{opts.seq_len}-{opts.attention.value}-b{opts.batch}"


def training_step(shape: TransformerShape, opts: StepOptions) -> Graph:
    """The training step of ``shape`` with ``opts``, named :func:`graph_name`.

    Raises :class:`~tmsim.errors.GraphError` if a tensor or the whole step is too large for
    a graph (2**62 bytes or FLOPs).
    """
    st = StepBuilder(opts.dtype)
    b, s, h = opts.batch, opts.seq_len, shape.hidden
    st.tensor(TOKENS, (b, s), Role.INPUT, TOKEN_DTYPE)
    st.tensor(LABELS, (b, s), Role.INPUT, TOKEN_DTYPE)
    gpt2 = shape.family is Family.GPT2
    table = st.param(TOKEN_TABLE[shape.family], (shape.vocab, h))
    if shape.learned_positions:
        positions: str | None = st.param("wpe", (shape.context, h))
    else:
        positions = None
        st.tensor(ROPE_TABLE, (2, s, shape.head_dim), Role.INPUT)
    x = ops.embedding(st, "embed", TOKENS, table, positions, h, dropout=shape.dropout)
    block = _gpt2_block if gpt2 else _llama_block
    for i in range(opts.layers):
        x = block(st, shape, opts, f"layer{i}/", x)
    if gpt2:
        gamma, beta = st.param("ln_f.weight", (h,)), st.param("ln_f.bias", (h,))
        x = ops.layer_norm(st, "ln_f", x, gamma, beta)
    else:
        x = ops.rms_norm(st, "norm", x, st.param("norm.weight", (h,)))
    head = table if shape.tied else st.param("lm_head.weight", (shape.vocab, h))
    (logits,) = ops.linear(st, "lm_head", x, head, None, (("logits", shape.vocab),))
    ops.cross_entropy(st, "loss", logits, LABELS)
    return st.build(graph_name(shape, opts))


def _gpt2_block(st: StepBuilder, shape: TransformerShape, opts: StepOptions, p: str, x: str) -> str:
    h, f = shape.hidden, shape.ffn

    def ln(name: str, value: str) -> str:
        gamma, beta = st.param(f"{p}{name}.weight", (h,)), st.param(f"{p}{name}.bias", (h,))
        return ops.layer_norm(st, f"{p}{name}", value, gamma, beta)

    def dense(name: str, value: str, outs: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
        width = sum(w for _, w in outs)
        weight = st.param(f"{p}{name}.weight", (st.shape(value)[-1], width))
        bias = st.param(f"{p}{name}.bias", (width,))
        return ops.linear(st, f"{p}{name}", value, weight, bias, outs)

    qkv = tuple((f"{p}attn.{n}", h) for n in "qkv")
    q, k, v = dense("attn.c_attn", ln("ln_1", x), qkv)
    context = attention(st, f"{p}attn", q, k, v, shape.heads, opts.attention, shape.dropout)
    (out,) = dense("attn.c_proj", context, ((f"{p}attn.out", h),))
    x = ops.dropout_add(st, f"{p}attn.residual", out, x)
    (up,) = dense("mlp.c_fc", ln("ln_2", x), ((f"{p}mlp.fc", f),))
    (down,) = dense("mlp.c_proj", ops.gelu(st, f"{p}mlp.gelu", up), ((f"{p}mlp.out", h),))
    return ops.dropout_add(st, f"{p}mlp.residual", down, x)


def _llama_block(
    st: StepBuilder, shape: TransformerShape, opts: StepOptions, p: str, x: str
) -> str:
    h, f = shape.hidden, shape.ffn

    def dense(name: str, value: str, width: int) -> str:
        weight = st.param(f"{p}{name}.weight", (width, st.shape(value)[-1]))
        (y,) = ops.linear(st, f"{p}{name}", value, weight, None, ((f"{p}{name}", width),))
        return y

    def norm(name: str, value: str) -> str:
        return ops.rms_norm(st, f"{p}{name}", value, st.param(f"{p}{name}.weight", (h,)))

    n1 = norm("input_layernorm", x)
    q, k, v = (dense(f"self_attn.{n}_proj", n1, h) for n in "qkv")
    q, k = ops.rotary(st, f"{p}self_attn.rotary", q, k, ROPE_TABLE)
    context = attention(st, f"{p}self_attn", q, k, v, shape.heads, opts.attention, dropout=False)
    x = ops.add(st, f"{p}self_attn.residual", dense("self_attn.o_proj", context, h), x)
    n2 = norm("post_attention_layernorm", x)
    gate, up = dense("mlp.gate_proj", n2, f), dense("mlp.up_proj", n2, f)
    act = ops.silu_mul(st, f"{p}mlp.act", gate, up)
    return ops.add(st, f"{p}mlp.residual", dense("mlp.down_proj", act, h), x)


__all__ = ["LABELS", "ROPE_TABLE", "TOKENS", "TOKEN_TABLE", "graph_name", "training_step"]
