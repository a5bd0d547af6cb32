"""Log distillation: the lines of a pasted log that carry the failure, without the boilerplate.

A whole server log is mostly start-up INFO lines, metrics, access logs and environment dumps. Fed to
the lexical and dense legs as they are, every log looks like every other log. This module keeps what
carries the failure (error lines are found by ``indexer.signatures.error_lines``) and the user's own
sentences, and says when a log has no failure line at all, so the lookup can answer "nothing failed
here" instead of guessing.

A pasted bug report is read by its markdown structure too: template headings, checklists, HTML comments
and ``<details>`` markup are dropped, and an environment section (``collect_env`` output, OS, GPU,
package versions) is context, never the user's account of the failure.

One pass over the lines, each cut to ``MAX_LINE`` and checked with a few anchored patterns, and at most
``MAX_LINES`` lines looked at: linear in the input, whatever it holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from indexer.signatures import LLAMA_STAMP, MAX_LINE, QUOTE_MARK, TRACE_FRAME

MAX_LINES = 20_000
"""Lines of an input that are classified; a 1 MB log rarely has more, and its failure sits at the end."""
MAX_PROSE_CHARS = 600
"""The user's own sentences kept for the query text, at most this long together."""

# A line that starts like a log record: a timestamp, a level, a process tag or a container prefix.
_DECORATED = re.compile(
    r"^\s{0,8}(?:\(\w[\w ]{0,40}pid=\d|\[?\d{2,4}[-/:]\d\d|\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"
    r"|time=|level=|[\w.-]{1,40} {0,12}\| |[A-Z][a-z]{2} [ \d]\d \d\d:"
    # A bracketed source, logger or level tag (``[api_server.py:1839]``, ``[TP0]``, ``[GIN] 2025/..``,
    # ``[I]``); a bracketed word before plain words is an issue title's tag (``[Bug] ...``), not a record.
    r"|\[(?=[^\]]{0,40}[\d.:/_-])[\w .:/-]{1,40}\] |\[[A-Za-z ]{1,40}\] (?=\d)|\[[A-Z]\] "
    # A C-style "function: message" record (llama.cpp: ``srv    load_model: ...``, ``ggml_cuda_init: ...``).
    r"|[a-z]{2,12} {1,12}[a-z_]{2,40}: |[a-z][a-z0-9]{1,20}_[a-z0-9_]{1,40}: |[a-z]{2,12}: "
    # llama.cpp's common log: its timestamp and a one-letter level.
    rf"|{LLAMA_STAMP}[IWED] )"
)
_INFO = re.compile(rf"(?:^|[\s\[(])(?:INFO|DEBUG|level=INFO|level=DEBUG|\[I\])(?:[\s\]):]|$)|^{LLAMA_STAMP}[ID] ")
# Lines that are never the failure, whatever words they hold: records that start like an env dump, a
# package list, Gin's access log or llama.cpp's timings, and records holding a metrics or access-log phrase.
_BOILERPLATE_START = re.compile(
    r"\s{0,4}[A-Z][A-Z0-9_]{2,60}=\S|\s{0,4}[\w.-]{2,60}\s{2,40}v?\d{1,4}\.\d"
    r"|\[GIN\] .{0,40}\| {0,3}[23]\d\d \|"  # Gin's access log (Ollama) for a 2xx/3xx answer
    r"|\s{0,12}(?:prompt )?eval time = "  # llama.cpp's per-request timings
)
_BOILERPLATE_ANYWHERE = re.compile(
    r"throughput: \d|KV cache usage|Running: \d{1,6} reqs|prefix cache hit rate"
    r"|(?:Prefill|Decode) batch[.,] #|throughput \(token/s\): \d"  # SGLang's batch metrics
    r"|\| (?:prompt )?eval time = "  # llama.cpp's per-request timings inside a slot record
    r'|"(?:GET|POST|PUT|DELETE|PATCH) \S{1,300} HTTP/\d(?:\.\d)?" [23]\d\d'
)
_ANYWHERE_LITERALS = (
    "throughput: ",
    "KV cache usage",
    "Running: ",
    "prefix cache hit rate",
    " HTTP/",
    "Prefill batch",
    "Decode batch",
    "throughput (token/s): ",
    "eval time = ",
)
"""One of these is in every match of ``_BOILERPLATE_ANYWHERE``: a line without any is not searched."""
_INFO_LITERALS = ("INFO", "DEBUG", "[I]", " I ", " D ")
"""One of these is in every match of ``_INFO``."""


# An environment dump: aligned "Key      : value" (collect_env), "Key:     value" (lscpu), a package
# list ("[pip3] torch==2.8.0"), a rule of "=" between its sections. Each holds one of _DUMP_LITERALS.
_DUMP = re.compile(
    r"\s{0,4}[A-Za-z][\w .()/+-]{0,60}?\s{2,}: |\s{0,4}[A-Z][\w .()/+-]{1,40}:\s{3,}\S"
    r"|\[(?:pip3?|conda)\] |={5,}\s*$"
)
_DUMP_LITERALS = ("  : ", ":   ", "[pip", "[conda] ", "=====")


def _env_dump(line: str) -> bool:
    return any(literal in line for literal in _DUMP_LITERALS) and _DUMP.match(line) is not None


def _boilerplate(line: str) -> bool:
    return _BOILERPLATE_START.match(line) is not None or (
        any(literal in line for literal in _ANYWHERE_LITERALS) and _BOILERPLATE_ANYWHERE.search(line) is not None
    )


def _info(head: str) -> bool:
    return any(literal in head for literal in _INFO_LITERALS) and _INFO.search(head) is not None


# A bug report's markdown structure. A short heading is a template's section name ("### Describe the
# bug", "**Environment**"; "# x" is left alone: in a pasted script it is a comment); a line of markup (a
# checklist item, a fence, <details>, an HTML comment, an issue form's empty field) says nothing about
# the failure.
_HEADING = re.compile(r"^\s{0,3}(?:#{2,6}\s+(.{1,80}?)\s*#*\s*$|\*\*([^*]{2,60})\*\*:?\s*$)")
_MARKUP = re.compile(
    r"^\s{0,3}(?:</?(?:details|summary|br|p|pre|code)\b|<!--|-->|`{3}|~{3}|[-*+] \[[ xX]\] |_No response_\s*$)"
)
_MARKDOWN_START = "#*<`~+_-"
"""The first character of every line ``_HEADING`` or ``_MARKUP`` matches (or an HTML comment opens)."""
# Section names (and <summary> texts) whose lines describe the machine, not the failure: an issue
# template's environment fields (vLLM's collect_env, Ollama's OS/GPU/CPU/version, llama.cpp's "Name and
# Version", SGLang's "Environment").
_ENV_SECTION = re.compile(
    r"environment|system info|collect_env|\bversions?\b|\bos\b|operating systems?|\b[gc]pus?\b|hardware"
    r"|platform|packages|dependencies|\bsetup\b",
    re.I,
)
_WORD = re.compile(r"[A-Za-z][a-z']{1,30}")
_CODE_LIKE = re.compile(
    r"^\s{0,8}(?:File \"|at |\$ |>>>|#|//|\{|\}|\[|\]|def |class |import |from \S+ import|Traceback \(most recent)"
)
# A command line (``vllm serve ... --chat-template x``, after a shell prompt ``user@host:~/dir# ``):
# context, not the user's account of the failure. A program's name opens one only before one of its
# subcommands or an option ("docker run", "python -m"): "docker for llama server crashing" is a sentence.
# So is a subcommand that English goes on from ("vllm serve never starts", "docker run fails with ..."):
# a command's next word is an argument, never one of these function words or verbs of a report.
_SENTENCE_GOES_ON = (
    r"never|not|no|still|always|only|just|also|then|now|does|doesn't|did|didn't|do|don't|is|isn't|was|wasn't"
    r"|are|won't|can't|cannot|will|would|keeps|kept|fails|failed|hangs|hung|crashes|crashed|works|worked"
    r"|stops|stopped|exits|exited|dies|died|gives|gave|returns|returned|throws|threw|starts|started|seems"
    r"|with|when|after|before|and|but|or|because|since|on|in|for|to|of|the|a|an|it|this|that"
)
_COMMAND = re.compile(
    r"(?:^|\s)--[a-z][\w-]{1,40}|^\s{0,8}(?:sudo|export) "
    r"|^\s{0,8}(?:python3? (?:-\w|\S{1,200}\.py\b)|curl (?:-|https?:))"
    r"|^\s{0,8}(?:docker (?:run|compose|exec|logs|pull|build|start|stop|ps)"
    r"|pip3? (?:install|show|list|freeze|uninstall)|uv (?:pip|run|sync|venv|add)"
    r"|vllm (?:serve|bench|run-batch|chat|complete|-)|ollama (?:run|serve|pull|create|show|ps|list|-))\b"
    rf"(?!\s+(?:{_SENTENCE_GOES_ON})\b(?!['-]))"
    r"|^\s{0,8}[\w.-]{1,40}@[\w.-]{1,64}:\S{0,200}[#$] "
)
# A stack frame of a compiled program: an address (``+0x21f``, ``[0x72edb99cd82f]``, ``0x7fac7ac778fd``),
# C++ scope (``tensorrt_llm::common``) or a Go method (``cobra.(*Command).Execute(``).
_NATIVE_FRAME = re.compile(r"\+0x[0-9a-f]{1,16}\b|\b0x[0-9a-f]{6,16}\b|\w::\w|\.\(\*?\w{1,60}\)\.\w")


@dataclass
class Distilled:
    """What a pasted text says once the boilerplate is gone."""

    prose: list[str] = field(default_factory=list)
    """The user's own sentences (undecorated lines that read as words, not code or log records)."""
    log_lines: int = 0
    """Lines that look like log records."""
    dropped: int = 0
    """Boilerplate lines dropped (INFO/DEBUG records, metrics, access logs with 2xx/3xx, env dumps)."""
    kept: list[str] = field(default_factory=list)
    """Lines neither boilerplate nor prose (commands, warnings, context) in input order, capped."""
    plain: list[str] = field(default_factory=list)
    """The kept lines that neither start like a log record nor continue one (indented): text the user
    wrote or pasted among the records (a command with a remark, a title, a quoted reply), in input order."""
    environment: list[tuple[int, int]] = field(default_factory=list)
    """Line spans ``[start, end)`` of a bug report's environment sections, their headings included."""

    def _in_environment(self, number: int) -> None:
        if self.environment and self.environment[-1][1] == number:
            self.environment[-1] = (self.environment[-1][0], number + 1)
        else:
            self.environment.append((number, number + 1))

    @property
    def is_log_dump(self) -> bool:
        """True when most of the input is log records: a pasted log rather than a message or a question.

        The records are weighed against what stands outside them: the user's sentences and the undecorated
        lines among the records (``plain``). A record kept as a failure line, or a line indented under a
        record (a relayed traceback), is part of the log, not evidence against it.
        """
        return self.log_lines >= 5 and self.log_lines >= len(self.prose) + len(self.plain)


_MARKER = re.compile(r"<\|[a-z_]{1,20}\|>")
"""A Harmony special-token marker (``<|channel|>``): a word the user quotes, not record syntax."""


# A fence whose info string names a programming or data language: its lines are code, not sentences.
_CODE_FENCE = re.compile(
    r"^(?:`{3,}|~{3,})\s*(?:python|py|python3|json|jsonc|javascript|js|typescript|ts|bash|sh|shell|zsh|console"
    r"|yaml|yml|toml|ini|go|golang|rust|java|kotlin|c|cpp|c\+\+|csharp|cs|dockerfile|docker|jinja2?|sql)\b",
    re.I,
)
# An issue title's tag ("[Bug]: ...", "[Usage] ..."), which _CODE_LIKE would take for a JSON list.
_TITLE_TAG = re.compile(r"^\s{0,3}\[[^\]\n\[{}\"']{1,24}\]:?\s+(?=\S)")
_OPTION_START = re.compile(r"^\s{0,8}--?[A-Za-z]")
_RELEASE = re.compile(r"\bv?\d{1,4}\.\d{1,4}\.\d{1,6}\b")
"""A release number a sentence names ("since Ollama 0.11.11"): words, not symbols."""
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
"""A kana, CJK ideograph or Hangul syllable."""


# The lines under pydantic's "N validation errors for X": each field's message and its type tag
# ("Field required [type=missing, input_value=..., input_type=dict]"), then the docs link. The library's.
_PYDANTIC_DETAIL = re.compile(r"\[type=[\w.]{1,60}(?:, input_value=|\])|errors\.pydantic\.dev/")


def _is_prose(line: str, first: bool = False) -> bool:
    """``first``: the input's first line, where a report's title stands (its tag is not code there)."""
    if ("[type=" in line or "pydantic.dev" in line) and _PYDANTIC_DETAIL.search(line):
        return False
    line = QUOTE_MARK.sub("", line, count=1)
    if first:
        line = _TITLE_TAG.sub("", line, count=1)
    if line.rstrip().endswith("\\") or _OPTION_START.match(line):
        return False  # a command's continued line or its options ("-v /srv/x:/x \\")
    if _CODE_LIKE.match(line) or _COMMAND.search(line) or _NATIVE_FRAME.search(line):
        return False
    line = _MARKER.sub(" marker ", line)
    words = _WORD.findall(line)
    # Chinese, Japanese and Korean sentences have few or no spaced words: their characters count instead.
    cjk = len(_CJK.findall(line)) if not line.isascii() else 0
    if len(words) < 5 and cjk < 6:
        return False
    # Mostly words, few symbols: a sentence, not a record, a dict dump or a path.
    letters = sum(len(w) for w in words) + cjk + sum(len(v) for v in _RELEASE.findall(line))  # "since 0.11.11"
    # Structural symbols only: a sentence may quote a field (``reasoning_content``), a path or a value.
    symbols = sum(1 for c in line if c in "{}[]()=<>\\|;")
    return letters >= 0.6 * len(line.strip()) and symbols <= 0.1 * len(line)


# What a log collector puts before every line it relays: docker compose's service column, a timestamp
# (``kubectl logs --timestamps``, ``docker logs -t``), journald's or syslog's header. The record under it
# is the engine's own line, which the patterns here and in indexer.signatures read.
_COLLECTORS = (
    re.compile(r"^[\w.-]{1,60} {0,12}\| ?", re.M),
    # kubectl logs --prefix ("[pod/name/container] "), stern's "<pod> <container> " (a pod of a
    # Deployment ends in its ReplicaSet's hash and a five-character suffix).
    re.compile(r"^\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] ", re.M),
    re.compile(r"^[a-z0-9][a-z0-9.-]{0,200}-[a-z0-9]{5} [a-z0-9][a-z0-9-]{0,62} ", re.M),
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d) ", re.M),
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w.@/-]{1,64}(?:\[\d{1,10}\])?: ", re.M),
)
COLLECTOR_SAMPLE = 400
"""Non-empty lines at the head of an input that decide whether a collector prefixed it."""
COLLECTOR_CHARS = 100_000
"""Characters of the head those lines are taken from."""
MAX_RECORD = 64_000
"""A longer line is not read as a JSON log record (a record carrying a whole traceback is far shorter)."""


_ANSI = re.compile(r"\x1b\[[0-9;?]{0,20}[A-Za-z]")
"""A terminal's colour or cursor code (``\x1b[31m``), kept by ``docker logs`` output saved to a file."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]+")
"""Control characters other than tabs and line ends, and bidirectional overrides: never part of a message."""


# LM Studio's server log writes a record on two lines: its time and level, then the message on the next
# line (``2025-08-28 01:22:58 [ERROR]`` / `` [openai_gpt-oss-20b] Failed to ...``).
_SPLIT_RECORD = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s{1,4}\[(?:INFO|ERROR|WARN|WARNING|DEBUG)\])[ \t]*\r?\n[ \t]*(?=\S)", re.M
)
SPLIT_RECORDS = 3
"""Two-line records an input needs before they are joined: a lone one may be the user's own layout."""


def _join_split_records(text: str) -> str:
    """LM Studio's two-line records as one line each (its level then stands beside its message)."""
    if "]" not in text or len(_SPLIT_RECORD.findall(text[:COLLECTOR_CHARS])) < SPLIT_RECORDS:
        return text
    return _SPLIT_RECORD.sub(r"\1 ", text)


def unwrap_log(text: str) -> str:
    """``text`` without terminal colour codes or other control characters, and without the prefix a log
    collector put on its lines when most of its lines carry one.

    Three passes at most (docker compose output with timestamps; a timestamp before a JSON record). A
    prefix on a few lines only is left: it is text the user wrote, not the collector's. A log of JSON
    records (one object per line, most lines) becomes the plain lines they stand for (``_json_record``).
    """
    if "\x1b[" in text:
        text = _ANSI.sub("", text)
    if _CONTROL.search(text) is not None:
        text = _CONTROL.sub("", text)
    text = _join_split_records(text)
    for _ in range(3):
        sample = [line for line in text[:COLLECTOR_CHARS].splitlines() if line.strip()][:COLLECTOR_SAMPLE]
        if len(sample) < 3:
            return text
        pattern = next((p for p in _COLLECTORS if _most(sample, _matcher(p))), None)
        if pattern is not None:
            text = pattern.sub("", text)
        elif _most(sample, lambda line: _json_record(line) is not None):
            text = "\n".join(_json_record(line) or line for line in text.splitlines())
        else:
            return text
    return text


def _matcher(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda line: pattern.match(line) is not None


def _most(sample: list[str], test: Callable[[str], bool]) -> bool:
    """True when at least 60% of ``sample`` passes ``test``: the collector wrote them, not the user."""
    return sum(1 for line in sample if test(line)) * 5 >= len(sample) * 3


_MESSAGE_KEYS = ("message", "msg", "log", "text", "event")
_LEVEL_KEYS = ("level", "levelname", "severity", "lvl")
_EXTRA_KEYS = ("exc_info", "exception", "stack_trace", "traceback", "stack", "error")


_NUMERIC_LEVELS = {10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARNING", 50: "ERROR", 60: "FATAL"}
"""pino's and bunyan's numeric levels (their documented scale)."""


def _level_name(value: str | int) -> str:
    """A record's level as a name: numeric levels (pino, bunyan) by their scale, bools and others as none."""
    if isinstance(value, bool):
        return ""
    return _NUMERIC_LEVELS.get(value, "") if isinstance(value, int) else value


def _json_record(line: str) -> str | None:
    """A structured log record (one JSON object per line: a JSON logging config, docker's json-file
    driver, a platform's export) as the plain line it stands for: its level, its message, then a
    traceback it carries; None when the line is not such a record."""
    if not line.lstrip().startswith("{") or len(line) > MAX_RECORD:
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    message = next((v for k in _MESSAGE_KEYS if isinstance(v := record.get(k), str)), None)
    if message is None:
        return None
    level = next((_level_name(v) for k in _LEVEL_KEYS if isinstance(v := record.get(k), str | int)), "")
    extra = next((v for k in _EXTRA_KEYS if isinstance(v := record.get(k), str) and v and v != message), "")
    head = f"{level.upper()} {message.rstrip()}" if level else message.rstrip()
    return f"{head}\n{extra.rstrip()}" if extra else head


def distill(text: str) -> Distilled:
    """Split a pasted input into the user's prose, log boilerplate (counted, dropped) and the rest."""
    out = Distilled()
    prose_chars = 0
    # Inside an environment section / a multi-line HTML comment / a fenced block (where "## x" is text).
    environment = comment = fenced = code = False  # code: the fence says its block is a program or data
    transcript = False  # a fenced block that went on from a command or a REPL prompt: a program's output
    seen_text = False  # a non-empty line came before (the first one is where a report's title stands)
    quoted = False  # the line before was a traceback frame: this one is the source code it quotes
    for number, raw in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            break
        line = raw[:MAX_LINE]
        stripped = line.strip()
        if not stripped:
            if environment:
                out._in_environment(number)
            continue
        first, seen_text = not seen_text, True
        # Markdown starts with one of these; a log record never does, so most lines skip every pattern.
        marked = stripped[0] in _MARKDOWN_START
        if comment or (marked and stripped.startswith("<!--")):
            comment = "-->" not in line
            out.dropped += 1
            continue
        heading = _HEADING.match(line) if marked and not fenced else None
        section = heading is not None and len(_WORD.findall(line)) <= 10
        markup = marked and not section and _MARKUP.match(line) is not None
        if markup and stripped.startswith(("```", "~~~")):
            fenced = not fenced
            code = fenced and _CODE_FENCE.match(stripped) is not None
            transcript = False
        if heading is not None and section:
            environment = _ENV_SECTION.search(heading.group(1) or heading.group(2) or "") is not None
        elif markup and "<summary" in line:
            environment = _ENV_SECTION.search(line) is not None
        if environment:
            out._in_environment(number)
            if markup and "</details" in line:
                environment = False
        if section or markup or environment:
            out.dropped += 1
            continue
        if len(line) < 4:
            continue
        decorated = _DECORATED.match(line) is not None
        if decorated:
            out.log_lines += 1
        if _boilerplate(line) or (decorated and _info(line[:120])) or _env_dump(line):
            out.dropped += 1
            continue
        after_frame, quoted = quoted, 'File "' in line and TRACE_FRAME.search(line) is not None
        if fenced and not transcript and (stripped.startswith(">>>") or _COMMAND.search(line)):
            transcript = True  # what follows is the session's output (a model's answer, too), not the user's
        words = not (decorated or after_frame or code or transcript) and prose_chars < MAX_PROSE_CHARS
        if words and _is_prose(line, first=first):
            out.prose.append(line.strip())
            prose_chars += len(line)
            continue
        if len(out.kept) < 200:
            out.kept.append(line.strip())
            if not decorated and not line[:1].isspace():  # an indented line continues the record above
                out.plain.append(line.strip())
    return out
