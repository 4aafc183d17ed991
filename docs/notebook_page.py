"""A Jupyter notebook as a page of the site, read at build time (``docs/tutorial.ipynb``).

Markdown cells become sections, paragraphs and lists, in the markdown a notebook of ours uses:
ATX headings (``#`` to ``######``), paragraphs, inline code, links, bullet and numbered lists,
bold and italic, and fenced code. Code cells become Python code blocks; their ``text/plain``
and stream outputs literal blocks, their ``image/png`` outputs images (written beside the
doctrees, copied into the site as any other image). Anything else (a table, a quote, raw
HTML, a nested list, an output with neither a picture nor text, an error) is a warning, which
``-W`` turns into a failed build: nothing the notebook holds is dropped without a word.

Loaded from ``docs/conf.py``; it registers the suffix ``.ipynb`` and its parser.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes  # type: ignore[import-untyped]
from sphinx.application import Sphinx
from sphinx.parsers import Parser
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The file type Sphinx knows ``.ipynb`` sources by.
FILETYPE = "jupyter_notebook"
#: Folder of the doctree directory the notebooks' pictures are written to.
IMAGES = "notebook_images"

HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)\s*$")
RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
#: Block starts this reader does not convert: a quote, a table row, raw HTML, indented code.
UNSUPPORTED_BLOCKS = (
    (re.compile(r"^\s{0,3}>"), "a block quote"),
    (re.compile(r"^\s{0,3}\|"), "a table"),
    (re.compile(r"^\s{0,3}<[A-Za-z!/]"), "raw HTML"),
    (re.compile(r"^( {4}|\t)"), "an indented code block"),
)
INLINE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?P<code_text>.+?)(?P=ticks))"
    r"|(?P<image>!\[[^\]]*\]\([^)]*\))"
    r"|(?P<link>\[(?P<link_text>[^\]]+)\]\((?P<link_url>[^)\s]+)(?:\s+\"[^\"]*\")?\))"
    r"|(?P<autolink><(?P<auto_url>(?:https?|mailto):[^>\s]+)>)"
    r"|(?P<html></?[A-Za-z][^>]*>)"
    r"|\*\*(?P<strong>\S(?:.*?\S)?)\*\*"
    r"|(?<!\w)__(?P<strong2>\S(?:.*?\S)?)__(?!\w)"
    r"|\*(?P<em>\S(?:.*?\S)?)\*"
    r"|(?<!\w)_(?P<em2>\S(?:.*?\S)?)_(?!\w)"
    r"|\\(?P<escaped>[\\`*_{}\[\]()#+\-.!<>|])"
)


@dataclass(frozen=True)
class Where:
    """A place in the notebook, for warnings: the document and the cell."""

    docname: str
    cell: int

    def warn(self, message: str) -> None:
        logger.warning("%s (cell %d)", message, self.cell, location=self.docname, type="notebook")


def inline(text: str, where: Where) -> list[nodes.Node]:
    """The inline nodes of one paragraph's markdown ``text``."""
    out: list[nodes.Node] = []
    at = 0
    for match in INLINE.finditer(text):
        if match.start() > at:
            out.append(nodes.Text(text[at : match.start()]))
        at = match.end()
        group = match.lastgroup
        if match.group("code") is not None:
            code = match.group("code_text")
            if code.startswith(" ") and code.endswith(" ") and code.strip():
                code = code[1:-1]
            out.append(nodes.literal(code, code))
        elif match.group("link") is not None:
            url = match.group("link_url")
            label = inline(match.group("link_text"), where)
            out.append(nodes.reference("", "", *label, refuri=url))
        elif match.group("autolink") is not None:
            url = match.group("auto_url")
            out.append(nodes.reference(url, url, refuri=url))
        elif match.group("strong") is not None or match.group("strong2") is not None:
            inner = match.group("strong") or match.group("strong2")
            out.append(nodes.strong("", "", *inline(inner, where)))
        elif match.group("em") is not None or match.group("em2") is not None:
            inner = match.group("em") or match.group("em2")
            out.append(nodes.emphasis("", "", *inline(inner, where)))
        elif match.group("escaped") is not None:
            out.append(nodes.Text(match.group("escaped")))
        else:  # an image or raw HTML inside a paragraph
            kind = "an inline image" if group == "image" else "inline HTML"
            where.warn(f"markdown not converted: {kind}, {match.group(0)!r}")
            out.append(nodes.Text(match.group(0)))
    if at < len(text):
        out.append(nodes.Text(text[at:]))
    return out


class Page:
    """The document being built: sections nested by heading level."""

    def __init__(self, document: nodes.document) -> None:
        self.document = document
        self.stack: list[tuple[int, nodes.Element]] = [(0, document)]

    @property
    def body(self) -> nodes.Element:
        return self.stack[-1][1]

    def heading(self, level: int, text: str, where: Where) -> None:
        while self.stack[-1][0] >= level:
            self.stack.pop()
        section = nodes.section()
        title = nodes.title(text, "", *inline(text, where))
        section += title
        section["names"].append(nodes.fully_normalize_name(title.astext()))
        self.body.append(section)
        self.document.note_implicit_target(section, section)
        self.stack.append((level, section))

    def add(self, node: nodes.Node) -> None:
        self.body.append(node)


def paragraph(lines: Sequence[str], where: Where) -> nodes.paragraph:
    text = " ".join(line.strip() for line in lines)
    return nodes.paragraph(text, "", *inline(text, where))


def blocks(source: str, where: Where) -> Iterator[tuple[str, Any]]:
    """The blocks of a markdown cell, in order: ``("heading", (level, text))``,
    ``("paragraph", lines)``, ``("list", (ordered, items))``, ``("code", (language, text))``."""
    lines = source.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> Iterator[tuple[str, Any]]:
        if para:
            yield "paragraph", list(para)
            para.clear()

    while i < len(lines):
        line = lines[i]
        if not line.strip():
            yield from flush()
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            yield from flush()
            mark, language = fence.group(1), fence.group(2)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                body.append(lines[i])
                i += 1
            if i == len(lines):
                where.warn("markdown: a code fence that is never closed")
            i += 1
            yield "code", (language, "\n".join(body))
            continue
        heading = HEADING.match(line)
        if heading:
            yield from flush()
            yield "heading", (len(heading.group(1)), heading.group(2))
            i += 1
            continue
        if para and SETEXT.match(line):
            where.warn(f"markdown not converted: a setext heading underline, {line!r}")
            i += 1
            continue
        if RULE.match(line):
            yield from flush()
            where.warn(f"markdown not converted: a horizontal rule, {line!r}")
            i += 1
            continue
        item = ITEM.match(line)
        # a list may interrupt a paragraph, but a numbered one only from 1 (as in CommonMark)
        if item and (not para or item.group(2) in ("-", "*", "+") or item.group(2)[:-1] == "1"):
            yield from flush()
            ordered = item.group(2)[0].isdigit()
            items: list[list[str]] = []
            indent = len(item.group(1))
            while i < len(lines) and lines[i].strip():
                item = ITEM.match(lines[i])
                if item and len(item.group(1)) > indent:
                    where.warn(f"markdown not converted: a nested list, {lines[i]!r}")
                if item and len(item.group(1)) <= indent:
                    items.append([item.group(3)])
                else:
                    items[-1].append(lines[i])
                i += 1
            yield "list", (ordered, items)
            continue
        if not para:
            for pattern, kind in UNSUPPORTED_BLOCKS:
                if pattern.match(line):
                    where.warn(f"markdown not converted: {kind}, {line!r}")
                    break
        para.append(line)
        i += 1
    yield from flush()


def markdown(page: Page, source: str, where: Where) -> None:
    """Add a markdown cell to ``page``."""
    for kind, value in blocks(source, where):
        if kind == "heading":
            page.heading(value[0], value[1], where)
        elif kind == "paragraph":
            page.add(paragraph(value, where))
        elif kind == "list":
            ordered, items = value
            listing = nodes.enumerated_list() if ordered else nodes.bullet_list()
            for lines in items:
                listing += nodes.list_item("", paragraph(lines, where))
            page.add(listing)
        else:
            language, text = value
            page.add(literal(text, language or "text"))


def literal(text: str, language: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = language
    return block


def text_of(value: str | list[str]) -> str:
    """A notebook string field: one string or a list of lines."""
    return value if isinstance(value, str) else "".join(value)


class Pictures:
    """The notebook's PNG outputs, written where Sphinx finds them as images."""

    def __init__(self, env: Any, docname: str) -> None:
        self.folder = Path(env.doctreedir) / IMAGES
        self.docdir = Path(env.srcdir) / Path(docname).parent
        self.stem = docname.replace("/", "-")

    def image(self, data: str | list[str], cell: int, number: int) -> nodes.image:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{self.stem}-cell{cell}-{number}.png"
        path.write_bytes(base64.b64decode(text_of(data)))
        uri = Path(os.path.relpath(path, self.docdir)).as_posix()
        return nodes.image(uri=uri, alt=f"output {number} of cell {cell}")


def outputs(page: Page, cell: dict[str, Any], pictures: Pictures, where: Where) -> None:
    """Add a code cell's outputs to ``page``."""
    for number, output in enumerate(cell.get("outputs", []), start=1):
        kind = output.get("output_type")
        if kind == "stream":
            block = literal(text_of(output.get("text", "")), "text")
            block["classes"].append(f"output-{output.get('name', 'stream')}")
            page.add(block)
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "image/png" in data:
                page.add(pictures.image(data["image/png"], where.cell, number))
            elif "text/plain" in data:
                page.add(literal(text_of(data["text/plain"]), "text"))
            else:
                where.warn(f"an output with neither image/png nor text/plain: {sorted(data)}")
        elif kind == "error":
            where.warn(
                f"the notebook holds an error: {output.get('ename')}: {output.get('evalue')}"
            )
        else:
            where.warn(f"an output of unknown type {kind!r}")


class NotebookParser(Parser):
    """Sphinx's parser of ``.ipynb`` sources (notebook format 4)."""

    supported = (FILETYPE,)

    def parse(self, inputstring: str, document: nodes.document) -> None:
        env = document.settings.env
        docname = env.docname
        notebook = json.loads(inputstring)
        if notebook.get("nbformat") != 4:
            logger.warning("notebook format %s, not 4", notebook.get("nbformat"), location=docname)
        page = Page(document)
        pictures = Pictures(env, docname)
        language = notebook.get("metadata", {}).get("language_info", {}).get("name", "python")
        for index, cell in enumerate(notebook.get("cells", [])):
            where = Where(docname, index)
            source = text_of(cell.get("source", ""))
            kind = cell.get("cell_type")
            if kind == "markdown":
                markdown(page, source, where)
            elif kind == "code":
                if source.strip():
                    page.add(literal(source, language))
                outputs(page, cell, pictures, where)
            elif kind == "raw":
                where.warn("a raw cell, not converted")
            else:
                where.warn(f"a cell of unknown type {kind!r}")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_source_suffix(".ipynb", FILETYPE)
    app.add_source_parser(NotebookParser)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
