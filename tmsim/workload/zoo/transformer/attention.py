"""The causal attention core, materialized or fused, with its backward kernels.

Q, K and V are ``(b, s, h)`` tensors holding ``a`` heads of width ``h / a``; the context is
``(b, s, h)``.

Materialized (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", MLSys 2023, Section 4.1; arXiv 2205.05198): ``attention_scores_bmm`` (Q, K -> the
``(b, a, s, s)`` scores), ``masked_softmax`` (scale, causal mask and softmax -> P), with
dropout ``dropout`` (P -> P', a one-byte mask), and ``attention_context_bmm`` (P', V ->
context). The scores die at the softmax; P (for the softmax's backward), P' and the mask
(for the backward of P'V and of the dropout), Q, K and V are kept: ``5 a s^2 b`` bytes in
16-bit with dropout, ``2 a s^2 b`` without. Each backward product reads exactly its two
operands: dP' = dC V^T (dC, V), dV = P'^T dC (dC, P'), dQ = dS K (dS, K), dK = dS^T Q
(dS, Q). Every product computes all ``s^2`` scores; the mask only hides half of them.
FLOPs: ``2 b s^2 h`` per product, ``4 b s^2 h`` forward and ``8 b s^2 h`` backward, the
attention term of Narayanan et al. (SC'21, eq. 3: ``72 B s l h^2 * s / (6h)`` per step
without recomputation).

Fused (Dao et al., FlashAttention, NeurIPS 2022; FlashAttention-2, ICLR 2024):
``flash_attention_bmm`` (Q, K, V -> context and the fp32 log-sum-exp per head and query,
``(b, a, s)``); dropout, if any, is drawn again from the random state in the backward pass,
so no mask is kept. ``flash_attention_bmm_backward`` reads Q, K, V, the context, its
gradient and the log-sum-exp and computes P again. With the causal mask, blocks above the
diagonal are skipped: FLOPs are FlashAttention-2's count (Section 4.1: ``4 s^2 d a`` per
sequence forward, halved for causal masking; backward 2.5 times forward, which includes
computing P again): ``2 b s^2 h`` forward and ``5 b s^2 h`` backward.
"""

from __future__ import annotations

from tmsim.workload.zoo.transformer.builder import MASK_DTYPE, STATE_DTYPE, StepBuilder
from tmsim.workload.zoo.transformer.shapes import Attention

#: FLOPs per score of the masked softmax, forward (scale, mask, max, exponent, sum and
#: divide: about 5) and backward (P * (dP - rowsum(P * dP)): about 4).
SOFTMAX_FLOPS = (5, 4)
#: FLOPs per element of a dropout forward (mask and scale) and backward.
DROPOUT_FLOPS = (1, 1)


def attention(
    st: StepBuilder,
    name: str,
    q: str,
    k: str,
    v: str,
    heads: int,
    mode: Attention,
    dropout: bool,
) -> str:
    """The causal attention of ``q``, ``k``, ``v`` over ``heads`` heads, run as ``mode``,
    with dropout on the probabilities if ``dropout``. Returns the context's name."""
    if mode is Attention.FUSED:
        return _fused(st, name, q, k, v, heads)
    return _materialized(st, name, q, k, v, heads, dropout)


def _product_flops(st: StepBuilder, q: str) -> int:
    """``2 b s^2 h``: one of the two attention products over the full ``s x s`` scores."""
    b, s, h = st.shape(q)
    return 2 * b * s * s * h


def _materialized(
    st: StepBuilder, name: str, q: str, k: str, v: str, heads: int, dropout: bool
) -> str:
    b, s, h = st.shape(q)
    square = (b, heads, s, s)
    scores = st.value(f"{name}.scores", square)
    probs = st.value(f"{name}.probs", square)
    kept = st.value(f"{name}.probs_dropped", square) if dropout else probs
    mask = st.value(f"{name}.probs_mask", square, MASK_DTYPE) if dropout else None
    context = st.value(f"{name}.context", (b, s, h))
    product = _product_flops(st, q)
    n = b * heads * s * s
    (softmax_fwd, softmax_bwd), (dropout_fwd, dropout_bwd) = SOFTMAX_FLOPS, DROPOUT_FLOPS

    def scores_backward() -> None:
        ds = st.gradient(scores)
        if ds is not None:
            op = "attention_scores_bmm_backward"
            st.backward(f"{name}.scores.bwd_query", op, (ds, k), (q,), product)
            st.backward(f"{name}.scores.bwd_key", op, (ds, q), (k,), product)

    def softmax_backward() -> None:
        dp = st.gradient(probs)
        if dp is not None:
            op = "masked_softmax_backward"
            st.backward(f"{name}.softmax.bwd", op, (dp, probs), (scores,), softmax_bwd * n)

    def dropout_backward() -> None:
        dk = st.gradient(kept)
        if dk is not None and mask is not None:
            op = "dropout_backward"
            st.backward(f"{name}.dropout.bwd", op, (dk, mask), (probs,), dropout_bwd * n)

    def context_backward() -> None:
        dc = st.gradient(context)
        if dc is not None:
            op = "attention_context_bmm_backward"
            st.backward(f"{name}.context.bwd_probs", op, (dc, v), (kept,), product)
            st.backward(f"{name}.context.bwd_values", op, (dc, kept), (v,), product)

    op = "attention_scores_bmm"
    st.forward(f"{name}.scores.fwd", op, (q, k), (scores,), product, scores_backward)
    op = "masked_softmax"
    st.forward(f"{name}.softmax.fwd", op, (scores,), (probs,), softmax_fwd * n, softmax_backward)
    if mask is not None:
        op = "dropout"
        st.forward(
            f"{name}.dropout.fwd", op, (probs,), (kept, mask), dropout_fwd * n, dropout_backward
        )
    op = "attention_context_bmm"
    st.forward(f"{name}.context.fwd", op, (kept, v), (context,), product, context_backward)
    return context


def _fused(st: StepBuilder, name: str, q: str, k: str, v: str, heads: int) -> str:
    b, s, h = st.shape(q)
    context = st.value(f"{name}.context", (b, s, h))
    lse = st.value(f"{name}.lse", (b, heads, s), STATE_DTYPE)
    # causal: half of the two full products forward, 2.5 times that backward
    forward_flops = _product_flops(st, q)
    backward_flops = 5 * forward_flops // 2

    def backward() -> None:
        dc = st.gradient(context)
        if dc is not None:
            reads = (dc, q, k, v, context, lse)
            op = "flash_attention_bmm_backward"
            st.backward(f"{name}.flash.bwd", op, reads, (q, k, v), backward_flops)

    op = "flash_attention_bmm"
    st.forward(f"{name}.flash.fwd", op, (q, k, v), (context, lse), forward_flops, backward)
    return context


__all__ = ["DROPOUT_FLOPS", "SOFTMAX_FLOPS", "attention"]
