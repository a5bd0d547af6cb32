"""Error-line extraction and normalisation, shared by the indexer (threads) and the service (queries).

Every pattern here is linear-time on its input: no nested quantifiers, bounded repetition only, so a
1 MB pathological log is analysed in well under a second.
"""

from __future__ import annotations

import re

# Log prefixes seen in vLLM, uvicorn, docker compose, systemd, ollama and generic Python logging.
_PREFIXES = [
    re.compile(r"^[\w.-]{1,40}\s{0,8}\|\s?"),  # docker compose "vllm-1  | "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w.@/-]{1,64}(?:\[\d{1,10}\])?: "),  # syslog
    re.compile(r"^\(\w[\w ]{0,40}pid=\d{1,10}\)\s?"),  # (APIServer pid=1)
    re.compile(r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?\s?"),  # ISO time
    re.compile(r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s{1,8}"),
    re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?\s{1,4}"),  # vLLM "09-02 17:45:51"
    re.compile(r"^\[[\w./-]{1,80}:\d{1,6}\]\s?"),  # [serving_chat.py:1145]
    re.compile(r"^\(\w[\w ]{0,40}pid=\d{1,10}\)\s?"),  # a second tag after the level
]

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX = re.compile(r"\b0x[0-9a-f]{4,}\b", re.I)
_LONG_HEX = re.compile(r"\b[0-9a-f]{16,}\b", re.I)
_REQ_ID = re.compile(r"\b(?:chatcmpl|cmpl|resp|req|call|msg|fc|rs)[-_][\w-]{6,64}\b")
_IPPORT = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]{1,128}){2,40}/?")
_TIME = re.compile(r"\b\d{1,2}:\d\d:\d\d(?:\.\d{1,9})?\b")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b|\b\d\d-\d\d(?= \d)")
_SPACE = re.compile(r"\s{1,1000}")

ERROR_LINE = re.compile(
    r"(?:\b[A-Z]\w{0,60}(?:Error|Exception|Exit|Interrupt|Warning)\b[:(]"  # FooError: / FooError(
    r"|\bHarmonyError\b|\bTraceback \(most recent call last\)"
    r"|\b(?:ERROR|CRITICAL|FATAL|panic|error|failed|Failed|FAILED)\b"
    r"|\bError code: \d{3}"
    r"|\bassert\w*\b)"
)


def strip_log_prefix(line: str) -> str:
    """Remove log decorations (container name, pid tag, time, level, source location) from a line."""
    text = line.strip()
    for _ in range(3):
        before = text
        for pattern in _PREFIXES:
            text = pattern.sub("", text, count=1).lstrip()
        if text == before:
            break
    return text


def normalize_signature(text: str) -> str:
    """A matching key for an error string: prefixes, ids, paths, addresses and times removed, lower-cased."""
    text = strip_log_prefix(text)
    text = _UUID.sub("<id>", text)
    text = _REQ_ID.sub("<id>", text)
    text = _HEX.sub("<addr>", text)
    text = _LONG_HEX.sub("<hex>", text)
    text = _IPPORT.sub("<ip>", text)
    text = _PATH.sub(lambda m: "<path>/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
    text = _TIME.sub("<time>", text)
    text = _DATE.sub("<date>", text)
    text = _SPACE.sub(" ", text)
    return text.strip().lower()


def extract_error_lines(text: str, limit: int = 50) -> list[str]:
    """Lines that look like errors, prefix-stripped, in order of appearance, deduplicated."""
    seen: set[str] = set()
    lines: list[str] = []
    for raw in text.splitlines():
        if len(raw) > 4000:
            raw = raw[:4000]
        if not ERROR_LINE.search(raw):
            continue
        line = strip_log_prefix(raw)
        key = normalize_signature(line)
        if not line or key in seen:
            continue
        seen.add(key)
        lines.append(line)
        if len(lines) >= limit:
            break
    return lines
