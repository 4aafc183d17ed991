"""Measuring every kernel of a traced training step on the machine at hand.

AutoTM profiled each kernel on its machine rather than trust a model; this does the same for
a PyTorch model. The step is traced as ``tmsim import`` traces it (the joint graph of
:func:`~tmsim.workload.torchimport.trace.export_joint`, reduced to the graph's kernels), on
the device it is measured on (fake CUDA tensors on a machine with a GPU: not run where this
was written, which had none), then
run node by node on real tensors on ``device`` (``cpu`` or ``cuda``): every node that became a
kernel of the graph is run ``warmup`` times and then timed ``repeats`` times (wall clock,
synchronized on CUDA, launch included), and its median kept. The optimizer's update, which
the graph appends per parameter, is timed per parameter with PyTorch's single-tensor update
written out (SGD with momentum; Adam and AdamW's moments and step).

Real tensors: parameters and buffers from the caller's module, copied to ``device`` (one on
the ``meta`` device gets values drawn from a normal of deviation 0.02, seeded); floating
inputs and targets drawn from a standard normal, integer and boolean ones zero (a valid class
index and embedding row for any model). Values do not change what a dense kernel costs.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from tmsim.errors import one_line
from tmsim.workload.graph import Graph
from tmsim.workload.torchimport.errors import TorchImportError
from tmsim.workload.torchimport.reduction import Joint, reduce_joint
from tmsim.workload.torchimport.specs import Spec
from tmsim.workload.torchimport.step import Optimizer, step_graph
from tmsim.workload.torchimport.trace import export_joint

#: Called after each kernel is timed with (kernels timed, kernels in all).
Progress = Callable[[int, int], None]
#: The seed of the values given to a model on the ``meta`` device and to its inputs.
SEED = 0
#: Learning rate, momentum and Adam's constants of the timed update (values do not change
#: its cost).
LR, MOMENTUM, BETAS, EPS, WEIGHT_DECAY = 1e-3, 0.9, (0.9, 0.999), 1e-8, 1e-2


@dataclass(frozen=True)
class MeasuredStep:
    """A traced step and what each of its kernels took: ``graph``, ``seconds`` (kernel name
    -> median seconds, every kernel of the graph) and the ``device`` it ran on."""

    graph: Graph
    seconds: dict[str, float]
    device: str


def measure_step(
    module: Any,
    inputs: Sequence[Spec],
    targets: Sequence[Spec] | None,
    loss: str,
    optimizer: Optimizer,
    name: str,
    *,
    device: str = "cpu",
    warmup: int = 2,
    repeats: int = 5,
    progress: Progress | None = None,
) -> MeasuredStep:
    """Every kernel of ``module``'s training step timed on ``device`` (module documentation).

    Raises :class:`TorchImportError` in one line for a device torch cannot use, when the step
    cannot be traced, and when it does not fit in the device's memory.
    """
    dev = _device(device)
    # Traced where it runs: a GPU's own dispatch (fused attention's backend) on CUDA.
    joint = export_joint(module, inputs, targets, loss, name, dev.type)
    graph = step_graph(reduce_joint(joint, name, dev.type), optimizer)
    kernels = {k.name for k in graph.kernels}
    total = len(graph.kernels)
    seconds: dict[str, float] = {}

    def timed(kernel: str, value: float) -> None:
        seconds[kernel] = value
        if progress is not None:
            progress(len(seconds), total)

    torch.manual_seed(SEED)
    try:
        with torch.no_grad():
            real = _real_module(module, dev)
            values = _placeholders(joint, real, dev)
            _Timed(joint.gm, kernels, dev, warmup, repeats, timed).run(*values)
            _time_updates(graph, real, optimizer, dev, warmup, repeats, timed)
    except torch.OutOfMemoryError as exc:
        raise TorchImportError(
            one_line(f"{name} does not fit in the memory of {dev}: {exc}")
        ) from None
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            raise TorchImportError(
                one_line(f"{name} does not fit in the memory of {dev}: {exc}")
            ) from None
        raise TorchImportError(one_line(f"cannot run {name} on {dev}: {exc}")) from None
    missing = sorted(kernels - set(seconds))
    if missing:
        raise TorchImportError(f"{name}: kernel {missing[0]!r} was never run ({len(missing)} so)")
    return MeasuredStep(graph, seconds, str(dev))


def _device(device: str) -> Any:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise TorchImportError(one_line(f"unknown device {device!r}: {exc}")) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise TorchImportError(f"device {device!r}: this machine has no CUDA device torch can use")
    if dev.type not in ("cpu", "cuda"):
        raise TorchImportError(f"device {device!r}: profiles are measured on cpu or cuda")
    return dev


def _sync(dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _median_s(run: Callable[[], object], dev: Any, warmup: int, repeats: int) -> float:
    """The median wall-clock seconds of ``repeats`` runs after ``warmup`` (at least a ns)."""
    for _ in range(warmup):
        run()
    _sync(dev)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        _sync(dev)
        times.append(time.perf_counter() - start)
    return max(statistics.median(times), 1e-9)


def _real_module(module: Any, dev: Any) -> Any:
    """A copy of ``module`` on ``dev`` (the caller's stays as it is); parameters and buffers
    on the ``meta`` device get values (module documentation)."""
    on_meta = any(t.is_meta for t in (*module.parameters(), *module.buffers()))
    if not on_meta:
        return copy.deepcopy(module).to(dev)
    real = copy.deepcopy(module).to_empty(device=dev)
    for t in (*real.parameters(), *real.buffers()):
        if t.is_floating_point():
            t.normal_(0.0, 0.02)
        else:
            t.zero_()
    return real


def _fill(like: Any, dev: Any) -> Any:
    """A real tensor of ``like``'s shape and dtype on ``dev``: normal if floating, else 0."""
    if like.is_floating_point():
        return torch.randn(tuple(like.shape), dtype=like.dtype, device=dev)
    return torch.zeros(tuple(like.shape), dtype=like.dtype, device=dev)


def _placeholders(joint: Joint, real: Any, dev: Any) -> list[Any]:
    """The real value of every placeholder of the joint graph, in order."""
    sig = joint.signature
    state = {f"model.{n}": t for n, t in (*real.named_parameters(), *real.named_buffers())}
    persistent = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    values = []
    for node in joint.gm.graph.nodes:
        if node.op != "placeholder":
            continue
        fqn = persistent.get(node.name)
        if fqn is not None and fqn in state:
            values.append(state[fqn].detach())
        else:
            values.append(_fill(node.meta["val"], dev))
    return values


class _Timed(torch.fx.Interpreter):  # type: ignore[misc]
    """Runs the joint graph, timing each node that is a kernel of the graph."""

    def __init__(
        self,
        gm: Any,
        kernels: set[str],
        dev: Any,
        warmup: int,
        repeats: int,
        timed: Callable[[str, float], None],
    ) -> None:
        super().__init__(gm)
        self.kernels, self.dev = kernels, dev
        self.warmup, self.repeats, self.timed = warmup, repeats, timed

    def run_node(self, node: Any) -> Any:
        if node.op != "call_function" or node.name not in self.kernels:
            return super().run_node(node)
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        target = node.target
        seconds = _median_s(lambda: target(*args, **kwargs), self.dev, self.warmup, self.repeats)
        self.timed(node.name, seconds)
        return target(*args, **kwargs)


def _time_updates(
    graph: Graph,
    real: Any,
    optimizer: Optimizer,
    dev: Any,
    warmup: int,
    repeats: int,
    timed: Callable[[str, float], None],
) -> None:
    """Time the optimizer's per-parameter kernels (``PARAM.sgd`` ...) on tensors of each
    parameter's shape and dtype."""
    params = {n: p for n, p in real.named_parameters()}
    for kernel in graph.kernels:
        if kernel.phase.value != "update":
            continue
        param = kernel.name.rpartition(".")[0]
        p = params.get(param)
        like = p if p is not None else graph.tensor(kernel.updates[0])
        w = _fill(p, dev) if p is not None else torch.randn(like.shape or (1,), device=dev)
        g, m, v = (torch.randn_like(w) for _ in range(3))
        update = _update(optimizer, w, g, m, v)
        timed(kernel.name, _median_s(update, dev, warmup, repeats))


def _update(optimizer: Optimizer, w: Any, g: Any, m: Any, v: Any) -> Callable[[], object]:
    """One parameter's update as PyTorch's single-tensor path runs it."""
    if optimizer is Optimizer.SGD:

        def sgd() -> object:
            m.mul_(MOMENTUM).add_(g)
            return w.add_(m, alpha=-LR)

        return sgd

    decoupled = optimizer is Optimizer.ADAMW
    b1, b2 = BETAS

    def adam() -> object:
        if decoupled:
            w.mul_(1 - LR * WEIGHT_DECAY)
            grad = g
        else:
            grad = g.add(w, alpha=WEIGHT_DECAY)
        m.lerp_(grad, 1 - b1)
        v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = v.sqrt().add_(EPS)
        return w.addcdiv_(m, denom, value=-LR)

    return adam
