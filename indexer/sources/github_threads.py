"""GitHub thread payloads -> Documents: template boilerplate removed, errors, versions and fix links derived.

Pure functions over the REST API's JSON (issue/PR payloads as returned by ``GET /repos/{o}/{r}/issues``
and the search API, plus comment payloads); the network side lives in ``indexer.sources.github``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from indexer.documents import DocKind, Document, SourceName, issue_id
from indexer.signatures import extract_error_lines, normalize_signature
from indexer.trust import MAINTAINER_ASSOCIATIONS

MAX_BODY_CHARS = 4000
MAX_COMMENT_CHARS = 1500
MAX_TEXT_CHARS = 16000
MAX_SIGNATURES = 10
MAX_SIGNATURE_CHARS = 300
MAX_VERSIONS_PER_PACKAGE = 5

_CHECKBOX = re.compile(r"^\s{0,6}[-*+] \[[ xX]\]")
_HEADING = re.compile(r"^(#{1,6})\s")
_ENV_HEADING = re.compile(r"^#{1,6}\s.{0,10}your (?:current )?environment", re.I)
_TEMPLATE_LINE = re.compile(
    r"^\s{0,4}(?:#{1,6}\s{1,4})?(?:Before submitting a new issue|Thanks for contributing)", re.I
)
_BLANK_RUN = re.compile(r"\n{3,20}")

# A real exception or error: a dotted/CamelCase name ending in Error/Exception followed by ":" "(" or
# the end of the line, HarmonyError anywhere, or an HTTP client's "Error code: 400".
_REAL_ERROR = re.compile(
    r"(?:^|[\s.(`'\"])[A-Z][A-Za-z0-9_]{0,60}(?:Error|Exception)(?::|\(|`|$)"
    r"|\bHarmonyError\b"
    r"|\bError code: \d{3}\b"
)
_NOT_AN_ERROR_LINE = re.compile(r"^(?:#|[-*+] |>|\||Traceback \(most recent)")

# "vllm==0.10.1+gptoss" (a pin), the start-up line naming the vLLM version, "PyTorch version: 2.8.0+cu128", "torch 2.8",
# "vllm/vllm-openai:v0.10.2"; not "CUDA used to build PyTorch: 12.8" (a colon needs "version" before it).
_SEPARATOR = r"(?:[ \t]{1,4}version[ \t]{0,2}:?|[ \t]{0,4}(?:==|>=|<=|~=|=)|[ \t])[ \t]{0,4}"
_VERSION = (
    r"v?(\d{1,3}\.\d{1,4}(?:\.\d{1,6}){0,2}"  # 0.10.1, 0.10.1.1
    r"(?:\.?(?:post|dev|rc|a|b)\d{0,8})?"  # rc1, .dev12
    r"(?:\+[0-9A-Za-z.]{1,30})?)"  # +gptoss, +cu128
)
_VERSION_PATTERNS: dict[str, re.Pattern[str]] = {
    "vllm": re.compile(
        r"(?<![\w-])vllm(?:/vllm-openai:|(?:[ \t]{1,4}api[ \t]server)?" + _SEPARATOR + ")" + _VERSION, re.I
    ),
    "openai-harmony": re.compile(r"(?<![\w-])openai[-_]harmony" + _SEPARATOR + _VERSION, re.I),
    "transformers": re.compile(r"(?<![\w-])transformers" + _SEPARATOR + _VERSION, re.I),
    "torch": re.compile(r"(?<![\w-])(?:py)?torch" + _SEPARATOR + _VERSION, re.I),
}

# "Fixes #12", "closes owner/repo#12", "Resolved https://github.com/owner/repo/issues/12".
_FIX_LINK = re.compile(
    r"\b(?:fix|fixes|fixed|close|closes|closed|resolve|resolves|resolved)\b:?[ \t]{1,4}"
    r"(?:(?P<repo>[\w.-]{1,100}/[\w.-]{1,100})#(?P<num>\d{1,9})"
    r"|#(?P<local>\d{1,9})"
    r"|https?://github\.com/(?P<urepo>[\w.-]{1,100}/[\w.-]{1,100})/(?:issues|pull)/(?P<unum>\d{1,9}))",
    re.I,
)


def parse_time(value: str | None) -> datetime | None:
    """GitHub's ISO 8601 timestamp (``2025-08-06T12:00:00Z``) -> an aware UTC datetime."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _without_html_comments(text: str) -> str:
    # str.find instead of a regex: an unclosed "<!--" repeated many times must stay linear.
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("<!--", pos)
        if start < 0:
            out.append(text[pos:])
            break
        out.append(text[pos:start])
        end = text.find("-->", start + 4)
        if end < 0:
            break  # an unclosed comment hides the rest, as GitHub renders it
        pos = end + 3
    return "".join(out)


def strip_boilerplate(text: str | None) -> str:
    """Remove issue-template noise: HTML comments, checklists, the environment section, template lines."""
    if not text:
        return ""
    text = _without_html_comments(text.replace("\r\n", "\n"))
    kept: list[str] = []
    skipping_level = 0  # heading level of the environment section being skipped, 0 when not skipping
    for line in text.split("\n"):
        heading = _HEADING.match(line)
        if skipping_level:
            if heading and len(heading.group(1)) <= skipping_level:
                skipping_level = 0
            else:
                continue
        if _ENV_HEADING.match(line):
            skipping_level = len(line) - len(line.lstrip("#"))
            continue
        if _CHECKBOX.match(line) or _TEMPLATE_LINE.match(line):
            continue
        kept.append(line.rstrip())
    return _BLANK_RUN.sub("\n\n", "\n".join(kept)).strip()


def error_signatures(text: str) -> list[str]:
    """Lines of ``text`` that name a real exception or error (not prose that mentions "error")."""
    found: list[str] = []
    for line in extract_error_lines(text):
        line = line.strip().strip("`").strip()
        if not line or _NOT_AN_ERROR_LINE.match(line) or not _REAL_ERROR.search(line):
            continue
        line = line[:MAX_SIGNATURE_CHARS]
        if line not in found:
            found.append(line)
        if len(found) >= MAX_SIGNATURES:
            break
    return found


def versions_mentioned(text: str) -> dict[str, list[str]]:
    """Versions of vllm, openai-harmony, transformers and torch named in ``text``."""
    versions: dict[str, list[str]] = {}
    for package, pattern in _VERSION_PATTERNS.items():
        for match in pattern.finditer(text):
            version = match.group(1).rstrip(".")
            seen = versions.setdefault(package, [])
            if version not in seen and len(seen) < MAX_VERSIONS_PER_PACKAGE:
                seen.append(version)
    return {k: v for k, v in versions.items() if v}


def fix_targets(repo: str, text: str) -> list[str]:
    """Thread ids a PR says it fixes/closes/resolves (``#N``, ``owner/repo#N`` or a GitHub URL)."""
    targets: list[str] = []
    for match in _FIX_LINK.finditer(text):
        if match["local"]:
            target = issue_id(repo, int(match["local"]))
        elif match["num"]:
            target = issue_id(match["repo"], int(match["num"]))
        else:
            target = issue_id(match["urepo"], int(match["unum"]))
        if target not in targets:
            targets.append(target)
    return targets


def thread_state(payload: Mapping[str, Any]) -> str:
    """open | closed | merged; a PR is merged when the issue payload's ``pull_request.merged_at`` is set."""
    pull = payload.get("pull_request")
    if isinstance(pull, Mapping) and pull.get("merged_at"):
        return "merged"
    return "closed" if payload.get("state") == "closed" else "open"


def without_repeats(text: str) -> str:
    """``text`` with every line after its first occurrence removed (blank lines kept).

    Saying the same thing again adds no evidence: a body that repeats an error string fifty times must
    not outscore one that quotes it once (BM25 counts repetitions).
    """
    seen: set[str] = set()
    kept: list[str] = []
    for line in text.split("\n"):
        key = " ".join(line.split()).lower()
        if key:
            if key in seen:
                continue
            seen.add(key)
        kept.append(line)
    return _BLANK_RUN.sub("\n\n", "\n".join(kept)).strip()


def github_thread_url(repo: str, number: int, is_pull: bool, html_url: object) -> str:
    """The thread's github.com URL: GitHub's ``html_url`` when it is one, else built from repo and number.

    A URL is shown to people and agents as a link to follow, so only ``https://github.com/<repo>/...``
    of this very thread passes.
    """
    kind_path = "pull" if is_pull else "issues"
    built = f"https://github.com/{repo}/{kind_path}/{number}"
    # Compared as strings, not with a pattern per thread: answers build a URL per issue they show,
    # and compiling a fresh regex for each cost ~10% of a lookup's CPU (issue 17).
    base = f"https://github.com/{repo}/"
    if isinstance(html_url, str) and html_url in (f"{base}issues/{number}", f"{base}pull/{number}"):
        return html_url
    return built


def _association(payload: Mapping[str, Any]) -> str | None:
    value = payload.get("author_association")
    return str(value).upper() if value else None


def _comment_section(comments: Sequence[Mapping[str, Any]]) -> list[str]:
    parts: list[str] = []
    for comment in comments:
        body = without_repeats(strip_boilerplate(comment.get("body")))
        if body:
            author = (comment.get("user") or {}).get("login") or "someone"
            parts.append(f"Comment by {author}:\n{body[:MAX_COMMENT_CHARS]}")
    return parts


def thread_document(
    repo: str, payload: Mapping[str, Any], comments: Sequence[Mapping[str, Any]] = ()
) -> Document:
    """The live Document of one issue or PR payload (plus up to a capped number of its comments)."""
    number = int(payload["number"])
    pull = payload.get("pull_request")
    is_pull = isinstance(pull, Mapping)
    title = str(payload.get("title") or f"{repo}#{number}")
    raw_body = str(payload.get("body") or "")
    raw_comments = "\n".join(str(c.get("body") or "") for c in comments)
    body = without_repeats(strip_boilerplate(raw_body))[:MAX_BODY_CHARS]
    text = "\n\n".join([title, body, *_comment_section(comments)]).strip()[:MAX_TEXT_CHARS]
    # Signatures from the cleaned text (the title often quotes the error); versions from the raw text,
    # because collect_env output inside the stripped environment section is where they are listed.
    signatures = error_signatures(f"{title}\n{body}\n{strip_boilerplate(raw_comments)}")
    merged_at = parse_time(pull.get("merged_at")) if is_pull and isinstance(pull, Mapping) else None
    return Document(
        id=issue_id(repo, number),
        kind=DocKind.PULL if is_pull else DocKind.ISSUE,
        repo=repo,
        number=number,
        title=title,
        url=github_thread_url(repo, number, is_pull, payload.get("html_url")),
        state=thread_state(payload),  # type: ignore[arg-type]
        labels=[str(label.get("name")) for label in payload.get("labels") or [] if label.get("name")],
        created_at=parse_time(payload.get("created_at")),
        updated_at=parse_time(payload.get("updated_at")),
        closed_at=parse_time(payload.get("closed_at")),
        merged_at=merged_at,
        text=text,
        error_signatures=signatures,
        normalized_signatures=[normalize_signature(s) for s in signatures],
        versions=versions_mentioned(f"{title}\n{raw_body}\n{raw_comments}"),
        fixes=fix_targets(repo, f"{title}\n{raw_body}") if is_pull else [],
        comments=int(payload.get("comments") or 0),
        sources=[SourceName.GITHUB],
        author=(payload.get("user") or {}).get("login"),
        author_association=_association(payload),
        maintainer_commented=any(_association(c) in MAINTAINER_ASSOCIATIONS for c in comments),
    )


def curated_text(doc: Document, title: str) -> str:
    """A curated document's searchable text (as ``cards.card_text`` builds it) under a new title."""
    parts = [title, *doc.error_signatures]
    parts += [p for p in (doc.summary, doc.cause, doc.fix) if p]
    parts += doc.workarounds
    if doc.flags:
        parts.append("Flags: " + ", ".join(doc.flags))
    return "\n".join(parts)


RELEASE_FIELDS = ("merge_commit", "released_in", "release_checked", "release_source")
"""What the sync's release check records on a merged PR; a re-fetched thread payload never carries it."""


def release_fields(*docs: Document) -> dict[str, Any]:
    """The release fields of the first doc the sync checked (else the first with a curated release)."""
    for doc in docs:
        if doc.release_checked is not None:
            return {name: getattr(doc, name) for name in RELEASE_FIELDS}
    for doc in docs:
        if doc.released_in is not None:
            return {name: getattr(doc, name) for name in RELEASE_FIELDS}
    return {}


def merged_signatures(curated: list[str], live: list[str], limit: int = 2 * MAX_SIGNATURES) -> list[str]:
    """The card's error strings first, then those the live thread (body and comments) adds.

    A thread's comments often quote the error in another form (another token id, a client's wrapper, a
    later version's wording); matching those finds the thread too. Curated strings keep the lead: the
    retriever weighs a thread's first error string most.
    """
    merged = list(curated)
    seen = {normalize_signature(sig) for sig in curated}
    for sig in live:
        key = normalize_signature(sig)
        if key and key not in seen and len(merged) < limit:
            seen.add(key)
            merged.append(sig)
    return merged


def merge_live(card_doc: Document, live_doc: Document) -> Document:
    """A curated document updated from its live thread.

    The card's curated fields stay; state, title, url, labels, dates and comment count come from GitHub;
    the live body and comments are appended after the curated text so new comments are searchable, and
    the error strings they quote join the card's own (after them).
    """
    live_extra = live_doc.text.split("\n\n", 1)[1] if "\n\n" in live_doc.text else ""
    signatures = merged_signatures(card_doc.error_signatures, live_doc.error_signatures)
    card_doc = card_doc.model_copy(
        update={"error_signatures": signatures, "normalized_signatures": [normalize_signature(s) for s in signatures]}
    )
    text = curated_text(card_doc, live_doc.title)
    if live_extra:
        text = f"{text}\n\n{live_extra}"[:MAX_TEXT_CHARS]
    return card_doc.model_copy(
        update={
            "title": live_doc.title,
            "url": live_doc.url or card_doc.url,
            "state": live_doc.state,
            "labels": list(live_doc.labels),
            "created_at": live_doc.created_at,
            "updated_at": live_doc.updated_at,
            "closed_at": live_doc.closed_at,
            "merged_at": live_doc.merged_at,
            "comments": live_doc.comments,
            "text": text,
            "fixed_by": sorted(set(card_doc.fixed_by) | set(live_doc.fixed_by)),
            "sources": [SourceName.SNAPSHOT, SourceName.GITHUB],
            **release_fields(live_doc, card_doc),
        }
    )


def live_update(existing: Document | None, live_doc: Document) -> Document:
    """What to store for a freshly fetched thread given what the store holds under the same id."""
    if existing is None:
        return live_doc
    if existing.curated:
        return merge_live(existing, live_doc)
    # Keep fix links other PRs recorded on this thread earlier, and what the release check found.
    return live_doc.model_copy(
        update={"fixed_by": sorted(set(existing.fixed_by) | set(live_doc.fixed_by)), **release_fields(existing)}
    )
