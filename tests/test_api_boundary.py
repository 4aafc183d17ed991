"""The command line and the figures stand on the public API: ``tmsim`` (its ``__all__``),
``tmsim.api``, the figure contract ``tmsim.figures`` and the error types of ``tmsim.errors``,
besides their own modules. The test names, file by file, every import past it.
"""

from __future__ import annotations

from pathlib import Path

from test_imports import imports, modules, room_of

ROOT = Path(__file__).resolve().parent.parent
#: What the command line and the figures may import of tmsim.
API_ROOMS = {"tmsim", "tmsim.api", "tmsim.figures", "tmsim.errors"}


def reach_past() -> dict[str, set[str]]:
    """Per file of ``tmsim/cli`` and ``experiments``, the tmsim and hwmodels modules it imports
    that are not the public API nor its own room."""
    out: dict[str, set[str]] = {}
    for module, path in modules():
        src = room_of(module)
        if src not in ("tmsim.cli", "experiments"):
            continue
        for target, _ in imports(path, module):
            top = target.split(".")[0]
            if top not in ("tmsim", "hwmodels"):
                continue
            if top == "tmsim" and room_of(target) in {*API_ROOMS, src}:
                continue
            out.setdefault(path.relative_to(ROOT).as_posix(), set()).add(target)
    return out


def test_the_cli_and_figures_stand_on_the_api_alone() -> None:
    found = {f: sorted(t) for f, t in reach_past().items()}
    assert not found, f"imports past the public API (use tmsim or tmsim.api): {found}"


def test_the_check_sees_an_import_past_the_api(tmp_path: Path) -> None:
    """The check reads imports inside functions and under ``TYPE_CHECKING`` as well: a module
    of the command line that reached into the planners would be caught."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tmsim.plans.values import Plan\n"
        "def f():\n    from tmsim.planners import plan\n    import tmsim.api.runs\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    found = {t for t, _ in imports(path, "tmsim.cli.probe")}
    assert {"tmsim.plans.values", "tmsim.planners"} <= found
    assert {room_of(t) for t in found} >= {"tmsim.plans", "tmsim.planners", "tmsim.api"}
