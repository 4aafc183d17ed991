"""Platform documents for sweeps: presets and files read as TOML, fields overridden by dotted
path before the document is parsed (:func:`apply_override`), each combination parsed once.

A path walks the document as the preset or file writes it: tables by key, the ``tiers`` array
by tier name or index, ``copy_paths`` by ``SRC->DST`` or index, ``kernel_links`` by the name
of the tier linked or index; its last part is a field. A
field given in another unit of the same quantity (``read_bw_bytes_per_s`` for
``read_bw_GBps``) replaces that spelling, so a quantity is never given twice.
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from hwmodels.docpaths import OVERRIDE_UNITS, element, override_clash
from hwmodels.errors import HardwareModelError
from hwmodels.platform import Platform
from hwmodels.presets import preset_names
from hwmodels.serialize import platform_from_dict, platform_to_dict

#: ``fail(where, message)`` raises the caller's error naming its file and ``where``.
Fail = Callable[[str, str], NoReturn]


class PlatformDocs:
    """Platform TOML documents by label (a preset's name, or a file under ``base_dir``), each
    read once, and their resolutions under overrides; errors go to ``fail``."""

    def __init__(self, base_dir: Path, fail: Fail) -> None:
        self.base_dir, self.fail = base_dir, fail
        self.docs: dict[str, dict[str, Any]] = {}
        self.resolved: dict[str, tuple[Platform, dict[str, Any]]] = {}

    def doc(self, label: str, where: str) -> dict[str, Any]:
        if label not in self.docs:
            if label in preset_names():
                res = resources.files("hwmodels").joinpath("presets", f"{label}.toml")
                self.docs[label] = tomllib.loads(res.read_text(encoding="utf-8"))
            else:
                path = self.base_dir / label
                if not path.is_file():
                    self.fail(
                        where,
                        f"{label!r} is neither a platform preset "
                        f"({', '.join(preset_names())}) nor a file in {self.base_dir}",
                    )

                def bad(_: str, message: str) -> NoReturn:
                    self.fail(where, f"platform {label!r}: {message}")

                self.docs[label] = read_toml(path, bad)
        return self.docs[label]

    def resolve(
        self, label: str, overrides: tuple[tuple[str, Any], ...], where: str
    ) -> tuple[Platform, dict[str, Any]]:
        """The platform ``label`` with ``overrides`` applied, and its SI dict."""
        ident = json.dumps([label, overrides], sort_keys=True, default=str)
        if ident not in self.resolved:
            doc = copy.deepcopy(self.doc(label, f"{where}.platform"))
            clash = override_clash(doc, [path for path, _ in overrides])
            if clash is not None:  # whichever came last would win, silently
                self.fail(f"{where}.overrides", clash)
            for path, value in overrides:

                def bad(message: str, path: str = path) -> NoReturn:
                    self.fail(f"{where}.overrides.{path}", message)

                apply_override(doc, path, value, bad)
            what = ", ".join(f"{p} = {v!r}" for p, v in overrides)
            try:
                platform = platform_from_dict(doc, f"platform {label}")
            except HardwareModelError as exc:
                self.fail(
                    f"{where}.overrides" if overrides else f"{where}.platform",
                    f"{exc}{f' (with {what})' if what else ''}",
                )
            self.resolved[ident] = (platform, platform_to_dict(platform))
        return self.resolved[ident]


def read_toml(path: Path, fail: Fail) -> dict[str, Any]:
    """The TOML document in the file ``path``; ``fail("", message)`` (which must raise) for
    text that is not UTF-8 or not TOML, an integer of more digits than Python converts, or
    nesting deeper than the parser follows. Raises ``OSError`` if the file cannot be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        fail("", "not valid TOML: not UTF-8 text")
    except tomllib.TOMLDecodeError as exc:
        fail("", f"not valid TOML: {exc}")
    except ValueError:
        fail("", "not valid TOML: an integer with too many digits")
    except RecursionError:
        fail("", "not valid TOML: arrays or tables nested too deeply")


def apply_override(
    doc: dict[str, Any], path: str, value: Any, fail: Callable[[str], NoReturn]
) -> None:
    """Set field ``path`` (dotted, see the module docstring) of platform document ``doc`` to
    ``value`` in place; ``fail(message)`` is called (and must raise) for a bad path."""
    parts = path.split(".")
    node: Any = doc
    walked = "platform"
    for part in parts[:-1]:
        if isinstance(node, list):
            node = _pick(node, part, walked, fail)
        elif isinstance(node, dict) and isinstance(node.get(part), dict | list):
            node = node[part]
        elif isinstance(node, dict):
            tables = sorted(k for k, v in node.items() if isinstance(v, dict | list))
            fail(f"{walked} has no table {part!r} (tables: {', '.join(tables) or 'none'})")
        walked = f"{walked}.{part}"
    leaf = parts[-1]
    if not isinstance(node, dict) or not leaf:
        fail(f"{path!r} must end in a field of a table")
    if leaf not in node:
        for units in OVERRIDE_UNITS:
            base = next((leaf.removesuffix(f"_{u}") for u in units if leaf.endswith(f"_{u}")), None)
            for other in [f"{base}_{u}" for u in units] if base else []:
                node.pop(other, None)
    node[leaf] = value


def _pick(items: list[Any], part: str, walked: str, fail: Callable[[str], NoReturn]) -> Any:
    """The element of array ``items`` called ``part`` (:func:`hwmodels.docpaths.element`: a
    name, a kernel link's tier, ``SRC->DST`` or an index)."""
    found = element(items, part)
    if found is None:
        names = [
            f"{i.get('src')}->{i.get('dst')}"
            if "src" in i
            else str(i.get("name", i.get("tier", "?")))
            for i in items
            if isinstance(i, dict)
        ]
        fail(f"{walked} has no element {part!r} (give one of {', '.join(names)} or an index)")
    return found


__all__ = ["Fail", "PlatformDocs", "apply_override", "read_toml"]
