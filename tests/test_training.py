"""The training step built from a forward model: what backward saves, accumulates, updates."""

from __future__ import annotations

import math

import pytest

from tmsim.errors import GraphError
from tmsim.workload.graph import Graph, Kernel, Phase, Role
from tmsim.workload.layers import Network
from tmsim.workload.training import training_graph

N, C, HW = 2, 3, 8


def _kernel(g: Graph, name: str) -> Kernel:
    matches = [k for k in g.kernels if k.name == name]
    assert len(matches) == 1, name
    return matches[0]


def small_cnn() -> Graph:
    net = Network("cnn", N, (HW, HW), channels=C)
    x = net.conv2d(net.input, 4, 3, padding=1, name="conv1")
    x = net.batch_norm(x, name="bn1")
    x = net.relu(x, name="relu1")
    x = net.max_pool(x, 2, 2, name="pool1")
    x = net.conv2d(x, 5, 3, padding=1, bias=True, name="conv2")
    x = net.linear(x, 10, name="fc")
    net.softmax_cross_entropy(x)
    return training_graph(net.build())


def residual() -> Graph:
    net = Network("res", N, (HW, HW), channels=C)
    r = net.relu(net.conv2d(net.input, 3, 3, padding=1, name="conv1"), name="relu1")
    y = net.add(net.conv2d(r, 3, 3, padding=1, name="conv2"), r, name="add")
    net.softmax_cross_entropy(net.linear(y, 10, name="fc"))
    return training_graph(net.build())


def test_backward_reads_exactly_what_it_needs() -> None:
    g = small_cnn()
    # the first convolution computes no gradient for the network input
    assert "conv1.bwd_data" not in {k.name for k in g.kernels}
    assert _kernel(g, "conv1.bwd_weight").inputs == ("bn1.d_conv1", "input")
    assert _kernel(g, "conv2.bwd_data").inputs == ("fc.d_conv2", "conv2.weight")
    assert _kernel(g, "conv2.bwd_weight").inputs == ("fc.d_conv2", "pool1")
    assert _kernel(g, "conv2.bwd_weight").outputs == ("conv2.weight.grad", "conv2.bias.grad")
    assert _kernel(g, "bn1.bwd").inputs == (
        "relu1.d_bn1",
        "conv1",
        "bn1.gamma",
        "bn1.mean",
        "bn1.invstd",
    )
    assert _kernel(g, "relu1.bwd").inputs == ("pool1.d_relu1", "relu1")  # output, not input
    assert _kernel(g, "pool1.bwd").inputs == ("conv2.d_pool1", "relu1", "pool1")
    assert _kernel(g, "loss.bwd").inputs == ("loss.probs", "labels")
    # batch norm's input is saved for its backward; its output dies after the ReLU
    assert g.live_range("conv1")[1] == g.kernels.index(_kernel(g, "bn1.bwd"))
    assert g.live_range("bn1")[1] == g.kernels.index(_kernel(g, "relu1.fwd"))


def test_shapes_and_flops_are_propagated() -> None:
    g = small_cnn()
    assert g.tensor("pool1").shape == (N, 4, HW // 2, HW // 2)
    assert g.tensor("fc.weight").shape == (10, 5 * 4 * 4)
    conv1 = 2 * N * 4 * HW * HW * C * 3 * 3
    assert _kernel(g, "conv1.fwd").flops == conv1
    assert _kernel(g, "conv1.bwd_weight").flops == conv1
    conv2_mac = 2 * N * 5 * 4 * 4 * 4 * 3 * 3
    assert _kernel(g, "conv2.fwd").flops == conv2_mac + N * 5 * 4 * 4  # + bias
    assert _kernel(g, "conv2.bwd_data").flops == conv2_mac
    fwd = sum(k.flops for k in g.kernels if k.op in ("conv2d", "linear"))
    bwd = sum(k.flops for k in g.kernels if k.op.startswith(("conv2d_", "linear_")))
    # weight gradients cost a forward each, data gradients a forward less the bias; conv1
    # computes no data gradient (its input is the network input)
    assert bwd == fwd + conv2_mac + 2 * N * 80 * 10


def test_optimizer_updates_every_weight_in_place_after_backward() -> None:
    g = small_cnn()
    weights = [t.name for t in g.tensors if t.role is Role.WEIGHT]
    updates = [k for k in g.kernels if k.phase is Phase.UPDATE]
    assert sorted(k.updates for k in updates) == sorted((w, f"{w}.momentum") for w in weights)
    assert all(g.tensor(f"{w}.momentum").role is Role.OPTIMIZER_STATE for w in weights)
    for k in updates:
        (grad,) = k.inputs
        assert g.tensor(grad).role is Role.GRADIENT
        assert k.flops == 4 * math.prod(g.tensor(k.updates[0]).shape)
    phases = [k.phase for k in g.kernels]
    assert phases == sorted(phases, key=[Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE].index)
    assert g.params == 4 * C * 9 + 8 + 5 * 4 * 9 + 5 + 10 * 80 + 10


def test_fan_out_accumulates_partial_gradients() -> None:
    g = residual()
    acc = [k for k in g.kernels if k.op == "accumulate"]
    assert len(acc) == 1
    # the add passes its output gradient straight through to both inputs: no add backward
    assert acc[0].inputs == ("fc.d_add", "conv2.d_relu1")
    assert _kernel(g, "conv2.bwd_data").inputs[0] == "fc.d_add"
    assert _kernel(g, "relu1.bwd").inputs == (acc[0].outputs[0], "relu1")


def test_concat_backward_slices() -> None:
    net = Network("cat", N, (HW, HW), channels=C)
    a = net.conv2d(net.input, 2, 1, name="a")
    b = net.conv2d(net.input, 3, 1, name="b")
    net.softmax_cross_entropy(net.linear(net.concat([a, b], name="cat"), 10, name="fc"))
    g = training_graph(net.build())
    k = _kernel(g, "cat.bwd")
    assert k.inputs == ("fc.d_cat",)
    assert [g.tensor(t).shape for t in k.outputs] == [(N, 2, HW, HW), (N, 3, HW, HW)]
    assert g.tensor("cat").shape == (N, 5, HW, HW)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda n: n.add(n.conv2d(n.input, 4, 1), n.input), "add of mismatched shapes"),
        (lambda n: n.concat([n.input]), "concat needs two or more inputs"),
        (lambda n: n.max_pool(n.input, 16, 1), "pool window 16 exceeds"),
        (lambda n: n.relu("nothing"), "no value called 'nothing'"),
        (lambda n: n.softmax_cross_entropy(n.input), "loss needs (N, classes) logits"),
        (lambda n: n.conv2d(n.input, 4, 9), "output shape"),
    ],
)
def test_network_rejects_bad_layers(build: object, message: str) -> None:
    net = Network("bad", N, (HW, HW), channels=C)
    with pytest.raises(GraphError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(net)  # type: ignore[operator]


def test_network_must_end_in_loss() -> None:
    net = Network("bad", N, (HW, HW), channels=C)
    net.relu(net.input)
    with pytest.raises(GraphError, match="must end in softmax_cross_entropy"):
        net.build()
