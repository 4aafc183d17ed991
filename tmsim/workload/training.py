"""Forward model -> whole training step (forward, loss, backward, SGD with momentum).

What each backward kernel reads is what it really needs from the forward pass, which is what
decides the step's memory footprint:

=============  ==============================================================  ==========
layer          backward kernel(s) and their inputs                              FLOPs
=============  ==============================================================  ==========
conv2d         ``bwd_data(dy, weight) -> dx``; ``bwd_weight(dy, x) -> dW, db``   fwd each
linear         as conv2d                                                        fwd each
batch_norm     ``bwd(dy, x, gamma, mean, invstd) -> dx, dgamma, dbeta``          12/elem
relu           ``bwd(dy, y) -> dx`` (the output, not the input)                 1/elem
max_pool       ``bwd(dy, x, y) -> dx``                                          window/elem
avg_pool       ``bwd(dy) -> dx``                                                window/elem
concat         ``bwd(dy) -> dx_1 ... dx_n`` (slicing)                            0
add            none: ``dy`` itself is the gradient of both inputs                -
loss           ``bwd(probs, labels) -> dlogits``                                 2/elem
=============  ==============================================================  ==========

Batch norm saves its per-channel mean and inverse standard deviation (fp32) in the forward
pass. Where a value fans out to several layers, its partial gradients are summed as they
arrive by ``accumulate`` kernels, so each partial dies as soon as it is added. No gradient is
computed for the network input. After the backward pass, one ``sgd_momentum`` kernel per
weight reads its gradient and updates the weight and its momentum buffer (optimizer state) in
place, as a framework's ``optimizer.step()`` does.

Not modelled (each small against activations): batch-norm running statistics, convolution
workspaces, dropout masks.
"""

from __future__ import annotations

import math

from tmsim.workload.graph import DTYPE_BYTES, Graph, Kernel, Phase, Role, Tensor
from tmsim.workload.layers import ForwardModel, Layer, Op, Shape

#: Backward FLOPs per input element of the element-wise and normalization layers.
BACKWARD_FLOPS_PER_ELEMENT = {Op.BATCH_NORM: 12, Op.RELU: 1, Op.SOFTMAX_CROSS_ENTROPY: 2}
#: FLOPs per parameter of one SGD-with-momentum step: m = mu*m + g; w = w - lr*m.
SGD_FLOPS_PER_PARAM = 4
#: FLOPs per element of summing two partial gradients.
ACCUMULATE_FLOPS_PER_ELEMENT = 1
LABELS = "labels"
STATS_DTYPE = "fp32"
LABELS_DTYPE = "int64"


class _StepBuilder:
    """Accumulates the tensors and kernels of one training step (private to this module)."""

    def __init__(self, model: ForwardModel) -> None:
        self.model = model
        self.tensors: dict[str, Tensor] = {}
        self.kernels: list[Kernel] = []
        self.shapes: dict[str, Shape] = {model.input_name: model.input_shape}
        self.grad: dict[str, str] = {}  # value -> its (partially) accumulated gradient
        self.n_acc = 0

    def tensor(self, name: str, shape: Shape, role: Role, dtype: str | None = None) -> str:
        dt = dtype or self.model.dtype
        self.tensors[name] = Tensor(name, math.prod(shape) * DTYPE_BYTES[dt], role, dt, shape)
        return name

    def kernel(
        self,
        name: str,
        op: str,
        inputs: tuple[str, ...],
        outputs: tuple[str, ...],
        phase: Phase,
        flops: int,
        updates: tuple[str, ...] = (),
    ) -> None:
        self.kernels.append(Kernel(name, op, inputs, outputs, phase, flops, updates))

    def contribute(self, value: str, partial: str) -> None:
        """Add ``partial`` to the gradient of ``value`` (an ``accumulate`` kernel if needed)."""
        if value == self.model.input_name:
            return
        previous = self.grad.get(value)
        if previous is None:
            self.grad[value] = partial
            return
        self.n_acc += 1
        total = self.tensor(f"{value}.grad_sum{self.n_acc}", self.shapes[value], Role.GRADIENT)
        flops = ACCUMULATE_FLOPS_PER_ELEMENT * math.prod(self.shapes[value])
        self.kernel(
            f"{value}.accumulate{self.n_acc}",
            "accumulate",
            (previous, partial),
            (total,),
            Phase.BACKWARD,
            flops,
        )
        self.grad[value] = total


def training_graph(model: ForwardModel) -> Graph:
    """Build the training step of ``model`` as a validated :class:`Graph`.

    The graph is named ``f"{model.name}-b{model.batch}"``. Raises
    :class:`~tmsim.errors.GraphError` if the resulting graph is malformed (which, for a model
    built by :class:`~tmsim.workload.layers.Network`, indicates a bug here).
    """
    b = _StepBuilder(model)
    b.tensor(model.input_name, model.input_shape, Role.INPUT)
    b.tensor(LABELS, (model.batch,), Role.INPUT, LABELS_DTYPE)
    weights: list[str] = []
    for layer in model.layers:
        for suffix, shape in layer.weights:
            w = b.tensor(f"{layer.name}.{suffix}", shape, Role.WEIGHT)
            b.tensor(f"{w}.momentum", shape, Role.OPTIMIZER_STATE)
            weights.append(w)
        _forward(b, layer)
    for layer in reversed(model.layers):
        _backward(b, layer)
    for w in weights:
        if w not in b.grad:
            continue  # a weight of a layer that does not reach the loss gets no update
        shape = b.tensors[w].shape
        b.kernel(
            f"{w}.sgd",
            "sgd_momentum",
            (b.grad[w],),
            (),
            Phase.UPDATE,
            SGD_FLOPS_PER_PARAM * math.prod(shape),
            updates=(w, f"{w}.momentum"),
        )
    return Graph(f"{model.name}-b{model.batch}", b.tensors.values(), b.kernels)


def _weight_names(layer: Layer) -> tuple[str, ...]:
    return tuple(f"{layer.name}.{suffix}" for suffix, _ in layer.weights)


def _forward(b: _StepBuilder, layer: Layer) -> None:
    name, op = layer.name, layer.op
    b.shapes[name] = layer.shape
    inputs = layer.inputs + _weight_names(layer)
    outputs = [b.tensor(name, layer.shape, Role.ACTIVATION)]
    if op is Op.BATCH_NORM:
        c = (layer.shape[1],)
        outputs.append(b.tensor(f"{name}.mean", c, Role.ACTIVATION, STATS_DTYPE))
        outputs.append(b.tensor(f"{name}.invstd", c, Role.ACTIVATION, STATS_DTYPE))
    elif op is Op.SOFTMAX_CROSS_ENTROPY:
        inputs += (LABELS,)
        outputs.append(b.tensor(f"{name}.probs", b.shapes[layer.inputs[0]], Role.ACTIVATION))
    b.kernel(f"{name}.fwd", op.value, inputs, tuple(outputs), Phase.FORWARD, layer.flops)


def _backward(b: _StepBuilder, layer: Layer) -> None:
    name, op = layer.name, layer.op
    if op is Op.SOFTMAX_CROSS_ENTROPY:
        (logits,) = layer.inputs
        d = b.tensor(f"{name}.d_{logits}", b.shapes[logits], Role.GRADIENT)
        flops = BACKWARD_FLOPS_PER_ELEMENT[op] * math.prod(b.shapes[logits])
        b.kernel(f"{name}.bwd", op.value, (f"{name}.probs", LABELS), (d,), Phase.BACKWARD, flops)
        b.contribute(logits, d)
        return
    dy = b.grad.get(name)
    if dy is None:
        return  # the layer's output does not reach the loss
    if op is Op.ADD:
        for x in layer.inputs:
            b.contribute(x, dy)
    elif op is Op.CONCAT:
        parts = tuple(b.tensor(f"{name}.d_{x}", b.shapes[x], Role.GRADIENT) for x in layer.inputs)
        b.kernel(f"{name}.bwd", "concat_backward", (dy,), parts, Phase.BACKWARD, 0)
        for x, part in zip(layer.inputs, parts, strict=True):
            b.contribute(x, part)
    elif op in (Op.CONV2D, Op.LINEAR):
        _backward_weighted(b, layer, dy)
    else:
        _backward_elementwise(b, layer, dy)


def _backward_weighted(b: _StepBuilder, layer: Layer, dy: str) -> None:
    """Convolution and linear: data gradient from the weight, weight gradient from the input."""
    (x,) = layer.inputs
    name, op = layer.name, layer.op.value
    weights = _weight_names(layer)
    # Bias gradients are a reduction of dy: one FLOP per output element.
    bias_flops = math.prod(layer.shape) if len(weights) > 1 else 0
    matmul_flops = layer.flops - bias_flops
    if x != b.model.input_name:
        dx = b.tensor(f"{name}.d_{x}", b.shapes[x], Role.GRADIENT)
        b.kernel(
            f"{name}.bwd_data",
            f"{op}_backward_data",
            (dy, weights[0]),
            (dx,),
            Phase.BACKWARD,
            matmul_flops,
        )
        b.contribute(x, dx)
    grads = tuple(
        b.tensor(f"{w}.grad", shape, Role.GRADIENT)
        for w, (_, shape) in zip(weights, layer.weights, strict=True)
    )
    b.kernel(
        f"{name}.bwd_weight",
        f"{op}_backward_weight",
        (dy, x),
        grads,
        Phase.BACKWARD,
        layer.flops,
    )
    for w, g in zip(weights, grads, strict=True):
        b.contribute(w, g)


def _backward_elementwise(b: _StepBuilder, layer: Layer, dy: str) -> None:
    """Batch norm, ReLU and pooling: one kernel producing the input gradient."""
    (x,) = layer.inputs
    name, op = layer.name, layer.op
    in_elems = math.prod(b.shapes[x])
    outputs = [b.tensor(f"{name}.d_{x}", b.shapes[x], Role.GRADIENT)]
    if op is Op.BATCH_NORM:
        gamma, beta = _weight_names(layer)
        inputs: tuple[str, ...] = (dy, x, gamma, f"{name}.mean", f"{name}.invstd")
        outputs += [
            b.tensor(f"{gamma}.grad", (layer.shape[1],), Role.GRADIENT),
            b.tensor(f"{beta}.grad", (layer.shape[1],), Role.GRADIENT),
        ]
        flops = BACKWARD_FLOPS_PER_ELEMENT[op] * in_elems
    elif op is Op.RELU:
        inputs = (dy, name)
        flops = BACKWARD_FLOPS_PER_ELEMENT[op] * in_elems
    elif op is Op.MAX_POOL:
        inputs = (dy, x, name)
        flops = layer.flops
    elif op is Op.AVG_POOL:
        inputs = (dy,)
        flops = layer.flops
    else:  # pragma: no cover - every Op is handled above or in _backward
        raise AssertionError(f"no backward rule for {op}")
    b.kernel(f"{name}.bwd", f"{op.value}_backward", inputs, tuple(outputs), Phase.BACKWARD, flops)
    b.contribute(x, outputs[0])
    if op is Op.BATCH_NORM:
        gamma, beta = _weight_names(layer)
        b.contribute(gamma, outputs[1])
        b.contribute(beta, outputs[2])
