"""Error-line extraction and normalisation, shared by the indexer (threads) and the service (queries).

Every pattern here is linear-time on its input: no nested unbounded quantifiers, bounded repetition
only, and lines are cut to a fixed length before matching, so a 1 MB pathological log is analysed in
well under a second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

MAX_LINE = 2000
"""Longer lines are cut before any pattern runs on them."""

LLAMA_STAMP = r"\d{1,5}\.\d\d\.\d{3}\.\d{3} "
"""llama.cpp's common log timestamp (minutes.seconds.ms.us), followed by a one-letter level."""
TRACE_FRAME = re.compile(r'File "([^"\n]{1,400})", line \d{1,7}, in ([\w<>.]{1,120})')
"""A Python traceback's frame line (its file, then its function); the line under it quotes the source."""

QUOTE_MARK = re.compile(r"^\s{0,3}(?:>(?!>) ?){1,4}|^\s{0,8}\u2502 ")
"""A markdown quote's marks ("> ", "> > ") or a rich traceback's frame bar ("\u2502 "), not a REPL's ">>> "
prompt: what follows them is read as it stands."""

# Log decorations seen in vLLM, uvicorn, docker compose, systemd, ollama, sglang and Python logging.
_PREFIXES = [
    QUOTE_MARK,
    re.compile(r"^[\w.-]{1,40} {0,12}\| ?"),  # docker compose "vllm-1  | "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w.@/-]{1,64}(?:\[\d{1,10}\])?: "),  # syslog
    re.compile(r"^\((?:\w[\w ]{0,40})?pid=\d{1,10}\) ?"),  # (APIServer pid=1)
    re.compile(r"^\[rank\d{1,5}\]:? ?"),
    re.compile(r"^\[?\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]? ?"),
    re.compile(r"^\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] ?"),  # TensorRT-LLM [MM/DD/YYYY-hh:mm:ss]
    re.compile(r"^time=\S{1,40} "),
    re.compile(r"^\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]? {1,8}|^\[[EWI]\] {1,8}"),  # "I " is a word
    re.compile(r"^level=\w{1,10} "),
    re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? {1,4}"),  # vLLM "MM-DD hh:mm:ss"
    re.compile(r"^\d\d:\d\d:\d\d(?:\.\d{1,6})? {1,4}"),
    re.compile(r"^\[[\w./-]{1,80}:\d{1,6}\] ?"),  # [serving_chat.py:1145]
    re.compile(r"^source=[\w./-]{1,80}:\d{1,6} "),
    re.compile(r"^\[[\w .-]{1,20}\] "),  # [TRT-LLM]
    re.compile(rf"^{LLAMA_STAMP}[IWED] "),  # llama.cpp's common log: "0.26.891.979 I srv ..."
]
_ANY_PREFIX = re.compile("|".join(p.pattern for p in _PREFIXES))
"""Any one decoration at the start: a line that has none (most, once stripped) costs one match, not 14."""

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX = re.compile(r"\b0x[0-9a-f]{4,64}\b", re.I)
_LONG_HEX = re.compile(r"\b[0-9a-f]{16,128}\b", re.I)
_REQ_ID = re.compile(r"\b(?:chatcmpl|cmpl|resp|req|call|msg|fc|rs)[-_][\w-]{6,64}\b")
_IPPORT = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]{1,128}){2,40}/?")
_TIME = re.compile(r"\b\d{1,2}:\d\d:\d\d(?:\.\d{1,9})?\b")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
_SPACE = re.compile(r"\s{1,2000}")
_WORD = re.compile(r"[a-z0-9_]{2,40}|<\|[a-z_]{1,20}\|>")

# An exception's (dotted) class name: Error, Exception, Exit, Interrupt, Failure or Fault at its end.
_EXCEPTION_NAME = r"(?:[\w.]{0,120}\.)?[A-Z]\w{0,60}(?:Error|Exception|Exit|Interrupt|Failure|Fault)"
# An exception line: the name then ':' or '(' or the end; a JavaScript error's name tag may stand between
# ("... [AI_UnsupportedModelVersionError]:").
_EXCEPTION = re.compile(r"^" + _EXCEPTION_NAME + r"(?: \[[\w.]{1,80}\])?(?::|\(|$)")
# An exception a line carries after a title or a lead ("GPT-OSS vLLM Serving - RuntimeError: ...", "[Bug]:
# ValueError: ..."): after a dash, colon or bracket that ends the words before it.
_LED_EXCEPTION = re.compile(r"(?:\s[-\u2013\u2014:|]\s|\]:?\s)(" + _EXCEPTION_NAME + r"(?::\s|\())")
# A bare exception name on its own line ("ValueError"), as some tracebacks print it above the message.
_BARE_EXCEPTION = re.compile(_EXCEPTION_NAME)
_ERRORISH = re.compile(
    r"\b(?:HarmonyError|error|Error|ERROR|failed|Failed|FAILED|fatal|FATAL|panic|invalid|Invalid|"
    r"not supported|unsupported|Unsupported|Unexpected|unexpected|cannot|Cannot|unable|Unable|"
    r"unrecognized|no module named|No module named|not found|not defined|no \w{1,20} found"
    # Messages with none of those words: an engine's refusal, a memory shortfall, a GPU page fault.
    r"|does not (?:currently )?support|requires more (?:system |GPU )?memory|[Mm]emory access fault)\b"
)
# A native crash: the C++ runtime's abort and its message, a signal, ggml's assertion. Read before the
# source-line test: ``what(): ...`` and ``GGML_ASSERT(...)`` look like calls.
_NATIVE_CRASH = re.compile(
    r"^terminate called after throwing|^what\(\): |\bSIG(?:SEGV|ABRT|BUS|ILL|FPE)\b|\bsegmentation fault"
    r"|\bGGML_ASSERT\(",
    re.I,
)
# The C++ runtime's report of an uncaught exception: "terminate called after throwing an instance of 'T'" and,
# on the next line, "  what():  <the exception's message>", the failure's own words.
_CPP_WHAT = re.compile(r"^what\(\):\s+(\S.{3,})")
_ACCESS_LOG = re.compile(r'"(?:GET|POST|PUT|DELETE|PATCH) \S{1,300} HTTP/\d(?:\.\d)?" \d{3}')
# llama.cpp's common log writes the level as one letter after its timestamp ("0.26.891.979 E ...").
_LLAMA_LEVEL = "|^" + LLAMA_STAMP
_LEVEL_ERROR = re.compile(r"(?:^|[\s\[(])(?:ERROR|CRITICAL|FATAL|level=ERROR|\[E\])(?:[\s\])]|$)" + _LLAMA_LEVEL + "E ")
_LEVEL_WARN = re.compile(r"(?:^|[\s\[(])(?:WARNING|WARN|level=WARN|\[W\])(?:[\s\])]|$)" + _LLAMA_LEVEL + "W ")
_LEVEL_INFO = re.compile(r"(?:^|[\s\[(])(?:INFO|DEBUG|level=INFO|level=DEBUG)(?:[\s\])]|$)" + _LLAMA_LEVEL + "[ID] ")
_SOURCE_LINE = re.compile(r"^(?:raise|assert|return|await|self\.|[\w.]{1,80} = |[\w.]{1,80}\()")
# Messages that wrap the real error: they say "see above" and carry no cause of their own.
_WRAPPER = re.compile(
    r"(?:see (?:the )?(?:root cause|stack trace)|failed to start\.?$|root cause above|hit an exception|"
    r"^traceback \(most recent|direct cause of\b|during handling of the above|"
    r"^error in (?:chat completion|completion) (?:stream|full) generator|^exception in asgi application|"
    r"^\^+$|^~+$"
    # PyTorch's standing advice under every CUDA error: it points at the error, it is not one.
    r"|^cuda kernel errors might be asynchronously|^for debugging consider passing cuda_launch_blocking"
    r"|^compile with .?torch_use_cuda_dsa"
    # LM Studio's chat window: its line above the error, and its standing advice below a template error.
    r"|^failed to (?:send|regenerate) message\.?$|^this is usually an issue with the model's prompt template"
    # Ollama's record when its runner's request fails ("post predict", 'Post "http://...": EOF'): the runner's
    # own error is the cause.
    r"|^post predict$|^post \S{1,300}: (?:eof|connection reset by peer)$"
    # Continue's notification above the error output it shows: "Error: gpt-oss:120b - 500".
    r"|^error: [\w.:/-]{1,80} - (?:\d{3}|unknown error)$)",
    re.I,
)
# A Jinja template error (llama.cpp's chat templates) names the template's line, then quotes it:
# "While executing CallExpression at line 296, column 36 in source:".
_SOURCE_INTRO = (" in source:", " in source: ")
# Python's lines between the tracebacks of one chained failure: they say where a traceback starts, not
# what failed.
CHAINING = re.compile(r"^(?:traceback \(most recent|during handling of the above|the above exception\b)", re.I)
# A user's line that introduces the error pasted below it ("... I am getting the following error:", "...
# gives the following error"): it names no failure of its own, so it is the user's sentence, not an error line.
# A sentence that says the user met "this error" and quotes none of it ("Later I get this error when running the
# container"): it points at an error pasted elsewhere, or left out.
POINTER = re.compile(
    r"\b(?:have|had|get|gets|got|getting|see|saw|seeing|hit|hitting|encounter(?:ed)?|receiv(?:e|ed|ing)|r[au]n into)"
    r"\s(?:this|these|the following|following|the same)\s(?:errors?|exceptions?)\b"
    r"(?:\s(?:when|while|after|on|in|at|during|if|whenever|with|from|every)\b[^:\n]{0,80})?\W{0,3}$",
    re.I,
)
LEAD_IN = re.compile(
    POINTER.pattern + "|"
    r"(?:\b(?:following|below)\s(?:\w{1,20}\s){0,2}(?:errors?|exceptions?|tracebacks?|logs?|output|messages?)"
    r"|\b(?:this|these|an|the|same)\s(?:errors?|exceptions?)\s{0,2}(?:below|here)?"
    r"|\b(?:errors?|exceptions?|tracebacks?)\b[^:\n]{0,40}\b(?:is|are|was|were|says?|reads?)\s{0,2}:"
    r"|\b(?:results? in|gives?|gave|throws?|shows?|gets?|got|getting|sees?|seeing|with)\s(?:an?\s|the\s|this\s)?"
    r"(?:errors?|exceptions?)\s{0,2}:)\W{0,3}$",
    re.I,
)
# Records vLLM writes at ERROR level when its engine dies that hold context, not a cause: its config and
# the scheduler's state (vllm/logging_utils/dump_input.py, in every release read). Their words
# (reasoning_parser=..., tool names) would read as a failure of their own; the error is another line.
_CONTEXT_AT_ERROR = re.compile(r"^dumping (?:input data|scheduler output|scheduler stats)\b", re.I)
# A markdown heading, a bold label or a short label line ("## Error", "**Error Details**:", "Error Log:"): a
# report's structure, not an error.
_LABEL = re.compile(
    r"^(?:#{1,6}\s+[^\n]{1,80}|\*\*[^*\n]{1,60}\*\*:?|[A-Z][A-Za-z]{0,20}(?: [A-Za-z]{1,20}){0,2}:"
    # a form's heading over the error with no colon ("Error Details", "Error Output", "Full Error Log")
    r"|(?:[A-Z][a-z]{1,12} )?Errors? (?:Details|Output|Logs?|Messages?|Info(?:rmation)?|Trace(?:back)?|Report))\s*$"
)
# A sentence: eight or more plain words from its start (a message the software writes breaks off sooner,
# at a colon, a quote, a bracket or an identifier).
_SENTENCE = re.compile(r"(?:[A-Za-z][a-z'-]{0,20}[,;]?\s+){8}")
# Messages embedded in a line: JSON/dict error bodies and Go key=value logs. (An "Error in request: ..." pattern
# here never matched a message, its groups being off by one; making it work took dev hit@1 to 0.985 with a
# wrong "high", 2026-11-27, so the message after such a prefix is left to the exception and lead rules.)
_EMBEDDED = [
    re.compile(r"""['"](?:message|detail|error|msg)['"]\s{0,3}:\s{0,3}(['"])(.{4,1500}?)(?<!\\)\1"""),
    re.compile(r"""\b(?:msg|error|err)=(")(.{4,1500}?)(?<!\\)\1"""),
]


@dataclass(frozen=True)
class ErrorLine:
    """One error-looking line of a log, with how much it should count."""

    text: str
    """The line without its log decorations."""
    weight: float
    """Evidence weight: exceptions and server messages count most, warnings and wrappers least."""
    position: int
    """Line number in the input (0-based)."""
    kind: str
    """exception | message | error | warning | source | wrapper"""
    record: str = ""
    """The decoration the line's log record put before it (time, level, process tag, source), empty for an
    undecorated line: a record's own tag (vLLM's ``(APIServer pid=1)``) names the program that wrote it."""
    said: bool = False
    """An undecorated line that reads as a sentence ("After a few calls the model starts failing with a
    parsing error"): the user's words about the failure. It counts like an error line but ranks after the
    error lines the software wrote."""


def strip_log_prefix(line: str) -> str:
    """Remove log decorations (container name, pid tag, time, level, source location) from a line."""
    text = line.strip()[:MAX_LINE]
    # Up to four passes, each trying every decoration in order; a pass that removes nothing ends it.
    # Every decoration is at least one character, so a pass removes nothing exactly when none matches.
    for _ in range(4):
        if _ANY_PREFIX.match(text) is None:
            break
        for pattern in _PREFIXES:
            found = pattern.match(text)
            if found is not None:
                text = text[found.end() :].lstrip()
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


def signature_tokens(text: str) -> list[str]:
    """Word tokens of a normalised signature, used for overlap matching."""
    return _WORD.findall(normalize_signature(text))


# Where a JSON or dict string value ends: its quote, then a separator or the end of the object.
_VALUE_END = {'"': re.compile(r'"\s{0,3}(?:[,}\]]|$)'), "'": re.compile(r"'\s{0,3}(?:[,}\]]|$)")}


def _embedded_messages(line: str) -> list[str]:
    found: list[str] = []
    for pattern in _EMBEDDED:
        for match in pattern.finditer(line):
            message = match.group(2)
            quote, end = match.group(1), match.end()
            if quote and end < len(line) and line[end] not in ",}] \t":
                # A quote the paste did not escape ('"error":"... executing "" at ..."'): the value runs to
                # the quote that closes it, before a separator.
                close = _VALUE_END[quote].search(line, end)
                message = line[match.start(2) : close.start()] if close else message
            message = message.replace("\\'", "'").replace('\\"', '"').strip()
            if len(message) >= 4 and message not in found:
                found.append(message)
    return found


# Every line classify_line() keeps contains one of these words (lower-cased): lines without any (most
# INFO lines of a long log) are passed over with one search instead of a dozen prefix substitutions.
# Matching the lower-cased line without re.IGNORECASE is several times faster on long logs.
_MAYBE = re.compile(
    r"error|exception|exit|interrupt|fail|fault|traceback|root cause|stack trace|direct cause|"
    r"handling of the above|http/|raise|assert|warn|critical|fatal|panic|invalid|support|unexpected|"
    r"requires more|"
    r"cannot|unable|unrecognized|no module|found|not defined|\[[ew]\]"
    r"|terminate called|what\(\)|sigsegv|sigabrt|sigbus|sigill|sigfpe|segmentation|ggml_assert"
)


def classify_line(raw: str, after_frame: bool = False) -> tuple[str, str] | None:
    """(kind, text) for an error-looking line, None for anything else.

    ``after_frame`` says the previous line was a traceback frame (``File "...", line N``), so this
    line is source code quoted by the traceback, whatever its log level.
    """
    raw = raw[:MAX_LINE]
    text = strip_log_prefix(raw)
    if TRACE_FRAME.match(text):
        return None
    return _classify(raw, text, after_frame)


def _classify(raw: str, text: str, after_frame: bool) -> tuple[str, str] | None:
    if not text or len(text) < 4 or _LABEL.match(text):
        return None
    if after_frame and not raw[:1].isspace() and _is_exception(text):
        return ("exception", text)  # a traceback cut to its frames: the exception line follows a frame directly
    if after_frame or text.startswith(("^", "~")):
        is_raise = text.startswith(("raise", "assert"))
        return ("source", text) if is_raise else None
    if _CONTEXT_AT_ERROR.match(text):
        return None
    if _ACCESS_LOG.search(text):
        return ("access", text) if not text.rstrip().endswith(("200 OK", "201 Created")) else None
    if _WRAPPER.search(text):
        return ("wrapper", text)
    if _is_exception(text):
        return ("exception", text)
    if ("Error" in text or "Exception" in text) and (led := _LED_EXCEPTION.search(text)):
        return ("exception", text[led.start(1) :])
    if what := _CPP_WHAT.match(text):
        return ("message", what.group(1))  # the C++ exception's message, under the terminate line naming its type
    if _NATIVE_CRASH.search(text):
        return ("error", text)
    prefix = raw[: len(raw.rstrip()) - len(text)]
    # A code line of a traceback relayed record by record keeps its indentation under the ERROR prefix
    # ("... [core.py:710]     outputs = await ..."); a paste that starts mid-traceback has no frame above it.
    if _SOURCE_LINE.match(text) and (not _LEVEL_ERROR.search(prefix) or prefix.endswith("  ")):
        return ("source", text) if ("raise" in text[:6] or text.startswith("assert")) else None
    level_part = prefix + " " + text[:12]
    errorish = _says_error(text)
    if _LEVEL_ERROR.search(level_part):
        return ("error", text)
    if _LEVEL_WARN.search(level_part):
        return ("warning", text) if errorish else ("notice", text)
    if _LEVEL_INFO.search(level_part):
        # An info record that relays a failure: a Go error field, a "failed", or a JSON error body it quotes.
        relays = "msg=" in text or "failed" in text or '"error":' in text
        return ("error", text) if ("error" in text.lower() and relays) else None
    if errorish:
        return ("error", text)
    return _quoted_error(text)


_DENIED = re.compile(r"(?:\bno|\bwithout(?: any)?|\bnot an?|\bzero)\s{1,3}$", re.I)
"""Words before an error word that deny it ("with no error and no log", "exits without any error")."""


def _says_error(text: str) -> bool:
    """True when the line has an error word that it does not deny."""
    for match in _ERRORISH.finditer(text):
        if not _DENIED.search(text[max(0, match.start() - 16) : match.start()]):
            return True
    return False


def _is_exception(text: str) -> bool:
    return _EXCEPTION.match(text) is not None or text.startswith("HarmonyError")


_QUOTED = re.compile(r"`([^`\n]{8,400})`")


def _quoted_error(text: str) -> tuple[str, str] | None:
    """An exception a sentence quotes in backticks ("I get `AssertionError: Sinks are only supported`")."""
    if "`" not in text:
        return None
    for match in _QUOTED.finditer(text):
        quoted = match.group(1).strip()
        if _is_exception(quoted):
            return ("exception", quoted)
    return None


_KIND_WEIGHT = {
    "exception": 1.4,
    "message": 1.4,
    "error": 1.0,
    "warning": 0.45,
    "notice": 0.3,
    "access": 0.3,
    "source": 0.35,
    "wrapper": 0.15,
}


def error_lines(text: str, limit: int = 40) -> list[ErrorLine]:
    """Error-looking lines of a log, deduplicated, each with a kind and an evidence weight.

    Embedded server messages (JSON error bodies, ``msg=``/``error=`` fields) become lines of their own,
    since they carry the server's own words inside a client's exception.
    """
    return [line for line, _ in keyed_error_lines(text, limit)]


def keyed_error_lines(text: str, limit: int = 40) -> list[tuple[ErrorLine, str]]:
    """:func:`error_lines`, each with its ``normalize_signature`` (computed here anyway to deduplicate)."""
    seen: set[str] = set()
    # (line cut to MAX_LINE, after_frame) -> is a frame: a repeated line gives the same result as its
    # first occurrence, whose keys are all in ``seen`` already, so it is skipped without any pattern.
    done: dict[tuple[str, bool], bool] = {}
    out: list[tuple[ErrorLine, str]] = []
    after_frame = False
    for position, raw in enumerate(text.splitlines()):
        # Blank and very short lines cannot classify (under 4 characters) nor be a frame: skip them
        # before any pattern runs, so a megabyte of newlines costs what one line does.
        if len(raw) < 4 or len(raw.strip()) < 4:
            after_frame = False
            continue
        raw = raw[:MAX_LINE]
        if raw.endswith(_SOURCE_INTRO):
            after_frame = True  # the template's text it quotes next is source, as under a Python frame
            continue
        memo_key = (raw, after_frame)
        if memo_key in done:
            after_frame = done[memo_key]
            continue
        maybe_frame = 'File "' in raw
        if not (after_frame or maybe_frame or _MAYBE.search(raw.lower())):
            after_frame = done[memo_key] = False
            continue
        stripped = strip_log_prefix(raw)
        is_frame = maybe_frame and TRACE_FRAME.match(stripped) is not None
        classified = None if is_frame else _classify(raw, stripped, after_frame)
        after_frame = done[memo_key] = is_frame
        if classified is None:
            continue
        kind, line = classified
        whole = raw.strip()
        record = whole[: len(whole) - len(stripped)].rstrip()
        if kind == "error" and not record and LEAD_IN.search(line):
            continue  # the user's lead-in to the error below it, left to the sentences
        said = kind == "error" and not record and _SENTENCE.match(line) is not None
        candidates = [(kind, line)]
        if kind in {"exception", "error", "warning"}:
            candidates += [("message", m) for m in _embedded_messages(line)]
        for cand_kind, cand in candidates:
            if cand_kind == "message" and _WRAPPER.search(cand):
                cand_kind = "wrapper"  # a record's message that only wraps the error ('msg="post predict"')
            key = normalize_signature(cand)
            if not key or key in seen:
                continue
            seen.add(key)
            line_said = said and cand is line  # an embedded message is the software's words
            out.append(
                (ErrorLine(cand[:MAX_LINE], _KIND_WEIGHT[cand_kind], position, cand_kind, record, line_said), key)
            )
        if len(out) >= limit * 4:
            break
    return sorted(_without_quoting_lines(_without_bare_names(out)), key=lambda item: _rank(item[0]))[:limit]


QUOTED_MIN = 20
"""Characters from which an error line found whole inside another line (a title that quotes the log line)
stands for it."""
TITLE_MAX = 160
"""A first line longer than this is a paragraph, not a title."""
TITLE_RUN_WORDS = 4
"""Words in a row a title must share with another error line to be quoting it in part."""


def _shares_a_run(title: str, other: str) -> bool:
    """True when ``TITLE_RUN_WORDS`` words in a row of the title (at least ``QUOTED_MIN`` characters) appear in
    the other line."""
    words = title.split()
    for start in range(len(words) - TITLE_RUN_WORDS + 1):
        run = " ".join(words[start : start + TITLE_RUN_WORDS])
        if len(run) >= QUOTED_MIN and run in other:
            return True
    return False


def _without_quoting_lines(found: list[tuple[ErrorLine, str]]) -> list[tuple[ErrorLine, str]]:
    """Put the quoted line in the place of an undecorated ``error`` line that quotes it whole ("[Bug]: gpt-oss
    fails [ERROR] Assertion failed: X" at the top, the log's "[ERROR] Assertion failed: X" below): the quoted
    line is the failure, the words around it are a title's. Messages taken out of a line are not other lines."""
    if len(found) < 2:
        return found
    lines = [line for line, _ in found if line.kind != "message" and len(line.text) >= QUOTED_MIN]
    moved: dict[int, int] = {}  # id of a quoted line -> the earliest position of a line quoting it
    quoting: set[int] = set()
    first = min(line.position for line, _ in found)
    for line, _ in found:
        if line.kind != "error" or line.record:
            continue  # a log record's line is the program's own words, not a title around them
        # The input's first line (a report's title) also gives way to a line it quotes in part ("X at 0.11.3
        # has invalid ggml type 39" over the loader's "tensor 'blk.0...' has invalid ggml type 39 (NONE)").
        title = line.position == first and not line.said and len(line.text) <= TITLE_MAX
        for other in lines:
            if other.position != line.position and (
                other.text in line.text
                # (not to a line that quotes the whole title back: then that line gives way to the title)
                or (title and line.text not in other.text and _shares_a_run(line.text, other.text))
            ):
                quoting.add(id(line))
                moved[id(other)] = min(moved.get(id(other), other.position), line.position)
                break
    if not quoting:
        return found
    return [
        (replace(line, position=moved[id(line)]) if id(line) in moved else line, key)
        for line, key in found
        if id(line) not in quoting
    ]


def _without_bare_names(found: list[tuple[ErrorLine, str]]) -> list[tuple[ErrorLine, str]]:
    """Leave out an exception's bare name ("ValueError") when a line gives that exception with its message."""
    bare = [line for line, _ in found if line.kind == "exception" and _BARE_EXCEPTION.fullmatch(line.text.strip())]
    if not bare:
        return found
    told = {
        line.text.split(":", 1)[0].strip().rsplit(".", 1)[-1]
        for line, _ in found
        if line.kind in {"exception", "message"} and ":" in line.text
    }
    dropped = {id(line) for line in bare if line.text.strip().rsplit(".", 1)[-1] in told}
    return [item for item in found if id(item[0]) not in dropped]


def _rank(line: ErrorLine) -> tuple[float, bool, int]:
    return -line.weight, line.said, line.position


def rank_error_lines(lines: list[ErrorLine]) -> list[ErrorLine]:
    """Root cause first: strongest kind first, earliest first within a kind."""
    return sorted(lines, key=_rank)


def extract_error_lines(text: str, limit: int = 50) -> list[str]:
    """Error lines without log decorations, root cause first (exceptions and server messages lead)."""
    return [e.text for e in error_lines(text, limit) if e.kind not in {"wrapper", "source", "notice", "access"}]
