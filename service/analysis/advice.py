"""Configuration advice: server flags, request parameters, env vars and versions, each with sources.

Rules fire on what the input shows (error text, flags seen, versions) and on the curated fields of
the best hits (fix, workarounds, flags, versions). Nothing is advised without a source: an issue id
from the hits or the loaded generation's curated threads (:class:`CuratedThreads`, built once per
generation by the engine). Synced text that no card backs is never a source of advice.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from packaging.version import Version
from pydantic import BaseModel, Field

from indexer.documents import Document, ThreadKind
from indexer.signatures import normalize_signature
from indexer.trust import trust_level
from service.analysis.engine_names import engine_name
from service.analysis.engines import ThreadEngines, advised_engine, repo_engines
from service.analysis.input import ParsedInput
from service.analysis.needles import Needled, folded
from service.analysis.origin import categorize, text_window
from service.analysis.platforms import other_platform
from service.flag_names import vllm_flag
from service.models import FlagAction, FlagOut
from service.versions import parse_version

# Harmony stop tokens, as openai-harmony's HARMONY_GPT_OSS encoding reports them
# (stop_tokens_for_assistant_actions(): <|call|>, <|return|>); tests pin them to the real library.
RETURN_TOKEN, CALL_TOKEN = 200002, 200012


class Advice(BaseModel):
    """One piece of configuration advice."""

    summary: str = Field(description="What to change and why")
    flags: list[FlagOut] = Field(default=[], description="Settings to set, unset or avoid (never what was seen)")
    sources: list[str] = Field(default=[], description="Issue ids (owner/repo#N) or reference/<doc>.md#anchor")


def flag(text: str, action: FlagAction) -> FlagOut:
    """``--flag value``, ``name=value`` or a bare name as a typed setting; avoid keeps no truthy value."""
    text = text.strip().strip("`")
    if re.match(r"[\w.-]+:\s", text):  # ``name: value`` as a card quotes a request field
        text = text.replace(":", "", 1)
    if "=" in text:
        name, value = (part.strip() for part in text.split("=", 1))
    elif " " in text:
        name, value = (part.strip() for part in text.split(None, 1))
    else:
        name, value = text, ""
    if action == "avoid" and value.lower() in {"true", "1", "yes", ""}:
        return FlagOut(flag=name, action=action)
    return FlagOut(flag=name, value=value or None, action=action)


# --- what the input shows --------------------------------------------------------------------------

_CLI_FLAG = re.compile(r"--([a-z][a-z0-9_-]{1,60})(?:[= ]+([\w./:-]{1,80}))?")
_ARGS_KEY = re.compile(r"'([a-z][a-z0-9_]{1,60})':\s{0,4}'?([\w./:-]{1,80})")
_TOOL_CHOICE = Needled(
    r"(?<![\w])tool_choice[\"']?\s{0,3}[=:]\s{0,3}[\"'{]?\s{0,3}([\w\"':]{1,40})", ("tool_choice",), re.I
)


_COMMAND_LINE = Needled(
    r"\bvllm serve\b|vllm\.entrypoints|api_server\b|docker run|^\s{0,8}[$#>]\s|\bserve\s",
    ("serve", "vllm.entrypoints", "api_server", "docker run"),
    re.I,
    start=r"\s{0,8}[$#>]\s",  # a shell prompt: the one branch without a literal
)


@dataclass(frozen=True)
class InputWindow:
    """The part of an input the whole-text rules read (``text_window``) and its folded form, made once
    per lookup so each rule's needle precheck is a substring search."""

    text: str
    low: str
    engines: tuple[str, ...] = ()
    """The engines the failure names (else the input's): vLLM's flags are advice only when vLLM is one."""

    @classmethod
    def of(cls, parsed: ParsedInput) -> InputWindow:
        text, low = _window_of(parsed.text)
        return cls(text, low, tuple(parsed.failure_engines or parsed.engines))


@functools.lru_cache(maxsize=4)
def _window_of(text: str) -> tuple[str, str]:
    """An input's window and its folded form: the advice and the diagnosis of one lookup both read them."""
    window = text_window(text)
    return window, folded(window)


def _command_lines(window: InputWindow) -> list[str]:
    """The lines of ``window`` that ``_COMMAND_LINE`` matches; a line is searched only when it could match.

    ``folded`` keeps an input's lines (see its docstring), so the text's and the folded form's lines pair up.
    """
    lines = zip(window.text.splitlines(), window.low.splitlines(), strict=True)
    return [line for line, low in lines if _COMMAND_LINE.search(line, low)]


def seen_flags(parsed: ParsedInput) -> dict[str, str]:
    """Server flags and request params the input shows: ``{"tool-call-parser": "openai", ...}``.

    CLI flags count only on command lines (an error message that names a flag is not a setting);
    ``'key': value`` pairs count anywhere (vLLM's "non-default args" and sampling-params dicts).
    The diagnosis and the advice of one lookup both ask: the input is read once (a copy each time).
    """
    return dict(_seen_flags(parsed.text, tuple(parsed.flags)))


@functools.lru_cache(maxsize=4)
def _seen_flags(text: str, parsed_flags: tuple[str, ...]) -> dict[str, str]:
    window = InputWindow(*_window_of(text))
    found: dict[str, str] = {}
    # parse_input's flags are spelled as their program reads them already; a raw command line of vLLM's is
    # read as vLLM reads it (--tool_call_parser is --tool-call-parser), another program's as written.
    lines = [
        *((flag, False) for flag in parsed_flags),
        *((line, "vllm" in line.lower()) for line in _command_lines(window)),
    ]
    for line, ours in lines:
        for match in _CLI_FLAG.finditer(line):
            value = match.group(2) or "true"
            name = vllm_flag("--" + match.group(1))[2:] if ours else match.group(1)
            found.setdefault(name, "true" if value.startswith("-") else value)
    for match in _ARGS_KEY.finditer(window.text):
        found.setdefault(match.group(1).replace("_", "-"), match.group(2))
    windows = [window.text] if _TOOL_CHOICE.possible(window.low) else []
    for source in [*parsed_flags, *windows]:
        for match in _TOOL_CHOICE.pattern.finditer(source):
            found.setdefault("tool-choice", match.group(1).strip("\"'{ ").lower())
    return found


# A report that tool calls come back right in one of the two modes (streaming, or not): vLLM parses tool calls
# in both with the same --tool-call-parser, so the parser is on, and advice to turn it on contradicts the
# report. One clause names the tool calls, the mode and that they work, with no negation in it; a contrast
# ("... but", "; non-streaming they do not") starts another clause.
_MODE_WORD = re.compile(r"stream", re.I)
_WORKS_WORD = re.compile(r"\b(?:works?|working|correctly|properly|fine|as expected)\b", re.I)
_NOT_WORD = re.compile(r"\b(?:not|no|never|neither|nor|cannot|except)\b|n't\b|\bfail", re.I)
_CLAUSE_END = re.compile(r"[.!?;](?:\s|$)|\n|,?\s(?:but|while|whereas|however)\b", re.I)


def tool_calls_work_in_a_mode(prose: Sequence[str]) -> bool:
    """True when a clause of the user's own sentences (``ParsedInput.prose``; a log's lines are not the user's
    report) says tool calls work in the streaming or the non-streaming mode."""
    for sentence in prose:
        low = sentence.lower()
        if "stream" not in low or "tool" not in low:
            continue
        for clause in _CLAUSE_END.split(sentence):
            if "tool" not in clause.lower() or not _MODE_WORD.search(clause) or not _WORKS_WORD.search(clause):
                continue
            if not _NOT_WORD.search(clause):
                return True
    return False


def settings_in_effect(parsed: ParsedInput) -> dict[str, str]:
    """:func:`seen_flags`, plus the tool-call parser a vLLM input shows on without naming it: tool calls that
    work in one mode (:func:`tool_calls_work_in_a_mode`). What the diagnosis and the advice leave out as set."""
    flags = seen_flags(parsed)
    engines = parsed.failure_engines or parsed.engines
    if (not engines or "vllm" in engines) and tool_calls_work_in_a_mode(parsed.prose):
        flags.setdefault("tool-call-parser", "openai")
        flags.setdefault("enable-auto-tool-choice", "true")
    return flags


def shows_set(shown: dict[str, str], name: str, value: str | None) -> bool:
    """True when the settings the input shows (:func:`settings_in_effect`) set ``name`` (no dashes) to ``value``
    (letter case aside), or set it at all when ``value`` is None."""
    have = shown.get(name)
    return have is not None and (value is None or have.lower() == value.lower())


def user_vllm_version(parsed: ParsedInput) -> str | None:
    """The vLLM version the input shows (from the parser, or the API server's start-up line)."""
    if parsed.versions.get("vllm"):
        return parsed.versions["vllm"]
    match = re.search(
        r"\bvLLM\b[\w ]{0,20}? version (\S{1,80})|vllm[=/ -]{1,3}v?(\d{1,4}\.\d{1,4}(?:\.\d{1,6})?\S{0,40})",
        text_window(parsed.text),
    )
    if match:
        return match.group(1) or match.group(2)
    return None


# --- what the KB knows -------------------------------------------------------------------------------

_MIN_VERSION = re.compile(
    r"(?:vLLM|vllm)\s(?:version\s)?v?(\d+\.\d+(?:\.\d+)?)\s(?:or newer|or later|and (?:newer|later))"
    r"|(?:only exists|available|supported) (?:from|since) (?:vLLM\s)?v?(\d+\.\d+(?:\.\d+)?)"
    r"|ship in (?:vLLM\s)?v?(\d+\.\d+(?:\.\d+)?)|fixed in (?:vLLM\s|release\s)?v?(\d+\.\d+(?:\.\d+)?)"
)


def fixing_version(doc: Document) -> str | None:
    """The vLLM version a card says fixes (or first supports) what it describes, if it says one."""
    if doc.repo not in {"vllm-project/vllm", "vllm-project/recipes"}:
        return None
    for text in (doc.fix, doc.summary):
        if text and (match := _MIN_VERSION.search(text)):
            return next(g for g in match.groups() if g)
    return None


class CuratedThreads:
    """The curated threads of one index generation (trust level ``curated``: a KB card backs them), as
    advice reads them. Built once per generation; what a rule pattern finds is kept for the generation.

    Only curated fields are read (fix, workarounds, flags and their roles, error strings, summary,
    state); threads no card backs (synced maintainer or community text) are left out. Ties are broken
    by id, so the result does not depend on the order the store returns documents in.
    """

    def __init__(self, documents: Iterable[Document]) -> None:
        threads = sorted((d for d in documents if d.is_thread and trust_level(d) == "curated"), key=lambda d: d.id)
        self.by_id: dict[str, Document] = {d.id: d for d in threads}
        self._sources: dict[tuple[str, int], tuple[str, ...]] = {}
        self._min_version: dict[str, tuple[str, str] | None] = {}
        # Threads with a workaround or a confirmed fix, with their normalised error strings (30+ chars):
        # normalising every thread's strings on each lookup was a tenth of its time.
        actionable = []
        for doc in threads:
            if not (doc.workarounds or (doc.fix and doc.fix_confirmed)):
                continue
            keys = tuple(k for k in (normalize_signature(sig) for sig in doc.error_signatures) if len(k) >= 30)
            if keys:
                actionable.append((doc, keys))
        self.actionable: tuple[tuple[Document, tuple[str, ...]], ...] = tuple(actionable)

    def get(self, doc_id: str) -> Document | None:
        return self.by_id.get(doc_id)

    def sources(self, pattern: str, limit: int = 3) -> list[str]:
        """Threads that back ``pattern``: a confirmed fix or a workaround naming it first, bare flags last."""
        key = (pattern, limit)
        found = self._sources.get(key)
        if found is None:
            found = self._sources[key] = self._scan_sources(pattern, limit)
        return list(found)

    def _scan_sources(self, pattern: str, limit: int) -> tuple[str, ...]:
        # The patterns are the rules' constants: each is scanned once per generation, not per lookup.
        rx = re.compile(pattern, re.I)
        scored: list[tuple[int, Document]] = []
        for doc in self.by_id.values():
            in_fix = bool(doc.fix and rx.search(doc.fix)) and doc.fix_confirmed
            in_workaround = any(rx.search(t) for t in doc.workarounds)
            in_flags = any(rx.search(t) for t in doc.flags) and doc.fix_confirmed
            score = 3 * in_fix + 2 * in_workaround + in_flags
            if score:
                scored.append((score, doc))
        scored.sort(key=lambda item: (-item[0], item[1].state != "merged", -(item[1].number or 0), item[1].id))
        return tuple(doc.id for _, doc in scored[:limit])

    def min_version_for(self, pattern: str) -> tuple[str, str] | None:
        """The lowest vLLM version the curated threads say is needed for something matching ``pattern``."""
        if pattern not in self._min_version:
            self._min_version[pattern] = self._scan_min_version(pattern)
        return self._min_version[pattern]

    def _scan_min_version(self, pattern: str) -> tuple[str, str] | None:
        # Among threads naming the same lowest version, a merged PR with a confirmed fix is cited first
        # (an open PR or an issue only reports the version), then the lowest id.
        rx = re.compile(pattern, re.I)
        best: tuple[tuple[Version, bool, bool, str], str] | None = None
        for doc in self.by_id.values():
            version = fixing_version(doc)
            if version is None or not any(rx.search(t) for t in [doc.fix or "", doc.summary or "", *doc.flags]):
                continue
            parsed = parse_version(version)
            if parsed is None:
                continue
            key = (parsed, doc.state != "merged", not doc.fix_confirmed, doc.id)
            if best is None or key < best[0]:
                best = (key, version)
        return (best[1], best[0][3]) if best else None


def _hit_sources(hits: Sequence[Document], pattern: str) -> list[str]:
    rx = re.compile(pattern, re.I)
    return [
        h.id
        for h in hits
        if any(rx.search(t) for t in [*h.flags, *h.workarounds, h.fix or "", h.summary or "", h.title])
    ]


def _unique(ids: Sequence[str]) -> list[str]:
    """``ids`` in their order without repeats: a source cited twice in one piece of advice adds nothing."""
    return list(dict.fromkeys(ids))


def _sources(hits: Sequence[Document], pattern: str, kb: CuratedThreads, limit: int = 3) -> list[str]:
    ids = _hit_sources(hits, pattern)
    for extra in kb.sources(pattern, limit):
        if extra not in ids:
            ids.append(extra)
    return ids[:limit]


# --- rules ---------------------------------------------------------------------------------------------

# Each rule pattern scans the whole input; its needles (service/analysis/needles.py) skip it on a log that
# cannot match, which is most logs for most rules.
_OTHER_ENGINE = Needled(
    r"\bollama\b|\bsglang\b|llama\.cpp|\blm ?studio\b|tensorrt|\bmlx\b|\bvmlx\b",
    ("ollama", "sglang", "llama.cpp", "studio", "tensorrt", "mlx"),
    re.I,
)
# vLLM by name, or by text only vLLM prints (its flag names, module names, process tags).
_VLLM = Needled(
    r"\bvllm\b|--enable-auto-tool-choice|--tool-call-parser|serving_chat|serving_responses|harmony_utils"
    r"|\(APIServer pid=|\(EngineCore",
    (
        "vllm",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "serving_chat",
        "serving_responses",
        "harmony_utils",
        "(apiserver pid=",
        "(enginecore",
    ),
    re.I,
)
_REQUEST_BODY = '"messages"'
_TOOLS_KEYS = ('"tools"', "'tools'", "tools=", "tools:")
# A Responses API request, log or object (the SDK's repr of one: ``Response(id='resp_...', object='response'``).
_RESPONSES_ONLY = Needled(
    r"/v1/responses|responses\.create|\bResponses API\b|serving_responses|\bResponsesRequest\b"
    r"|\bobject\s{0,2}[=:]\s{0,2}[\"']response[\"']",
    ("/v1/responses", "responses.create", "responses api", "serving_responses", "responsesrequest", "response"),
    re.I,
)
_CHAT_COMPLETIONS = Needled(
    r"chat/completions|chat\.completions|\bChatCompletion|\bchat completions?\b",
    ("chat/completions", "chat.completions", "chatcompletion", "chat completion"),
    re.I,
)
_TOOL_SYMPTOM = Needled(
    r"tool[_ ]calls?\b|tool choice|tool_choice|function calls?\b|function[ _-]?calling\b|tools array|call a function"
    r"|enable-auto-tool-choice|tool-call-parser|tool_call_parser",
    ("tool", "function"),
    re.I,
)
# A response field that holds reasoning text (``"reasoning_content": "We need ..."``) shows reasoning apart from
# the answer, which is what a reasoning parser does: it is no reasoning symptom.
_REASONING_SYMPTOM = Needled(
    r"reasoning_content(?![\"']?\s{0,3}:\s{0,3}\"[^\"])"
    r"|reasoning (?:field|text|tokens?|leaks?|shows|appears|ends up)|reasoning parser"
    r"|analysis channel|chain of thought|thinking (?:text|appears|shows|leaks)",
    ("reasoning", "analysis channel", "chain of thought", "thinking "),
    re.I,
)
_STOP_SYMPTOM = Needled(
    r"ignore_eos(?![\"']?\s{0,3}[=:]\s{0,3}[\"']?(?:false|0)\b)|min_tokens[\"']?\s{0,3}[=:]\s{0,3}[1-9]"
    r"|never stops|doesn't stop|does not stop|past (?:the )?<\|return\|>",
    ("ignore_eos", "min_tokens", "never stops", "doesn't stop", "does not stop", "<|return|>"),
    re.I,
)
_SINKS = Needled(r"attention sin|Sinks are only supported|sinks not supported", ("attention sin", "sinks"), re.I)
_RETURN_ERROR = Needled(r"Unexpected token (?:200002|200012) while expect", ("while expect",))


_GPT_OSS = Needled(r"gpt-?oss|harmony|\b(?:20|120)b\b", ("gptoss", "gpt-oss", "harmony", "20b"), re.I)
# Another model named by its id (org/name or a versioned family name), not a parser list that names one.
_OTHER_MODEL = Needled(
    r"\b(?:deepseek-ai|meta-llama|Qwen|mistralai|google|microsoft|zai-org|moonshotai)/[\w.-]{1,100}"
    r"|\b(?:DeepSeek-[RV]\d|Llama-\d|Qwen\d|Mistral-\d|gemma-\d)",
    (
        "deepseek-",
        "meta-llama/",
        "llama-",
        "qwen",
        "mistral",
        "google/",
        "microsoft/",
        "zai-org/",
        "moonshotai/",
        "gemma-",
    ),
    re.I,
)


def _vllm_context(window: InputWindow, hits: Sequence[Document]) -> bool:
    """True when vLLM flags for gpt-oss apply: not another engine, not another model family."""
    text, low = window.text, window.low
    if window.engines and "vllm" not in window.engines:
        return False  # SGLang and lmdeploy take a --tool-call-parser too: the flag's name does not make it vLLM
    if _OTHER_MODEL.search(text, low) and not _GPT_OSS.search(text, low):
        return False
    if _VLLM.search(text, low):
        return True
    if _OTHER_ENGINE.search(text, low):
        return False
    return not hits or hits[0].repo in {"vllm-project/vllm", "vllm-project/recipes", "openai/harmony", None}


def _tool_parser_advice(
    parsed: ParsedInput,
    window: InputWindow,
    hits: Sequence[Document],
    kb: CuratedThreads,
    flags: dict[str, str],
    category: str,
) -> list[Advice]:
    text = window.text
    # The input's own words must name tools or function calls: a tool-calling thread among the hits is not
    # enough (a report of a dropped answer, with no tools in its request, is no parser question).
    wants_tools = bool(_TOOL_SYMPTOM.search(text, window.low))
    if not wants_tools or not _vllm_context(window, hits):
        return []
    if _REQUEST_BODY in window.low and not any(key in window.low for key in _TOOLS_KEYS):
        return []  # a pasted request that sends no tools: the parser has no call to parse
    if _RESPONSES_ONLY.search(text, window.low) and not _CHAT_COMPLETIONS.search(text, window.low):
        # vLLM's Responses API builds gpt-oss tool calls from the Harmony messages (HarmonyContext), not with
        # the Chat Completions tool-call parser (read in the release packages).
        return []
    has_parser = flags.get("tool-call-parser", "").lower() == "openai"
    has_auto = "enable-auto-tool-choice" in flags and flags["enable-auto-tool-choice"].lower() not in {
        "false",
        "0",
    }
    advice: list[Advice] = []
    minimum = kb.min_version_for(r"tool-call-parser openai")
    version = user_vllm_version(parsed)
    if not (has_parser and has_auto):
        missing = [
            f
            for f, ok in (("--tool-call-parser openai", has_parser), ("--enable-auto-tool-choice", has_auto))
            if not ok
        ]
        # "Not seen" in a command the input shows is a finding; with no command in the input it is only a check.
        lead = (
            f"Start vLLM with `--tool-call-parser openai --enable-auto-tool-choice` (not seen: {', '.join(missing)})"
            if command_shown(parsed)
            else "Check that vLLM runs with `--tool-call-parser openai --enable-auto-tool-choice` (the input shows "
            "no server command)"
        )
        summary = (
            f"{lead}: without them gpt-oss tool calls are not parsed into `tool_calls` and arrive as text, or "
            'requests with tool_choice "auto" are rejected.'
        )
        if minimum:
            summary += f" The `openai` tool-call parser needs vLLM >= {minimum[0]}."
        advice.append(
            Advice(
                summary=summary,
                flags=[flag("--tool-call-parser openai", "set"), flag("--enable-auto-tool-choice", "set")],
                sources=_unique(
                    _sources(hits, r"enable-auto-tool-choice|tool-call-parser[ =]openai", kb)
                    + ([minimum[1]] if minimum else [])
                ),
            )
        )
    invalid_parser = re.search(r"invalid tool call parser: openai", text)
    if minimum and (invalid_parser or (version and _older(version, minimum[0]) and has_parser)):
        shown = f"your vLLM {version}" if version else "this vLLM"
        advice.append(
            Advice(
                summary=f"Upgrade vLLM to {minimum[0]} or newer: {shown} does not have the "
                "`openai` tool-call parser "
                "that gpt-oss tool calling needs.",
                sources=_unique([minimum[1], *_hit_sources(hits, r"invalid tool call parser")])[:3],
            )
        )
    return advice


def _older(version: str, minimum: str) -> bool:
    have, need = parse_version(version), parse_version(minimum)
    return have is not None and need is not None and have < need


def _tool_choice_advice(
    parsed: ParsedInput, hits: Sequence[Document], kb: CuratedThreads, flags: dict[str, str]
) -> list[Advice]:
    choice = flags.get("tool-choice")
    if choice is None or choice in {"true", "false"} or choice.startswith(("auto", "none")):
        return []
    return [
        Advice(
            summary=f"tool_choice={choice!r} is not reliably enforced for gpt-oss on vLLM: the `openai` tool "
            'parser handles tool_choice "auto"; "required" put a JSON array in content on 0.10.1-0.11.x, was '
            "not enforced on 0.12.0-0.26.x (v0.20.1 in vllm#44216, open) and is forced from 0.27.0 with both "
            "tool flags; the Responses API refused it before vllm#45560 (0.27.0). Validate tool calls on the "
            'client or send tool_choice "auto" with clear instructions; on builds with vllm#45560 and '
            "vllm#52222 (0.29.0), function tools declared strict get grammar-constrained calls under auto "
            "(the release behaviour read in vLLM's published packages).",
            flags=[flag("tool_choice=auto", "set")],
            sources=_sources(hits, r"tool_choice\W{0,3}(?:required|auto)|only supports auto", kb),
        )
    ]


def _reasoning_advice(
    window: InputWindow, hits: Sequence[Document], kb: CuratedThreads, flags: dict[str, str], category: str
) -> list[Advice]:
    if not (category == "reasoning-output" or _REASONING_SYMPTOM.search(window.text, window.low)):
        return []
    if not _vllm_context(window, hits):
        return []
    return [
        Advice(
            summary="On vLLM, Chat Completions and the Responses API return gpt-oss reasoning apart from the "
            "answer with or without `--reasoning-parser` (read in the release packages). Raw analysis text in "
            "`content` comes from `/v1/completions` or offline generation (parse those tokens with "
            "openai-harmony) or from a streamed chunk that crosses channels; and a client must read the field "
            "your vLLM returns (`reasoning`, or `reasoning_content` on older builds).",
            sources=[REASONING_SECTION],
        )
    ]


REASONING_SECTION = "reference/known-issues.md#reasoning-appears-in-content"
"""The reference section behind the reasoning advice: it cites the threads and the release packages that
show the split (vllm-project/vllm#22334, #22337); no card's fix field carries that, and the threads that
match the input's words are often other reasoning bugs."""


def _vocab_advice(parsed: ParsedInput, hits: Sequence[Document], kb: CuratedThreads, category: str) -> list[Advice]:
    if category != "vocab-download":
        return []
    return [
        Advice(
            summary="Provide the Harmony vocabulary offline: put `o200k_base.tiktoken` (sha256 "
            "446a9538…1a2d) in a "
            "local folder and set `TIKTOKEN_ENCODINGS_BASE=<that folder>` in the server's "
            "environment before it "
            "starts, so openai-harmony does not try to download it. `gptoss-doctor vocab export DIR` "
            "writes the verified file and prints that line.",
            flags=[flag("TIKTOKEN_ENCODINGS_BASE", "set")],
            sources=_sources(hits, r"TIKTOKEN_ENCODINGS_BASE", kb),
        )
    ]


def _stop_advice(
    window: InputWindow, hits: Sequence[Document], kb: CuratedThreads, flags: dict[str, str]
) -> list[Advice]:
    text, low = window.text, window.low
    ignore_eos = flags.get("ignore-eos", "false").lower() not in {"false", "0"}
    if not (_RETURN_ERROR.search(text, low) or _STOP_SYMPTOM.search(text, low) or ignore_eos):
        return []
    return [
        Advice(
            summary="Do not send `ignore_eos` (or a `min_tokens` that forces generation past "
            "the end) to gpt-oss: "
            f"the model then writes past <|return|> ({RETURN_TOKEN}) / <|call|> ({CALL_TOKEN}) "
            "and the Harmony parser "
            "rejects the extra token. Keep the model's generation_config.json eos_token_id list (it includes "
            f"{RETURN_TOKEN} and {CALL_TOKEN}) so the server stops there.",
            flags=[flag("ignore_eos", "avoid"), flag("min_tokens", "avoid")],
            sources=_sources(hits, r"ignore_eos", kb),
        )
    ]


def _attention_advice(window: InputWindow, hits: Sequence[Document], kb: CuratedThreads, category: str) -> list[Advice]:
    if not (category == "attention-backend" and _SINKS.search(window.text, window.low)) or not _vllm_context(
        window, hits
    ):
        return []
    return [
        Advice(
            summary="gpt-oss needs attention sinks, which this attention backend (or GPU) does "
            "not provide: select "
            "vLLM's Triton attention backend, which supports them: `--attention-backend TRITON_ATTN` "
            "(0.13.0 and later; the variable is not read from 0.15.0), `VLLM_ATTENTION_BACKEND=TRITON_ATTN` "
            "before 0.13.0, `TRITON_ATTN_VLLM_V1` on 0.10.x (read in vLLM's published packages).",
            flags=[
                flag("--attention-backend TRITON_ATTN", "set"),
                flag("VLLM_ATTENTION_BACKEND=TRITON_ATTN", "set"),
            ],
            sources=_sources(hits, r"TRITON_ATTN", kb),
        )
    ]


def _same_error_cards(
    parsed: ParsedInput, hits: Sequence[Document], kb: CuratedThreads, limit: int = 2
) -> list[Document]:
    """Curated threads that quote the input's exact error string and say what to do about it."""
    if not parsed.normalized:
        return []
    shown = [n for n in parsed.normalized[:10] if len(n) >= 30]
    if not shown:
        return []
    have = {h.id for h in hits}
    found: list[Document] = []
    for doc, keys in kb.actionable:
        if doc.id in have:
            continue
        if any(key in s or s in key for key in keys for s in shown):
            found.append(doc)
    found.sort(key=lambda d: (not d.fix_confirmed, -len(d.workarounds), d.id))
    return found[:limit]


def _version_advice(parsed: ParsedInput, hits: Sequence[Document], kb: CuratedThreads) -> list[Advice]:
    version = user_vllm_version(parsed)
    advice: list[Advice] = []
    for doc in hits:
        fixed_in: tuple[str, str] | None = None
        own = fixing_version(doc)
        if own:
            fixed_in = (own, doc.id)
        for pr in doc.fixed_by:
            card = kb.get(pr)
            if fixed_in is None and card is not None and card.state == "merged" and (v := fixing_version(card)):
                fixed_in = (v, pr)
        if fixed_in is None:
            reported = [
                v for v in doc.versions.get("vllm", []) if version and parse_version(v) == parse_version(version)
            ]
            if reported and doc.state == "open":
                advice.append(
                    Advice(
                        summary=f"{doc.id} was reported on vLLM {reported[0]}, your version, and "
                        "is still open: no "
                        "released fix is known to the KB.",
                        sources=[doc.id],
                    )
                )
            continue
        target, source = fixed_in
        if version is None:
            summary = f"The KB says {source} ships in vLLM {target}: for {doc.id} use vLLM {target} or newer."
        elif _older(version, target):
            summary = (
                f"Your vLLM {version} is older than {target}, the first release with {source}: "
                "you are affected by "
                f"{doc.id}; upgrade to {target} or newer."
            )
        else:
            summary = f"Your vLLM {version} already has {source} (vLLM {target}): not the cause here."
        advice.append(Advice(summary=summary, sources=sorted({doc.id, source})))
    return advice


def card_flags(doc: Document) -> list[FlagOut]:
    """The flags a card says to set (role fix) or to avoid (role avoid); context flags are what a
    reporter ran, and a flag without a role counts as context: neither is ever advice."""
    out: list[FlagOut] = []
    for text in doc.flags:
        role = doc.flag_roles.get(text, "context")
        if role == "fix":
            out.append(flag(text, "set"))
        elif role == "avoid":
            out.append(flag(text, "avoid"))
    return out


COMMAND_SHOWN_FLAGS = 2
"""Options read off the input's command lines from which the command counts as shown in full: an option it
lacks is one the user did not pass (one option is a mention, not a command)."""


def command_shown(parsed: ParsedInput) -> bool:
    """True when the input shows the server's command (or its options): an option it lacks is one the user did
    not pass."""
    return sum(f.startswith("--") for f in parsed.flags) >= COMMAND_SHOWN_FLAGS


def _moot(item: FlagOut, shown: dict[str, str], shows_command: bool) -> bool:
    """True when the input shows the setting already as the card wants it: a flag to set, set to that value;
    a command-line option to avoid, absent from the command the input shows."""
    name = item.flag.lstrip("-")
    if item.action == "set":
        return shows_set(shown, name, item.value)
    if item.action != "avoid" or not shows_command or not item.flag.startswith("--"):
        return False
    return not shows_set(shown, name, item.value)


_UNSETS = re.compile(r"\b(?:not|avoid|without|remove|drop|instead|unset|disable|leave out)\b|n't\b", re.I)


def _sets_only_what_is_set(step: str, shown: dict[str, str]) -> bool:
    """True when every option a step names with a value (``use --reasoning-parser openai_gptoss``) is one the
    input shows set to that value: the step asks for nothing the user has not done."""
    matches = list(_CLI_FLAG.finditer(step))
    if any(_UNSETS.search(step[max(0, m.start() - 30) : m.start()]) for m in matches):
        return False  # "do not force --attention-backend flashinfer": asks to undo what is set
    return bool(matches) and all(m.group(2) is not None and shows_set(shown, m.group(1), m.group(2)) for m in matches)


def _names_flag(step: str, item: FlagOut) -> bool:
    """True when ``step`` names the option as the card avoids it (with its value, when it has one)."""
    return re.search(re.escape(item.text()) + r"(?![\w-])", step) is not None


def _fix_release(doc: Document, kb: CuratedThreads) -> tuple[str, str] | None:
    """(PR, release) for the first release with an issue's fix, when the KB knows it: the earliest of its merged
    fixing PRs in the same repository."""
    known: list[tuple[Version, str, str]] = []
    for pr in doc.fixed_by:
        card = kb.get(pr)
        if card is None or card.state != "merged" or card.repo != doc.repo or not card.released_in:
            continue
        if (version := parse_version(card.released_in)) is not None:
            known.append((version, pr, card.released_in))
    return min(known)[1:] if known else None


def _against_version(doc: Document, parsed: ParsedInput, kb: CuratedThreads) -> str:
    """A note on an issue's advice from the input's release of the issue's engine, when it is newer than the
    issue's: the fix's first release is in it already, or (the fix's release unknown) every release the issue
    was reported on is older, so a fix released in between is in it. Either way the issue may not be the cause;
    the note says what is known and leaves the steps to the reader (an issue's flags may still apply)."""
    if doc.thread_kind is ThreadKind.PULL:
        return ""  # a merged PR's own fix is the change it made: having it says nothing against it
    for engine in repo_engines(doc.repo) if doc.repo else ():
        mine = parse_version(parsed.versions.get(engine))
        if mine is None:
            continue
        name, theirs = engine_name(engine), mine.public  # a build's local tag (+g6c3c0f823.rocm711) says no more
        fix = _fix_release(doc, kb)
        if fix is not None:
            pr, release = fix
            older = mine < (parse_version(release) or mine)
            return "" if older else f" ({pr}, its fix, was first released in {release}, and you run {name} {theirs})"
        reported = [v for r in doc.versions.get(engine, []) if (v := parse_version(r)) is not None]
        if reported and doc.state != "open" and mine > max(reported):
            return (
                f" (reported on {name} {max(reported).public}, and you run {theirs}, so a fix released in between "
                "is in yours and it may not be the cause)"
            )
        return ""
    return ""


_UPGRADE_STEP = re.compile(
    r"\b(?:upgraded?|updated?|newer|later) |\buntil (?:then|a fix|the fix)\b|\bin the meantime\b", re.I
)
"""A step that moves to another release ("upgrade Ollama", "use a newer vLLM", "pull ... the updated template"),
or one meant only for the time before it ("until then, ...")."""


def _card_advice(
    hits: Sequence[Document], related: bool, parsed: ParsedInput, kb: CuratedThreads, shown: dict[str, str]
) -> list[Advice]:
    """Each hit's own fix and workarounds, with the flags the card says to set or avoid; ``related``: no hit
    is known to be this failure, and the advice says so.

    What the input shows already done (``shown``: its :func:`settings_in_effect`) is left out: a flag it sets
    as the card says, a step that only sets what it sets, and an option to avoid that its command does not
    pass, with the steps that ask to drop that option; and the input's release, when it is newer than the
    issue's, is noted (:func:`_against_version`).
    """
    advice: list[Advice] = []
    told = ", a related issue not known to be this failure" if related else ""
    shows_command = command_shown(parsed)
    for doc in hits:
        note = _against_version(doc, parsed, kb)
        # Not known to be this failure, and its fix is in the input's release already: its fix and its steps
        # to upgrade are no lead; a workaround of another kind ("reduce the context size") may still be one.
        outdated = related and bool(note)
        typed = card_flags(doc)
        moot = [item for item in typed if _moot(item, shown, shows_command)]
        typed = [item for item in typed if item not in moot]
        steps: list[str] = []
        if doc.fix and (doc.fix_confirmed or doc.state == "merged") and not outdated:
            steps.append(doc.fix)
        steps.extend(step for step in doc.workarounds if not (outdated and _UPGRADE_STEP.search(step)))
        unused = [item for item in moot if item.action == "avoid"]
        steps = [
            step
            for step in steps
            if not any(_names_flag(step, item) for item in unused) and not _sets_only_what_is_set(step, shown)
        ]
        if not steps and not typed:
            continue
        if not steps:
            steps.append(f"The settings {doc.id} points at: " + ", ".join(f"{f.action} {f.text()}" for f in typed))
        # The note goes in the head: the steps stay as the card words them, so an answer's fixes that say the
        # same step still replace it (service.answer.without_repeats), and the note has no ": " of its own.
        summary = f"From {doc.id}{told}{note}: " + " / ".join(steps)
        advice.append(Advice(summary=summary, flags=typed[:6], sources=[doc.id]))
    return advice


def _for_failing(docs: Sequence[Document], parsed: ParsedInput, threads: ThreadEngines | None) -> list[Document]:
    """The threads to take advice from: none about another GPU platform than the input's, and of the rest those
    about an engine (another engine's thread with the same error is a look-alike whose own advice may carry over:
    ``ignore_eos`` breaks every Harmony server), and those about none whose fix is not another engine's than the
    failure's (vLLM's attention backends for a TensorRT-LLM failure). All of them without ``threads``; all
    but another platform's when the failure names no engine."""
    if threads is None:
        return list(docs)
    # A hardware thread of another GPU platform than the input's: its fix is that platform's (a newer CUDA
    # image for a HIP error), whatever engine either runs.
    docs = [doc for doc in docs if not other_platform(parsed.platform, threads.platform.get(doc.id))]
    failing = parsed.failure_engines
    if not failing:
        return docs
    return [doc for doc in docs if doc.id in threads.engine or advised_engine(doc) in {None, *failing}]


def _related_fits(
    docs: Sequence[Document],
    parsed: ParsedInput,
    threads: ThreadEngines | None,
    matched: bool,
    related: Collection[str] | None = None,
) -> list[Document]:
    """With no thread known to be this failure, the related threads whose own fix may still fit. A thread in a
    client's tracker: unless the input names another client (an Emacs library's Ollama provider is no fix
    for a LangChain report). Any other thread: of the engine the input runs (the index's default when it
    names none) or of none (an Ollama thread's fix is no fix for a vLLM or an unnamed server). ``related``: the
    threads that use a distinctive word of the input's error line (all when None): a thread close only in the
    words around the error is another failure of the same engine, and its fix is that failure's."""
    if matched:
        return list(docs)
    if related is not None:
        docs = [doc for doc in docs if doc.id in related]
    if threads is None:
        return list(docs)
    engines: set[str | None] = set(parsed.failure_engines or parsed.engines) or {threads.default_engine}

    def fits(doc: Document) -> bool:
        client = threads.client.get(doc.id)
        if client is not None:
            return parsed.client in {None, client}
        return threads.engine.get(doc.id) in {None, *engines}

    return [doc for doc in docs if fits(doc)]


def _dedupe(items: Iterable[Advice]) -> list[Advice]:
    seen: set[str] = set()
    out: list[Advice] = []
    for item in items:
        if item.summary in seen:
            continue
        seen.add(item.summary)
        out.append(item)
    return out


def advise(
    parsed: ParsedInput,
    hits: Sequence[Document],
    kb: CuratedThreads,
    *,
    max_hits: int = 3,
    matched: bool = True,
    threads: ThreadEngines | None = None,
    related: Collection[str] | None = None,
) -> list[Advice]:
    """Configuration advice for this input; ``hits`` are ranked best first (pass only confident ones), ``kb``
    is the loaded generation's curated threads. ``matched`` False: no hit is known to be this failure, so a
    hit's own fix is offered as a related issue's, not as this failure's, and only from a thread of the
    input's engine and client (:func:`_related_fits`). ``threads``, the generation's thread engines and
    clients: a thread in no engine's tracker whose failure vLLM's server raised gives its own fix only to a
    vLLM failure (:func:`_for_failing`). ``related``: the hits whose own fix may be offered as a related
    issue's (:func:`_related_fits`)."""
    top = list(hits[:max_hits])
    if top:
        # Lower-ranked hits only count when they are about the same thing as the best one.
        top = [top[0], *[h for h in top[1:] if h.component == top[0].component]]
    window = InputWindow.of(parsed)
    flags = settings_in_effect(parsed)
    category = categorize(parsed, top)
    advice = [
        *_vocab_advice(parsed, top, kb, category),
        *_attention_advice(window, top, kb, category),
        *_tool_parser_advice(parsed, window, top, kb, flags, category),
        *_tool_choice_advice(parsed, top, kb, flags),
        *_reasoning_advice(window, top, kb, flags, category),
        *_stop_advice(window, top, kb, flags),
        *_version_advice(parsed, top, kb),
        *_card_advice(
            _related_fits(_for_failing(top, parsed, threads), parsed, threads, matched, related),
            not matched,
            parsed,
            kb,
            flags,
        ),
        *_card_advice(_for_failing(_same_error_cards(parsed, top, kb), parsed, threads), False, parsed, kb, flags),
    ]
    return _dedupe(advice)
