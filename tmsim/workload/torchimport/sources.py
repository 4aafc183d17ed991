"""Models named on the command line: ``torchvision:NAME``, ``package.module:ATTR`` or
``path/to/file.py:ATTR``.

``ATTR`` is a :class:`torch.nn.Module`, or a class or function that builds one with no
arguments; torchvision's builders are called with ``weights=None`` (nothing is downloaded).
Builders run under ``torch.device("meta")``, so parameters take no memory. Importing a module
or a file runs its code, as ``python`` would, but fenced
(:func:`~tmsim.workload.torchimport.fence.fenced`): what it prints is dropped, and an exit
(``sys.exit``) ends the import in one line rather than the process. Every problem raises
:class:`~tmsim.workload.torchimport.errors.TorchImportError` in one line.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch

from tmsim.errors import one_line
from tmsim.workload.torchimport.errors import TorchImportError
from tmsim.workload.torchimport.fence import fenced

TORCHVISION = "torchvision"
#: Floating dtypes a model may be cast to, and the method of :class:`torch.nn.Module` that
#: casts its floating-point parameters and buffers to each (complex and integer ones keep
#: theirs: ``Module.to(dtype)`` would drop a complex tensor's imaginary part).
CASTS = MappingProxyType({"fp32": "float", "fp16": "half", "bf16": "bfloat16", "fp64": "double"})
MODEL_DTYPES = tuple(CASTS)


def build_model(source: str, dtype: str | None = None) -> Any:
    """The module ``source`` names (module documentation), its floating-point parameters and
    buffers cast to ``dtype`` (one of :data:`MODEL_DTYPES`) if given."""
    if dtype is not None and dtype not in MODEL_DTYPES:
        raise TorchImportError(f"dtype must be one of {', '.join(MODEL_DTYPES)}, got {dtype!r}")
    where, sep, attr = source.rpartition(":")
    if not sep or not where.strip() or not attr.strip():
        raise TorchImportError(
            f"model {source!r}: give torchvision:NAME, package.module:ATTR or file.py:ATTR"
        )
    if where == TORCHVISION:
        built = _run(source, lambda: _torchvision(attr)(weights=None))
    else:
        found = getattr(_load(where, source), attr, None)
        if found is None:
            raise TorchImportError(f"model {source!r}: {where} has no attribute {attr!r}")
        built = found if isinstance(found, torch.nn.Module) else _run(source, found)
    if not isinstance(built, torch.nn.Module):
        raise TorchImportError(
            f"model {source!r}: {attr} built a {type(built).__name__}, not a torch.nn.Module"
        )
    if dtype is None:
        return built
    return _run(source, getattr(built, CASTS[dtype]))


def _torchvision(name: str) -> Any:
    try:
        import torchvision
    except ImportError:
        raise TorchImportError(
            "torchvision models need torchvision: pip install 'tmsim[torch]'"
        ) from None
    try:
        return torchvision.models.get_model_builder(name)
    except ValueError:
        known = sorted(torchvision.models.list_models())
        shown = ", ".join(known[:6])
        raise TorchImportError(
            f"unknown torchvision model {name!r}; {len(known)} are known, e.g. {shown}"
        ) from None


def _load(where: str, source: str) -> Any:
    """The Python module of a file ``where`` (ending in ``.py``) or an importable name."""
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise TorchImportError(f"model {source!r}: no file {where}")
        spec = importlib.util.spec_from_file_location(f"tmsim_model_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise TorchImportError(f"model {source!r}: cannot load {where} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import would: dataclasses look it up there
        loader = spec.loader
        try:
            _run(source, lambda: loader.exec_module(module))
        except BaseException:
            sys.modules.pop(spec.name, None)  # as a failed import does
            raise
        return module
    if not all(part.isidentifier() for part in where.split(".")):
        raise TorchImportError(f"model {source!r}: {where!r} is neither a .py file nor a module")
    return _run(source, lambda: importlib.import_module(where))


def _run(source: str, build: Any) -> Any:
    """``build()`` under the meta device, fenced; any exception or exit becomes one line
    naming ``source`` (Ctrl-C interrupts)."""
    try:
        with fenced(f"model {source!r}"), torch.device("meta"):
            return build()
    except TorchImportError:
        raise
    except Exception as exc:
        text = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
        raise TorchImportError(one_line(f"model {source!r}: {reason}")) from None
