"""A traced joint graph reduced to the storages and ops of a training step.

Each distinct storage of the joint graph's fake tensors becomes one storage of the step:
views and aliases (``view``, ``t``, ``alias``, ``getitem``, ``_unsafe_view``...) share their
base's storage, so they hold no memory of their own and are no ops of the step. An op that
creates a storage is an op; what it reads is every storage under its arguments. A buffer's
new value (batch-norm running statistics, ``num_batches_tracked``) is written in place: its
op updates the buffer. A storage of zero bytes is left out. For a GPU target, an op the GPU
dispatches differently takes its GPU kernel's name and output sizes
(:mod:`~tmsim.workload.torchimport.dispatch`).

Every storage is recorded with its dtype and, when one tensor covers it whole, its shape: a
dtype tmsim names as itself (every fp8 format as ``fp8``); a complex one as pairs of floats
of its width (:data:`~tmsim.workload.torchimport.specs.COMPLEX_PARTS`, shape ``(*shape, 2)``,
so a complex parameter counts two real parameters, as :mod:`torch.optim` updates it), and an
op on complex values in real FLOPs (:func:`~tmsim.workload.torchimport.flops.real_flops`).
Any other dtype (int16, unsigned integers wider than a byte, quantized and sub-byte types) is
refused by name.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from tmsim.workload.graph import DTYPE_BYTES
from tmsim.workload.torchimport.dispatch import Rewrite, gpu_rewrite
from tmsim.workload.torchimport.errors import TorchImportError
from tmsim.workload.torchimport.flops import Operand, aten_flops, real_flops
from tmsim.workload.torchimport.specs import COMPLEX_PARTS, TMSIM_DTYPES
from tmsim.workload.torchimport.step import Kind, Storage, TracedOp, TracedStep

#: The attribute the trace's wrapper holds the model in (stripped from parameter names).
_MODEL = "model"


@dataclass(frozen=True)
class Joint:
    """A traced joint graph: the FX module ``gm`` (forward, loss and backward), its export
    ``signature``, and the wrapper ``step`` (the fake-parameter copy of the model and its loss)
    whose parameters and buffers are the graph's by name."""

    gm: Any
    signature: Any
    step: Any
    n_inputs: int
    n_targets: int


def reduce_joint(joint: Joint, name: str, device: str = "cpu") -> TracedStep:
    """The storages and ops of ``joint`` as a :class:`TracedStep` named ``name``: each op is
    named after the graph node that runs it; for ``device`` ``cuda``, an op the GPU runs
    differently takes its GPU kernel's name and output sizes
    (:mod:`~tmsim.workload.torchimport.dispatch`). Raises :class:`TorchImportError` for a
    storage of a dtype a graph cannot record (module documentation)."""
    reduction = _Reduction(joint.gm, joint.signature, joint.n_inputs, joint.n_targets, name, device)
    return reduction.step()


def _tensors(value: object) -> list[tuple[int, Any]]:
    """The tensors of a node's value, with their positions in it."""
    if isinstance(value, tuple | list):
        return [(i, v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return [(0, value)] if isinstance(value, torch.Tensor) else []


def _key(t: Any) -> StorageWeakRef:
    return StorageWeakRef(t.untyped_storage())


def _op_name(target: object) -> str:
    """``aten.addmm`` for ``torch.ops.aten.addmm.default``; other callables by name."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return str(schema.name).replace("::", ".")
    return str(getattr(target, "__name__", target))


def _arg(a: object) -> object:
    """An argument for :func:`aten_flops`: tensors as :class:`Operand`."""
    if isinstance(a, torch.fx.Node):
        v = a.meta.get("val")
        return Operand(tuple(int(d) for d in v.shape)) if isinstance(v, torch.Tensor) else v
    if isinstance(a, tuple | list):
        return [_arg(x) for x in a]
    return a


class _Reduction:
    """One walk over a joint graph, building the storages and ops of :class:`TracedStep`."""

    def __init__(
        self, gm: Any, sig: Any, n_inputs: int, n_targets: int, name: str, device: str = "cpu"
    ) -> None:
        self.gm, self.sig, self.name, self.device = gm, sig, name, device
        self.nodes = {n.name: n for n in gm.graph.nodes}
        self.names: set[str] = set()
        self.of: dict[StorageWeakRef, str] = {}  # storage -> its name
        self.kind: dict[str, Kind] = {}
        self.storages: list[Storage] = []
        self.empty: set[StorageWeakRef] = set()
        user = list(sig.user_inputs)
        self.input_names = {
            p: ("input" if n_inputs == 1 else f"input{i}") for i, p in enumerate(user[:n_inputs])
        }
        self.input_names.update(
            {
                p: ("target" if n_targets == 1 else f"target{i}")
                for i, p in enumerate(user[n_inputs:])
            }
        )

    def _val(self, name: str) -> Any:
        return self.nodes[name].meta.get("val")

    def _take(self, wanted: str) -> str:
        chosen, n = wanted, 1
        while chosen in self.names:
            n += 1
            chosen = f"{wanted}#{n}"
        self.names.add(chosen)
        return chosen

    def _register(
        self, t: Any, wanted: str, kind: Kind, shape_as: tuple[int, ...] | None = None
    ) -> str | None:
        """Name the storage of ``t`` (``None`` when it holds no byte); with ``shape_as``, a
        storage of that shape in ``t``'s dtype (what another device's kernel allocates)."""
        key = _key(t)
        nbytes = int(t.untyped_storage().nbytes())
        dims = tuple(int(d) for d in t.shape)
        if shape_as is not None:
            nbytes, dims = math.prod(shape_as) * t.element_size(), shape_as
        if nbytes == 0:
            self.empty.add(key)
            return None
        dtype = TMSIM_DTYPES.get(t.dtype)
        if dtype is None and t.dtype in COMPLEX_PARTS:
            dtype, dims = COMPLEX_PARTS[t.dtype], (*dims, 2)
        if dtype is None:
            known = ", ".join([*dict.fromkeys(TMSIM_DTYPES.values()), "complex as pairs"])
            raise TorchImportError(
                f"cannot import {self.name}: tensor {wanted!r} is "
                f"{str(t.dtype).removeprefix('torch.')}, which a graph cannot record "
                f"(its dtypes: {known})"
            )
        name = self._take(wanted)
        whole = dims and math.prod(dims) * DTYPE_BYTES[dtype] == nbytes
        shape = dims if whole else ()
        self.of[key] = name
        self.kind[name] = kind
        self.storages.append(Storage(name, nbytes, dtype, shape, kind))
        return name

    def step(self) -> TracedStep:
        """Walk the graph once: placeholders, then ops (module documentation)."""
        sig = self.sig
        by_fqn = self._placeholders()
        redirect = {
            _key(self._val(out)): by_fqn[fqn]
            for out, fqn in sig.buffers_to_mutate.items()
            if fqn in by_fqn and isinstance(self._val(out), torch.Tensor)
        }
        grads = {
            out: fqn
            for out, fqn in sig.backward_signature.gradients_to_parameters.items()
            if fqn in by_fqn and isinstance(self._val(out), torch.Tensor)
        }
        grad_names: dict[StorageWeakRef, str] = {}
        for out, fqn in grads.items():
            grad_names.setdefault(_key(self._val(out)), f"{by_fqn[fqn]}.grad")
        ops = self._ops(redirect, grad_names)
        loss = self.of.get(_key(self._val(sig.user_outputs[0])))
        forward = next((i + 1 for i, op in enumerate(ops) if loss in op.creates), len(ops))
        gradients: dict[str, str] = {}
        for out, fqn in grads.items():
            grad = self.of.get(_key(self._val(out)))
            if grad is not None and self.kind.get(grad) is Kind.VALUE:
                gradients.setdefault(by_fqn[fqn], grad)
        return TracedStep(self.name, tuple(self.storages), tuple(ops), forward, gradients)

    def _placeholders(self) -> dict[str, str]:
        """Register the parameters, buffers and inputs; return the storage name of each
        parameter and buffer by its name in the signature."""
        sig = self.sig
        persistent = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        for node in self.gm.graph.nodes:
            value = node.meta.get("val")
            if node.op != "placeholder" or not isinstance(value, torch.Tensor):
                continue
            if _key(value) in self.of:
                continue  # a parameter tied to one registered already
            if node.name in persistent:
                kind = Kind.PARAMETER if node.name in sig.inputs_to_parameters else Kind.BUFFER
                label = persistent[node.name].removeprefix(f"{_MODEL}.")
            else:
                kind, label = Kind.INPUT, self.input_names.get(node.name, node.name)
            self._register(value, label, kind)
        found = {fqn: self.of.get(_key(self._val(p))) for p, fqn in persistent.items()}
        return {fqn: name for fqn, name in found.items() if name is not None}

    def _ops(
        self, redirect: dict[StorageWeakRef, str], grad_names: dict[StorageWeakRef, str]
    ) -> list[TracedOp]:
        ops: list[TracedOp] = []
        for node in self.gm.graph.nodes:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            value = node.meta.get("val")
            outs = _tensors(value)
            rewrite = self._rewrite(node)
            reads = [
                self.of[k]
                for inp in node.all_input_nodes
                for _, t in _tensors(inp.meta.get("val"))
                if (k := _key(t)) in self.of
            ]
            written = self._written(node)
            creates: list[str] = []
            updates: list[str] = []
            for i, t in outs:
                k = _key(t)
                if k in self.empty:
                    continue
                if k in self.of:  # a view or alias, or an in-place write
                    held = self.of[k]
                    if k in written and self.kind[held] in (Kind.PARAMETER, Kind.BUFFER):
                        updates.append(held)
                    continue
                if k in redirect:  # a buffer's new value: written over the buffer
                    self.of[k] = redirect[k]
                    updates.append(redirect[k])
                    continue
                wanted = grad_names.get(k) or (
                    f"{node.name}.{i}" if isinstance(value, tuple | list) else node.name
                )
                shape_as = rewrite.output_shapes.get(i) if rewrite is not None else None
                made = self._register(t, wanted, Kind.VALUE, shape_as)
                if made is not None:
                    creates.append(made)
            if not creates and not updates:
                continue
            op = _op_name(node.target)
            args = [_arg(a) for a in node.args]
            shapes = [tuple(int(d) for d in t.shape) for _, t in outs]
            base = op.rpartition(".")[2]
            complex_values = any(
                t.is_complex()
                for arg in (*node.all_input_nodes, node)
                for _, t in _tensors(arg.meta.get("val"))
            )
            flops = real_flops(base, aten_flops(base, args, shapes), complex_values)
            if rewrite is not None:
                op = rewrite.op
            ops.append(
                TracedOp(
                    node.name,
                    op,
                    tuple(dict.fromkeys(reads)),
                    tuple(creates),
                    tuple(updates),
                    flops,
                )
            )
        return ops

    def _rewrite(self, node: Any) -> Rewrite | None:
        """What the target device runs for ``node`` where it differs from the CPU's."""
        if self.device == "cpu":
            return None

        def val(a: object) -> object:
            return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

        args = tuple(val(a) for a in node.args)
        kwargs = {k: val(v) for k, v in node.kwargs.items()}
        return gpu_rewrite(_op_name(node.target).rpartition(".")[2], args, kwargs)

    def _written(self, node: Any) -> set[StorageWeakRef]:
        """Storages of the arguments the op's schema marks as written in place."""
        schema = getattr(node.target, "_schema", None)
        if schema is None:
            return set()
        out: set[StorageWeakRef] = set()
        for formal, actual in zip(schema.arguments, node.args, strict=False):
            info = formal.alias_info
            if info is not None and info.is_write and isinstance(actual, torch.fx.Node):
                out.update(_key(t) for _, t in _tensors(actual.meta.get("val")))
        return out
