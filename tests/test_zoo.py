"""The model zoo against published parameter counts, compute and AutoTM's footprints."""

from __future__ import annotations

import itertools

import pytest

from tmsim.errors import GraphError
from tmsim.workload.layers import Op
from tmsim.workload.training import training_graph
from tmsim.workload.zoo import MODELS, model, training_graph_of
from tmsim.workload.zoo.densenet import densenet264
from tmsim.workload.zoo.inception import inception_v4

GB = 1e9


@pytest.mark.parametrize(
    ("name", "params"),
    [
        # torchvision's model documentation (resnet50, vgg19, densenet121 at 1000 classes)
        ("resnet50", 25_557_032),
        ("vgg19", 143_667_240),
        ("densenet121", 7_978_856),
    ],
)
def test_published_parameter_counts(name: str, params: int) -> None:
    assert model(name)(1).params == params
    assert training_graph_of(name, 1).params == params


def test_inception_v4_parameters_within_one_percent() -> None:
    # Szegedy et al. 2017 / timm: 42.7 M parameters
    for batch_norm in (False, True):
        assert inception_v4(1, batch_norm=batch_norm).params == pytest.approx(42.7e6, rel=0.01)


@pytest.mark.parametrize(
    ("name", "gmacs"),
    # torchvision's documented GFLOPS (multiply-adds) per 224x224 image
    [("resnet50", 4.09), ("vgg19", 19.63), ("densenet121", 2.83)],
)
def test_forward_compute_matches_published(name: str, gmacs: float) -> None:
    m = model(name)(1)
    flops = sum(layer.flops for layer in m.layers if layer.op in (Op.CONV2D, Op.LINEAR))
    assert flops / 2 / 1e9 == pytest.approx(gmacs, rel=0.005)


@pytest.mark.parametrize(
    ("name", "batch", "footprint_gb"),
    # Hildebrand et al., AutoTM, ASPLOS 2020: the conventional workloads' footprints
    [
        ("inception_v4", 1024, 111),
        ("vgg19", 2048, 143),
        ("resnet200", 512, 132),
        ("densenet264", 512, 115),
    ],
)
def test_autotm_footprints_within_25_percent(name: str, batch: int, footprint_gb: float) -> None:
    peak = training_graph_of(name, batch).peak_live_bytes / GB
    assert peak == pytest.approx(footprint_gb, rel=0.25)


def test_autotm_densenet_variant_matches_its_footprint_closely() -> None:
    # AutoTM's DenseNet shrinks every transition to 64 channels (src/zoo/densenet.jl)
    peak = training_graph(densenet264(512, transition_channels=64)).peak_live_bytes / GB
    assert peak == pytest.approx(115, rel=0.05)


def test_inception_with_batch_norm_saves_more() -> None:
    plain = training_graph(inception_v4(1024)).peak_live_bytes
    with_bn = training_graph(inception_v4(1024, batch_norm=True)).peak_live_bytes
    assert 1.5 < with_bn / plain < 1.6


@pytest.mark.parametrize(
    ("name", "batch", "footprint_gb"),
    # AutoTM's large workloads (darchr/AutoTM, src/experiments/models.jl comments)
    [("vgg416", 320, 658), ("resnet200", 2560, 651)],
)
def test_large_workloads(name: str, batch: int, footprint_gb: float) -> None:
    peak = training_graph_of(name, batch).peak_live_bytes / GB
    assert peak == pytest.approx(footprint_gb, rel=0.1)


def test_architecture_shapes() -> None:
    r50 = model("resnet50")(2)
    fc = next(layer for layer in r50.layers if layer.name == "fc")
    assert fc.weights == (("weight", (1000, 2048)), ("bias", (1000,)))
    pooled = [layer for layer in r50.layers if layer.op is Op.AVG_POOL][-1]
    assert pooled.shape == (2, 2048, 1, 1)
    inc = inception_v4(2)
    assert [layer for layer in inc.layers if layer.op is Op.CONCAT][-1].shape == (2, 1536, 8, 8)
    dn = model("densenet121")(2)
    assert [layer for layer in dn.layers if layer.op is Op.CONCAT][-1].shape == (2, 1024, 7, 7)
    vgg416 = model("vgg416")(1)
    assert sum(layer.op is Op.CONV2D for layer in vgg416.layers) == 413
    assert sum(layer.op is Op.LINEAR for layer in vgg416.layers) == 3


def test_zoo_names_and_dtype() -> None:
    assert list(MODELS) == [
        "vgg19",
        "vgg416",
        "resnet50",
        "resnet200",
        "inception_v4",
        "densenet121",
        "densenet264",
    ]
    half = training_graph_of("resnet50", 4, dtype="fp16")
    full = training_graph_of("resnet50", 4)
    assert half.tensor("stem/conv2d1").size_bytes * 2 == full.tensor("stem/conv2d1").size_bytes


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (10**17, "tensor 'input': size_bytes 60211200000000000000000 is not below the bound"),
        (10**12, "brings the graph's bytes to"),  # 64-bit sums would wrap: refused, not wrong
        (10**9, "brings the graph's FLOPs to"),
        (2**62, "batch must be a positive integer below 2**62"),
        (10**400, "batch must be a positive integer below 2**62 (the bound on a graph's bytes)"),
        (0, "batch must be a positive integer below 2**62"),
        (
            True,
            "batch must be a positive integer below 2**62 (the bound on a graph's bytes), got True",
        ),
    ],
)
def test_batches_past_the_bound_fail_in_one_line(batch: int, message: str) -> None:
    with pytest.raises(GraphError) as info:
        training_graph_of("resnet50", batch)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_large_batch_under_the_bound_counts_exactly() -> None:
    """ResNet-50 at batch 10**8: 3e16 bytes and 2.5e18 FLOPs, live bytes as in Python."""
    g = training_graph_of("resnet50", 10**8)
    assert 2**61 < g.flops < 2**62
    delta = [0] * (len(g.kernels) + 1)
    for t, first, last in zip(g.tensors, g.live_first, g.live_last, strict=True):
        delta[int(first)] += t.size_bytes
        delta[int(last) + 1] -= t.size_bytes
    assert g.peak_live_bytes == max(itertools.accumulate(delta[:-1]))
    small = training_graph_of("resnet50", 1)
    assert g.peak_live_bytes > 10**7 * small.peak_live_bytes


def test_a_bottleneck_resnet_of_resnet200s_blocks_is_resnet200_and_deeper_ones_grow() -> None:
    from tmsim.workload.training import training_graph
    from tmsim.workload.zoo.resnet import bottleneck_resnet, resnet200

    same = training_graph(bottleneck_resnet((3, 24, 36, 3), 2))
    zoo = training_graph(resnet200(2))
    assert same.name == zoo.name == "resnet200-b2"
    assert [k.name for k in same.kernels] == [k.name for k in zoo.kernels]
    assert list(same.sizes_bytes) == list(zoo.sizes_bytes)
    deep = training_graph(bottleneck_resnet((3, 100, 144, 3), 2))
    assert deep.name == "resnet752-b2"
    # each added bottleneck adds the same kernels: ResNet-752 has 184 blocks more than 200
    per_block = (len(deep.kernels) - len(zoo.kernels)) / (250 - 66)
    assert per_block == int(per_block) and len(deep.kernels) > 3.7 * len(zoo.kernels)
    for bad in ((3, 24, 36), (3, 0, 36, 3)):
        with pytest.raises(GraphError, match="4 stages of at least one block"):
            bottleneck_resnet(bad, 2)
