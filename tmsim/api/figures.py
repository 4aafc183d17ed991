"""The figures of ``tmsim reproduce`` as functions of their tables: :func:`figure`, and
:func:`read_table` for a table written by ``tmsim reproduce``, ``compare --out`` or ``sweep``.

The figures themselves live in the package that declares the ``tmsim.figures`` entry point
(this repository's ``experiments``); :data:`tmsim.figures.ENTRY_POINT_GROUP` says how.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tmsim.api.inputs import expect
from tmsim.errors import TmsimError
from tmsim.figures import discover
from tmsim.results import read_table as read_result
from tmsim.results import write_table as write_result

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def figure_names() -> tuple[str, ...]:
    """The figures installed, in the order ``tmsim reproduce`` runs them. Raises
    :class:`TmsimError` when no figure package is installed."""
    return discover().names


def figure(name: str, frame: pd.DataFrame, ax: Any = None) -> Figure:
    """Figure ``name`` (see :func:`figure_names`) drawn from ``frame``, the table its compute
    stage wrote (``tmsim reproduce --out DIR`` writes ``DIR/NAME.parquet``; read it with
    :func:`read_table`, which keeps its configuration in ``attrs``), on ``ax``: None (a
    figure of its own, not attached to pyplot), a matplotlib Axes, or one Axes per panel.

    Raises :class:`TmsimError` for an unknown figure, a table without the figure's
    configuration in ``attrs``, and another number of Axes than the figure has panels.

    >>> import tmsim
    >>> tmsim.figure("nope", pd.DataFrame())
    Traceback (most recent call last):
    tmsim.errors.TmsimError: unknown figure 'nope'; figures are conventional, large, ...
    """
    expect(name, str, "a figure's name", "one of tmsim.figure_names()")
    expect(frame, pd.DataFrame, "a figure's table", "a DataFrame (from tmsim.read_table)")
    module = discover().module(name)
    if "config" not in frame.attrs:
        raise TmsimError(
            f"figure {name}: the table carries no configuration in its attrs; read the table "
            "tmsim reproduce wrote with tmsim.read_table"
        )
    drawn: Figure = module.draw(frame, ax)
    return drawn


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The result table at ``path`` (``.parquet``, or ``.csv`` with its ``.meta.json``) with
    its metadata (configuration, provenance) in ``attrs``. Raises :class:`TmsimError` for a
    file that is not a tmsim result table or cannot be read.

    >>> import tmsim
    >>> tmsim.read_table("no/such/table.parquet")
    Traceback (most recent call last):
    tmsim.errors.TmsimError: no/such/table.parquet: ...
    """
    expect(path, (str, os.PathLike), "a table's path", "a file path")
    try:
        frame, meta = read_result(path)
    except OSError as exc:
        raise TmsimError(f"{os.fspath(path)}: {exc.strerror or exc}") from None
    frame.attrs.update(meta)
    return frame


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``frame`` to ``path`` (``.parquet``, or ``.csv`` with a ``.meta.json`` beside it)
    atomically, with its ``attrs`` (JSON-ready: its configuration and provenance) as the
    metadata :func:`read_table` gives back; return the path. Raises :class:`TmsimError` for
    another suffix, ``attrs`` JSON cannot write, or a path that cannot be written.

    >>> import tmsim, tempfile, os
    >>> t = tmsim.compare(tmsim.graph("vgg19", batch=2), tmsim.platform(), ["all-fast"])
    >>> path = tmsim.write_table(t, os.path.join(tempfile.mkdtemp(), "t.parquet"))
    >>> tmsim.read_table(path).attrs["graph"]
    'vgg19-b2'
    """
    expect(frame, pd.DataFrame, "a table", "a DataFrame")
    expect(path, (str, os.PathLike), "a table's path", "a file path")
    try:
        return write_result(frame, path, {str(k): v for k, v in frame.attrs.items()})
    except TypeError as exc:
        raise TmsimError(f"{os.fspath(path)}: the table's attrs are not JSON: {exc}") from None
    except OSError as exc:
        raise TmsimError(f"{os.fspath(path)}: {exc.strerror or exc}") from None


__all__ = ["figure", "figure_names", "read_table", "write_table"]
