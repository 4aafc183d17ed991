"""Dotted paths into a platform document, as overrides write them (``tiers.DRAM.capacity_GiB``,
``copy_paths.PMM->DRAM.sync_bw_GBps``, ``kernel_links.0.bw_GBps``): the table a path walks to,
an element of an array of tables by name, ``SRC->DST``, a kernel link's tier or an index, and
two paths that would set one field (:func:`override_clash`). Tools that edit a document before
it is parsed (tmsim's sweep overrides, ``--set``) walk it with these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hwmodels.energy import PER_BYTE, POWER, WRITTEN
from hwmodels.tables import BYTES, RATE, TIME

#: The unit maps of the quantities a document spells in units: an override of one spelling
#: replaces another of the same map (tmsim's sweep overrides), so two set one field.
OVERRIDE_UNITS: tuple[Mapping[str, float], ...] = (BYTES, RATE, TIME, PER_BYTE, POWER, WRITTEN)


def override_clash(doc: Mapping[str, Any], paths: Iterable[str]) -> str | None:
    """Two of the dotted ``paths`` that would set one field of the platform document ``doc``
    twice, so that whichever is applied last wins: the same key, or one quantity in two units
    (``capacity_GiB`` and ``capacity_bytes``), however each names its table (a key; an
    element of an array of tables by name, ``SRC->DST``, a kernel link's tier or index, as
    sweeps write paths). Returns a one-line message naming both paths, or None where no two
    clash; a path that leads to no table of ``doc`` is left to the code that applies it."""
    seen: dict[tuple[int, str], str] = {}
    for path in paths:
        parts = path.split(".")
        node = table_at(doc, parts[:-1])
        if node is None or not parts[-1]:
            continue
        fields = [parts[-1]]
        for units in OVERRIDE_UNITS:
            unit = next((u for u in units if parts[-1].endswith(f"_{u}")), None)
            if unit is not None:
                fields.append(f"{parts[-1][: -len(unit) - 1]} (in {', '.join(units)})")
        for field in fields:
            first = seen.setdefault((id(node), field), path)
            if first != path:
                what = field.partition(" (")[0]
                return f"overrides {first} and {path} both set {what}; give one"
    return None


def table_at(doc: Mapping[str, Any], parts: list[str]) -> Mapping[str, Any] | None:
    """The table of ``doc`` that the dotted path ``parts`` walks to, or None."""
    node: Any = doc
    for part in parts:
        if isinstance(node, list):
            node = element(node, part)
        elif isinstance(node, Mapping) and isinstance(node.get(part), Mapping | list):
            node = node[part]
        else:
            return None
    return node if isinstance(node, Mapping) else None


def element(items: list[Any], part: str) -> Any:
    """The element of an array of tables that ``part`` names (a name, a kernel link's tier,
    ``SRC->DST``), or that ``part`` indexes; None for neither."""
    for item in items:
        if not isinstance(item, Mapping):
            continue
        name = f"{item.get('src')}->{item.get('dst')}" if "src" in item else None
        if part in (name, str(item.get("name", item.get("tier", "?")))):
            return item
    short = part.isascii() and part.isdigit() and len(part) <= len(str(len(items)))
    return items[int(part)] if short and int(part) < len(items) else None


__all__ = ["OVERRIDE_UNITS", "element", "override_clash", "table_at"]
