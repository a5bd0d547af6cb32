"""Known problems as data: the regular blocks of the reference docs, parsed into typed, frozen models.

The prose in ``reference/*.md`` is written for people. Each section an operator acts on also carries
one small, regular block the code reads, so a diagnosis or a config checker never has to scrape prose:

* a facts table whose header is ``| Field | Value |`` with the rows ``Kind``, ``Status``, ``Fixed in``,
  ``Fix PRs``, ``Open PRs``, ``Side``, ``Change``, ``Cause`` and ``Sources`` (see ``_FIELDS``);
* an actions table whose header is ``| Action | Target | Value | When | What | Sources |``, one ordered
  row per thing to do.

The section's ``**Errors**`` list gives the exact error strings (items that are one code span) and its
symptoms (the other items). A section without a facts table is prose only; an actions table without a
facts table, or a malformed row, is an error that names the file and the heading.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from markdown_it import MarkdownIt
from markdown_it.token import Token
from pydantic import BaseModel, ConfigDict, Field

from indexer.documents import ISSUE_ID
from indexer.errors import IndexerError
from indexer.sources.markdown import github_slug

log = logging.getLogger(__name__)

ActionKind = Literal["set", "unset", "avoid", "upgrade", "workaround", "check"]
ProblemKind = Literal["error", "setup"]
Status = Literal["fixed", "merged", "open", "workaround-only", "not-a-bug", "unknown"]
Side = Literal["server", "client", "model-files", "environment"]
When = Literal[
    "always",
    "tools",
    "built-in-tools",
    "tool-choice-required",
    "reasoning",
    "multi-turn",
    "streaming",
    "chat-completions",
    "responses-api",
    "offline",
    "benchmark",
    "offline-inference",
    "custom-checkpoint",
    "multi-gpu",
    "gpu",
    "install",
    "non-vllm",
    "sglang",
    "langchain",
    "litellm",
    "openai-agents",
    "codex",
    "pydantic-ai",
]
"""When an action applies. Several values in one row all have to hold (AND).

always: every gpt-oss deployment. tools: the request declares function tools. built-in-tools: the
browser/python tools or MCP tool servers (``--tool-server``). tool-choice-required: the client sends
``tool_choice="required"``. reasoning: the client wants reasoning separate from content or reads it.
multi-turn: the client sends earlier assistant turns back. streaming: ``stream=true``. chat-completions:
``/v1/chat/completions``. responses-api: ``/v1/responses``. offline: the server host has no internet
access. benchmark: a benchmark or evaluation client sends the requests. offline-inference: Python
``LLM.generate`` instead of the HTTP server. custom-checkpoint: fine-tuned, merged, converted or
re-quantised weights instead of ``openai/gpt-oss-*``. multi-gpu: tensor or expert parallel. gpu: depends
on the GPU architecture (the row's text names it). install: installing or building vLLM. non-vllm: code
or servers that drive openai-harmony or Harmony stops themselves. sglang: the server is SGLang (its own
flags and releases). langchain, litellm, openai-agents,
codex, pydantic-ai: that client is in the path.
"""

STATUSES: tuple[str, ...] = get_args(Status)
SIDES: tuple[str, ...] = get_args(Side)
WHENS: tuple[str, ...] = get_args(When)
ACTION_KINDS: tuple[str, ...] = get_args(ActionKind)
_FIELDS = ("Kind", "Status", "Fixed in", "Fix PRs", "Open PRs", "Side", "Change", "Cause", "Sources")
_REQUIRED = ("Kind", "Status", "Side", "Change", "Cause", "Sources")
_ACTION_HEADER = ("action", "target", "value", "when", "what", "sources")
_NONE = {"", "-", "—", "none", "n/a"}
_RELEASE = re.compile(r"^v?\d+(?:\.\d+)+(?:\.post\d+|rc\d+)?$")
_ERROR_LABEL = re.compile(r"^(errors|symptoms|errors / symptoms)\b", re.I)


class ProblemFormatError(IndexerError):
    """A reference doc's problem block is malformed (the message names the file and the heading)."""


class Action(BaseModel):
    """One thing to do about a problem, with the threads that support it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ActionKind
    target: str = Field(
        min_length=1,
        description="What to change, exactly as typed: a flag, request parameter, env var, file or package",
    )
    value: str | None = Field(default=None, description="The value to set, or for upgrade the release")
    when: tuple[When, ...] = Field(min_length=1, description="Conditions that all have to hold")
    text: str = Field(min_length=1, description="One short line in the project's words")
    sources: tuple[str, ...] = Field(min_length=1, description="owner/repo#N ids that support the action")


class Problem(BaseModel):
    """A known error family or setup topic of the reference docs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    anchor: str = Field(description="<doc>#<GitHub slug of the heading>, e.g. reference/known-issues.md#...")
    doc: str
    title: str
    kind: ProblemKind
    errors: tuple[str, ...] = Field(default=(), description="Exact error strings from the Errors list")
    symptoms: tuple[str, ...] = Field(default=(), description="Errors-list items that are not one error string")
    side: Side = Field(description="Where the error is raised or the behaviour shows")
    change_side: tuple[Side, ...] = Field(min_length=1, description="Where to change something, first first")
    cause: str
    status: Status
    fixed_in: dict[str, str] = Field(default={}, description="package -> first release with a merged fix")
    fix_prs: tuple[str, ...] = Field(default=(), description="Merged PRs that fix it")
    open_prs: tuple[str, ...] = Field(default=(), description="Proposed fixes not merged at snapshot time")
    actions: tuple[Action, ...] = ()
    sources: tuple[str, ...] = Field(min_length=1)

    @property
    def threads(self) -> tuple[str, ...]:
        """Every thread the problem cites: its sources, fix PRs and open PRs."""
        return (*self.sources, *self.fix_prs, *self.open_prs)


@dataclass
class _Block:
    title: str
    anchor: str
    tables: list[list[list[str]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    symptoms: list[str] = field(default_factory=list)


def _inline_text(token: Token) -> str:
    return "".join(c.content for c in token.children or [] if c.type in {"text", "code_inline"}).strip()


def _cell(token: Token) -> str:
    """A table cell as typed: code spans lose their backticks, everything else keeps its text."""
    return "".join(
        c.content if c.type in {"text", "code_inline"} else " " if c.type == "softbreak" else ""
        for c in token.children or []
    ).strip()


def _blocks(source: str) -> list[_Block]:
    """Every heading's tables and Errors-list items, in document order."""
    tokens = MarkdownIt("commonmark").enable("table").parse(source)
    blocks: list[_Block] = []
    seen: dict[str, int] = {}
    current: _Block | None = None
    in_errors = False
    table: list[list[str]] | None = None
    row: list[str] = []
    depth = 0
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            title = _inline_text(tokens[i + 1])
            current = _Block(title, github_slug(title, seen))
            blocks.append(current)
            in_errors = False
        elif current is None:
            continue
        elif token.type == "table_open":
            table = []
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and table is not None:
            row.append(_cell(token))
        elif token.type == "tr_close" and table is not None:
            table.append(row)
        elif token.type == "table_close" and table is not None:
            current.tables.append(table)
            table = None
        elif token.type == "paragraph_open" and depth == 0:
            text = _inline_text(tokens[i + 1])
            in_errors = bool(_ERROR_LABEL.match(text))
            if in_errors and ":" in text.split("\n")[0]:
                rest = text.split(":", 1)[1].strip()
                if rest:
                    current.symptoms.append(rest)
        elif token.type == "bullet_list_open":
            depth += 1
        elif token.type == "bullet_list_close":
            depth -= 1
            in_errors = in_errors and depth > 0
        elif token.type == "inline" and in_errors and depth == 1 and tokens[i - 1].type == "paragraph_open":
            children = [c for c in token.children or [] if not (c.type == "text" and not c.content.strip())]
            if len(children) == 1 and children[0].type == "code_inline":
                current.errors.append(children[0].content)
            else:
                current.symptoms.append(" ".join(token.content.split()))
    return blocks


def _ids(value: str, where: str) -> tuple[str, ...]:
    if value.strip().lower() in _NONE:
        return ()
    ids = tuple(part.strip() for part in re.split(r"[,\s]+", value) if part.strip())
    for item in ids:
        if not ISSUE_ID.match(item):
            raise ProblemFormatError(f"{where}: {item!r} is not an issue id like owner/repo#123")
    return ids


def _choice(value: str, allowed: tuple[str, ...], what: str, where: str) -> str:
    if value not in allowed:
        raise ProblemFormatError(f"{where}: {what} {value!r} is not one of {', '.join(allowed)}")
    return value


def _fixed_in(value: str, where: str) -> dict[str, str]:
    """``vllm 0.10.2, openai-harmony 0.0.5`` -> {"vllm": "0.10.2", ...}."""
    if value.strip().lower() in _NONE:
        return {}
    found: dict[str, str] = {}
    for part in value.split(","):
        words = part.split()
        if len(words) != 2 or not _RELEASE.match(words[1]):
            raise ProblemFormatError(f"{where}: Fixed in {part.strip()!r} is not 'package release'")
        found[words[0]] = words[1].removeprefix("v")
    return found


def _action(row: list[str], where: str) -> Action:
    kind, target, value, when, text, sources = (cell.strip() for cell in row)
    _choice(kind, ACTION_KINDS, "action", where)
    conditions = tuple(c.strip() for c in when.split(",") if c.strip())
    for condition in conditions or ("",):
        _choice(condition, WHENS, "when", where)
    ids = _ids(sources, where)
    if not ids:
        raise ProblemFormatError(f"{where}: the {kind} action on {target!r} cites no source")
    release = None if value.lower() in _NONE else value
    if kind == "upgrade" and (release is None or not _RELEASE.match(release)):
        raise ProblemFormatError(f"{where}: the upgrade of {target!r} names no release (Value column)")
    if not target or not text:
        raise ProblemFormatError(f"{where}: an action row needs a target and a text")
    return Action(kind=kind, target=target, value=release, when=conditions, text=text, sources=ids)  # type: ignore[arg-type]


def _problem(block: _Block, doc: str) -> Problem | None:
    where = f"{doc} > {block.title!r}"
    facts = [t for t in block.tables if [c.lower() for c in t[0]] == ["field", "value"]]
    actions = [t for t in block.tables if tuple(c.lower() for c in t[0]) == _ACTION_HEADER]
    if not facts:
        if actions:
            raise ProblemFormatError(f"{where}: an actions table without a | Field | Value | table")
        return None
    if len(facts) > 1 or len(actions) > 1:
        raise ProblemFormatError(f"{where}: more than one facts or actions table")
    rows: dict[str, str] = {}
    for row in facts[0][1:]:
        if len(row) != 2 or row[0] not in _FIELDS:
            raise ProblemFormatError(f"{where}: unknown field {row[0]!r}; fields are {', '.join(_FIELDS)}")
        if row[0] in rows:
            raise ProblemFormatError(f"{where}: field {row[0]!r} given twice")
        rows[row[0]] = row[1].strip()
    missing = [name for name in _REQUIRED if not rows.get(name)]
    if missing:
        raise ProblemFormatError(f"{where}: missing field(s) {', '.join(missing)}")
    kind = _choice(rows["Kind"], get_args(ProblemKind), "Kind", where)
    status = _choice(rows["Status"], STATUSES, "Status", where)
    side = _choice(rows["Side"], SIDES, "Side", where)
    change = tuple(_choice(s.strip(), SIDES, "Change", where) for s in rows["Change"].split(","))
    fixed_in = _fixed_in(rows.get("Fixed in", ""), where)
    fix_prs = _ids(rows.get("Fix PRs", ""), where)
    open_prs = _ids(rows.get("Open PRs", ""), where)
    if set(fix_prs) & set(open_prs):
        raise ProblemFormatError(f"{where}: {sorted(set(fix_prs) & set(open_prs))} listed as fix and as open PR")
    if fixed_in and (status != "fixed" or not fix_prs):
        raise ProblemFormatError(f"{where}: Fixed in needs Status fixed and at least one Fix PR")
    if status == "fixed" and not fixed_in:
        raise ProblemFormatError(f"{where}: Status fixed needs Fixed in (package release); else use merged")
    if status == "merged" and not fix_prs:
        raise ProblemFormatError(f"{where}: Status merged needs at least one Fix PR")
    parsed_actions: list[Action] = []
    if actions:
        for row in actions[0][1:]:
            if len(row) != len(_ACTION_HEADER):
                raise ProblemFormatError(f"{where}: an action row has {len(row)} cells, not 6")
            parsed_actions.append(_action(row, where))
    return Problem(
        anchor=f"{doc}#{block.anchor}",
        doc=doc,
        title=block.title,
        kind=kind,  # type: ignore[arg-type]
        errors=tuple(dict.fromkeys(block.errors)),
        symptoms=tuple(dict.fromkeys(block.symptoms)),
        side=side,  # type: ignore[arg-type]
        change_side=change,  # type: ignore[arg-type]
        cause=rows["Cause"],
        status=status,  # type: ignore[arg-type]
        fixed_in=fixed_in,
        fix_prs=fix_prs,
        open_prs=open_prs,
        actions=tuple(parsed_actions),
        sources=_ids(rows["Sources"], where),
    )


def parse_problems(source: str, doc: str) -> tuple[Problem, ...]:
    """The Problems of one markdown file; ``doc`` is its path relative to the docs root."""
    found = [_problem(block, doc) for block in _blocks(source)]
    return tuple(p for p in found if p is not None)


def _reference_files(docs_dir: Path) -> list[Path]:
    reference = docs_dir / "reference"
    return sorted(p for p in reference.rglob("*.md") if p.is_file()) if reference.is_dir() else []


_CACHE: dict[tuple[Path, Path | None], tuple[tuple[tuple[str, int, int], ...], tuple[Problem, ...]]] = {}

CACHE_FILE = "problems.json"
"""The parsed problems in ``load_problems``'s ``cache_dir``, for the next process to read instead of parsing."""


@cache
def _parser_key() -> str:
    """Changes whenever this parser does: a cache written by another version of it is not read (read once
    per process)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _read_cache(path: Path, key: list[Any]) -> tuple[Problem, ...] | None:
    """The problems cached for exactly ``key``; None when missing, for other files or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") != key:
            return None
        return tuple(Problem.model_validate(item) for item in data["problems"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):  # ValidationError is a ValueError
        return None


def _write_cache(path: Path, key: list[Any], problems: tuple[Problem, ...]) -> None:
    """Replace the cache file in one step; a cache that cannot be written only costs the next parse."""
    data = {"key": key, "problems": [p.model_dump(mode="json") for p in problems]}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("problems cache not written (%s)", exc)
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def load_problems(docs_dir: Path, cache_dir: Path | None = None) -> tuple[Problem, ...]:
    """Every Problem of ``docs_dir/reference/*.md``, re-parsed only when a file changed (mtime, size).

    ``cache_dir``: where the parsed problems are also kept for other processes, keyed by the files and
    this parser (a cold CLI lookup otherwise spends about 0.15 s parsing the markdown).
    """
    root = Path(docs_dir).resolve()
    files = _reference_files(root)
    stamp = tuple((p.as_posix(), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    cached = _CACHE.get((root, cache_dir))
    if cached and cached[0] == stamp:
        return cached[1]
    key: list[Any] = [_parser_key(), [list(s) for s in stamp]]
    path = cache_dir / CACHE_FILE if cache_dir is not None else None
    found = _read_cache(path, key) if path is not None else None
    if found is None:
        problems: list[Problem] = []
        for file in files:
            problems += parse_problems(file.read_text(encoding="utf-8"), file.relative_to(root).as_posix())
        found = tuple(problems)
        if path is not None:
            _write_cache(path, key, found)
    _CACHE[(root, cache_dir)] = (stamp, found)
    return found


def problem_by_anchor(problems: tuple[Problem, ...], anchor: str) -> Problem | None:
    """The Problem whose anchor is ``anchor`` (``reference/x.md#slug``), or None."""
    return next((p for p in problems if p.anchor == anchor), None)
