"""ResNet-50 and ResNet-200 (He et al., 2016), bottleneck blocks.

Follows torchvision's ``resnet50`` (v1.5: the stride sits in the 3x3 convolution;
convolutions without bias, each followed by batch norm): 25,557,032 parameters at 1000
classes. ResNet-200 uses the same blocks with (3, 24, 36, 3) blocks per stage, as in
AutoTM's ``src/zoo/resnet.jl``.
"""

from __future__ import annotations

from tmsim.errors import GraphError
from tmsim.workload.layers import ForwardModel, Network

STAGE_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4
RESNET50_BLOCKS = (3, 4, 6, 3)
RESNET200_BLOCKS = (3, 24, 36, 3)


def _bottleneck(net: Network, x: str, width: int, stride: int) -> str:
    out_channels = width * EXPANSION
    y = net.conv_bn_relu(x, width, 1)
    y = net.conv_bn_relu(y, width, 3, stride=stride, padding=1)
    y = net.conv_bn_relu(y, out_channels, 1, relu=False)
    shortcut = x
    if stride != 1 or net.shape(x)[1] != out_channels:
        with net.scope("downsample"):
            shortcut = net.conv_bn_relu(x, out_channels, 1, stride=stride, relu=False)
    return net.relu(net.add(y, shortcut))


def _resnet(
    name: str,
    blocks: tuple[int, ...],
    batch: int,
    image_hw: tuple[int, int],
    dtype: str,
    classes: int,
) -> ForwardModel:
    net = Network(name, batch, image_hw, dtype=dtype)
    with net.scope("stem"):
        x = net.conv_bn_relu(net.input, 64, 7, stride=2, padding=3)
        x = net.max_pool(x, 3, 2, padding=1)
    for s, (width, count) in enumerate(zip(STAGE_WIDTHS, blocks, strict=True), start=1):
        for i in range(count):
            with net.scope(f"stage{s}/block{i + 1}"):
                x = _bottleneck(net, x, width, 2 if i == 0 and s > 1 else 1)
    x = net.linear(net.global_avg_pool(x), classes, name="fc")
    net.softmax_cross_entropy(x)
    return net.build()


def bottleneck_resnet(
    blocks: tuple[int, ...],
    batch: int,
    image_hw: tuple[int, int] = (224, 224),
    dtype: str = "fp32",
    classes: int = 1000,
) -> ForwardModel:
    """An ImageNet bottleneck ResNet with ``blocks`` bottleneck blocks in each of its four
    stages (ResNet-50: 3, 4, 6, 3; ResNet-200: 3, 24, 36, 3), named ``resnet<depth>`` with
    depth ``3 * sum(blocks) + 2`` (e.g. deeper graphs than the zoo's, for scaling studies).
    Raises :class:`GraphError` for other than four stages or a stage without a block."""
    if len(blocks) != len(STAGE_WIDTHS) or any(b < 1 for b in blocks):
        raise GraphError(
            f"a ResNet has {len(STAGE_WIDTHS)} stages of at least one block, not {blocks}"
        )
    return _resnet(f"resnet{3 * sum(blocks) + 2}", blocks, batch, image_hw, dtype, classes)


def resnet50(
    batch: int, image_hw: tuple[int, int] = (224, 224), dtype: str = "fp32", classes: int = 1000
) -> ForwardModel:
    """ResNet-50 forward model at ``batch`` images of ``image_hw`` pixels."""
    return _resnet("resnet50", RESNET50_BLOCKS, batch, image_hw, dtype, classes)


def resnet200(
    batch: int, image_hw: tuple[int, int] = (224, 224), dtype: str = "fp32", classes: int = 1000
) -> ForwardModel:
    """ResNet-200 forward model at ``batch`` images of ``image_hw`` pixels."""
    return _resnet("resnet200", RESNET200_BLOCKS, batch, image_hw, dtype, classes)
