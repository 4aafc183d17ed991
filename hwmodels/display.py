"""Short tables of an object's headline numbers, for a terminal and for Jupyter.

A notebook shows an object through its ``_repr_html_``; the platforms of :mod:`hwmodels` and
the graphs, plans and runs of :mod:`tmsim` build theirs with :func:`html_table` from the same
``(label, value)`` rows that their plain-text summaries print, so both say the same thing.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hwmodels.platform import Platform

#: One row of a summary: a label and its value, both already formatted as text.
SummaryRow = tuple[str, str]


def html_table(title: str, rows: Sequence[SummaryRow]) -> str:
    """An HTML table headed ``title`` with one ``label | value`` row each, every text escaped.

    >>> print(html_table("T", [("a", "<1>")]).replace("><", ">\\n<"))
    <table>
    <caption>T</caption>
    <tr>
    <th style="text-align:left">a</th>
    <td style="text-align:left">&lt;1&gt;</td>
    </tr>
    </table>
    """
    cells = "".join(
        f'<tr><th style="text-align:left">{html.escape(label)}</th>'
        f'<td style="text-align:left">{html.escape(value)}</td></tr>'
        for label, value in rows
    )
    return f"<table><caption>{html.escape(title)}</caption>{cells}</table>"


def text_table(title: str, rows: Sequence[SummaryRow]) -> str:
    """``title`` and one ``label  value`` line per row, the labels padded to one width.

    >>> print(text_table("T", [("a", "1"), ("bcd", "2")]))
    T
      a    1
      bcd  2
    """
    width = max((len(label) for label, _ in rows), default=0)
    return "\n".join([title, *(f"  {label:{width}s}  {value}" for label, value in rows)])


def gigabytes(size_bytes: float) -> str:
    """``size_bytes`` in GB (10^9 bytes) to three decimals: ``gigabytes(1.5e9) == '1.500 GB'``."""
    return f"{size_bytes / 1e9:,.3f} GB"


def platform_rows(p: Platform) -> list[SummaryRow]:
    """``p``'s headline numbers as ``(label, value)`` text: each tier's capacity and
    bandwidths, each copy path's rates, the kernel tiers and links, the compute device and
    host compute, and the optional models present."""
    rows = [
        (
            f"tier {t.name}",
            f"{gigabytes(t.capacity_bytes)}, read {t.read_bw_bytes_per_s / 1e9:g} GB/s, "
            f"write {t.write_bw_bytes_per_s / 1e9:g} GB/s"
            + (" (2LM cache)" if p.cache and t.name == p.cache.cache_tier else ""),
        )
        for t in p.tiers
    ]
    rows += [
        (
            f"copy {c.src}->{c.dst}",
            f"sync {c.sync_bw_bytes_per_s / 1e9:g} GB/s, async "
            f"{c.async_bw_bytes_per_s / 1e9:g} GB/s",
        )
        for c in p.copy_paths
    ]
    rows.append(("kernels reach", ", ".join(p.kernel_tiers)))
    rows += [
        (
            f"kernel link to {k.tier}",
            f"read {k.read_bw_bytes_per_s / 1e9:g} GB/s, write "
            f"{k.write_bw_bytes_per_s / 1e9:g} GB/s",
        )
        for k in p.kernel_links
    ]
    rows.append(("compute", f"{p.compute.cores} cores"))
    if p.host_compute is not None:
        host = p.host_compute
        rows.append(
            (
                "host compute",
                f"{host.compute.cores} cores, reach {', '.join(host.kernel_tiers)}",
            )
        )
    models = {
        "memory controller": p.controller,
        "copy thread": p.copy_thread,
        "memory mode": p.memory_mode,
        "unified memory": p.unified_memory,
        "energy": p.energy,
    }
    present = [name for name, model in models.items() if model is not None]
    rows.append(("models", ", ".join(present) or "none"))
    return rows


__all__ = ["SummaryRow", "gigabytes", "html_table", "platform_rows", "text_table"]
