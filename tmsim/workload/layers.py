"""Forward network descriptions: layers with propagated shapes and forward FLOPs.

A :class:`Network` builder records layers in forward order and propagates shapes, so a model
is written the way it is drawn (``y = net.conv2d(x, 64, 7, stride=2, padding=3)``) and never
with hand-typed tensor sizes. :meth:`Network.build` returns a :class:`ForwardModel`, the
immutable input of :func:`tmsim.workload.training.training_graph`.

Shapes are ``(N, C, H, W)`` for images and ``(N, F)`` for features. FLOPs count a
multiply-add as two operations.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from tmsim.errors import GraphError
from tmsim.workload.graph import DTYPE_BYTES
from tmsim.workload.tensors import MAX_GRAPH_BYTES, show_int

Shape = tuple[int, ...]


class Op(StrEnum):
    """Forward layer types that :mod:`tmsim.workload.training` knows how to differentiate."""

    CONV2D = "conv2d"
    BATCH_NORM = "batch_norm"
    RELU = "relu"
    MAX_POOL = "max_pool"
    AVG_POOL = "avg_pool"
    CONCAT = "concat"
    ADD = "add"
    LINEAR = "linear"
    SOFTMAX_CROSS_ENTROPY = "softmax_cross_entropy"


#: Forward FLOPs per output element of the element-wise and normalization layers
#: (batch norm: mean, variance, normalize, scale and shift).
FORWARD_FLOPS_PER_ELEMENT = {Op.BATCH_NORM: 8, Op.RELU: 1, Op.ADD: 1, Op.SOFTMAX_CROSS_ENTROPY: 5}


@dataclass(frozen=True, slots=True)
class Layer:
    """One forward layer.

    ``inputs`` name the values it reads (the network input or earlier layers' outputs, which
    are called by their layer's name); ``shape`` is the shape of its output; ``weights`` lists
    ``(suffix, shape)`` of its trainable parameters (tensor ``f"{name}.{suffix}"``);
    ``flops`` is its forward FLOP count.
    """

    name: str
    op: Op
    inputs: tuple[str, ...]
    shape: Shape
    weights: tuple[tuple[str, Shape], ...] = ()
    flops: int = 0


@dataclass(frozen=True, slots=True)
class ForwardModel:
    """A complete forward pass ending in a loss layer.

    ``input_name`` has shape ``input_shape``; the labels are an ``int64`` tensor of shape
    ``(batch,)`` called ``labels``. ``layers`` are in forward execution order and the last
    one is the loss.
    """

    name: str
    batch: int
    dtype: str
    input_name: str
    input_shape: Shape
    layers: tuple[Layer, ...]

    @property
    def params(self) -> int:
        """Trainable parameter count of the network."""
        return sum(math.prod(s) for layer in self.layers for _, s in layer.weights)


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


def _window_out(size: int, kernel: int, stride: int, padding: int, ceil: bool) -> int:
    span = size + 2 * padding - kernel
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + padding:
        out -= 1  # the last window must start inside the input (PyTorch's rule)
    return out


class Network:
    """Mutable builder of a :class:`ForwardModel`.

    Every method takes value names, appends one layer, and returns the new value's name.
    Raises :class:`GraphError` for a batch that is not a positive integer below 2**62
    (:data:`~tmsim.workload.tensors.MAX_GRAPH_BYTES`), an unknown dtype, unknown values,
    shapes that do not fit (a window larger than its input, mismatched add or concat shapes)
    and non-positive sizes.
    """

    def __init__(
        self,
        name: str,
        batch: int,
        image_hw: tuple[int, int] = (224, 224),
        channels: int = 3,
        dtype: str = "fp32",
    ) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or not 0 < batch < MAX_GRAPH_BYTES:
            shown = show_int(batch) if isinstance(batch, int) else repr(batch)
            raise GraphError(
                f"network {name!r}: batch must be a positive integer below 2**62 (the bound on "
                f"a graph's bytes), got {shown}"
            )
        if dtype not in DTYPE_BYTES:
            raise GraphError(f"network {name!r}: unknown dtype {dtype!r}")
        self.name = name
        self.batch = batch
        self.dtype = dtype
        self.input = "input"
        self._input_shape: Shape = (batch, channels, *image_hw)
        self._shapes: dict[str, Shape] = {self.input: self._input_shape}
        self._layers: list[Layer] = []
        self._scope: list[str] = []
        self._counts: dict[str, int] = {}

    # ------------------------------------------------------------------ bookkeeping
    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix the names of layers created inside the ``with`` block by ``name/``."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def shape(self, value: str) -> Shape:
        """Shape of ``value``; raises :class:`GraphError` if it does not exist."""
        try:
            return self._shapes[value]
        except KeyError:
            raise GraphError(f"network {self.name!r}: no value called {value!r}") from None

    def _name(self, op: Op, name: str | None) -> str:
        if name is None:
            count = self._counts.get(op.value, 0) + 1
            self._counts[op.value] = count
            name = f"{op.value}{count}"
        full = "/".join([*self._scope, name])
        if full in self._shapes:
            raise GraphError(f"network {self.name!r}: layer name {full!r} used twice")
        return full

    def _add(self, layer: Layer) -> str:
        if any(d <= 0 for d in layer.shape):
            raise GraphError(f"layer {layer.name!r}: output shape {layer.shape} is empty")
        self._layers.append(layer)
        self._shapes[layer.name] = layer.shape
        return layer.name

    # ------------------------------------------------------------------ layers
    def conv2d(
        self,
        x: str,
        out_channels: int,
        kernel: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        bias: bool = False,
        name: str | None = None,
    ) -> str:
        """2-D convolution; weight ``(out, in, kh, kw)``, optional bias ``(out,)``."""
        n, c, h, w = self._image(x)
        (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(padding)
        shape = (
            n,
            out_channels,
            _window_out(h, kh, sh, ph, False),
            _window_out(w, kw, sw, pw, False),
        )
        weights: tuple[tuple[str, Shape], ...] = (("weight", (out_channels, c, kh, kw)),)
        if bias:
            weights += (("bias", (out_channels,)),)
        out_elems = math.prod(shape)
        flops = 2 * out_elems * c * kh * kw + (out_elems if bias else 0)
        return self._add(Layer(self._name(Op.CONV2D, name), Op.CONV2D, (x,), shape, weights, flops))

    def batch_norm(self, x: str, name: str | None = None) -> str:
        """Batch normalization over channels; scale and shift ``(C,)`` are trainable."""
        shape = self.shape(x)
        c = shape[1]
        per = FORWARD_FLOPS_PER_ELEMENT[Op.BATCH_NORM]
        layer = Layer(
            self._name(Op.BATCH_NORM, name),
            Op.BATCH_NORM,
            (x,),
            shape,
            (("gamma", (c,)), ("beta", (c,))),
            per * math.prod(shape),
        )
        return self._add(layer)

    def relu(self, x: str, name: str | None = None) -> str:
        """Rectified linear unit."""
        shape = self.shape(x)
        flops = FORWARD_FLOPS_PER_ELEMENT[Op.RELU] * math.prod(shape)
        return self._add(Layer(self._name(Op.RELU, name), Op.RELU, (x,), shape, (), flops))

    def conv_bn_relu(
        self,
        x: str,
        out_channels: int,
        kernel: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
        relu: bool = True,
    ) -> str:
        """Convolution without bias, batch norm and (unless ``relu=False``) ReLU."""
        y = self.batch_norm(self.conv2d(x, out_channels, kernel, stride, padding))
        return self.relu(y) if relu else y

    def bn_relu_conv(
        self,
        x: str,
        out_channels: int,
        kernel: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] = 0,
    ) -> str:
        """Pre-activation order: batch norm, ReLU, then a convolution without bias."""
        return self.conv2d(self.relu(self.batch_norm(x)), out_channels, kernel, stride, padding)

    def max_pool(
        self,
        x: str,
        kernel: int,
        stride: int,
        padding: int = 0,
        ceil_mode: bool = False,
        name: str | None = None,
    ) -> str:
        """Max pooling over ``kernel x kernel`` windows."""
        return self._pool(Op.MAX_POOL, x, kernel, stride, padding, ceil_mode, name)

    def avg_pool(
        self,
        x: str,
        kernel: int,
        stride: int,
        padding: int = 0,
        ceil_mode: bool = False,
        name: str | None = None,
    ) -> str:
        """Average pooling over ``kernel x kernel`` windows."""
        return self._pool(Op.AVG_POOL, x, kernel, stride, padding, ceil_mode, name)

    def global_avg_pool(self, x: str, name: str | None = None) -> str:
        """Average over the whole spatial extent: ``(N, C, H, W) -> (N, C, 1, 1)``."""
        n, c, h, w = self._image(x)
        flops = n * c * h * w
        layer = Layer(self._name(Op.AVG_POOL, name), Op.AVG_POOL, (x,), (n, c, 1, 1), (), flops)
        return self._add(layer)

    def concat(self, xs: Sequence[str], name: str | None = None) -> str:
        """Concatenate along channels; every other dimension must agree."""
        if len(xs) < 2:
            raise GraphError(f"network {self.name!r}: concat needs two or more inputs")
        shapes = [self.shape(x) for x in xs]
        rest = {(s[0], *s[2:]) for s in shapes}
        if len(rest) != 1:
            raise GraphError(f"network {self.name!r}: concat of mismatched shapes {shapes}")
        shape = (shapes[0][0], sum(s[1] for s in shapes), *shapes[0][2:])
        return self._add(Layer(self._name(Op.CONCAT, name), Op.CONCAT, tuple(xs), shape))

    def add(self, a: str, b: str, name: str | None = None) -> str:
        """Element-wise sum of two values of the same shape."""
        sa, sb = self.shape(a), self.shape(b)
        if sa != sb:
            raise GraphError(f"network {self.name!r}: add of mismatched shapes {sa} and {sb}")
        flops = FORWARD_FLOPS_PER_ELEMENT[Op.ADD] * math.prod(sa)
        return self._add(Layer(self._name(Op.ADD, name), Op.ADD, (a, b), sa, (), flops))

    def linear(self, x: str, out_features: int, bias: bool = True, name: str | None = None) -> str:
        """Fully connected layer; a 4-D input is flattened. Weight ``(out, in)``."""
        shape = self.shape(x)
        n, in_features = shape[0], math.prod(shape[1:])
        weights: tuple[tuple[str, Shape], ...] = (("weight", (out_features, in_features)),)
        if bias:
            weights += (("bias", (out_features,)),)
        flops = 2 * n * in_features * out_features + (n * out_features if bias else 0)
        layer = Layer(
            self._name(Op.LINEAR, name), Op.LINEAR, (x,), (n, out_features), weights, flops
        )
        return self._add(layer)

    def softmax_cross_entropy(self, logits: str, name: str | None = None) -> str:
        """The loss: softmax over ``(N, classes)`` logits against the ``labels`` input."""
        shape = self.shape(logits)
        if len(shape) != 2:
            raise GraphError(f"network {self.name!r}: loss needs (N, classes) logits, got {shape}")
        flops = FORWARD_FLOPS_PER_ELEMENT[Op.SOFTMAX_CROSS_ENTROPY] * math.prod(shape)
        op = Op.SOFTMAX_CROSS_ENTROPY
        return self._add(Layer(self._name(op, name or "loss"), op, (logits,), (1,), (), flops))

    # ------------------------------------------------------------------ result
    def build(self) -> ForwardModel:
        """Freeze the layers; raises :class:`GraphError` unless the last layer is the loss."""
        if not self._layers or self._layers[-1].op is not Op.SOFTMAX_CROSS_ENTROPY:
            raise GraphError(f"network {self.name!r}: must end in softmax_cross_entropy")
        return ForwardModel(
            self.name, self.batch, self.dtype, self.input, self._input_shape, tuple(self._layers)
        )

    def _image(self, x: str) -> tuple[int, int, int, int]:
        shape = self.shape(x)
        if len(shape) != 4:
            raise GraphError(f"network {self.name!r}: {x!r} is not (N, C, H, W): {shape}")
        return shape[0], shape[1], shape[2], shape[3]

    def _pool(
        self, op: Op, x: str, kernel: int, stride: int, padding: int, ceil: bool, name: str | None
    ) -> str:
        n, c, h, w = self._image(x)
        if kernel > h + 2 * padding or kernel > w + 2 * padding:
            raise GraphError(f"network {self.name!r}: pool window {kernel} exceeds {x!r} {h}x{w}")
        shape = (
            n,
            c,
            _window_out(h, kernel, stride, padding, ceil),
            _window_out(w, kernel, stride, padding, ceil),
        )
        flops = math.prod(shape) * kernel * kernel
        return self._add(Layer(self._name(op, name), op, (x,), shape, (), flops))
