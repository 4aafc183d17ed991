"""PyTorch models imported as training-step graphs (``tmsim import``, :func:`tmsim.import_torch`).

Checks against independent numbers: torchvision's ResNet-50 against the zoo's ResNet-50 (the
same network, built by hand: parameters equal, FLOPs within 5%, peak live bytes within 10%),
a GPT-2-style block against Korthikanti et al.'s activation bytes saved for backward
("Reducing Activation Recomputation in Large Transformer Models", MLSys 2023, section 4.1:
s*b*h*(34 + 5*a*s/h) for 16-bit activations and 1-byte dropout masks), FLOP formulas by hand,
the exact op classes of ATen ops, and one-line errors for bad input. The tests that trace
need torch (the ``torch`` extra, which ``make test`` installs) and are skipped without it;
those of the classifier, the FLOP formulas, the graph builder and the command line's parsing
run either way.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

import tmsim
from hwmodels.opclass import _CLASS_KEYWORDS, OpClass, op_class
from tmsim.cli import catalog
from tmsim.cli.main import main
from tmsim.cli.torchimport import default_name, shape_arg
from tmsim.errors import TmsimError
from tmsim.workload.graph import Graph, Phase, Role
from tmsim.workload.torchimport import LOSSES, OPTIMIZERS, TorchImportError
from tmsim.workload.torchimport.flops import Operand, aten_flops
from tmsim.workload.torchimport.step import (
    Kind,
    Optimizer,
    Storage,
    TracedOp,
    TracedStep,
    step_graph,
)
from tmsim.workload.zoo import NAMES, build

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="torch is not installed (the optional extra: pip install 'tmsim[torch]')"
)


# ---------------------------------------------------------------------- op classes
@pytest.mark.parametrize(
    ("op", "cls"),
    [
        ("aten.convolution", OpClass.CONV),
        ("aten.convolution_backward", OpClass.CONV),
        ("aten.addmm", OpClass.MATMUL),  # no "matmul" in the name
        ("aten.addmm.default", OpClass.MATMUL),  # an overload
        ("aten.mm", OpClass.MATMUL),
        ("aten.bmm", OpClass.MATMUL),
        ("aten.baddbmm", OpClass.MATMUL),
        ("aten._scaled_dot_product_flash_attention_for_cpu", OpClass.MATMUL),
        ("aten._native_batch_norm_legit_functional", OpClass.NORM),
        ("aten.native_batch_norm_backward", OpClass.NORM),
        ("aten.native_layer_norm", OpClass.NORM),
        ("aten._softmax", OpClass.NORM),
        ("aten._log_softmax_backward_data", OpClass.NORM),
        ("prims.convert_element_type", OpClass.ELEMENTWISE),  # holds "conv"
        ("aten._to_copy", OpClass.ELEMENTWISE),
        ("aten.relu", OpClass.ELEMENTWISE),
        ("aten.threshold_backward", OpClass.ELEMENTWISE),
        ("aten.linalg_vector_norm", OpClass.ELEMENTWISE),  # a reduction, not a normalization
        ("aten.max_pool2d_with_indices", OpClass.ELEMENTWISE),
    ],
)
def test_aten_ops_take_their_exact_class(op: str, cls: OpClass) -> None:
    assert op_class(op) is cls


def _by_substring(op: str) -> OpClass:
    """The classifier's rule before ATen names had a table of their own."""
    name = op.lower()
    return next(
        (c for c, keys in _CLASS_KEYWORDS if any(k in name for k in keys)), OpClass.ELEMENTWISE
    )


def test_every_zoo_op_keeps_its_class() -> None:
    ops = {k.op for name in NAMES for k in build(name, batch=1).kernels}
    ops |= {"sgd_momentum", "adam", "adamw"}
    assert ops and all(op_class(op) is _by_substring(op) for op in ops)


# ---------------------------------------------------------------------- FLOPs by hand
def T(*shape: int) -> Operand:
    return Operand(shape)


@pytest.mark.parametrize(
    ("op", "args", "outputs", "flops"),
    [
        # ResNet-50's first convolution at batch 2: 2 x N x 112^2 x (64 x 3 x 7 x 7)
        (
            "convolution",
            [T(2, 3, 224, 224), T(64, 3, 7, 7), None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1],
            [(2, 64, 112, 112)],
            2 * 2 * 112 * 112 * 64 * 3 * 49,
        ),
        # with a bias: one more per output element
        (
            "convolution",
            [T(1, 4, 8, 8), T(6, 4, 3, 3), T(6), [1, 1], [1, 1], [1, 1], False, [0, 0], 1],
            [(1, 6, 8, 8)],
            2 * 64 * 6 * 4 * 9 + 6 * 64,
        ),
        # transposed: every input position meets the whole weight
        (
            "convolution",
            [T(1, 4, 5, 5), T(4, 2, 3, 3), None, [2, 2], [0, 0], [1, 1], True, [0, 0], 1],
            [(1, 2, 11, 11)],
            2 * 25 * 4 * 2 * 9,
        ),
        # grouped (depthwise): the weight holds C_in / groups
        (
            "convolution",
            [T(1, 8, 4, 4), T(8, 1, 3, 3), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 8],
            [(1, 8, 4, 4)],
            2 * 16 * 8 * 9,
        ),
        # backward: input and weight gradients, each the forward's products; bias: output
        (
            "convolution_backward",
            [
                T(2, 64, 112, 112),
                T(2, 3, 224, 224),
                T(64, 3, 7, 7),
                [64],
                [2, 2],
                [3, 3],
                [1, 1],
                False,
                [0, 0],
                1,
                [True, True, True],
            ],
            [(2, 3, 224, 224), (64, 3, 7, 7), (64,)],
            2 * (2 * 2 * 112 * 112 * 64 * 3 * 49) + 2 * 64 * 112 * 112,
        ),
        (
            "convolution_backward",
            [
                T(2, 64, 112, 112),
                T(2, 3, 224, 224),
                T(64, 3, 7, 7),
                None,
                [2, 2],
                [3, 3],
                [1, 1],
                False,
                [0, 0],
                1,
                [False, True, False],
            ],
            [(64, 3, 7, 7)],
            2 * 2 * 112 * 112 * 64 * 3 * 49,
        ),
        ("mm", [T(32, 2048), T(2048, 1000)], [(32, 1000)], 2 * 32 * 2048 * 1000),
        (
            "addmm",
            [T(1000), T(32, 2048), T(2048, 1000)],
            [(32, 1000)],
            2 * 32 * 2048 * 1000 + 32000,
        ),
        ("bmm", [T(8, 128, 64), T(8, 64, 128)], [(8, 128, 128)], 2 * 8 * 128 * 64 * 128),
        # fused attention: Q K^T and P V; backward 2.5 times (FlashAttention-2)
        (
            "_scaled_dot_product_flash_attention_for_cpu",
            [T(2, 4, 128, 64), T(2, 4, 128, 64), T(2, 4, 128, 64)],
            [(2, 4, 128, 64)],
            2 * 2 * 4 * 128 * 128 * (64 + 64),
        ),
        (
            "_scaled_dot_product_flash_attention_for_cpu_backward",
            [T(2, 4, 128, 64), T(2, 4, 128, 64), T(2, 4, 128, 64), T(2, 4, 128, 64)],
            [(2, 4, 128, 64)] * 3,
            5 * 2 * 4 * 128 * 128 * (64 + 64),
        ),
        (
            "native_layer_norm",
            [T(4, 10), [10], T(10), T(10), 1e-5],
            [(4, 10), (4, 1), (4, 1)],
            8 * 40,
        ),
        ("native_layer_norm_backward", [T(4, 10), T(4, 10), [10]], [(4, 10)], 12 * 40),
        ("_softmax", [T(4, 10), -1, False], [(4, 10)], 5 * 40),
        ("_softmax_backward_data", [T(4, 10), T(4, 10), -1], [(4, 10)], 4 * 40),
        (
            "max_pool2d_with_indices",
            [T(2, 64, 112, 112), [3, 3], [2, 2]],
            [(2, 64, 56, 56)] * 2,
            9 * 2 * 64 * 56 * 56,
        ),
        ("sum", [T(4, 10), [1]], [(4,)], 40),
        ("clone", [T(4, 10)], [(4, 10)], 0),
        ("relu", [T(4, 10)], [(4, 10)], 40),
        ("some_new_op", [T(4, 10)], [(4, 10)], 40),  # one per output element
        ("mm", ["not", "tensors"], [(4, 4)], 0),  # arguments it cannot read count nothing
    ],
)
def test_flops_of_aten_ops(
    op: str, args: list[Any], outputs: list[tuple[int, ...]], flops: int
) -> None:
    assert aten_flops(op, args, outputs) == flops


# ---------------------------------------------------------------------- the graph builder
def _hand_step() -> TracedStep:
    """x -> y = x*w (forward, also updating a buffer), l = sum(y), dw (backward)."""
    s = [
        Storage("w", 16, "fp32", (4,), Kind.PARAMETER),
        Storage("stats", 8, "fp32", (2,), Kind.BUFFER),
        Storage("x", 16, "fp32", (4,), Kind.INPUT),
        Storage("y", 16, "fp32", (4,), Kind.VALUE),
        Storage("l", 4, "fp32", (), Kind.VALUE),
        Storage("w.grad", 16, "fp32", (4,), Kind.VALUE),
    ]
    ops = [
        TracedOp("mul", "aten.mul", ("x", "w", "stats"), ("y",), ("stats",), 4),
        TracedOp("sum", "aten.sum", ("y",), ("l",), (), 4),
        TracedOp("mul_1", "aten.mul", ("l", "x"), ("w.grad",), (), 4),
    ]
    return TracedStep("hand", tuple(s), tuple(ops), 2, {"w": "w.grad"})


@pytest.mark.parametrize("optimizer", list(Optimizer))
def test_a_traced_step_becomes_a_graph_with_its_update(optimizer: Optimizer) -> None:
    g = step_graph(_hand_step(), optimizer)
    roles = {t.name: t.role for t in g.tensors}
    assert roles["w"] is Role.WEIGHT and roles["x"] is Role.INPUT
    assert roles["stats"] is Role.OPTIMIZER_STATE  # persistent, updated in place
    assert roles["y"] is roles["l"] is Role.ACTIVATION and roles["w.grad"] is Role.GRADIENT
    assert [k.phase for k in g.kernels] == [
        Phase.FORWARD,
        Phase.FORWARD,
        Phase.BACKWARD,
        Phase.UPDATE,
    ]
    first = g.kernels[0]
    assert first.inputs == ("x", "w") and first.updates == ("stats",)  # updated, not also read
    update = g.kernels[-1]
    state = {Optimizer.SGD: ("momentum_buffer",), Optimizer.ADAM: ("exp_avg", "exp_avg_sq")}
    names = state.get(optimizer, state[Optimizer.ADAM])
    assert update.inputs == ("w.grad",) and update.updates == ("w", *(f"w.{n}" for n in names))
    assert all(g.tensor(f"w.{n}").size_bytes == 16 for n in names)
    per_param = {Optimizer.SGD: 4, Optimizer.ADAM: 13, Optimizer.ADAMW: 14}[optimizer]
    assert update.flops == per_param * 4
    assert g.live_range("w.grad") == (2, 3)  # the gradient lives until the update


# ---------------------------------------------------------------------- the command line's parsing
@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("3x224x224", ((3, 224, 224), None)),
        ("128:int64", ((128,), "int64")),
        (":int64", ((), "int64")),
        ("4:bf16", ((4,), "bf16")),
    ],
)
def test_shapes_parse(text: str, parsed: tuple[tuple[int, ...], str | None]) -> None:
    assert shape_arg(text) == parsed


@pytest.mark.parametrize(
    "text", ["", " ", "3x", "x3", "3x0", "-3", "3:", "3:fp7", "1_0", "3.5", "٣", f"{2**62}", "3,4"]
)
def test_bad_shapes_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        shape_arg(text)


def test_default_names_and_the_catalog() -> None:
    assert default_name("torchvision:resnet50", 32) == "resnet50-b32"
    assert default_name("my/models.py:Block", 2) == "Block-b2"
    assert catalog.IMPORT_LOSSES == LOSSES and catalog.IMPORT_OPTIMIZERS == OPTIMIZERS


def test_without_torch_the_import_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    with pytest.raises(TmsimError, match=r"needs torch: pip install 'tmsim\[torch\]'"):
        tmsim.import_torch(object(), (1, 2))
    argv = ["import", "torchvision:resnet50", "--input", "3x8x8", "--out", str(tmp_path / "g.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "tmsim: error: importing a PyTorch model needs torch"
    )


# ---------------------------------------------------------------------- traced models
if HAS_TORCH:
    import torch
    import torch.nn.functional as F
    from torch import nn

    from tmsim.workload.torchimport.sources import MODEL_DTYPES

    class Block(nn.Module):  # type: ignore[misc]
        """A GPT-2 block: pre-norm attention with the s x s scores kept, a 4h GeLU MLP,
        dropout on the attention probabilities and after each projection, as Korthikanti
        et al. count it."""

        def __init__(self, hidden: int, heads: int, seq: int, p: float = 0.1) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.fc, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
            self.drop_attn, self.drop_proj, self.drop_mlp = (nn.Dropout(p) for _ in range(3))
            self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1))

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            a, d = self.heads, h // self.heads
            q, k, v = (
                t.view(b, s, a, d).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(h, dim=2)
            )
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            att = self.drop_attn(F.softmax(att.masked_fill(self.future[:s, :s], -math.inf), dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(b, s, h)
            x = x + self.drop_proj(self.proj(y))
            return x + self.drop_mlp(self.fc2(F.gelu(self.fc(self.ln2(x)))))

    def tiny_cnn() -> Any:
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(8 * 4 * 4, 10),
        )


@pytest.fixture(scope="module")
def resnet50() -> Graph:
    from torchvision.models import resnet50 as build_resnet50

    with torch.device("meta"):
        model = build_resnet50()
    return tmsim.import_torch(model, inputs=(2, 3, 224, 224), optimizer="sgd", name="resnet50-b2")


@needs_torch
def test_resnet50_matches_the_zoo(resnet50: Graph) -> None:
    zoo = tmsim.graph("resnet50", batch=2)
    assert resnet50.params == zoo.params == 25_557_032
    assert resnet50.flops / zoo.flops == pytest.approx(1, abs=0.05)
    assert resnet50.peak_live_bytes / zoo.peak_live_bytes == pytest.approx(1, abs=0.10)
    by_class = {
        g: sum(k.flops for k in g.kernels if op_class(k.op) is OpClass.CONV)
        for g in (resnet50, zoo)
    }
    assert by_class[resnet50] / by_class[zoo] == pytest.approx(1, abs=0.01)
    for role in (Role.WEIGHT, Role.INPUT):
        assert resnet50.bytes_by_role()[role] == zoo.bytes_by_role()[role]


@needs_torch
def test_resnet50_ops_roles_and_updates(resnet50: Graph) -> None:
    ops = {k.op for k in resnet50.kernels}
    classes = {op: op_class(op) for op in ops}
    assert classes["aten.convolution"] is classes["aten.convolution_backward"] is OpClass.CONV
    assert classes["aten.addmm"] is classes["aten.mm"] is OpClass.MATMUL
    assert classes["aten._native_batch_norm_legit_functional"] is OpClass.NORM
    assert classes["aten.relu"] is classes["aten.threshold_backward"] is OpClass.ELEMENTWISE
    # views and aliases are no kernels and hold no storage of their own
    assert not ops & {
        "aten.view",
        "aten.t",
        "aten.alias",
        "aten.expand",
        "aten._unsafe_view",
        "getitem",
    }
    weights = [t.name for t in resnet50.tensors if t.role is Role.WEIGHT]
    assert len(weights) == 161 and "fc.weight" in weights
    for w in weights:  # each updated in place after the backward pass, reading its gradient
        (k,) = [k for k in resnet50.kernels if k.updates[:1] == (w,)]
        assert k.phase is Phase.UPDATE and k.op == "sgd_momentum"
        assert k.inputs == (f"{w}.grad",) and k.updates == (w, f"{w}.momentum_buffer")
    bn = resnet50.kernels[2]  # the stem's batch norm updates its running statistics
    assert bn.op == "aten._native_batch_norm_legit_functional"
    assert bn.updates == ("bn1.running_mean", "bn1.running_var")
    assert resnet50.tensor("bn1.running_mean").role is Role.OPTIMIZER_STATE
    phases = [k.phase for k in resnet50.kernels]
    assert phases == sorted(phases, key=[Phase.FORWARD, Phase.BACKWARD, Phase.UPDATE].index)


@pytest.mark.parametrize(("seq", "batch", "hidden", "heads"), [(128, 2, 256, 4), (64, 2, 128, 8)])
@needs_torch
def test_a_gpt2_block_saves_korthikanti_bytes(
    seq: int, batch: int, hidden: int, heads: int
) -> None:
    """bf16 weights and activations, bool (1-byte) dropout masks, as the formula assumes."""
    with torch.device("meta"):
        block = Block(hidden, heads, seq).to(torch.bfloat16)
    g = tmsim.import_torch(block, (batch, seq, hidden), loss="sum", optimizer="adam")
    saved = sum(
        t.size_bytes
        for t in g.tensors
        if t.role in (Role.INPUT, Role.ACTIVATION)
        and any(g.kernels[k].phase is Phase.BACKWARD for k in g.users(t.name))
    )
    expected = seq * batch * hidden * (34 + 5 * heads * seq / hidden)
    assert saved / expected == pytest.approx(1, abs=0.10)
    assert g.tensor("native_dropout.1").dtype == "bool"  # the probabilities' mask
    params = sum(p.numel() for p in block.parameters())
    assert g.params == params
    adam = [k for k in g.kernels if k.phase is Phase.UPDATE]
    assert len(adam) == len(list(block.parameters())) and all(k.op == "adam" for k in adam)
    assert sum(k.flops for k in adam) == 13 * params


@needs_torch
@pytest.mark.parametrize("model", ["cnn", "block"])
def test_an_imported_graph_plans_validates_and_simulates(model: str, tmp_path: Path) -> None:
    if model == "cnn":
        g = tmsim.import_torch(tiny_cnn(), (4, 3, 8, 8))
    else:
        g = tmsim.import_torch(Block(64, 2, 32), (2, 32, 64), loss="mse", optimizer="adamw")
    tmsim.save(g, tmp_path / "g.json")
    assert tmsim.load_graph(tmp_path / "g.json") == g
    p = tmsim.platform()
    plan = tmsim.plan(g, p, "sync", fast="4:1")
    assert tmsim.validate(plan, g, p).ok
    run = tmsim.simulate(plan, g, p)
    assert run.step_time_s >= plan.predicted_s * 0.99


@pytest.mark.slow
@needs_torch
def test_resnet50_plans_like_the_zoo(resnet50: Graph) -> None:
    p = tmsim.platform()
    plan = tmsim.plan(resnet50, p, "sync", fast="4:1")
    assert tmsim.validate(plan, resnet50, p).ok
    zoo = tmsim.plan(tmsim.graph("resnet50", batch=2), p, "sync", fast="4:1")
    assert plan.predicted_s / zoo.predicted_s == pytest.approx(1, abs=0.05)


@needs_torch
def test_the_module_is_not_touched_and_real_or_meta_trace_alike() -> None:
    torch.manual_seed(0)
    real = tiny_cnn()
    before = [p.detach().clone() for p in real.parameters()]
    g = tmsim.import_torch(real.eval(), [torch.empty(4, 3, 8, 8, device="meta")])
    assert not real.training  # the copy was put in training mode, not the module
    assert all(torch.equal(a, b) for a, b in zip(before, real.parameters(), strict=True))
    with torch.device("meta"):
        meta = tiny_cnn()
    assert tmsim.import_torch(meta, ((4, 3, 8, 8), "fp32")) == g
    assert g.name == "sequential-b4" and g.tensor("target").dtype == "int64"


@needs_torch
def test_the_command_line_writes_a_graph_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine.py").write_text(
        "import torch\n\ndef build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 3))\n",
        encoding="utf-8",
    )
    out = tmp_path / "g.json"
    argv = ["import", f"{tmp_path / 'mine.py'}:build", "--batch", "5", "--input", "4"]
    assert main([*argv, "--optimizer", "adam", "--dtype", "bf16", "--out", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == "build-b5" and info["params"] == 4 * 8 + 8 + 8 * 3 + 3
    g = tmsim.load_graph(out)
    assert g.tensor("input").shape == (5, 4) and g.tensor("input").dtype == "bf16"
    assert main(["graph", "--file", str(out)]) == 0
    assert "build-b5" in capsys.readouterr().out
    assert catalog.IMPORT_MODEL_DTYPES == MODEL_DTYPES


def _untraceable() -> Any:
    class Branchy(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return self.lin(x) if x.sum() > 0 else self.lin(-x)  # depends on the data

    return Branchy()


def _unused() -> Any:
    class Unused(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.used, self.unused = nn.Linear(4, 2), nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return self.used(x)

    return Unused()


def _dict_out() -> Any:
    class Dicty(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return {"logits": self.lin(x)}

    return Dicty()


@needs_torch
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tmsim.import_torch("resnet50", (2, 4)), "must be a torch.nn.Module"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), "2x4"), "inputs must be"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), []), "non-empty list"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 0)), "every dimension must be >= 1"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), ((2, 4), "fp7")), "unknown dtype 'fp7'"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), (2**40, 2**40)), "2**62 bytes"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 4), loss="hinge"), "loss must be one of"),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 4), optimizer="lbfgs"), "optimizer must"),
        (
            lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 4), loss="sum", targets=(2,)),
            "no targets",
        ),
        (lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 4), name=" "), "name must be"),
        (
            lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 5)),
            "cannot trace linear-b2: RuntimeError",
        ),
        (lambda: tmsim.import_torch(_untraceable(), (2, 4)), "cannot trace branchy-b2"),
        (lambda: tmsim.import_torch(_unused(), (2, 4)), "requires_grad_(False)"),
        (lambda: tmsim.import_torch(_dict_out(), (2, 4)), "returned dict"),
        (
            lambda: tmsim.import_torch(nn.Linear(4, 2), (2, 4), loss="mse", targets=(3, 3)),
            "cannot trace",
        ),
        (
            lambda: tmsim.api.torchimport.torch_model("torchvision:nope"),
            "unknown torchvision model",
        ),
        (lambda: tmsim.api.torchimport.torch_model("nowhere.py:f"), "no file nowhere.py"),
        (lambda: tmsim.api.torchimport.torch_model("json:dumps"), "TypeError"),
        (
            lambda: tmsim.api.torchimport.torch_model("torchvision:resnet50", "int8"),
            "dtype must be",
        ),
    ],
)
def test_bad_input_fails_in_one_line(call: Any, message: str) -> None:
    import tmsim.api.torchimport  # noqa: F401  (the lambdas reach it through tmsim.api)

    with pytest.raises(TorchImportError) as info:
        call()
    text = str(info.value)
    assert message in text and "\n" not in text
