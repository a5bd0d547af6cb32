"""The skill and reference markdown, cut into heading-aware sections with markdown-it-py.

Each heading starts a section that runs to the next heading. A section's id is
``<path relative to docs_dir>#<github-style anchor>``; its text keeps the markdown source verbatim
(code blocks included) after the heading trail, so the embedded text carries its context.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt
from markdown_it.token import Token

if TYPE_CHECKING:
    from indexer.sources.base import Batch, SourceRun

from indexer.documents import DocKind, Document, SourceName
from indexer.meta import Cursor
from indexer.signatures import classify_line, extract_error_lines, normalize_signature

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.S)
_FRONT_FIELD = re.compile(r"^(name|description):\s*(.+)$", re.M)
_ISSUE_REF = re.compile(r"\b([\w.-]+/[\w.-]+)#(\d+)\b")
_ISSUE_URL = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)")
_SLUG_DROP = re.compile(r"[^\w\- ]", re.UNICODE)
_LOG_FENCES = {"", "text", "log", "logs", "txt", "output", "python-traceback", "pytb"}
_MIN_SIGNATURE = 8


def github_slug(text: str, seen: dict[str, int] | None = None) -> str:
    """The anchor GitHub gives a heading: lower-case, punctuation dropped, spaces to hyphens, de-duplicated."""
    slug = _SLUG_DROP.sub("", unicodedata.normalize("NFC", text).strip().lower()).replace(" ", "-")
    if seen is None:
        return slug
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def inline_text(token: Token) -> str:
    """Plain text of an inline token (what GitHub slugs): code spans keep their content."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in {"text", "code_inline"}:
            parts.append(child.content)
        elif child.type in {"softbreak", "hardbreak"}:
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return "".join(parts).strip()


@dataclass
class _Section:
    level: int
    title: str
    anchor: str
    path: list[str]
    start: int  # first source line after the heading
    end: int = -1
    code_spans: list[str] = field(default_factory=list)
    fences: list[tuple[str, str]] = field(default_factory=list)


def issue_refs(text: str) -> list[str]:
    """Issue/PR ids cited in text (``owner/repo#N`` or a github.com thread URL), in order, deduplicated."""
    found = [f"{m[1]}#{m[2]}" for m in _ISSUE_URL.finditer(text)]
    found += [f"{m[1]}#{m[2]}" for m in _ISSUE_REF.finditer(text)]
    positions = {ref: text.find(ref.split("#")[0]) for ref in found}
    return sorted(dict.fromkeys(found), key=lambda ref: positions[ref])


def looks_like_error(code: str) -> bool:
    """An inline code span that reads as an error message rather than a flag or a command."""
    code = code.strip()
    if len(code) < _MIN_SIGNATURE or code.startswith(("-", "$", "pip ", "vllm ")):
        return False
    found = classify_line(code)
    return found is not None and found[0] in {"exception", "message", "error"}


def parse_markdown(source: str, rel_path: str) -> list[Document]:
    """Sections of one markdown file as Documents (``kind="reference-section"``)."""
    front = _FRONT_MATTER.match(source)
    fields: dict[str, str] = {}
    if front:
        fields = {m[1]: m[2].strip().strip("\"'") for m in _FRONT_FIELD.finditer(front.group(1))}
        source = source[front.end() :]
    lines = source.splitlines()
    tokens = MarkdownIt("commonmark").enable("table").parse(source)
    sections: list[_Section] = []
    trail: list[_Section] = []
    seen: dict[str, int] = {}
    preamble = _Section(0, fields.get("name") or Path(rel_path).stem, "", [], 0)
    current = preamble
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            level = int(token.tag[1:])
            title = inline_text(tokens[i + 1])
            current.end = token.map[0]
            while trail and trail[-1].level >= level:
                trail.pop()
            path = [s.title for s in trail] + [title]
            current = _Section(level, title, github_slug(title, seen), path, token.map[1])
            trail.append(current)
            sections.append(current)
        elif token.type == "inline":
            current.code_spans += [c.content for c in token.children or [] if c.type == "code_inline"]
        elif token.type in {"fence", "code_block"}:
            current.fences.append((token.info.strip().lower(), token.content))
    current.end = len(lines)
    documents: list[Document] = []
    for section in [preamble, *sections]:
        body = "\n".join(lines[section.start : section.end]).strip()
        if section is preamble and fields.get("description"):
            body = (fields["description"] + "\n\n" + body).strip()
        if not body:
            continue
        signatures = [c.strip() for c in section.code_spans if looks_like_error(c)]
        for info, content in section.fences:
            if info.split(" ")[0] in _LOG_FENCES:
                signatures += extract_error_lines(content, limit=10)
        signatures = list(dict.fromkeys(signatures))
        heading = " > ".join(section.path) or section.title
        doc_id = f"{rel_path}#{section.anchor}" if section.anchor else rel_path
        documents.append(
            Document(
                id=doc_id,
                kind=DocKind.REFERENCE_SECTION,
                title=section.title,
                text=f"{heading}\n\n{body}",
                heading_path=section.path or [section.title],
                error_signatures=signatures,
                normalized_signatures=list(dict.fromkeys(normalize_signature(s) for s in signatures)),
                references=issue_refs(body),
                sources=[SourceName.DOCS],
            )
        )
    return documents


def markdown_files(docs_dir: Path) -> list[Path]:
    """``skill/SKILL.md`` and every ``reference/**/*.md`` under docs_dir, in a stable order."""
    files = [docs_dir / "skill" / "SKILL.md"] if (docs_dir / "skill" / "SKILL.md").is_file() else []
    reference = docs_dir / "reference"
    if reference.is_dir():
        files += sorted(p for p in reference.rglob("*.md") if p.is_file())
    return files


def markdown_documents(docs_dir: Path) -> list[Document]:
    """Every section of the skill and reference docs under docs_dir."""
    documents: list[Document] = []
    for path in markdown_files(docs_dir):
        rel = path.relative_to(docs_dir).as_posix()
        documents += parse_markdown(path.read_text(encoding="utf-8"), rel)
    return documents


class MarkdownSource:
    """The skill and reference docs (``docs_dir``): every section, each run (no cursor)."""

    name = SourceName.DOCS.value
    complete = True
    network = False

    def fetch(self, run: SourceRun, cursor: Cursor) -> Iterator[Batch]:
        from indexer.sources.base import Batch

        yield Batch(markdown_documents(run.settings.docs_dir))


SOURCE = MarkdownSource()
