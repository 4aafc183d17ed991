"""The inputs of a study: a training-step graph, a platform, a fast-tier capacity.

Each takes the forms the command line takes (a zoo model or a graph file; a preset or a TOML
file, with fields overridden as sweeps override them; a ratio or a size) and raises
:class:`~tmsim.errors.TmsimError` with the command line's one-line message for bad input.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

from hwmodels.docpaths import override_clash
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.presets import preset_descriptions, preset_names
from hwmodels.serialize import platform_from_dict, platform_to_dict
from tmsim.capacity import Capacity, CapacityError, parse_bytes
from tmsim.errors import TmsimError, one_line, shown_path
from tmsim.sweeps.overrides import PlatformDocs, apply_override
from tmsim.workload.files import load_graph as read_graph
from tmsim.workload.graph import DTYPE_BYTES, Graph
from tmsim.workload.identity import zoo_graph
from tmsim.workload.zoo import DESCRIPTIONS, training_graph_of

#: Every zoo model by name, with a one-line description (``tmsim models``).
MODELS: Mapping[str, str] = MappingProxyType(dict(DESCRIPTIONS))
#: Every platform preset by name, with its description (``tmsim platforms``).
PRESETS: Mapping[str, str] = MappingProxyType(preset_descriptions())

#: The batch of a zoo model when none is given (the command line's).
DEFAULT_BATCH = 32
#: The platform when none is given (the command line's): Cascade Lake with Optane PMM.
DEFAULT_PLATFORM = "cascadelake-optane"

#: The exceptions bad input raises: tmsim's own, and the hardware models' for a platform
#: description they refuse (the API turns those it meets into :class:`TmsimError`).
INPUT_ERRORS: tuple[type[Exception], ...] = (TmsimError, HardwareModelError)

#: What ``fast=`` takes: a ratio ``"S:F"``, a size (``"24GiB"``, ``"96GB"``, ``3e9``, an
#: int of bytes), a :class:`Capacity`, or None (the fastest tier's own capacity).
FastCapacity = Capacity | str | int | float | None


def expect(value: object, kinds: type | tuple[type, ...], what: str, wanted: str) -> None:
    """Raise :class:`TmsimError` ``"{what} must be {wanted}, got ..."`` unless ``value`` is an
    instance of ``kinds`` (the API's check of a Python type at its edge, so that a wrong one
    is a one-line error rather than a failure deep inside)."""
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
        shown = repr(value) if len(repr(value)) <= 60 else f"a {type(value).__name__}"
        raise TmsimError(f"{what} must be {wanted}, got {shown}")


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Re-raise a :class:`TmsimError` whose message spans lines (a key or value given by the
    caller may hold a line break) with every line break escaped, as the command line prints
    it."""
    try:
        yield
    except TmsimError as exc:
        text = str(exc)
        if one_line(text) == text:
            raise
        raise TmsimError(one_line(text)) from None


def is_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a regular file (False, not an error, for a name too long or
    otherwise impossible)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def _tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def graph(
    source: str | os.PathLike[str],
    *,
    batch: int | None = None,
    dtype: str | None = None,
    **options: Any,
) -> Graph:
    """The training step of zoo model ``source`` at ``batch`` (default 32) in ``dtype``
    (default: the model's own, ``fp32`` for the CNNs and ``fp16`` mixed precision for the
    transformers), with any other argument of the model's entry as a keyword (a CNN's
    ``image_hw``, ``classes`` or its own such as ``batch_norm``; a transformer's
    ``seq_len``, ``attention`` or ``layers``: the arguments a plan's graph identity lists),
    or the graph in the JSON file ``source`` (from ``tmsim graph --save``).

    Raises :class:`TmsimError` for a name that is neither a zoo model nor a file, a
    ``batch``, ``dtype`` or option given with a file, out of range or unknown to the model,
    and a file that is not a graph.

    >>> g = graph("vgg19", batch=16)
    >>> g.name, len(g.kernels)
    ('vgg19-b16', 142)
    >>> graph("resnet50", batch=2, image_hw=(112, 112)).tensor("input").shape
    (2, 3, 112, 112)
    >>> graph("gpt2_small", batch=1, seq_len=128, attention="fused", layers=2).name
    'gpt2_small-l2-s128-fused-b1'
    >>> graph("vgg20")
    Traceback (most recent call last):
    tmsim.errors.TmsimError: 'vgg20' is neither a zoo model (...) nor a graph file
    """
    expect(source, (str, os.PathLike), "a graph's source", "a zoo model's name or a file path")
    name = os.fspath(source)
    if isinstance(source, str) and source in MODELS:
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)):
            raise TmsimError(f"batch must be a whole number >= 1, got {batch!r}")
        if batch is not None and batch < 1:
            raise TmsimError(f"batch must be a whole number >= 1, got {batch!r}")
        if dtype is not None:
            expect(dtype, str, "dtype", f"one of {', '.join(DTYPE_BYTES)}")
        if dtype is not None and dtype not in DTYPE_BYTES:
            raise TmsimError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
        size = DEFAULT_BATCH if batch is None else batch
        if options:
            given = options if dtype is None else {**options, "dtype": dtype}
            built, _ = zoo_graph(source, size, **given)
            return built
        return training_graph_of(source, size, dtype)
    if not is_file(name):
        raise TmsimError(f"{name!r} is neither a zoo model ({', '.join(MODELS)}) nor a graph file")
    for what, value in (("batch", batch), ("dtype", dtype), *options.items()):
        if value is not None:
            raise TmsimError(f"{what} shapes a zoo model; the graph file {name!r} has its own")
    return load_graph(name)


def load_graph(path: str | os.PathLike[str]) -> Graph:
    """The graph in the JSON file ``path`` (from :func:`tmsim.save` or ``tmsim graph
    --save``), even one named like a zoo model. Raises :class:`TmsimError` (an ``OSError``'s
    reason with the file's name for one that cannot be read) for anything but a graph file.

    >>> import os, tempfile, tmsim
    >>> path = os.path.join(tempfile.mkdtemp(), "g.json")
    >>> tmsim.save(tmsim.graph("vgg19", batch=2), path)
    >>> tmsim.load_graph(path).name
    'vgg19-b2'
    """
    expect(path, (str, os.PathLike), "a graph's path", "a file path")
    name = os.fspath(path)
    if "\0" in str(name):
        raise TmsimError(f"{shown_path(str(name))}: a file name cannot hold a NUL character")
    try:
        return read_graph(path)
    except OSError as exc:
        raise TmsimError(f"{shown_path(str(name))}: {exc.strerror or exc}") from None


def platform(
    source: str | os.PathLike[str] | Platform = DEFAULT_PLATFORM,
    overrides: Mapping[str, Any] | None = None,
) -> Platform:
    """The platform of preset ``source`` (``tmsim platforms`` lists them), of the TOML file
    ``source``, or ``source`` itself, with each field of ``overrides`` set first.

    An override's key is a dotted path as sweeps write them: tables by key, tiers by name,
    copy paths by ``SRC->DST``, then a field; a field in another unit of the same quantity
    replaces that spelling. Raises :class:`TmsimError` for an unknown preset or unreadable
    file, a bad path, and a platform the values make invalid.

    >>> p = platform("cascadelake-optane", {"tiers.DRAM.capacity_GiB": 96})
    >>> p.tier("DRAM").capacity_bytes == 96 * 2**30
    True
    >>> platform("cascadelake-optane", {"tiers.HBM.capacity_GiB": 96})
    Traceback (most recent call last):
    tmsim.errors.TmsimError: platform cascadelake-optane: overrides.tiers.HBM.capacity_GiB: ...
    """
    expect(
        source,
        (str, os.PathLike, Platform),
        "a platform's source",
        "a preset, a file or a Platform",
    )
    if overrides is not None:
        expect(overrides, Mapping, "overrides", "a mapping of dotted paths to values")
    given = dict(overrides or {})
    for key in given:
        if not isinstance(key, str) or not key:
            raise TmsimError(
                f"an override's key is a dotted path such as 'tiers.DRAM.capacity_GiB', got {key!r}"
            )
    if isinstance(source, Platform):
        with one_line_errors():
            return _override(source, given)
    name = os.fspath(source)
    what = f"platform {name}"

    def fail(where: str, message: str) -> NoReturn:
        # the hardware models name the platform again; the message names it once
        for prefix in (f"platform {label}: ", f"platform {label!r}: "):
            message = message.removeprefix(prefix)
        where = where.lstrip(".").removesuffix("platform").rstrip(".")
        raise TmsimError(f"{what}: {where}: {message}" if where else f"{what}: {message}")

    label = name if name in preset_names() else Path(name).name
    if name in preset_names():
        docs = PlatformDocs(Path("."), fail)
    elif is_file(name):
        docs = PlatformDocs(Path(name).parent, fail)
    else:
        raise TmsimError(
            f"{name!r} is neither a platform preset ({', '.join(preset_names())}) nor a file"
        )
    try:
        with one_line_errors():
            _refuse_clash(docs.doc(label, ".platform"), given, what)
            resolved, _ = docs.resolve(label, tuple(sorted(given.items())), "")
    except OSError as exc:
        raise TmsimError(f"{what}: cannot read it: {exc.strerror or exc}") from None
    return resolved


def platform_document(source: Platform) -> dict[str, Any]:
    """The platform ``source`` as plain data in SI units, the document a platform file holds
    (``tmsim platform --json`` prints it; :func:`platform` reads it back from a file).

    >>> platform_document(platform())["name"]
    'cascadelake-optane'
    """
    expect(source, Platform, "a platform", "a Platform (from tmsim.platform)")
    return platform_to_dict(source)


def _override(base: Platform, overrides: dict[str, Any]) -> Platform:
    """``base`` with ``overrides`` set on its SI document."""
    if not overrides:
        return base
    doc = platform_to_dict(base)
    what = f"platform {base.name}"
    _refuse_clash(doc, overrides, what)
    for path, value in overrides.items():

        def bad(message: str, path: str = path) -> NoReturn:
            raise TmsimError(f"{what}: overrides.{path}: {message}")

        apply_override(doc, path, value, bad)
    try:
        return platform_from_dict(doc, what)
    except HardwareModelError as exc:
        raise TmsimError(f"{exc} (with {', '.join(overrides)})") from None


def _refuse_clash(doc: Mapping[str, Any], overrides: Mapping[str, Any], what: str) -> None:
    """Raise :class:`TmsimError` where two overrides set one field of ``doc`` (in two units,
    or through two names of its table): whichever came last would win, silently."""
    clash = override_clash(doc, overrides)
    if clash is not None:
        raise TmsimError(f"{what}: {clash}")


def capacity(fast: FastCapacity) -> Capacity | None:
    """The fast-tier capacity ``fast`` asks for, parsed as the command line parses
    ``--ratio`` and ``--fast-bytes``: a ratio ``"S:F"`` of slow to fast (fast = peak / (S+F)
    * F), a size in bytes (an int, a whole float, or text such as ``"24GiB"``), a
    :class:`Capacity` as it is, or None (the fastest tier's own). Raises :class:`TmsimError`.

    >>> str(capacity("4:1")), capacity("24GiB").fast_bytes(0) == 24 * 2**30
    ('4:1', True)
    >>> capacity(-3)
    Traceback (most recent call last):
    tmsim.errors.TmsimError: fast capacity: must be a size from 1 to 2**63 - 1 bytes, got -3
    """
    if fast is None or isinstance(fast, Capacity):
        return fast
    try:
        if isinstance(fast, str):
            if ":" in fast:
                return Capacity.parse(fast)
            return Capacity.of_bytes(parse_bytes(fast))
        if isinstance(fast, bool) or not isinstance(fast, int | float):
            raise TmsimError(
                f"fast capacity: give a ratio such as '4:1', a size such as '24GiB' or a "
                f"number of bytes, got {fast!r}"
            )
        if isinstance(fast, float) and not fast.is_integer():
            raise TmsimError(f"fast capacity: a number of bytes is whole, got {fast!r}")
        if not 1 <= fast <= 2**63 - 1:
            raise TmsimError(
                f"fast capacity: must be a size from 1 to 2**63 - 1 bytes, got {fast!r}"
            )
        return Capacity.of_bytes(int(fast))
    except CapacityError as exc:
        raise TmsimError(f"fast capacity: {exc}") from None
    except ArithmeticError:
        raise TmsimError(f"fast capacity {fast!r} is out of range") from None


__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_PLATFORM",
    "INPUT_ERRORS",
    "MODELS",
    "PRESETS",
    "FastCapacity",
    "capacity",
    "expect",
    "graph",
    "is_file",
    "load_graph",
    "one_line_errors",
    "platform",
    "platform_document",
]
