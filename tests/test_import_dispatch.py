"""Import for the device that runs the step: fused attention as a GPU dispatches it, where the
CPU trace records the CPU's kernel (tmsim/workload/torchimport/dispatch.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import tmsim
from tmsim.api.torchimport import target_device, torch_model
from tmsim.cli.main import main
from tmsim.errors import TmsimError

pytest.importorskip("torch")

MODEL = '''
import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    """One attention head block: 16 tokens, 4 heads of 16 (masked when asked)."""

    def __init__(self, masked=False):
        super().__init__()
        self.qkv = torch.nn.Linear(64, 192)
        self.masked = masked

    def forward(self, x):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 16, 3, 4, 16).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        mask = torch.ones(16, 16, dtype=torch.bool, device=x.device).tril() if self.masked else None
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=not self.masked)
        return y.transpose(1, 2).reshape(b, 16, 64)


def build():
    return Attention()


def build_masked():
    return Attention(masked=True)
'''


def attention(tmp_path: Path, masked: bool = False, dtype: str | None = None) -> object:
    """The model of :data:`MODEL` as ``tmsim import`` builds it from its file (on meta)."""
    source = tmp_path / "attn.py"
    source.write_text(MODEL)
    return torch_model(f"{source}:{'build_masked' if masked else 'build'}", dtype)


def attention_ops(graph: tmsim.Graph) -> list[str]:
    return [k.op for k in graph.kernels if "attention" in k.op]


def log_sum_exp(graph: tmsim.Graph) -> int:
    """Bytes of the forward attention kernel's second output (its log-sum-exp)."""
    (kernel,) = [k for k in graph.kernels if "attention" in k.op and "backward" not in k.op]
    return graph.tensor(kernel.outputs[1]).size_bytes


def test_fp32_attention_runs_the_memory_efficient_kernel_on_a_gpu(tmp_path: Path) -> None:
    """8 x 4 heads x 16 queries: the CPU's log-sum-exp 8 x 4 x 16 fp32 (2 KiB); the GPU's
    memory-efficient kernel pads the queries to 32 (4 KiB)."""
    model = attention(tmp_path)
    cpu = tmsim.import_torch(model, (8, 16, 64), loss="sum")
    gpu = tmsim.import_torch(model, (8, 16, 64), loss="sum", device="cuda")
    assert attention_ops(cpu) == [
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    ]
    assert attention_ops(gpu) == [
        "aten._scaled_dot_product_efficient_attention",
        "aten._scaled_dot_product_efficient_attention_backward",
    ]
    assert log_sum_exp(cpu) == 8 * 4 * 16 * 4
    assert log_sum_exp(gpu) == 8 * 4 * 32 * 4
    assert [k.name for k in cpu.kernels] == [k.name for k in gpu.kernels]


def test_bf16_attention_runs_flash_attention_unless_masked(tmp_path: Path) -> None:
    model = attention(tmp_path, dtype="bf16")
    gpu = tmsim.import_torch(model, (8, 16, 64), loss="sum", device="cuda")
    assert attention_ops(gpu)[0] == "aten._scaled_dot_product_flash_attention"
    assert log_sum_exp(gpu) == 8 * 4 * 16 * 4  # fp32 rows of the queries, unpadded
    masked = attention(tmp_path, masked=True, dtype="bf16")
    gpu_masked = tmsim.import_torch(masked, (8, 16, 64), loss="sum", device="cuda")
    assert attention_ops(gpu_masked)[0] == "aten._scaled_dot_product_efficient_attention"


def test_a_platform_names_its_device() -> None:
    assert target_device(tmsim.platform("h200-host-nvme")) == "cuda"
    assert target_device(tmsim.platform("gh200")) == "cuda"
    assert target_device(tmsim.platform("cascadelake-optane")) == "cpu"
    assert target_device(tmsim.platform("cascadelake-2lm")) == "cpu"


def test_the_command_imports_for_the_platform(tmp_path: Path) -> None:
    (tmp_path / "attn.py").write_text(MODEL)
    out = tmp_path / "g.json"
    argv = ["import", f"{tmp_path / 'attn.py'}:build", "--input", "16x64", "--batch", "8"]
    argv += ["--loss", "sum", "--out", str(out), "--platform", "h200-host-nvme"]
    assert main(argv) == 0
    assert attention_ops(tmsim.load_graph(out))[0] == "aten._scaled_dot_product_efficient_attention"
    assert main([*argv, "--device", "cpu"]) == 0
    assert "for_cpu" in attention_ops(tmsim.load_graph(out))[0]


def test_an_unknown_device_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TmsimError, match="device must be one of cpu, cuda"):
        tmsim.import_torch(attention(tmp_path), (8, 16, 64), loss="sum", device="tpu")


def test_math_modes_travel_with_the_graph(tmp_path: Path) -> None:
    """A step whose script sets TF32 matrix products records it; the graph file keeps it;
    the H200's kernel model prices the step in it (GPT-2's fp32 step about halves)."""
    import torch

    from hwmodels.kernels import MathMode, MathModes
    from tmsim.workload.graph import MATH_MODES

    # The graph's table of modes is the kernel model's.
    assert set(MATH_MODES) == {f for f in MathModes.__dataclass_fields__}
    assert all(set(v) == {m.value for m in MathMode} for v in MATH_MODES.values())
    model = attention(tmp_path)
    assert tmsim.import_torch(model, (8, 16, 64), loss="sum").math == ()
    saved = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        high = tmsim.import_torch(model, (8, 16, 64), loss="sum")
    finally:
        torch.set_float32_matmul_precision(saved)
    assert dict(high.math) == {"matmul_fp32": "tf32"}
    tmsim.save(high, tmp_path / "g.json")
    assert tmsim.load_graph(tmp_path / "g.json") == high
    with pytest.raises(TmsimError, match="math mode matmul_fp32 must be one of fp32, tf32"):
        tmsim.import_torch(model, (8, 16, 64), loss="sum", math={"matmul_fp32": "bf16"})
    with pytest.raises(TmsimError, match="unknown math mode 'attention'"):
        tmsim.import_torch(model, (8, 16, 64), loss="sum", math={"attention": "tf32"})
    gpt = tmsim.load_graph(
        Path(__file__).parent.parent / "calibration/h200/graphs/gpt2_fp32_b8.json"
    )
    tf32 = tmsim.Graph(gpt.name, gpt.tensors, gpt.kernels, {"matmul_fp32": "tf32"})
    h200 = tmsim.platform("h200-host-nvme")
    fp32_s = tmsim.plan(gpt, h200, "all-fast").predicted_s
    tf32_s = tmsim.plan(tf32, h200, "all-fast").predicted_s
    assert tf32_s < 0.6 * fp32_s
    # the same as the platform set to it
    as_set = tmsim.platform("h200-host-nvme", {"compute.kernels.matmul_fp32": "tf32"})
    assert tmsim.plan(gpt, as_set, "all-fast").predicted_s == pytest.approx(tf32_s)


def test_the_command_records_math_modes(tmp_path: Path) -> None:
    (tmp_path / "attn.py").write_text(MODEL)
    out = tmp_path / "g.json"
    argv = ["import", f"{tmp_path / 'attn.py'}:build", "--input", "16x64", "--batch", "8"]
    argv += ["--loss", "sum", "--out", str(out), "--math", "matmul_fp32=tf32"]
    assert main(argv) == 0
    assert dict(tmsim.load_graph(out).math) == {"matmul_fp32": "tf32"}
    assert main([*argv[:-2], "--math", "matmul_fp32=fp8"]) == 2
