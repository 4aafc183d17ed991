"""``tmsim import`` and ``tmsim profile``: a PyTorch model's training step as a graph file,
and its kernels measured on this machine.

``tmsim import torchvision:resnet50 --batch 32 --input 3x224x224 --out resnet50.json``
traces the model's forward pass, loss, backward pass and optimizer update on fake tensors
(:func:`tmsim.import_torch`) and writes the graph, which ``tmsim graph --file``,
``tmsim plan --file`` and sweeps then take. ``tmsim profile`` traces the same step, times
each of its kernels on this machine (:func:`tmsim.profile`) and writes the profile
``--profile`` reads beside the graph. Both need the optional extra: ``pip install
'tmsim[torch]'``. Building the parser imports neither torch nor numpy.
"""

from __future__ import annotations

import argparse
from typing import Any

import tmsim
from tmsim.cli.args import batch_arg, text_arg
from tmsim.cli.catalog import (
    DEFAULT_BATCH,
    DTYPES,
    IMPORT_LOSSES,
    IMPORT_MODEL_DTYPES,
    IMPORT_OPTIMIZERS,
)

#: The largest dimension ``--input`` and ``--target`` take (a tensor's dimension in torch is
#: a 64-bit integer; the graph then refuses a step of 2**62 bytes or more).
MAX_DIMENSION = 2**62

Shape = tuple[tuple[int, ...], str | None]


def shape_arg(text: str) -> Shape:
    """An argparse type: ``DxDx...[:DTYPE]``, one sample's dimensions (the batch comes
    first, from ``--batch``) and optionally a dtype of :data:`~tmsim.cli.catalog.DTYPES`;
    no dimensions at all (``:int64``) is one value per sample."""
    dims, sep, dtype = text.partition(":")
    if not text.strip() or (sep and not dtype):
        raise argparse.ArgumentTypeError(
            f"give one sample's shape as DxDx...[:DTYPE], e.g. 3x224x224 or 128:int64, got {text!r}"
        )
    if sep and dtype not in DTYPES:
        raise argparse.ArgumentTypeError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    shape: list[int] = []
    for part in dims.split("x") if dims else []:
        if not part.isdigit() or not part.isascii():
            raise argparse.ArgumentTypeError(
                f"dimensions are whole numbers joined by x, e.g. 3x224x224, got {text!r}"
            )
        value = int(part)
        if not 1 <= value < MAX_DIMENSION:
            raise argparse.ArgumentTypeError(
                f"each dimension must be from 1 to below 2**62, got {part} in {text!r}"
            )
        shape.append(value)
    return tuple(shape), (dtype or None)


def _model_args(p: argparse.ArgumentParser) -> None:
    """The arguments that name a model and its step, shared by ``import`` and ``profile``."""
    p.add_argument(
        "model",
        type=text_arg,
        help="torchvision:NAME (e.g. torchvision:resnet50), package.module:ATTR or "
        "file.py:ATTR, where ATTR is a torch.nn.Module or builds one with no arguments",
    )
    p.add_argument(
        "--input",
        type=shape_arg,
        action="append",
        required=True,
        metavar="SHAPE[:DTYPE]",
        help="one sample of an input of the model's forward, e.g. 3x224x224 or 128:int64 "
        "(the batch is prepended; the model's dtype unless given); once per input, in order",
    )
    p.add_argument(
        "--target",
        type=shape_arg,
        action="append",
        metavar="SHAPE[:DTYPE]",
        help="one sample of the loss's target, as --input (default: what the loss needs: "
        "class indices for cross_entropy, the output's shape for mse)",
    )
    p.add_argument("--batch", type=batch_arg, help=f"samples per step, >= 1 ({DEFAULT_BATCH})")
    p.add_argument(
        "--loss",
        choices=IMPORT_LOSSES,
        default=IMPORT_LOSSES[0],
        help="cross_entropy over the output's last dimension, mse, or the output's sum "
        f"({IMPORT_LOSSES[0]})",
    )
    p.add_argument(
        "--optimizer",
        choices=IMPORT_OPTIMIZERS,
        default=IMPORT_OPTIMIZERS[0],
        help=f"the update that ends the step: sgd with momentum, adam or adamw "
        f"({IMPORT_OPTIMIZERS[0]})",
    )
    p.add_argument(
        "--dtype",
        choices=IMPORT_MODEL_DTYPES,
        help="cast the model's floating-point parameters and buffers, and inputs given "
        "without a dtype, to this type (default: the model's own)",
    )
    p.add_argument("--name", type=text_arg, help="the graph's name (MODEL-bBATCH)")


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``import`` and ``profile`` on ``sub``."""
    p = sub.add_parser(
        "import",
        help="trace a PyTorch model's training step into a graph file (needs tmsim[torch])",
        description="Trace a PyTorch model's training step (forward, loss, backward, "
        "optimizer update) on fake tensors and write it as a graph file.",
    )
    _model_args(p)
    p.add_argument(
        "--out", type=text_arg, required=True, metavar="PATH", help="write the graph to PATH"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="the device whose kernels the graph holds (traced on the CPU; ops a GPU "
        "dispatches differently as it runs them); default: --platform's, else cpu",
    )
    p.add_argument(
        "--platform",
        type=text_arg,
        metavar="NAME_OR_FILE",
        help="the platform the graph is for: cuda for a GPU preset, else cpu",
    )
    p.add_argument(
        "--math",
        type=math_arg,
        action="append",
        default=[],
        metavar="KEY=MODE",
        help="record a math mode of the step: conv_fp32 or matmul_fp32 = fp32 or tf32 (e.g. "
        "matmul_fp32=tf32, as torch.set_float32_matmul_precision('high')); repeatable",
    )
    p.set_defaults(func=_import)
    q = sub.add_parser(
        "profile",
        help="measure every kernel of a PyTorch model's training step on this machine "
        "(needs tmsim[torch])",
        description="Trace a PyTorch model's training step as `tmsim import` does, run each "
        "of its kernels on real tensors on this machine (the median of --repeats runs after "
        "--warmup), and write the profile that --profile reads and the graph it belongs to.",
    )
    _model_args(q)
    q.add_argument(
        "--out", type=text_arg, required=True, metavar="PATH", help="write the profile to PATH"
    )
    q.add_argument(
        "--graph",
        type=text_arg,
        required=True,
        metavar="PATH",
        help="write the traced graph to PATH (plan it with --file and --profile)",
    )
    q.add_argument("--device", default="cpu", help="cpu or cuda (cpu)")
    q.add_argument(
        "--tier",
        type=text_arg,
        help="the tier every operand is on in the profile (device on cuda, host on cpu: the "
        "kernel tiers of the platforms `tmsim calibrate` writes)",
    )
    q.add_argument("--warmup", type=count_arg(0), default=2, help="untimed runs per kernel (2)")
    q.add_argument("--repeats", type=count_arg(1), default=5, help="timed runs per kernel (5)")
    q.set_defaults(func=_profile)


def count_arg(low: int) -> Any:
    """An argparse type: a whole number from ``low`` to 10000."""

    def parse(text: str) -> int:
        if not text.strip().isdigit() or not low <= int(text) <= 10_000:
            raise argparse.ArgumentTypeError(f"give a whole number of {low} to 10000, got {text!r}")
        return int(text)

    return parse


def math_arg(text: str) -> tuple[str, str]:
    """An argparse type: ``KEY=MODE``, a math mode the graph records."""
    key, sep, mode = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"give KEY=MODE, e.g. matmul_fp32=tf32, got {text!r}")
    return key.strip(), mode.strip()


def default_name(source: str, batch: int) -> str:
    """``resnet50-b32`` for ``torchvision:resnet50`` at batch 32."""
    attr = source.rpartition(":")[2].strip() or "model"
    return f"{attr.rsplit('.', 1)[-1]}-b{batch}"


def _step_args(args: argparse.Namespace) -> dict[str, Any]:
    """The model and the keyword arguments of :func:`tmsim.import_torch` that ``args`` give."""
    from tmsim.api.torchimport import torch_model

    batch = DEFAULT_BATCH if args.batch is None else args.batch

    def batched(shapes: list[Shape]) -> list[object]:
        return [(batch, *dims) if dt is None else ((batch, *dims), dt) for dims, dt in shapes]

    return {
        "module": torch_model(args.model, args.dtype),
        "inputs": batched(args.input),
        "targets": batched(args.target) if args.target else None,
        "loss": args.loss,
        "optimizer": args.optimizer,
        "name": args.name or default_name(args.model, batch),
    }


def _import(args: argparse.Namespace) -> int:
    from tmsim.api.torchimport import import_torch, target_device
    from tmsim.cli.graph import print_summary

    device = args.device
    if device is None:
        device = target_device(tmsim.platform(args.platform)) if args.platform else "cpu"
    graph = import_torch(**_step_args(args), device=device, math=dict(args.math))
    tmsim.save(graph, args.out)
    print_summary(graph, args.out, args.json)
    return 0


def _profile(args: argparse.Namespace) -> int:
    import sys

    from tmsim.api.torchimport import profile

    interactive = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if interactive and (done == total or done % 25 == 0):
            end = "\n" if done == total else ""
            print(f"\rprofiled {done}/{total} kernels", end=end, file=sys.stderr, flush=True)

    graph, prof = profile(
        **_step_args(args),
        out=args.out,
        device=args.device,
        tier=args.tier,
        warmup=args.warmup,
        repeats=args.repeats,
        progress=progress,
    )
    tmsim.save(graph, args.graph)
    total = sum(e.seconds for e in prof.entries)
    print(f"graph            {graph.name} ({len(graph.kernels):,} kernels) -> {args.graph}")
    print(f"profile          {len(prof.entries):,} kernels on {args.device} -> {args.out}")
    print(f"kernels in all   {total * 1e3:.3f} ms (each the median of {args.repeats} runs)")
    return 0
