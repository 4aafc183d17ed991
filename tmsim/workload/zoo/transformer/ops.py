"""The transformer's operations outside the attention core, each with its backward kernels.

Each function appends a forward kernel to a :class:`StepBuilder` and puts its backward on
the tape; what a backward kernel reads is what it needs, which decides what the forward pass
keeps:

==================  ======================================  =====================================
operation           forward kernel (op)                     backward kernels: reads -> gradients
==================  ======================================  =====================================
linear              ``linear``: x, W[, b] -> y (pieces)     ``linear_backward_data``: dy, W -> dx;
                                                            ``linear_backward_weight``: dy, x ->
                                                            dW[, db]
layer norm          ``layer_norm``: x, g, b -> y, stats     dy, x, g, stats -> dx, dg, db
RMS norm            ``rms_norm``: x, g -> y, rstd           dy, x, g, rstd -> dx, dg
dropout + residual  ``dropout_add``: a, x -> y, mask        ``dropout_backward``: dy, mask -> da;
                                                            dx is dy itself
residual            ``add``: a, x -> y                      none: dy is the gradient of both
GELU                ``gelu``: x -> y                        dy, x -> dx
SwiGLU              ``silu_mul``: gate, up -> y             dy, gate, up -> dgate, dup
rotary              ``rotary_embedding``: q, k, table ->    dq', dk', table -> dq, dk
                    q', k'
embedding           ``embedding``: tokens, table[, pos]     dy, tokens[, mask] -> dtable[, dpos]
                    -> x[, mask]
loss                ``softmax_cross_entropy``: logits,      logprobs, labels -> dlogits
                    labels -> loss, logprobs (fp32)
==================  ======================================  =====================================

The op names carry the class the cost model times a kernel by (a substring rule:
``linear`` and ``bmm`` are matrix products, ``norm`` and ``softmax`` normalizations, the
rest element-wise). FLOPs count a multiply-add as two; the per-element counts of the
element-wise and normalization kernels are approximate (they are memory-bound, so their
FLOPs barely move their time): layer norm 8 forward and 12 backward, as the batch norm of
the CNN zoo; RMS norm half of that (no mean); GELU's tanh form 8 and its derivative 16;
SiLU times the up projection 5 and 10; rotary 3 per element of Q and K either way; the
loss's softmax 5 forward and 2 backward, as the CNN zoo's loss.
"""

from __future__ import annotations

from collections.abc import Sequence

from tmsim.workload.zoo.transformer.builder import MASK_DTYPE, STATE_DTYPE, StepBuilder

LAYER_NORM_FLOPS = (8, 12)
RMS_NORM_FLOPS = (4, 6)
GELU_FLOPS = (8, 16)
SILU_MUL_FLOPS = (5, 10)
ROTARY_FLOPS = (3, 3)
LOSS_FLOPS = (5, 2)
LOSS_DTYPE = STATE_DTYPE


def linear(
    st: StepBuilder,
    name: str,
    x: str,
    weight: str,
    bias: str | None,
    outputs: Sequence[tuple[str, int]],
) -> tuple[str, ...]:
    """``y = x @ W (+ b)`` for ``x`` of shape ``(b, s, in)``, written as the ``outputs``
    pieces ``(name, width)`` whose widths sum to the weight's output features (a fused QKV
    projection writes Q, K and V apart). Returns the pieces' names."""
    *lead, in_features = st.shape(x)
    rows = st.elements(x) // in_features
    out_features = sum(width for _, width in outputs)
    outs = tuple(st.value(n, (*lead, width)) for n, width in outputs)
    matmul = 2 * rows * in_features * out_features
    bias_flops = rows * out_features if bias is not None else 0
    params = (weight,) if bias is None else (weight, bias)

    def backward() -> None:
        dys = [st.gradient(o) for o in outs]
        if any(d is None for d in dys):
            return  # a piece that does not reach the loss: never the case in this zoo
        grads = tuple(d for d in dys if d is not None)
        st.backward(f"{name}.bwd_data", "linear_backward_data", (*grads, weight), (x,), matmul)
        st.backward(
            f"{name}.bwd_weight", "linear_backward_weight", (*grads, x), params, matmul + bias_flops
        )

    st.forward(f"{name}.fwd", "linear", (x, *params), outs, matmul + bias_flops, backward)
    return outs


def layer_norm(st: StepBuilder, name: str, x: str, gamma: str, beta: str) -> str:
    """LayerNorm over the last axis; keeps the input and its per-row mean and 1/std (fp32)."""
    *rows, _ = st.shape(x)
    y = st.value(name, st.shape(x))
    stats = st.value(f"{name}.stats", (*rows, 2), STATE_DTYPE)
    n = st.elements(x)
    fwd, bwd = LAYER_NORM_FLOPS

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            op = "layer_norm_backward"
            st.backward(f"{name}.bwd", op, (dy, x, gamma, stats), (x, gamma, beta), bwd * n)

    st.forward(f"{name}.fwd", "layer_norm", (x, gamma, beta), (y, stats), fwd * n, backward)
    return y


def rms_norm(st: StepBuilder, name: str, x: str, gamma: str) -> str:
    """RMSNorm over the last axis; keeps the input and its per-row 1/rms (fp32)."""
    *rows, _ = st.shape(x)
    y = st.value(name, st.shape(x))
    rstd = st.value(f"{name}.rstd", tuple(rows), STATE_DTYPE)
    n = st.elements(x)
    fwd, bwd = RMS_NORM_FLOPS

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            op = "rms_norm_backward"
            st.backward(f"{name}.bwd", op, (dy, x, gamma, rstd), (x, gamma), bwd * n)

    st.forward(f"{name}.fwd", "rms_norm", (x, gamma), (y, rstd), fwd * n, backward)
    return y


def dropout_add(st: StepBuilder, name: str, branch: str, residual: str) -> str:
    """``residual + dropout(branch)``; keeps the one-byte dropout mask."""
    y = st.value(name, st.shape(residual))
    mask = st.value(f"{name}.mask", st.shape(residual), MASK_DTYPE)
    n = st.elements(residual)

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            st.backward(f"{name}.bwd", "dropout_backward", (dy, mask), (branch,), n)
            st.pass_gradient(dy, residual)

    st.forward(f"{name}.fwd", "dropout_add", (branch, residual), (y, mask), 2 * n, backward)
    return y


def add(st: StepBuilder, name: str, branch: str, residual: str) -> str:
    """``residual + branch``; the backward pass needs no kernel."""
    y = st.value(name, st.shape(residual))

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            st.pass_gradient(dy, branch)
            st.pass_gradient(dy, residual)

    st.forward(f"{name}.fwd", "add", (branch, residual), (y,), st.elements(residual), backward)
    return y


def gelu(st: StepBuilder, name: str, x: str) -> str:
    """GELU (tanh form); its backward reads the input."""
    y = st.value(name, st.shape(x))
    n = st.elements(x)
    fwd, bwd = GELU_FLOPS

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            st.backward(f"{name}.bwd", "gelu_backward", (dy, x), (x,), bwd * n)

    st.forward(f"{name}.fwd", "gelu", (x,), (y,), fwd * n, backward)
    return y


def silu_mul(st: StepBuilder, name: str, gate: str, up: str) -> str:
    """SwiGLU's ``silu(gate) * up``; its backward reads both inputs."""
    y = st.value(name, st.shape(gate))
    n = st.elements(gate)
    fwd, bwd = SILU_MUL_FLOPS

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            st.backward(f"{name}.bwd", "silu_mul_backward", (dy, gate, up), (gate, up), bwd * n)

    st.forward(f"{name}.fwd", "silu_mul", (gate, up), (y,), fwd * n, backward)
    return y


def rotary(st: StepBuilder, name: str, q: str, k: str, table: str) -> tuple[str, str]:
    """Rotary position embedding of Q and K by the cos/sin ``table``; a rotation, so its
    backward needs the table only."""
    q_rot = st.value(f"{name}.q", st.shape(q))
    k_rot = st.value(f"{name}.k", st.shape(k))
    n = st.elements(q) + st.elements(k)
    fwd, bwd = ROTARY_FLOPS

    def backward() -> None:
        dq, dk = st.gradient(q_rot), st.gradient(k_rot)
        if dq is not None and dk is not None:
            op = "rotary_embedding_backward"
            st.backward(f"{name}.bwd", op, (dq, dk, table), (q, k), bwd * n)

    st.forward(f"{name}.fwd", "rotary_embedding", (q, k, table), (q_rot, k_rot), fwd * n, backward)
    return q_rot, k_rot


def embedding(
    st: StepBuilder,
    name: str,
    tokens: str,
    table: str,
    positions: str | None,
    hidden: int,
    dropout: bool,
) -> str:
    """Token rows of ``table`` (plus the learned ``positions`` rows, then dropout, for
    GPT-2) for ``tokens`` of shape ``(b, s)``; the backward scatters the gradient into
    the tables' gradients."""
    shape = (*st.shape(tokens), hidden)
    y = st.value(name, shape)
    mask = st.value(f"{name}.mask", shape, MASK_DTYPE) if dropout else None
    n = st.elements(y)
    params = (table,) if positions is None else (table, positions)

    def backward() -> None:
        dy = st.gradient(y)
        if dy is not None:
            reads = (dy, tokens) if mask is None else (dy, tokens, mask)
            st.backward(f"{name}.bwd", "embedding_backward", reads, params, n * len(params))

    outs = (y,) if mask is None else (y, mask)
    flops = n * (len(params) - 1 + (mask is not None))
    st.forward(f"{name}.fwd", "embedding", (tokens, *params), outs, flops, backward)
    return y


def cross_entropy(st: StepBuilder, name: str, logits: str, labels: str) -> str:
    """Mean softmax cross-entropy of ``logits`` against ``labels``, computed in fp32; keeps
    the fp32 log-probabilities, which its backward reads with the labels. Returns the loss."""
    loss = st.value(name, (1,), LOSS_DTYPE)
    logprobs = st.value(f"{name}.logprobs", st.shape(logits), LOSS_DTYPE)
    n = st.elements(logits)
    fwd, bwd = LOSS_FLOPS

    def backward() -> None:
        op = "softmax_cross_entropy_backward"
        st.backward(f"{name}.bwd", op, (logprobs, labels), (logits,), bwd * n)

    op = "softmax_cross_entropy"
    st.forward(f"{name}.fwd", op, (logits, labels), (loss, logprobs), fwd * n, backward)
    return loss


__all__ = [
    "add",
    "cross_entropy",
    "dropout_add",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "rms_norm",
    "rotary",
    "silu_mul",
]
