"""A model's own code runs fenced, and what fake tensors let through is checked
(``tmsim import``, :func:`tmsim.import_torch`).

- a model file, builder or forward pass that calls ``sys.exit`` (any code) or raises another
  :class:`BaseException` ends the import in one line naming the model, never a silent exit;
  Ctrl-C (:class:`KeyboardInterrupt`) still interrupts as everywhere in the command line;
- what the model's code prints (stdout, stderr, logging, warnings) and PyTorch's fake-tensor
  logger are contained: ``--json`` prints JSON alone, an error is one line on stderr, and
  everything is restored afterwards, on error too;
- a graph eager PyTorch would refuse for its dtypes (an integer, bool or fp8 input into a
  float ``Linear``) is refused in one line naming the op and the dtypes; the references are
  eager PyTorch's own refusals on real tensors;
- every storage is recorded with its shape: a complex tensor as pairs of floats of its width
  (as ``torch.view_as_real``), a dtype the graph format has no name for refused by name.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import tmsim  # noqa: E402
from tmsim.cli.main import EXIT_INTERRUPTED, main  # noqa: E402
from tmsim.workload.graph import Role  # noqa: E402
from tmsim.workload.torchimport import TorchImportError  # noqa: E402

LINEAR = "import torch\n\ndef build():\n    return torch.nn.Linear(16, 3)\n"
FAKE_LOGGER = "torch._subclasses.fake_tensor"


def write(folder: Path, source: str, name: str = "model.py") -> str:
    """Write ``source`` as a model file in ``folder``; return ``FILE:build``."""
    path = folder / name
    path.write_text(source, encoding="utf-8")
    return f"{path}:build"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``tmsim ARGV`` (a usage error's SystemExit too)."""
    try:
        code = main(argv)
    except SystemExit as exc:  # what the command line must never let a model's code do
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 99)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tmsim: error: "), err
    return lines[0]


# ---------------------------------------------------------------------- exits and interrupts
EXITS = {
    "exit 0 at import": "import sys\nsys.exit(0)\n",
    "exit 3 at import": "import sys\nsys.exit(3)\n",
    "exit with a message": "raise SystemExit('bye')\n",
    "exit() in the builder": "import torch\n\ndef build():\n    exit()\n",
    "exit in forward": (
        "import sys, torch\n\nclass M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.lin = torch.nn.Linear(16, 3)\n"
        "    def forward(self, x):\n        sys.exit(0)\n\n"
        "def build():\n    return M()\n"
    ),
    "a BaseException of its own": (
        "class Stop(BaseException):\n    pass\n\nraise Stop('stop here')\n"
    ),
}


@pytest.mark.parametrize("source", EXITS.values(), ids=EXITS.keys())
def test_a_model_that_exits_fails_the_import_in_one_line(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write(tmp_path, source)
    out = tmp_path / "g.json"
    code, stdout, err = run(["import", model, "--input", "16", "--out", str(out)], capsys)
    assert code == 2 and stdout == "" and not out.exists()
    line = one_error_line(err)
    assert "model.py:build" in line or "cannot trace" in line


def test_sys_exit_in_forward_is_refused_by_the_api() -> None:
    class Exits(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            sys.exit(0)

    with pytest.raises(TorchImportError, match=r"cannot trace exits-b2: .*sys\.exit\(0\)"):
        tmsim.import_torch(Exits(), (2, 4))


def test_ctrl_c_in_a_model_still_interrupts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write(tmp_path, "print('noise')\nraise KeyboardInterrupt\n")
    stdout_before, stderr_before = sys.stdout, sys.stderr
    code, out, err = run(
        ["import", model, "--input", "16", "--out", str(tmp_path / "g.json")], capsys
    )
    assert code == EXIT_INTERRUPTED and out == "" and err == "tmsim: interrupted\n"
    assert sys.stdout is stdout_before and sys.stderr is stderr_before


# ---------------------------------------------------------------------- output contained
NOISY = (
    "import logging, sys, warnings, torch\n"
    "print('import noise')\n"
    "print('import noise on stderr', file=sys.stderr)\n"
    "logging.getLogger('mine').warning('import log noise')\n"
    "warnings.warn('import warning noise')\n\n"
    "class Noisy(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        print('init noise')\n"
    "        self.lin = torch.nn.Linear(16, 3)\n"
    "    def forward(self, x):\n"
    "        print('forward noise', x.shape)\n"
    "        logging.getLogger('mine').error('forward log noise')\n"
    "        return self.lin(x)\n\n"
    "def build():\n"
    "    print('build noise')\n"
    "    return Noisy()\n"
)


def test_a_model_that_prints_leaves_json_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write(tmp_path, NOISY)
    out = tmp_path / "g.json"
    code, stdout, err = run(["import", model, "--input", "16", "--out", str(out), "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["name"] == "build-b32" and out.is_file()
    assert "noise" not in stdout + err


def test_a_model_that_prints_leaves_the_summary_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write(tmp_path, NOISY)
    code, stdout, err = run(
        ["import", model, "--input", "16", "--out", str(tmp_path / "g.json")], capsys
    )
    assert code == 0 and err == "" and "noise" not in stdout and "build-b32" in stdout


def test_a_bad_input_is_one_line_without_pytorchs_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Linear(16, 3) on 15 features: fake tensors refuse it, and PyTorch's fake-tensor
    logger would print the failing op's traceback first."""
    model = write(tmp_path, LINEAR)
    logger = logging.getLogger(FAKE_LOGGER)
    before = (sys.stdout, sys.stderr, logger.disabled, logger.level, list(warnings.filters))
    code, out, err = run(
        ["import", model, "--input", "15", "--out", str(tmp_path / "g.json")], capsys
    )
    assert code == 2 and out == ""
    assert "cannot trace build-b32: RuntimeError" in one_error_line(err)
    after = (sys.stdout, sys.stderr, logger.disabled, logger.level, list(warnings.filters))
    assert after == before  # restored on error too


def test_the_api_contains_a_models_output(capsys: pytest.CaptureFixture[str]) -> None:
    class Loud(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            print("forward noise")
            return self.lin(x)

    g = tmsim.import_torch(Loud(), (2, 4))
    assert g.name == "loud-b2"
    with pytest.raises(TorchImportError):
        tmsim.import_torch(Loud(), (2, 5))
    captured = capsys.readouterr()
    assert captured.out == captured.err == ""


# ---------------------------------------------------------------------- dtypes that eager refuses
def eager_refuses(module: Any, x: Any) -> str:
    """Eager PyTorch's refusal of ``module(x)`` on real tensors ("" if it runs)."""
    try:
        module(x)
    except RuntimeError as exc:
        return str(exc)
    return ""


def real(dtype: Any) -> Any:
    return torch.zeros(2, 16).to(dtype)


@pytest.mark.parametrize(
    ("dtype", "name"),
    [("int64", "int64"), ("bool", "bool"), ("fp8", "fp8"), ("fp16", "fp16"), ("int32", "int32")],
)
def test_an_input_of_another_dtype_into_a_linear_is_refused(
    dtype: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tmsim.workload.torchimport.specs import TORCH_DTYPES

    assert eager_refuses(torch.nn.Linear(16, 3), real(TORCH_DTYPES[dtype]))  # the reference
    model = write(tmp_path, LINEAR)
    out = tmp_path / "g.json"
    code, stdout, err = run(
        ["import", model, "--input", f"16:{dtype}", "--out", str(out), "--json"], capsys
    )
    assert code == 2 and stdout == "" and not out.exists()
    line = one_error_line(err)
    assert "aten.addmm" in line and name in line and "fp32" in line


def test_the_api_refuses_a_half_precision_batch_of_matrices_into_a_float_weight() -> None:
    class Project(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4, 3))

        def forward(self, x: Any) -> Any:
            return x @ self.w  # (batch, seq, 4) @ (4, 3): one matrix product on the CPU

    assert eager_refuses(Project(), torch.zeros(2, 5, 4, dtype=torch.float16))
    with pytest.raises(TorchImportError, match=r"aten\.mm .*fp16.*fp32"):
        tmsim.import_torch(Project(), ((2, 5, 4), "fp16"), loss="sum")


@pytest.mark.parametrize(("dtype", "norm_dtype"), [("fp8", torch.float32), ("fp32", torch.float64)])
def test_a_norm_on_an_input_its_parameters_do_not_take_is_refused(
    dtype: str, norm_dtype: Any
) -> None:
    from tmsim.workload.torchimport.specs import TORCH_DTYPES

    norm = torch.nn.LayerNorm(4).to(norm_dtype)
    assert eager_refuses(norm, torch.zeros(2, 4).to(TORCH_DTYPES[dtype]))
    with pytest.raises(TorchImportError, match=rf"aten\.native_layer_norm .*{dtype}"):
        tmsim.import_torch(norm, ((2, 4), dtype), loss="sum")


def test_a_half_precision_norm_on_float_parameters_still_imports() -> None:
    norm = torch.nn.LayerNorm(4)
    assert not eager_refuses(norm, torch.zeros(2, 4, dtype=torch.bfloat16))
    assert tmsim.import_torch(norm, ((2, 4), "bf16"), loss="sum").tensor("input").dtype == "bf16"


def test_a_bool_matrix_product_is_refused_though_its_dtypes_agree() -> None:
    class BoolMM(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            m = x > 0
            return self.lin(x) + (m @ m.t()).sum()

    assert eager_refuses(BoolMM(), torch.zeros(2, 4))
    with pytest.raises(TorchImportError, match=r"aten\.mm .*bool"):
        tmsim.import_torch(BoolMM(), (2, 4), loss="sum")


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp64"])
def test_inputs_in_the_models_own_dtype_still_import(dtype: str, tmp_path: Path) -> None:
    model = write(tmp_path, LINEAR)
    out = tmp_path / "g.json"
    argv = ["import", model, "--input", f"16:{dtype}", "--dtype", dtype, "--out", str(out)]
    assert main(argv) == 0
    assert tmsim.load_graph(out).tensor("input").dtype == dtype


def test_integer_indices_into_an_embedding_still_import() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 3))
    g = tmsim.import_torch(model, ((2, 5), "int64"))
    assert g.tensor("input").dtype == "int64"


# ---------------------------------------------------------------------- every dtype with its shape
class Spectral(torch.nn.Module):  # type: ignore[misc]
    """A complex weight, as a spectral layer holds one, beside a real one."""

    def __init__(self, dtype: Any = torch.complex64) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(8, 8, dtype=dtype))
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: Any) -> Any:
        return self.lin(x) + self.w.abs().sum()


@pytest.mark.parametrize(("dtype", "real_dtype"), [("complex64", "fp32"), ("complex128", "fp64")])
def test_a_complex_parameter_is_recorded_as_pairs_of_floats(dtype: str, real_dtype: str) -> None:
    g = tmsim.import_torch(Spectral(getattr(torch, dtype)), (2, 4), loss="sum")
    w = g.tensor("w")
    assert (w.dtype, w.shape, w.role) == (real_dtype, (8, 8, 2), Role.WEIGHT)
    assert w.size_bytes == 64 * getattr(torch, dtype).itemsize
    assert g.tensor("w.momentum_buffer").shape == (8, 8, 2)
    assert g.params == 2 * 64 + 4 * 3 + 3  # real numbers: two per complex value
    assert g.tensor("w.grad").shape == (8, 8, 2)


def test_every_parameter_of_the_cli_import_has_a_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (
        "import torch\n\nclass C(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.zeros(8, 8, dtype=torch.complex64))\n"
        "        self.lin = torch.nn.Linear(16, 3)\n"
        "    def forward(self, x):\n        return self.lin(x) + self.w.abs().sum()\n\n"
        "def build():\n    return C()\n"
    )
    out = tmp_path / "g.json"
    code, stdout, err = run(
        ["import", write(tmp_path, source), "--input", "16", "--out", str(out), "--json"], capsys
    )
    assert code == 0, err
    assert json.loads(stdout)["params"] == 2 * 64 + 16 * 3 + 3
    doc = json.loads(out.read_text("utf-8"))
    assert all(t.get("shape") for t in doc["tensors"] if t["role"] == "weight")


@pytest.mark.parametrize("dtype", ["fp64", "fp16"])
def test_dtype_casts_floating_parameters_and_keeps_complex_ones(
    dtype: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``Module.half()`` casts: ``Module.to(dtype)`` would drop the imaginary parts."""
    source = (
        "import torch\n\nclass C(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = torch.nn.Parameter(torch.zeros(8, 8, dtype=torch.complex64))\n"
        "        self.lin = torch.nn.Linear(16, 3)\n"
        "    def forward(self, x):\n        return self.lin(x) + self.w.abs().sum()\n\n"
        "def build():\n    return C()\n"
    )
    out = tmp_path / "g.json"
    argv = ["import", write(tmp_path, source), "--input", "16", "--dtype", dtype]
    code, stdout, err = run([*argv, "--out", str(out), "--json"], capsys)
    assert code == 0 and err == "", err
    g = tmsim.load_graph(out)
    assert (g.tensor("w").dtype, g.tensor("w").shape) == ("fp32", (8, 8, 2))
    assert g.tensor("lin.weight").dtype == g.tensor("input").dtype == dtype
    assert json.loads(stdout)["params"] == 2 * 64 + 16 * 3 + 3


def test_a_complex_product_counts_real_flops() -> None:
    class ComplexMM(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4, 4, dtype=torch.complex64))

        def forward(self, x: Any) -> Any:
            return (x.to(torch.complex64) @ self.w).abs()

    g = tmsim.import_torch(ComplexMM(), (2, 4), loss="sum")
    (mm,) = [k for k in g.kernels if k.op == "aten.mm" and k.phase.value == "forward"]
    assert mm.flops == 4 * (2 * 2 * 4 * 4)  # a complex multiply-add is 8 real FLOPs


def test_a_dtype_the_graph_cannot_name_is_refused_by_name() -> None:
    class Shorts(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("table", torch.zeros(5, dtype=torch.int16))

        def forward(self, x: Any) -> Any:
            return self.lin(x) + self.table.sum()

    with pytest.raises(TorchImportError) as info:
        tmsim.import_torch(Shorts(), (2, 4), loss="sum")
    text = str(info.value)
    assert "'table'" in text and "int16" in text and "\n" not in text


def test_fp8_variants_are_fp8_with_their_shape() -> None:
    class Scales(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("amax", torch.zeros(6, 2).to(torch.float8_e4m3fnuz))

        def forward(self, x: Any) -> Any:
            return self.lin(x) + self.amax.float().sum()

    g = tmsim.import_torch(Scales(), (2, 4), loss="sum")
    assert (g.tensor("amax").dtype, g.tensor("amax").shape) == ("fp8", (6, 2))
