"""Fuzzing ``tmsim import``: small model files and odd arguments either give a graph file that
eager PyTorch agrees with, or are refused in one line; never a traceback, a silent exit or a
polluted stdout (Hypothesis).

Each example writes a model file to a scratch folder, assembled from parts: what its code
does at import (nothing, print to stdout or stderr, log, warn, ``sys.exit`` with a code or a
message, raise an exception or a :class:`BaseException` of its own, a syntax error), the
network (a linear layer, an MLP, a layer norm before a linear layer, an embedding, or a linear
layer after a cast of its input to float), odd parameters and buffers it adds to its output
(complex64 and complex128 weights, int16, bool and fp8 buffers, fp16 and fp64 weights, a
frozen weight, an empty one, one the loss never reaches), what its forward pass does (print,
exit, raise, return a dict) and what its builder does (print, exit, return no module). The
arguments draw ``--input`` shapes and dtypes (integers, bool, fp8 and floats of every width),
``--batch``, ``--dtype``, ``--loss``, ``--optimizer``, ``--target`` and ``--json``.

:func:`tmsim.cli.main.main` runs in this process (torch is imported once), and the oracle
(:func:`verdict`) requires:

- exit code 0: the graph file loads, stdout is the summary (one JSON document with
  ``--json``), stderr is empty, nothing the model printed reached either; every weight has a
  shape and the graph's parameters are the model's real numbers (two per complex value); and
  eager PyTorch runs the same step (forward, loss, backward) on real tensors of the same
  shapes and dtypes: a graph eager PyTorch refuses is a silent wrong answer;
- any other exit code: one line on stderr, ``tmsim: error: ...`` (or the one line of a usage
  error), nothing on stdout, no graph file.

Without torch every run must be refused in one line, which the general command-line fuzzer
(``test_fuzz_cli``) checks; this one is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from tmsim.cli.torchimport import shape_arg  # noqa: E402
from tmsim.workload.files import load_graph  # noqa: E402
from tmsim.workload.graph import Role  # noqa: E402
from tmsim.workload.torchimport.specs import TORCH_DTYPES  # noqa: E402

ERROR_LINE = re.compile(r"^tmsim( [a-z]+)?: error: .")
#: What every model prints: none of it may reach tmsim's output.
NOISE = "NOISE"
FEATURES = 4

IMPORT_TIME = {
    "quiet": "",
    "print": f"print('{NOISE} at import')\n",
    "stderr": f"print('{NOISE} on stderr', file=sys.stderr)\n",
    "log": f"logging.getLogger('model').warning('{NOISE} logged')\n",
    "warn": f"warnings.warn('{NOISE} warned')\n",
    "exit 0": "sys.exit(0)\n",
    "exit 1": "sys.exit(1)\n",
    "exit message": "raise SystemExit('bye')\n",
    "raise": "raise ValueError('no model here')\n",
    "base exception": "class Stop(BaseException):\n    pass\n\nraise Stop('stop')\n",
    "syntax error": "def broken(:\n",
}
#: The network: its source, and whether its input is class indices.
BODIES = {
    "linear": f"nn.Linear({FEATURES}, 3)",
    "mlp": f"nn.Sequential(nn.Linear({FEATURES}, 8), nn.GELU(), nn.Linear(8, 3))",
    "norm": f"nn.Sequential(nn.LayerNorm({FEATURES}), nn.Linear({FEATURES}, 3))",
    "embedding": "nn.Sequential(nn.Embedding(10, 6), nn.Linear(6, 3))",
    "cast": f"Cast(nn.Linear({FEATURES}, 3))",
}
#: Odd parameters and buffers: how each is made and what it adds to the output.
EXTRAS = {
    "complex64": ("nn.Parameter(torch.zeros(3, 5, dtype=torch.complex64))", "v.abs().sum()"),
    "complex128": ("nn.Parameter(torch.zeros(2, 2, dtype=torch.complex128))", "v.abs().sum()"),
    "int16 buffer": ("torch.zeros(5, dtype=torch.int16)", "v.sum()"),
    "bool buffer": ("torch.ones(5, dtype=torch.bool)", "v.sum()"),
    "fp8 buffer": ("torch.zeros(5).to(torch.float8_e4m3fn)", "v.float().sum()"),
    "fp16 weight": ("nn.Parameter(torch.zeros(5, dtype=torch.float16))", "v.float().sum()"),
    "fp64 weight": ("nn.Parameter(torch.zeros(5, dtype=torch.float64))", "v.sum()"),
    "frozen": ("nn.Parameter(torch.zeros(5), requires_grad=False)", "v.sum()"),
    "empty": ("nn.Parameter(torch.zeros(0))", "v.sum()"),
    "unused": ("nn.Parameter(torch.zeros(5))", "0"),
}
FORWARD = {
    "plain": "",
    "print": f"        print('{NOISE} in forward', x.shape)\n",
    "exit": "        sys.exit(0)\n",
    "raise": "        raise RuntimeError('forward failed')\n",
    "dict": "        return {'out': self.body(x)}\n",
}
BUILDER = {
    "plain": "def build():\n    return Model()\n",
    "print": f"def build():\n    print('{NOISE} in build')\n    return Model()\n",
    "exit": "def build():\n    sys.exit(2)\n",
    "no module": "def build():\n    return 42\n",
    "instance": "build = Model()\n",
}
HEAD = "import logging, sys, warnings\nimport torch\nfrom torch import nn\n\n"
CAST = (
    "class Cast(nn.Module):\n    def __init__(self, inner):\n        super().__init__()\n"
    "        self.inner = inner\n    def forward(self, x):\n        return self.inner(x.float())\n\n"
)


@dataclass(frozen=True)
class Model:
    """A model file's parts (module documentation)."""

    at_import: str
    body: str
    extras: tuple[str, ...]
    forward: str
    builder: str

    def source(self) -> str:
        lines = [HEAD, IMPORT_TIME[self.at_import], CAST]
        lines.append(
            "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        )
        lines.append(f"        self.body = {BODIES[self.body]}\n")
        for i, name in enumerate(self.extras):
            made = EXTRAS[name][0]
            if made.startswith("nn.Parameter"):
                lines.append(f"        self.extra{i} = {made}\n")
            else:
                lines.append(f"        self.register_buffer('extra{i}', {made})\n")
        lines.append("    def forward(self, x):\n")
        lines.append(FORWARD[self.forward])
        lines.append("        out = self.body(x)\n")
        for i, name in enumerate(self.extras):
            lines.append(f"        v = self.extra{i}\n        out = out + {EXTRAS[name][1]}\n")
        lines.append("        return out\n\n")
        lines.append(BUILDER[self.builder])
        return "".join(lines)


def models(plain: bool = False) -> st.SearchStrategy[Model]:
    """Model files; ``plain``: those whose code prints nothing, exits nowhere and builds a
    module (their odd parameters and the arguments are the test)."""
    if plain:
        quiet, calm = st.just("quiet"), st.just("plain")
        return st.builds(Model, quiet, st.sampled_from(list(BODIES)), extras(), calm, calm)
    often = st.sampled_from(["quiet", "quiet", "print", "stderr", "log", "warn"])
    return st.builds(
        Model,
        often | st.sampled_from(list(IMPORT_TIME)),
        st.sampled_from(list(BODIES)),
        extras(),
        st.sampled_from(["plain", "plain", "print"]) | st.sampled_from(list(FORWARD)),
        st.sampled_from(["plain", "plain", "print"]) | st.sampled_from(list(BUILDER)),
    )


def extras() -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(st.sampled_from(list(EXTRAS)), max_size=2, unique=True).map(tuple)


INPUTS = ["4", "4", "4:fp32", "3x4", "4:int64", "4:int32", "4:uint8", "4:bool", "4:fp8"]
INPUTS += ["4:fp16", "4:bf16", "4:fp64", "5", "1", ":int64", "2x4:int64", "5:int64"]


@st.composite
def arguments(draw: st.DrawFn) -> list[str]:
    """The arguments after ``import MODEL``, but ``--out``."""
    argv = ["--input", draw(st.sampled_from(INPUTS))]
    for flag, values in (
        ("--batch", ["1", "2", "3"]),
        ("--dtype", ["fp32", "fp16", "bf16", "fp64"]),
        ("--loss", ["cross_entropy", "mse", "sum"]),
        ("--optimizer", ["sgd", "adam", "adamw"]),
        ("--target", [":int64", "3", "3:fp64", "2"]),
    ):
        if draw(st.integers(0, 2)) == 0:
            argv += [flag, draw(st.sampled_from(values))]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


def run(argv: list[str], folder: Path) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``tmsim ARGV`` in ``folder``: a :class:`SystemExit`
    that escapes is its code (as the shell would see it), any other exception a traceback
    (Ctrl-C still stops the test run)."""
    from tmsim.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # what the command line must never let through
            return 99, out.getvalue(), f"Traceback: {type(exc).__name__}: {exc}"
    return code, out.getvalue(), err.getvalue()


# ---------------------------------------------------------------------- the eager reference
def load(path: Path) -> Any:
    """The model the file builds, built eagerly on the CPU (its warnings ignored; the callers
    swallow its output)."""
    spec = importlib.util.spec_from_file_location(f"fuzz_reference_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    found = module.build
    return found if isinstance(found, torch.nn.Module) else found()


def flag(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def tensor(shape: tuple[int, ...], dtype: Any) -> Any:
    """Real values: small floats, zeros for integers and bools (a valid index anywhere)."""
    if dtype.is_floating_point:
        return (torch.rand(shape) * 0.1).to(dtype)
    return torch.zeros(shape, dtype=dtype)


def eager_refusal(path: Path, argv: list[str]) -> str:
    """Why eager PyTorch refuses the training step ``argv`` describes ("" if it runs it)."""
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        model = load(path)
        if flag(argv, "--dtype"):  # the floating-point tensors, as Module.half() casts
            cast = TORCH_DTYPES[str(flag(argv, "--dtype"))]
            model = model._apply(lambda t: t.to(cast) if t.is_floating_point() else t)
        floating = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
        batch = int(flag(argv, "--batch", "32") or 32)
        dims, dtype = shape_arg(str(flag(argv, "--input")))
        x = tensor((batch, *dims), TORCH_DTYPES[dtype] if dtype else floating or torch.float32)
        loss = flag(argv, "--loss", "cross_entropy")
        try:
            out = model(x)
            out = out[0] if isinstance(out, tuple | list) else out
            if flag(argv, "--target"):
                t_dims, t_dtype = shape_arg(str(flag(argv, "--target")))
                target = tensor((batch, *t_dims), TORCH_DTYPES[t_dtype] if t_dtype else out.dtype)
            elif loss == "cross_entropy":
                target = torch.zeros(out.shape[:-1], dtype=torch.int64)
            else:
                target = torch.zeros_like(out)
            if loss == "cross_entropy":
                logits = out.reshape(-1, out.shape[-1]) if out.dim() != 2 else out
                value = torch.nn.functional.cross_entropy(logits, target.reshape(-1))
            elif loss == "mse":
                value = torch.nn.functional.mse_loss(out, target)
            else:
                value = out.sum()
            value.backward()
        except (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError) as exc:
            return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    return ""


def real_numbers(path: Path) -> int:
    """The model's parameters in real numbers: two per complex value."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        model = load(path)
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())


# ---------------------------------------------------------------------- the oracle
def verdict(path: Path, argv: list[str], code: int, out: str, err: str, graph: Path) -> str:
    """``ok``, ``clean`` (refused in one line), ``silent: why`` (a wrong answer, an exit
    without a graph), ``noisy: why`` (stdout or stderr polluted) or ``traceback: why``."""
    if "Traceback" in err:
        return f"traceback: {err.strip().splitlines()[-1][:100]}"
    if NOISE in out:
        return "noisy: the model's output on stdout"
    if code != 0:
        lines = err.splitlines()
        if len(lines) != 1 or not ERROR_LINE.match(lines[0]) or out or graph.exists():
            return f"noisy: exit {code} with {len(lines)} lines on stderr, {len(out)} on stdout"
        return "clean"
    if not graph.exists():
        return "silent: exit code 0 without a graph file"
    if err:
        return f"noisy: stderr on success: {err.strip().splitlines()[0][:80]}"
    if "--json" in argv:
        try:
            json.loads(out)
        except ValueError:
            return "noisy: --json printed no JSON document"
    g = load_graph(graph)
    shapeless = [t.name for t in g.tensors if t.role is Role.WEIGHT and not t.shape]
    if shapeless:
        return f"silent: weight {shapeless[0]!r} without a shape"
    if g.params != real_numbers(path):
        return f"silent: {g.params} parameters for {real_numbers(path)} real numbers"
    refusal = eager_refusal(path, argv)
    return f"silent: eager PyTorch refuses: {refusal}" if refusal else "ok"


def check(model: Model, argv: list[str], folder: Path) -> str:
    """Write ``model``, run ``tmsim import`` on it with ``argv`` and judge the outcome."""
    source = model.source()
    digest = hashlib.sha1(f"{source}{argv}".encode()).hexdigest()[:12]
    path = folder / f"m{digest}.py"
    path.write_text(source, encoding="utf-8")
    graph = folder / f"g{digest}.json"
    graph.unlink(missing_ok=True)
    full = ["import", f"{path.name}:build", *argv, "--out", graph.name]
    code, out, err = run(full, folder)
    return verdict(path, full, code, out, err, graph)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_import")


FAST = settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(model=models(), argv=arguments())
def test_fuzzed_models_import_right_or_fail_in_one_line(
    model: Model, argv: list[str], folder: Path
) -> None:
    result = check(model, argv, folder)
    assert result in ("ok", "clean"), (result, model, argv)


@FAST
@given(model=models(plain=True), argv=arguments())
def test_fuzzed_arguments_and_parameters_import_right_or_fail_in_one_line(
    model: Model, argv: list[str], folder: Path
) -> None:
    result = check(model, argv, folder)
    assert result in ("ok", "clean"), (result, model, argv)


@pytest.mark.slow
@SLOW
@given(model=models(), argv=arguments())
def test_many_fuzzed_models_import_right_or_fail_in_one_line(
    model: Model, argv: list[str], folder: Path
) -> None:
    result = check(model, argv, folder)
    assert result in ("ok", "clean"), (result, model, argv)


def test_a_plain_model_imports(folder: Path) -> None:
    model = Model("quiet", "mlp", ("complex64",), "plain", "plain")
    assert check(model, ["--input", "4", "--json"], folder) == "ok"
