"""VGG19 (Simonyan and Zisserman, 2015) and AutoTM's VGG416.

VGG19 follows torchvision's ``vgg19`` (convolutions with bias, no batch norm, three fully
connected layers): 143,667,240 parameters at 1000 classes. Dropout is not modelled.

VGG416 is the network of AutoTM's large workload set (darchr/AutoTM, ``src/zoo/vgg.jl``):
VGG19's five blocks with their 3x3 convolutions repeated (80, 81, 82, 83, 83 extra
convolutions), the channel change at the end of each of the first three blocks, 413
convolutions and three fully connected layers in all.
"""

from __future__ import annotations

from tmsim.workload.layers import ForwardModel, Network

#: Output channels of VGG19's convolutions per block.
VGG19_BLOCKS: tuple[tuple[int, ...], ...] = (
    (64, 64),
    (128, 128),
    (256, 256, 256, 256),
    (512, 512, 512, 512),
    (512, 512, 512, 512),
)
#: Extra same-width convolutions per block of VGG416 (AutoTM's ``loops``).
VGG416_REPEATS = (80, 81, 82, 83, 83)


def _vgg416_blocks() -> tuple[tuple[int, ...], ...]:
    widths = (64, 128, 256, 512, 512)
    blocks = []
    for i, (width, repeats) in enumerate(zip(widths, VGG416_REPEATS, strict=True)):
        convs = [width] * (repeats + (1 if i == 0 else 0))
        if i < 3:
            convs.append(widths[i + 1])  # the widening convolution closes the block
        blocks.append(tuple(convs))
    return tuple(blocks)


def _vgg(
    name: str,
    blocks: tuple[tuple[int, ...], ...],
    batch: int,
    image_hw: tuple[int, int],
    dtype: str,
    classes: int,
) -> ForwardModel:
    net = Network(name, batch, image_hw, dtype=dtype)
    x = net.input
    for b, widths in enumerate(blocks, start=1):
        with net.scope(f"block{b}"):
            for width in widths:
                x = net.relu(net.conv2d(x, width, 3, padding=1, bias=True))
            x = net.max_pool(x, 2, 2)
    with net.scope("classifier"):
        x = net.relu(net.linear(x, 4096))
        x = net.relu(net.linear(x, 4096))
        x = net.linear(x, classes)
    net.softmax_cross_entropy(x)
    return net.build()


def vgg19(
    batch: int, image_hw: tuple[int, int] = (224, 224), dtype: str = "fp32", classes: int = 1000
) -> ForwardModel:
    """VGG19 forward model at ``batch`` images of ``image_hw`` pixels."""
    return _vgg("vgg19", VGG19_BLOCKS, batch, image_hw, dtype, classes)


def vgg416(
    batch: int, image_hw: tuple[int, int] = (224, 224), dtype: str = "fp32", classes: int = 1000
) -> ForwardModel:
    """AutoTM's VGG416 forward model at ``batch`` images of ``image_hw`` pixels."""
    return _vgg("vgg416", _vgg416_blocks(), batch, image_hw, dtype, classes)
