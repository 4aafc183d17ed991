"""The documentation site builds with no warning (what ``make docs`` runs), with every guide, the
tutorial and the API reference in it, and the README and the guides say only what is true:
every ``tmsim`` command they show parses, names files the repository has (or writes them
first), and the cheap ones print what the page shows; every file, module and image they name
exists; every Python example written as a doctest runs.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GUIDES = sorted((DOCS / "guides").glob("*.rst"))
PAGES = [*GUIDES, DOCS / "commands.rst", DOCS / "notes.rst", DOCS / "index.rst"]
#: Every page whose words are checked: the README, the site's own pages, the benchmarks' README.
TEXTS = [README, *PAGES, DOCS / "api" / "index.rst", ROOT / "bench" / "README.md"]

#: Files a command reads that the repository does not have and no earlier command writes.
NOT_IN_THE_REPOSITORY = {
    "measured.csv": "a profile of the reader's own measurements; the page shows its format",
    "models.py": "the reader's own model file",
}
#: Commands the tests run for real, where a page shows their output: each takes under a second.
CHEAP = {"models", "platforms", "platform", "graph"}


@dataclass(frozen=True)
class Block:
    """A code block of a page: its language and its lines."""

    language: str
    lines: tuple[str, ...]


def rst_blocks(text: str) -> Iterator[Block]:
    """The ``code-block`` directives and ``::`` literal blocks of an rst page, in order."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = re.match(r"^(\s*)\.\. code-block::\s*(\S*)", line)
        literal = line.rstrip().endswith("::") and not line.lstrip().startswith("..")
        if not (directive or literal):
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        language = directive.group(2) if directive else "text"
        i += 1
        while i < len(lines) and (not lines[i].strip() or re.match(r"^\s+:\w[\w-]*:", lines[i])):
            i += 1
        body = []
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
        ):
            body.append(lines[i])
            i += 1
        margin = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
        yield Block(language, tuple(b[margin:] for b in body))


def markdown_blocks(text: str) -> Iterator[Block]:
    """The fenced code blocks of a markdown page, and the commands of its tables (one block
    per table row with a ``tmsim`` command in inline code), in order."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)", lines[i])
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            yield Block(fence.group(1) or "text", tuple(lines[i + 1 : end]))
            i = end + 1
            continue
        if lines[i].startswith("|"):
            commands = [c for c in re.findall(r"`([^`]+)`", lines[i]) if c.startswith("tmsim ")]
            if commands:
                yield Block("sh", tuple(commands))
        i += 1


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return list(markdown_blocks(text) if path.suffix == ".md" else rst_blocks(text))


def commands(block: Block) -> Iterator[str]:
    """The ``tmsim`` command lines of a block (a console block's prompts, a shell block's lines,
    continuation lines joined), each without its ``$`` or ``.venv/bin/`` prefix."""
    joined: list[str] = []
    for line in block.lines:
        if joined and joined[-1].endswith("\\"):
            joined[-1] = joined[-1][:-1] + " " + line.strip()
        else:
            joined.append(line.strip())
    for line in joined:
        line = line.removeprefix("$ ").removeprefix(".venv/bin/")
        if line.startswith("tmsim "):
            yield line


def console(block: Block) -> Iterator[tuple[str, str]]:
    """The (command, output) pairs of a ``console`` block."""
    command: str | None = None
    output: list[str] = []
    for line in block.lines:
        if line.startswith("$ "):
            if command is not None:
                yield command, "\n".join(output)
            command, output = line[2:], []
        else:
            output.append(line)
    if command is not None:
        yield command, "\n".join(output).rstrip("\n")


def documented_commands() -> list[tuple[str, int, list[str]]]:
    """(page, index on the page, the command line's words) of every command of every page."""
    found = []
    for path in [README, *PAGES]:
        n = 0
        for block in blocks(path):
            for line in commands(block):
                found.append(
                    (path.relative_to(ROOT).as_posix(), n, shlex.split(line, comments=True))
                )
                n += 1
    return found


COMMANDS = documented_commands()


def test_every_page_shows_commands() -> None:
    pages = {page for page, _, _ in COMMANDS}
    assert "README.md" in pages and "docs/commands.rst" in pages
    subcommands = {words[1] for page, _, words in COMMANDS if page == "README.md"}
    # the README's table: one example of every command
    assert subcommands >= {
        "models", "graph", "import", "profile", "platforms", "platform", "calibrate", "plan",
        "simulate", "compare", "reproduce", "sweep",
    }  # fmt: skip


def reads_and_writes(words: list[str]) -> tuple[list[str], list[str]]:
    """The files the command ``words`` reads and those it writes (parsed as ``tmsim`` parses
    them); names of zoo models, presets, strategies and figures are checked here as well."""
    import tmsim
    from tmsim.cli.main import build_parser

    args = build_parser(deferred=True).parse_args(words[1:])
    command = args.command
    reads: list[str] = []
    for name in ("file", "spec", "profile"):
        if getattr(args, name, None):
            reads.append(getattr(args, name))
    if command == "simulate" and args.plan:
        reads.append(args.plan)
    platform = getattr(args, "platform", None)
    if platform:
        if platform.endswith(".toml"):
            reads.append(platform)
        else:
            assert platform in tmsim.PRESETS, f"unknown preset {platform!r}"
    model = getattr(args, "model", None) or getattr(args, "cache_mode", None)
    if command in ("import", "profile"):
        source = model.split(":")[0]
        if source.endswith(".py"):
            reads.append(source)
    elif model:
        assert model in tmsim.MODELS, f"unknown zoo model {model!r}"
    for strategy in getattr(args, "strategies", None) or ():
        assert strategy in tmsim.STRATEGIES, f"unknown strategy {strategy!r}"
    for figure in getattr(args, "only", None) or ():
        assert figure in tmsim.figure_names(), f"unknown figure {figure!r}"
    writes = [
        getattr(args, name)
        for name in ("out", "save", "graph", "trace", "timeline", "perfetto")
        if isinstance(getattr(args, name, None), str)
    ]
    return reads, writes


@pytest.mark.parametrize("page", sorted({page for page, _, _ in COMMANDS}))
def test_every_command_parses_and_reads_files_that_exist(page: str) -> None:
    """Each page is run in order: a file a command reads is in the repository, or an earlier
    command of the same page writes it, or it is the reader's own (an explicit list)."""
    written: set[str] = set()
    for _, _, words in [c for c in COMMANDS if c[0] == page]:
        line = shlex.join(words)
        try:
            reads, writes = reads_and_writes(words)
        except SystemExit as exc:  # argparse refused it
            pytest.fail(f"{page}: `{line}` does not parse (exit {exc.code})")
        for name in reads:
            known = (ROOT / name).exists() or name in written or name in NOT_IN_THE_REPOSITORY
            assert known, f"{page}: `{line}` reads {name}, which nothing provides"
        written.update(writes)


def console_blocks() -> list[tuple[str, str, str]]:
    found = []
    for path in [README, *PAGES]:
        for block in blocks(path):
            if block.language == "console":
                for command, output in console(block):
                    found.append((path.relative_to(ROOT).as_posix(), command, output))
    return found


CONSOLE = console_blocks()


def test_the_pages_show_what_cheap_commands_print() -> None:
    assert len(CONSOLE) >= 4
    assert {"models", "platforms", "platform", "graph"} <= {c.split()[1] for _, c, _ in CONSOLE}


@pytest.mark.parametrize(("page", "command", "shown"), CONSOLE, ids=[c for _, c, _ in CONSOLE])
def test_a_cheap_command_prints_what_the_page_shows(page: str, command: str, shown: str) -> None:
    from tmsim.cli.main import main

    words = shlex.split(command)
    assert words[0] == "tmsim" and words[1] in CHEAP, f"{page}: `{command}` is not cheap to run"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(words[1:]) == 0
    printed = "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").splitlines())
    assert printed == "\n".join(line.rstrip() for line in shown.splitlines()), page


# Paths a page names in inline code, links or images: the repository's folders and files.
REPO_PATH = re.compile(
    r"^(?:(?:tmsim|hwmodels|experiments|tests|bench|docs|calibration)/[\w./-]*"
    r"|Makefile|pyproject\.toml|constraints\.txt|README\.md)$"
)
DOTTED = re.compile(r"\b(?:tmsim|hwmodels|experiments)(?:\.\w+)+")
#: The words a page writes in place of a name of the reader's choosing (``bench/NAME.py``).
PLACEHOLDER = re.compile(r"\b(?:NAME|DIR|MODEL|PLAN|FILE|SPEC)\b")


def inline_code(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        return re.findall(r"`([^`\n]+)`", text)
    return re.findall(r"``([^`]+?)``", text)


def linked(path: Path) -> list[Path]:
    """The files a page links to or shows: markdown links and images, rst images and figures."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        targets = re.findall(r"\]\(([^)\s]+)\)", text)
        targets = [t for t in targets if "://" not in t and not t.startswith("#")]
    else:
        targets = re.findall(r"^\s*\.\. (?:image|figure):: (\S+)", text, flags=re.M)
    return [(path.parent / t).resolve() for t in targets]


@pytest.mark.parametrize("path", TEXTS, ids=[p.relative_to(ROOT).as_posix() for p in TEXTS])
def test_every_file_a_page_names_exists(path: Path) -> None:
    missing = [str(t.relative_to(ROOT)) for t in linked(path) if not t.exists()]
    for token in inline_code(path):
        if PLACEHOLDER.search(token):
            continue
        if REPO_PATH.match(token) and not (ROOT / token).exists():
            missing.append(token)
        for bench in re.findall(r"python -m bench ([\w ]+)", token):
            missing += [
                f"bench/{b}.py" for b in bench.split() if not (ROOT / "bench" / f"{b}.py").exists()
            ]
    assert not missing, f"{path.relative_to(ROOT)} names files that do not exist: {missing}"


def resolves(dotted: str) -> bool:
    """Whether ``a.b.c.d`` is a module, or an attribute of the longest module it starts with."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("path", TEXTS, ids=[p.relative_to(ROOT).as_posix() for p in TEXTS])
def test_every_module_and_name_a_page_names_exists(path: Path) -> None:
    python = [line for b in blocks(path) if b.language == "python" for line in b.lines]
    names = {m for token in [*inline_code(path), *python] for m in DOTTED.findall(token)}
    missing = sorted(n for n in names if not resolves(n))
    assert not missing, f"{path.relative_to(ROOT)} names what does not exist: {missing}"


DOCTESTED = [p for p in PAGES if ">>> " in p.read_text(encoding="utf-8")]


def test_the_guides_hold_doctests() -> None:
    assert {p.stem for p in DOCTESTED} >= {
        "planning", "recomputation", "modern", "own-model", "sweeps-figures",
    }  # fmt: skip


@pytest.mark.parametrize("path", DOCTESTED, ids=[p.stem for p in DOCTESTED])
def test_the_python_examples_of_a_page_run(path: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = doctest.testfile(
            str(path),
            module_relative=False,
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        )
    assert result.attempted > 0
    assert result.failed == 0, out.getvalue()


@pytest.mark.slow
def test_the_site_builds_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("sphinx")
    cmd = [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-E", "-b", "html"]
    out = subprocess.run([*cmd, str(DOCS), str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # every guide, the tutorial, the references and the notes are pages of the site
    for guide in GUIDES:
        assert (tmp_path / "guides" / f"{guide.stem}.html").exists(), guide.name
    for page in ("index", "tutorial", "commands", "notes", "api/index"):
        assert (tmp_path / f"{page}.html").exists(), page
    # the API reference: every public function of the module documented, its example as code
    runs = (tmp_path / "api" / "runs.html").read_text(encoding="utf-8")
    for name in ("tmsim.api.runs.plan", "tmsim.api.runs.simulate", "tmsim.api.runs.Run"):
        assert f'id="{name}"' in runs
    assert "doctest" in runs
    # the tutorial: its sections, its code, its text outputs and its two pictures
    tutorial = (tmp_path / "tutorial.html").read_text(encoding="utf-8")
    assert 'id="a-sweep-over-the-capacity-ratio"' in tutorial
    assert "Graph('inception_v4-b16', 1700 tensors" in tutorial
    pictures = re.findall(r'<img [^>]*src="(_images/[^"]+)"', tutorial)
    assert len(pictures) == 2 and all((tmp_path / p).stat().st_size > 0 for p in pictures)
    # the figures the guides show are copied into the site
    for name in ("conventional", "modern", "prediction_gpu", "recompute", "sensitivity"):
        assert (tmp_path / "_images" / f"{name}.png").exists(), name


def room_map() -> dict[str, list[str]]:
    """The architecture guide's rooms, each with the file and folder names its row mentions."""
    text = (DOCS / "guides" / "architecture.rst").read_text(encoding="utf-8")
    rows = re.split(r"^   \* - ", text.split(".. list-table::", 1)[1], flags=re.M)[2:]
    rooms: dict[str, list[str]] = {}
    for row in rows:
        cells = re.split(r"^     - ", row, flags=re.M)
        for room in re.findall(r"``([^`]+)``", cells[0]):
            rooms[room] = re.findall(r"``([\w/]+(?:\.py|/))``", cells[1])
    return rooms


def test_the_room_map_names_every_room_and_only_files_that_exist() -> None:
    rooms = room_map()
    named = set(rooms)
    packages = {
        p.parent.relative_to(ROOT).as_posix() + "/"
        for p in [
            *ROOT.glob("tmsim/*/__init__.py"),
            *ROOT.glob("tmsim/planners/milp/*/__init__.py"),
        ]
    }
    modules = {p.name for p in ROOT.glob("tmsim/*.py") if p.name != "__init__.py"}
    assert packages - named == set(), "packages the room map leaves out"
    assert modules - {Path(r).name for r in named} == set(), "modules the room map leaves out"
    missing = []
    for room, names in rooms.items():
        folder = ROOT / room if room.endswith("/") else (ROOT / room).parent
        if "/" not in room:  # a module named alone, beside the first of its row
            folder = ROOT / "tmsim"
        for name in names:
            if not any((base / name).exists() for base in (folder, ROOT / "tmsim", ROOT)):
                missing.append(f"{room} {name}")
    assert not missing, f"the room map names what does not exist: {missing}"
