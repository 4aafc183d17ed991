"""The contract between ``tmsim reproduce`` and the figures it runs.

tmsim does not know which figures exist: a package declares them in the entry-point group
:data:`ENTRY_POINT_GROUP` with a :class:`FigureRegistry` (this repository's ``experiments``
package does, in ``pyproject.toml``), and :func:`discover` finds it. A registry names its
figures in the order they run and loads each one's module, which follows
:class:`FigureModule`. A figure that stores its finished points for resuming keeps them in
:func:`points_dir`, which ``tmsim reproduce --force`` empties.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol

from tmsim.errors import TmsimError

#: The entry-point group a package declares its :class:`FigureRegistry` in.
ENTRY_POINT_GROUP = "tmsim.figures"

#: ``progress(message)``: called as a figure's compute stage reaches each point.
Progress = Callable[[str], None]


class FigureModule(Protocol):
    """What a figure module defines.

    ``NAME``: the stem of its data file and figures; ``TITLE``: one line; ``Config``: a frozen
    dataclass whose defaults are the full run; ``QUICK``: the reduced ``Config`` that
    ``--quick`` runs. ``compute`` runs planners and simulations and writes one table,
    ``out_dir/NAME.parquet``, with the resolved configuration and provenance, and returns its
    path; its points run in ``workers`` local processes (None: the figure's default) or on the
    Dask scheduler at ``dask_address``, and it raises :class:`~tmsim.errors.TmsimError` when it
    cannot write the table. ``plot`` reads only that table and writes ``NAME.pdf`` and
    ``NAME.png`` to ``out_dir``, returning their paths; it draws with ``draw``, which takes
    that table as a DataFrame with its metadata in ``attrs`` and ``on``, None (a figure of its
    own) or the matplotlib Axes to draw on, one per panel, and returns the matplotlib figure.
    """

    NAME: str
    TITLE: str
    QUICK: Any

    def Config(self) -> Any: ...

    def compute(
        self,
        config: Any,
        out_dir: str | os.PathLike[str],
        progress: Progress | None = None,
        *,
        workers: int | None = None,
        dask_address: str | None = None,
    ) -> Path: ...

    def plot(self, data: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> list[Path]: ...

    def draw(self, frame: Any, on: Any = None) -> Any: ...


@dataclass(frozen=True)
class FigureRegistry:
    """Figures by name: ``names`` in the order ``tmsim reproduce`` runs them, and ``load(name)``
    giving the module of one of them (imported only when asked for)."""

    names: tuple[str, ...]
    load: Callable[[str], FigureModule]

    def module(self, name: str) -> FigureModule:
        """The module of figure ``name``. Raises :class:`TmsimError` listing the figures if
        ``name`` is not one."""
        if name not in self.names:
            raise TmsimError(f"unknown figure {name!r}; figures are {', '.join(self.names)}")
        return self.load(name)

    def select(self, names: list[str]) -> list[str]:
        """``names`` if every one is a figure here. Raises :class:`TmsimError` naming the
        unknown ones and listing the figures."""
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise TmsimError(
                f"unknown figure(s) {', '.join(unknown)}; figures are {', '.join(self.names)}"
            )
        return names


def discover() -> FigureRegistry:
    """The registry installed in :data:`ENTRY_POINT_GROUP`. Raises :class:`TmsimError` (one
    line) when none is installed, when more than one is, or when the one installed does not
    load as a :class:`FigureRegistry`."""
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    if not found:
        raise TmsimError(
            f"no figures installed: no package declares the {ENTRY_POINT_GROUP!r} entry point "
            "(in a checkout of tmsim: pip install -e .)"
        )
    if len(found) > 1:
        names = ", ".join(f"{e.name} = {e.value}" for e in found)
        raise TmsimError(f"several {ENTRY_POINT_GROUP!r} entry points ({names}); keep one")
    return _load(found[0])


def _load(entry: EntryPoint) -> FigureRegistry:
    try:
        registry = entry.load()
    except Exception as exc:  # a broken figure package must not give a traceback
        raise TmsimError(
            f"figures entry point {entry.name} = {entry.value} does not load: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not isinstance(registry, FigureRegistry):
        raise TmsimError(
            f"figures entry point {entry.name} = {entry.value} is a "
            f"{type(registry).__name__}, not a tmsim.figures.FigureRegistry"
        )
    return registry


def points_dir(out_dir: str | os.PathLike[str], name: str) -> Path:
    """Where figure ``name`` keeps its finished points in ``out_dir``: ``NAME.points/``."""
    return Path(out_dir) / f"{name}.points"


__all__ = [
    "ENTRY_POINT_GROUP",
    "FigureModule",
    "FigureRegistry",
    "Progress",
    "discover",
    "points_dir",
]
