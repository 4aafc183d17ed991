"""DenseNet-121 and DenseNet-264 (Huang et al., 2017), DenseNet-BC.

Follows torchvision's ``densenet121`` (growth rate 32, bottleneck width 4 x 32, compression
0.5 at each transition): 7,978,856 parameters at 1000 classes. DenseNet-264 has blocks of
(6, 12, 64, 48) layers. Each dense layer appends its 32 new channels by concatenating them to
its block's running feature map, as AutoTM's ``src/zoo/densenet.jl`` does, so every layer
reads (and its batch norm saves) a new, wider concatenation: the quadratic memory growth that
makes DenseNet a memory-hungry workload.

AutoTM's own "DenseNet 264" differs: its transitions shrink the feature map back to 64
channels instead of halving it (21.1 million parameters instead of 33.3 million), which is why
its training step at batch 512 needs the 115 GB the AutoTM paper reports while the standard
DenseNet-264 here needs about 140 GB. ``transition_channels=64`` gives that variant's widths.
"""

from __future__ import annotations

from tmsim.workload.layers import ForwardModel, Network

GROWTH = 32
BOTTLENECK = 4
STEM_CHANNELS = 64
DENSENET121_BLOCKS = (6, 12, 24, 16)
DENSENET264_BLOCKS = (6, 12, 64, 48)


def _densenet(
    name: str,
    blocks: tuple[int, ...],
    batch: int,
    image_hw: tuple[int, int],
    dtype: str,
    classes: int,
    transition_channels: int | None,
) -> ForwardModel:
    net = Network(name, batch, image_hw, dtype=dtype)
    with net.scope("stem"):
        x = net.conv_bn_relu(net.input, STEM_CHANNELS, 7, stride=2, padding=3)
        x = net.max_pool(x, 3, 2, padding=1)
    for b, count in enumerate(blocks, start=1):
        for i in range(count):
            with net.scope(f"block{b}/layer{i + 1}"):
                y = net.bn_relu_conv(x, BOTTLENECK * GROWTH, 1)
                y = net.bn_relu_conv(y, GROWTH, 3, padding=1)
                x = net.concat([x, y])
        if b < len(blocks):
            with net.scope(f"transition{b}"):
                width = transition_channels or net.shape(x)[1] // 2
                x = net.bn_relu_conv(x, width, 1)
                x = net.avg_pool(x, 2, 2)
    with net.scope("head"):
        x = net.relu(net.batch_norm(x))
        x = net.linear(net.global_avg_pool(x), classes, name="fc")
    net.softmax_cross_entropy(x)
    return net.build()


def densenet121(
    batch: int,
    image_hw: tuple[int, int] = (224, 224),
    dtype: str = "fp32",
    classes: int = 1000,
    transition_channels: int | None = None,
) -> ForwardModel:
    """DenseNet-121 forward model; ``transition_channels`` fixes the transitions' width."""
    return _densenet(
        "densenet121",
        DENSENET121_BLOCKS,
        batch,
        image_hw,
        dtype,
        classes,
        transition_channels,
    )


def densenet264(
    batch: int,
    image_hw: tuple[int, int] = (224, 224),
    dtype: str = "fp32",
    classes: int = 1000,
    transition_channels: int | None = None,
) -> ForwardModel:
    """DenseNet-264 forward model; ``transition_channels`` fixes the transitions' width."""
    return _densenet(
        "densenet264",
        DENSENET264_BLOCKS,
        batch,
        image_hw,
        dtype,
        classes,
        transition_channels,
    )
