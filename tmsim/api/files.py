"""Files of the objects of a study: :func:`save` a graph, a plan, a platform or a run, and
:func:`load_plan` (graphs and platforms load through :func:`tmsim.graph` and
:func:`tmsim.platform`, tables through :func:`tmsim.read_table`).

The formats are the command line's: a graph is the JSON of ``tmsim graph --save``, a plan the
JSON of ``tmsim plan --out`` (which ``tmsim simulate`` replays; a plan of a zoo graph names
it, so the graph is built again from the plan alone), a platform the TOML of the presets, and
a run its trace as Parquet (``tmsim simulate --trace``).
"""

from __future__ import annotations

import os

from hwmodels.platform import Platform
from hwmodels.presets import save_platform
from tmsim.api.cache import CacheRun
from tmsim.api.inputs import expect
from tmsim.api.runs import Run
from tmsim.errors import TmsimError
from tmsim.plans.files import load_plan as read_plan
from tmsim.plans.files import save_plan
from tmsim.plans.values import Plan
from tmsim.sim import save_trace
from tmsim.workload.files import save_graph
from tmsim.workload.graph import Graph

#: What each kind of object is written as, by the ending its file name must have.
SUFFIXES = {
    Graph: (".json",),
    Plan: (".json",),
    Platform: (".toml",),
    Run: (".parquet",),
    CacheRun: (".parquet",),
}


def save(obj: Graph | Plan | Platform | Run | CacheRun, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` to ``path``: a :class:`Graph` or a :class:`Plan` as JSON (``.json``), a
    :class:`Platform` as TOML (``.toml``), the trace of a :class:`Run` or a
    :class:`~tmsim.api.cache.CacheRun` as Parquet (``.parquet``).
    Raises :class:`TmsimError` for another object or ending and a path that cannot be
    written.

    >>> import os, tempfile, tmsim
    >>> g, p = tmsim.graph("vgg19", batch=2), tmsim.platform()
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> tmsim.save(tmsim.plan(g, p, "greedy", fast="4:1"), path)
    >>> tmsim.load_plan(path).planner
    'greedy'
    """
    expect(obj, tuple(SUFFIXES), "what to save", "a Graph, Plan, Platform, Run or CacheRun")
    expect(path, (str, os.PathLike), "a path", "a file path")
    name = os.fspath(path)
    endings = SUFFIXES[type(obj)]
    if not name.lower().endswith(endings):
        raise TmsimError(f"{name}: a {type(obj).__name__} is saved as a {endings[0]} file")
    try:
        if isinstance(obj, Graph):
            save_graph(obj, name)
        elif isinstance(obj, Plan):
            save_plan(obj, name)
        elif isinstance(obj, Platform):
            save_platform(obj, name)
        elif isinstance(obj, Run):
            save_trace(obj.trace, name)
        else:
            save_trace(obj.details.trace, name)
    except OSError as exc:
        raise TmsimError(f"{name}: cannot write it: {exc.strerror or exc}") from None


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """The plan in the file ``path`` (from :func:`save` or ``tmsim plan --out``). Raises
    :class:`TmsimError` naming the file for one that cannot be read or is not a plan file."""
    expect(path, (str, os.PathLike), "a plan's path", "a file path")
    try:
        return read_plan(path)
    except OSError as exc:
        raise TmsimError(f"{os.fspath(path)}: cannot read it: {exc.strerror or exc}") from None


__all__ = ["SUFFIXES", "load_plan", "save"]
