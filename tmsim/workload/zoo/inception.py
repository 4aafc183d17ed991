"""Inception v4 (Szegedy et al., AAAI 2017), at 299 x 299 pixels by default.

Every convolution is a "basic" unit. By default it is a convolution with bias and a ReLU, as in
the workload AutoTM measured (darchr/AutoTM, ``src/zoo/inception.jl``: no batch norm), whose
training step at batch 1024 needs the 111 GB the AutoTM paper reports. With
``batch_norm=True`` it is a convolution without bias, batch norm and ReLU, as in the TF-slim
and timm implementations; batch norm saves one more activation per unit, about 1.55x the
footprint. The stem, 4 x Inception-A, Reduction-A, 7 x Inception-B, Reduction-B and
3 x Inception-C follow Figures 3 to 9 of the paper (with Reduction-A's k, l, m, n = 192, 224,
256, 384): about 42.7 million parameters at 1000 classes either way (42,648,232 without
batch norm, 42,679,816 with it). The average-pool branches pool 3 x 3 with stride 1 and padding 1.
"""

from __future__ import annotations

from tmsim.workload.layers import ForwardModel, Network


class _Units:
    """Builds basic units on ``net``, with or without batch norm."""

    def __init__(self, net: Network, batch_norm: bool) -> None:
        self.net = net
        self.batch_norm = batch_norm

    def __call__(
        self,
        x: str,
        channels: int,
        kernel: int | tuple[int, int],
        stride: int = 1,
        padding: int | tuple[int, int] = 0,
    ) -> str:
        if self.batch_norm:
            return self.net.conv_bn_relu(x, channels, kernel, stride, padding)
        return self.net.relu(self.net.conv2d(x, channels, kernel, stride, padding, bias=True))


def _chain(u: _Units, x: str, specs: list[tuple[int, tuple[int, int]]]) -> str:
    """Stride-1 "same" convolutions of the given widths and (kh, kw) kernels."""
    for channels, (kh, kw) in specs:
        x = u(x, channels, (kh, kw), padding=(kh // 2, kw // 2))
    return x


def _pool_branch(u: _Units, x: str, channels: int) -> str:
    return u(u.net.avg_pool(x, 3, 1, padding=1), channels, 1)


def _stem(u: _Units) -> str:
    net = u.net
    x = u(net.input, 32, 3, stride=2)
    x = u(x, 32, 3)
    x = u(x, 64, 3, padding=1)
    x = net.concat([net.max_pool(x, 3, 2), u(x, 96, 3, stride=2)])
    a = u(u(x, 64, 1), 96, 3)
    b = _chain(u, x, [(64, (1, 1)), (64, (1, 7)), (64, (7, 1))])
    x = net.concat([a, u(b, 96, 3)])
    return net.concat([u(x, 192, 3, stride=2), net.max_pool(x, 3, 2)])


def _inception_a(u: _Units, x: str) -> str:
    net = u.net
    return net.concat(
        [
            u(x, 96, 1),
            _chain(u, x, [(64, (1, 1)), (96, (3, 3))]),
            _chain(u, x, [(64, (1, 1)), (96, (3, 3)), (96, (3, 3))]),
            _pool_branch(u, x, 96),
        ]
    )


def _reduction_a(u: _Units, x: str) -> str:
    net = u.net
    return net.concat(
        [
            u(x, 384, 3, stride=2),
            u(_chain(u, x, [(192, (1, 1)), (224, (3, 3))]), 256, 3, stride=2),
            net.max_pool(x, 3, 2),
        ]
    )


def _inception_b(u: _Units, x: str) -> str:
    net = u.net
    return net.concat(
        [
            u(x, 384, 1),
            _chain(u, x, [(192, (1, 1)), (224, (1, 7)), (256, (7, 1))]),
            _chain(
                u, x, [(192, (1, 1)), (192, (7, 1)), (224, (1, 7)), (224, (7, 1)), (256, (1, 7))]
            ),
            _pool_branch(u, x, 128),
        ]
    )


def _reduction_b(u: _Units, x: str) -> str:
    net = u.net
    return net.concat(
        [
            u(u(x, 192, 1), 192, 3, stride=2),
            u(_chain(u, x, [(256, (1, 1)), (256, (1, 7)), (320, (7, 1))]), 320, 3, stride=2),
            net.max_pool(x, 3, 2),
        ]
    )


def _inception_c(u: _Units, x: str) -> str:
    net = u.net
    b1 = u(x, 384, 1)
    b2 = _chain(u, x, [(384, (1, 1)), (448, (3, 1)), (512, (1, 3))])
    return net.concat(
        [
            u(x, 256, 1),
            net.concat([_chain(u, b1, [(256, (1, 3))]), _chain(u, b1, [(256, (3, 1))])]),
            net.concat([_chain(u, b2, [(256, (1, 3))]), _chain(u, b2, [(256, (3, 1))])]),
            _pool_branch(u, x, 256),
        ]
    )


def inception_v4(
    batch: int,
    image_hw: tuple[int, int] = (299, 299),
    dtype: str = "fp32",
    classes: int = 1000,
    batch_norm: bool = False,
) -> ForwardModel:
    """Inception v4 forward model at ``batch`` images of ``image_hw`` pixels."""
    net = Network("inception_v4", batch, image_hw, dtype=dtype)
    u = _Units(net, batch_norm)
    with net.scope("stem"):
        x = _stem(u)
    stages = [(_inception_a, 4), (_reduction_a, 1), (_inception_b, 7), (_reduction_b, 1)]
    stages.append((_inception_c, 3))
    for s, (block, count) in enumerate(stages, start=1):
        for i in range(count):
            with net.scope(f"{block.__name__.lstrip('_')}{i + 1}" if count > 1 else f"s{s}"):
                x = block(u, x)
    x = net.linear(net.global_avg_pool(x), classes, name="fc")
    net.softmax_cross_entropy(x)
    return net.build()
