"""FLOPs of one PyTorch ATen operator, from the shapes of its operands.

Plain Python: the tracer (:mod:`tmsim.workload.torchimport.trace`) hands each op its
arguments with every tensor replaced by an :class:`Operand` (its shape) and the shapes of its
outputs. A multiply-add counts two FLOPs, as everywhere in tmsim.

========================================  ===============================================
op                                        FLOPs
========================================  ===============================================
``convolution``                           2 x N x spatial x prod(weight shape), + one per
                                          output element with a bias; ``spatial`` is the
                                          output's (the input's when transposed)
``convolution_backward``                  the forward's products once for the input
                                          gradient and once for the weight gradient, + one
                                          per output element for the bias gradient
``mm`` / ``bmm``                          2 x (B x) m x k x n
``addmm`` / ``baddbmm``                   the product's, + m x n (x B) for the addition
``mv`` / ``addmv`` / ``dot``              2 x m x n (2 x n)
fused attention, forward                  2 x B x H x L x S x (E + Ev): Q K^T and P V
                                          (a causal mask's skipped half is counted)
fused attention, backward                 2.5 x the forward's (five products to two)
batch, layer, group and RMS norm          8 per input element forward, 12 backward
``_softmax``, ``_log_softmax``            5 per element; their backward 4 per element
pooling, forward and backward             window elements per output element (of the
                                          forward's output)
reductions (``sum``, ``mean``, ...)       1 per input element
copies, casts, fills, gathers, ``cat``    0
anything else (element-wise)              1 per element of the first output
on complex values (:func:`real_flops`)    products 4 times the count above (a complex
                                          multiply-add is 8 real FLOPs), others twice (one
                                          per real part)
========================================  ===============================================

Sources: convolution and matrix products as in Molchanov et al., "Pruning Convolutional
Neural Networks for Resource Efficient Inference" (ICLR 2017, appendix: FLOPs per layer), and
as :mod:`torch.utils.flop_counter` counts them; the attention backward's 2.5x as Dao,
"FlashAttention-2" (2023, section 4: five matrix products in the backward pass to two in the
forward). Norms and softmax count the passes over each element (mean 1, variance 3,
normalize 2, scale and shift 2 forward), the same per-element constants as tmsim's zoo
(:data:`tmsim.workload.layers.FORWARD_FLOPS_PER_ELEMENT`,
:data:`tmsim.workload.training.BACKWARD_FLOPS_PER_ELEMENT`), so an imported graph and a zoo
graph of one network count alike; their time is bandwidth-bound in any case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from tmsim.workload.layers import FORWARD_FLOPS_PER_ELEMENT, Op
from tmsim.workload.training import BACKWARD_FLOPS_PER_ELEMENT

Shape = tuple[int, ...]

#: FLOPs per input element of a normalization, forward and backward (the zoo's batch norm).
NORM_FORWARD_FLOPS_PER_ELEMENT = FORWARD_FLOPS_PER_ELEMENT[Op.BATCH_NORM]
NORM_BACKWARD_FLOPS_PER_ELEMENT = BACKWARD_FLOPS_PER_ELEMENT[Op.BATCH_NORM]
#: Softmax forward per element: max, subtract, exp, sum, divide.
SOFTMAX_FORWARD_FLOPS_PER_ELEMENT = 5
#: Softmax backward per element: y * (dy - sum(dy * y)): multiply, sum, subtract, multiply.
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4
#: A fused attention's backward over its forward (FlashAttention-2, section 4).
ATTENTION_BACKWARD_RATIO = 2.5


@dataclass(frozen=True, slots=True)
class Operand:
    """A tensor argument of an op, by its shape."""

    shape: Shape

    @property
    def elements(self) -> int:
        """Number of elements (1 for a scalar)."""
        return math.prod(self.shape)


Args = Sequence[object]
Rule = Callable[[Args, Sequence[Shape]], int]


def _operands(args: Args) -> list[Operand]:
    return [a for a in args if isinstance(a, Operand)]


def _shape(args: Args, i: int) -> Shape:
    a = args[i] if i < len(args) else None
    return a.shape if isinstance(a, Operand) else ()


def _conv_products(input_shape: Shape, weight: Shape, output: Shape, transposed: bool) -> int:
    """FLOPs of a convolution's multiply-adds: every weight element meets every spatial
    position of the output (of the input when transposed) of every sample."""
    if len(input_shape) < 2 or len(weight) < 2:
        return 0
    spatial = input_shape[2:] if transposed else output[2:]
    return 2 * input_shape[0] * math.prod(spatial) * math.prod(weight)


def _flag(args: Args, i: int) -> bool:
    return bool(args[i]) if i < len(args) and isinstance(args[i], bool) else False


def _convolution(args: Args, outputs: Sequence[Shape]) -> int:
    out = outputs[0] if outputs else ()
    flops = _conv_products(_shape(args, 0), _shape(args, 1), out, _flag(args, 6))
    return flops + (math.prod(out) if _shape(args, 2) else 0)


def _convolution_backward(args: Args, outputs: Sequence[Shape]) -> int:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    #  output_padding, groups, output_mask): the mask says which gradients are computed
    grad_out, x, w = _shape(args, 0), _shape(args, 1), _shape(args, 2)
    products = _conv_products(x, w, grad_out, _flag(args, 7))
    mask = args[10] if len(args) > 10 and isinstance(args[10], list | tuple) else ()
    grad_input, grad_weight, grad_bias = (bool(m) for m in (*mask, True, True, True)[:3])
    bias = math.prod(grad_out) if grad_bias else 0
    return products * (int(grad_input) + int(grad_weight)) + bias


def _mm(args: Args, outputs: Sequence[Shape]) -> int:
    """2 x (batch x) m x k x n of the last two tensor arguments, (..., m, k) and (..., k, n)."""
    ops = _operands(args)
    if len(ops) < 2 or len(ops[-2].shape) < 2 or len(ops[-1].shape) < 2:
        return 0
    a, b = ops[-2].shape, ops[-1].shape
    return 2 * math.prod(a[:-2]) * a[-2] * a[-1] * b[-1]


def _addmm(args: Args, outputs: Sequence[Shape]) -> int:
    return _mm(args, outputs) + (math.prod(outputs[0]) if outputs else 0)


def _mv(args: Args, outputs: Sequence[Shape]) -> int:
    ops = _operands(args)
    return 2 * ops[-2].elements if len(ops) >= 2 else 0


def _attention_forward(args: Args) -> int:
    """2 x B x H x L x S x (E + Ev) of ``q, k, v`` (the first three tensor arguments)."""
    q, k, v = (_shape(args, i) for i in range(3))
    if min(len(q), len(k), len(v)) < 2:
        return 0
    return 2 * math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


def _attention(args: Args, outputs: Sequence[Shape]) -> int:
    return _attention_forward(args)


def _attention_backward(args: Args, outputs: Sequence[Shape]) -> int:
    # (grad_out, query, key, value, ...): the forward's products, 2.5 times
    return round(ATTENTION_BACKWARD_RATIO * _attention_forward(args[1:]))


def _per_input_element(count: int) -> Rule:
    def rule(args: Args, outputs: Sequence[Shape]) -> int:
        ops = _operands(args)
        return count * (ops[0].elements if ops else 0)

    return rule


def _norm_backward(args: Args, outputs: Sequence[Shape]) -> int:
    # (grad_out, input, ...): per element of the input
    ops = _operands(args)
    return NORM_BACKWARD_FLOPS_PER_ELEMENT * (ops[1].elements if len(ops) > 1 else 0)


def _per_output_element(count: int) -> Rule:
    def rule(args: Args, outputs: Sequence[Shape]) -> int:
        return count * (math.prod(outputs[0]) if outputs else 0)

    return rule


def _window(args: Args) -> int:
    """Elements of a pooling window from its ``kernel_size`` argument (the first list)."""
    size = next((a for a in args if isinstance(a, list | tuple)), ())
    return math.prod(int(s) for s in size) if size else 1


def _pool(args: Args, outputs: Sequence[Shape]) -> int:
    return _window(args) * (math.prod(outputs[0]) if outputs else 0)


def _pool_backward(args: Args, outputs: Sequence[Shape]) -> int:
    return _window(args) * _operands(args)[0].elements if _operands(args) else 0


_MOVEMENT = (
    "clone",
    "_to_copy",
    "copy",
    "copy_",
    "cat",
    "stack",
    "constant_pad_nd",
    "index",
    "index_select",
    "gather",
    "scatter",
    "embedding",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "empty",
    "empty_like",
    "empty_strided",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty",
    "new_empty_strided",
    "arange",
    "scalar_tensor",
    "lift_fresh_copy",
    "slice_scatter",
    "select_scatter",
    "as_strided_scatter",
    "masked_fill",
    "where",
    "convert_element_type",
    "tril",
    "triu",
    "bernoulli",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
)
_REDUCTIONS = (
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "var",
    "std",
    "prod",
    "_adaptive_avg_pool2d",
    "adaptive_avg_pool2d",
    "_adaptive_avg_pool3d",
)

#: The rule of each op with one of its own; others use :func:`_per_output_element` (1).
RULES: Mapping[str, Rule] = MappingProxyType(
    {
        "convolution": _convolution,
        "_convolution": _convolution,
        "convolution_backward": _convolution_backward,
        "mm": _mm,
        "bmm": _mm,
        "matmul": _mm,
        "addmm": _addmm,
        "baddbmm": _addmm,
        "mv": _mv,
        "addmv": _mv,
        "dot": _mv,
        **dict.fromkeys(
            (
                "_scaled_dot_product_flash_attention",
                "_scaled_dot_product_flash_attention_for_cpu",
                "_scaled_dot_product_efficient_attention",
                "_scaled_dot_product_cudnn_attention",
                "scaled_dot_product_attention",
            ),
            _attention,
        ),
        **dict.fromkeys(
            (
                "_scaled_dot_product_flash_attention_backward",
                "_scaled_dot_product_flash_attention_for_cpu_backward",
                "_scaled_dot_product_efficient_attention_backward",
                "_scaled_dot_product_cudnn_attention_backward",
            ),
            _attention_backward,
        ),
        **dict.fromkeys(
            (
                "native_batch_norm",
                "_native_batch_norm_legit",
                "_native_batch_norm_legit_functional",
                "_native_batch_norm_legit_no_training",
                "native_layer_norm",
                "native_group_norm",
                "_fused_rms_norm",
            ),
            _per_input_element(NORM_FORWARD_FLOPS_PER_ELEMENT),
        ),
        **dict.fromkeys(
            (
                "native_batch_norm_backward",
                "batch_norm_backward",
                "native_layer_norm_backward",
                "native_group_norm_backward",
                "_fused_rms_norm_backward",
            ),
            _norm_backward,
        ),
        "_softmax": _per_input_element(SOFTMAX_FORWARD_FLOPS_PER_ELEMENT),
        "_log_softmax": _per_input_element(SOFTMAX_FORWARD_FLOPS_PER_ELEMENT),
        "_softmax_backward_data": _per_input_element(SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT),
        "_log_softmax_backward_data": _per_input_element(SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT),
        **dict.fromkeys(
            ("max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool2d", "avg_pool3d"),
            _pool,
        ),
        **dict.fromkeys(
            (
                "max_pool2d_with_indices_backward",
                "max_pool3d_with_indices_backward",
                "avg_pool2d_backward",
                "avg_pool3d_backward",
            ),
            _pool_backward,
        ),
        **dict.fromkeys(_REDUCTIONS, _per_input_element(1)),
        **dict.fromkeys(_MOVEMENT, _per_output_element(0)),
    }
)


#: A complex multiply-add over a real one: four real multiplies and four adds to one of each.
COMPLEX_PRODUCT_FACTOR = 4
#: A complex element-wise op over a real one: one per real part.
COMPLEX_ELEMENT_FACTOR = 2
#: The ops whose FLOPs are multiply-adds (matrix products, convolutions, fused attention).
PRODUCT_OPS = frozenset(
    op
    for op, rule in RULES.items()
    if rule in (_mm, _addmm, _mv, _convolution, _convolution_backward, _attention)
    or rule is _attention_backward
)


def real_flops(op: str, flops: int, complex_values: bool) -> int:
    """The real FLOPs of ``flops`` counted by :func:`aten_flops` for op ``op`` (its base
    name) when ``complex_values`` (an operand or output is complex; module documentation)."""
    if not complex_values:
        return flops
    return flops * (COMPLEX_PRODUCT_FACTOR if op in PRODUCT_OPS else COMPLEX_ELEMENT_FACTOR)


def aten_flops(op: str, args: Args, outputs: Sequence[Shape]) -> int:
    """FLOPs of ATen op ``op`` (its name without namespace or overload: ``"addmm"``) called
    with ``args`` (tensors as :class:`Operand`, other arguments as given) and producing
    tensors of shapes ``outputs``, by the table of the module documentation. Never raises
    for arguments of an unexpected form: a rule that cannot read them counts 0."""
    rule = RULES.get(op, _per_output_element(1))
    try:
        return max(0, int(rule(args, outputs)))
    except (IndexError, TypeError, ValueError):
        return 0
