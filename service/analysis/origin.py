"""Where a failure originates (server, client, model files, environment) and which error family it is.

The input is judged first: its error lines (root cause first), then the whole text. When the input
alone does not say, the best-ranked hits' curated fields (``error_source``, ``component`` and their
own error strings) are the evidence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from indexer.documents import Document
from indexer.signatures import TRACE_FRAME
from service.analysis.engines import SDK_CLIENTS, detect_client, detect_engines, repo_engines
from service.analysis.input import ParsedInput, names_a_model

Side = Literal["server", "client", "model-files", "environment", "unknown"]

FIRST_SPECIAL_ID = 199_998  # o200k: ids below are ordinary text tokens, ids from here up are specials


class Origin(BaseModel):
    """Where the failure comes from, in one line."""

    side: Side = Field(description="server | client | model-files | environment | unknown")
    component: str = Field(description="Error family / component, e.g. harmony-token, tool-calling")
    explanation: str = Field(description="One-line reason for the verdict")


@dataclass(frozen=True)
class Rule:
    """An input pattern that names a side and an error family."""

    side: Side
    category: str
    pattern: re.Pattern[str]
    why: str
    tier: int = 0  # 0: a specific diagnosis; 1: a generic "this came from a server" marker
    check: Callable[[re.Match[str]], bool] | None = None


def _plain_token(match: re.Match[str]) -> bool:
    return int(match.group(1)) < FIRST_SPECIAL_ID


def _special_token(match: re.Match[str]) -> bool:
    return int(match.group(1)) >= FIRST_SPECIAL_ID


# What a 4xx body relays when the server itself failed: the interpreter's own error text (vLLM returns
# some of its internal exceptions as 400), or an outer 5xx around an inner hop's 4xx.
_SERVER_FAULT_IN_4XX = re.compile(
    r"\b(?:TypeError|KeyError|AttributeError|IndexError|NameError|UnboundLocalError)\b|has no len\(\)"
    r"|has no attribute|'NoneType'|object is not (?:subscriptable|iterable|callable)"
    r"|unexpected keyword argument|\b50[0-4]\b[^\n]{0,80}\b4\d\d\b",
)


def _refused_as_sent(match: re.Match[str]) -> bool:
    """A 4xx that is the server refusing the request, not a server fault it relays with a 4xx code."""
    return _SERVER_FAULT_IN_4XX.search(match.string) is None


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_VOCAB = (
    r"error downloading or loading vocab file|failed to download or load vocab file"
    r"|openaipublic\.blob\.core\.windows\.net|TIKTOKEN_ENCODINGS_BASE|TIKTOKEN_RS_CACHE_DIR"
    r"|o200k_base\.tiktoken"
)

# Order matters only between rules of one tier that match the same line: more specific first.
RULES: tuple[Rule, ...] = (
    Rule(
        "client",
        "request-shape",
        _rx(
            r"Field required|missing required (?:field|parameter|argument|property)|is a required property"
            r"|Extra inputs are not permitted|extra_forbidden|Unrecognized request argument|UnsupportedParamsError"
            r"|\d{1,3} validation errors? for \w{0,40}Request\b"
            r"|does not support ['\"]?\w{2,40}['\"]?,? ignoring"
            r"|tool_choice\W{0,4}(?:\w{1,20}\W{1,4}){0,3}(?:is )?(?:not supported|unsupported|invalid|must be)"
            r"|reasoning(?:_content|_effort)?['\"]?\W{0,4}(?:is |was )?"
            r"(?:not permitted|unexpected|unrecognized|not supported|unsupported)"
            # A provider naming a request field it does not take (the KB's Groq and Bedrock signatures:
            # "property 'reasoning' is unsupported", "doesn't support the <field> field. Remove <field>").
            r"|property ['\"][\w.\[\]]{1,80}['\"] is unsupported"
            r"|(?:doesn't|does not) support the [\w.]{1,80} field|\bRemove [\w.]{1,80} and try again"
        ),
        "the request the client sent has the wrong shape for this server (a missing or extra field, a "
        "tool_choice or reasoning parameter the server does not take); the client or its settings must change",
    ),
    Rule(
        "environment",
        "vocab-download",
        _rx(_VOCAB),
        "openai-harmony could not fetch its vocabulary file (no network access to the blob store); "
        "this is the deployment's network, not a bug in the request",
    ),
    Rule(
        "model-files",
        "harmony-token",
        re.compile(r"Unexpected token (\d{1,7}) while expect"),
        "the model emitted an ordinary text token where Harmony requires the special <|start|> token: "
        "the checkpoint (often a re-quantised or converted copy) writes Harmony specials as plain text",
        check=_plain_token,
    ),
    Rule(
        "environment",
        "install-build",
        _rx(
            r"No module named|cannot import name|ModuleNotFoundError|ImportError|undefined symbol|GLIBC"
            r"|unrecognized arguments|invalid (?:tool call|reasoning) parser|CPU backend only supports"
            r"|requires? (?:a newer|newer) version|is not installed"
        ),
        "the installed packages do not match what this setup needs (missing module, version without "
        "the flag or parser, wrong build)",
    ),
    Rule(
        "environment",
        "install-build",
        re.compile(
            # A title or request that moves a deployment to another engine release or image (the KB's
            # recipe and image-update threads), not a report that something broke after an upgrade.
            r"^\W{0,3}(?![^\n]*\b(?:break|broke|fail|error|crash|regress|no longer|stopped))"
            r"(?:\[[^\]\n]{1,20}\]\s*)*(?:\w{1,10}:\s*)?(?:update|upgrade|bump)\b[^\n]{0,80}?"
            r"(?:\bto|->|\u2192)\s*(?:[\w./-]{1,30}\s){0,3}?(?:latest\b|v?\d{1,3}\.\d{1,3})",
            re.IGNORECASE | re.MULTILINE,
        ),
        "the input moves a deployment to another engine release or image: which versions, images and flags "
        "are deployed is the environment's part, not a failure in a request",
    ),
    Rule(
        "environment",
        "multi-gpu",
        _rx(
            r"invalid device ordinal|NCCL error|nccl\w{0,40}Error|ProcessGroupNCCL.{0,300}(?:error|timeout)"
            r"|DistBackendError"
        ),
        "the GPUs or their interconnect setup (device visibility, NCCL, symmetric memory) fail before "
        "any request is served",
    ),
    Rule(
        "environment",
        "quantization-kernels",
        _rx(
            r"not supported (?:for|on) (?:the )?current GPU|Minimum capability"
            r"|Current capability|compute capability"
            r"|requires \d+(?:\.x)? architecture|\bsm_?\d{2,3}a?\b|PTXAS|triton\.runtime\.errors"
            r"|Failed to import Triton|Check failed|Could not construct fused moe op"
            r"|no kernel image is available"
            # A driver error, or a CUDA/HIP error that says the device cannot run the code; not any CUDA error
            # (an illegal memory access is a kernel's bug, a bare "CUDA error" says nothing of the cause).
            r"|\bgfx\d{3,4}\b|hipError|CUDA driver error|invalid device function|driver version"
            r"|insufficient for CUDA runtime"
        ),
        "the GPU, driver or kernel build cannot run the requested kernels (compute capability, "
        "architecture, Triton/FlashInfer build)",
    ),
    Rule(
        "environment",
        "attention-backend",
        _rx(
            r"Sinks are only supported in FlashAttention|FlashAttention only supports|only supports Ampere"
            r"|attention sinks not supported"
            r"|Attention sinks are only supported"
        ),
        "the attention backend available on this GPU or build does not support what the model needs "
        "(for gpt-oss: attention sinks)",
    ),
    Rule(
        "environment",
        "resources",
        # Ollama's refusal to load: "model requires more system memory (58.0 GiB) than is available (30.5 GiB)".
        _rx(
            r"CUDA out of memory|OutOfMemoryError|\bOOM\b|out of memory"
            r"|requires more (?:system |GPU )?memory\b.{0,40}\bthan"
        ),
        "the GPU (or the machine) ran out of memory for this configuration",
    ),
    Rule(
        "model-files",
        "model-files",
        _rx(
            r"params_dict\[name\]|_load_weights|load_weights|KeyError: '(?:model\.)?layers\.\d"
            r"|generation_config(?:\.json)?|eos_token_id|tokenizer_config\.json"
            r"|special_tokens_map|chat_template\.jinja"
            r"|\bsafetensors\b.{0,80}(?:missing|unexpected|mismatch)"
        ),
        "the model folder (weights naming, generation_config, tokenizer or chat template files) does not "
        "match what the loader expects",
    ),
    Rule(
        "server",
        "harmony-header",
        _rx(
            r"unexpected tokens remaining in message header|channel marker present but no channel value"
            r"|Unexpected EOS while waiting for message header|message header did not contain a role"
            r"|could not decode header"
        ),
        "openai-harmony's parser rejected the header of a message the model generated",
    ),
    Rule(
        "server",
        "harmony-token",
        re.compile(r"Unexpected token (\d{1,7}) while expect"),
        "openai-harmony's parser got a token where a new message must start",
        check=_special_token,
    ),
    Rule(
        "server",
        "tool-calling",
        _rx(
            r"Unknown recipient|tool choice requires|tool-call-parser|tool_call_parser"
            r"|error parsing tool call"
            r"|tool type \w{1,40} not supported|Tool use is not supported|harmonyparser|harmony parser"
        ),
        "the server's tool-call handling for gpt-oss failed on this request",
    ),
    Rule(
        "server",
        "responses-api",
        _rx(r"serving_responses|/v1/responses|Responses API|store=True|response store"),
        "the server's Responses API layer rejected or mishandled the request",
    ),
    Rule(
        "client",
        "reasoning-output",
        _rx(
            r"reasoning_content\W{0,4}(?:field\W{0,3})?(?:(?:is|was|has been|got|being)\s)?"
            r"(?:renamed|deprecated|replaced)"
            r"|\breasoning\W{0,4}(?:field\W{0,3})?instead of\W{0,4}reasoning_content"
            r"|(?:legacy|deprecated|old)\W{0,4}reasoning_content"
            r"|\b(?:still|only)\s(?:sends?|reads?|uses?|expects?|parses?)\b[^\n]{0,30}reasoning_content"
            r"|\breads?\sonly\W{0,4}reasoning_content"
        ),
        "vLLM moved gpt-oss reasoning from the deprecated `reasoning_content` field to `reasoning` and later "
        "removed the old field (vllm-project/vllm#33402); a client that reads only `reasoning_content` "
        "loses the reasoning and must read `reasoning`",
    ),
    Rule(
        "server",
        "reasoning-output",
        _rx(r"Expected \d{1,6} output messages|reasoning parser|reasoning_content|reasoning_parser"),
        "the server's split of gpt-oss output into reasoning and final answer failed",
    ),
    Rule(
        "server",
        "chat-template-rendering",
        _rx(
            r"Error in preprocessing prompt inputs|_make_request_with_harmony"
            r"|render_conversation|parse_chat_input"
        ),
        "the server failed while turning the chat request into a Harmony prompt",
    ),
    Rule(
        "server",
        "harmony-parser",
        _rx(r"HarmonyError|openai_harmony|harmony_utils"),
        "openai-harmony raised inside the server while handling gpt-oss output",
    ),
    Rule(
        "server",
        "quantization-kernels",
        _rx(r"\bMXFP4\b.{0,40}not supported|AssertionError.{0,60}(?:mxfp4|moe|quant)"),
        "an assertion in the server's own quantisation code path (a server bug or regression, not the GPU)",
    ),
    Rule(
        "server",
        "streaming",
        # Not a stream flag switched off (``streaming=False``, ``"streaming": false``, "without streaming"):
        # then no stream ran.
        _rx(
            r"stream generator|(?<!disable )(?<!disabled )(?<!disabling )(?<!without )(?<!no )(?<!non-)"
            r"streaming(?!['\"]?\s{0,3}[=:]\s{0,3}(?:false|0|no|off)\b)"
        ),
        "the server's streaming path failed",
        tier=1,
    ),
    Rule(
        "client",
        "request-shape",
        # HTTP's own split: a 4xx is the server refusing the request as sent. With no message a tier-0
        # rule knows (a Harmony error a server returns as 400 is matched there first), the request's
        # fields, parameters or model name are the first suspect. Before the generic server marker: the
        # same line often holds a JSON error body too.
        _rx(
            r"Error code: 4\d\d|status code:? ?4\d\d|unexpected status 4\d\d|\bHTTP(?:/\d(?:\.\d)?\"?)? 4\d\d\b"
            r"|\b4\d\d (?:Bad Request|Unprocessable)|\b4(?:00|22)(?=\s{0,2}[-:{])|BadRequestError"
            r"|UnprocessableEntityError|invalid_request_error|\bINVALID_ARGUMENT\b"
        ),
        "the server refused the request as sent (HTTP 4xx) with no message these rules know: a field, a "
        "parameter or the model name the client sends is the first suspect",
        tier=1,
        check=_refused_as_sent,
    ),
    Rule(
        "server",
        "other",
        _rx(
            r"serving_chat|serving_completion|serving\.py|entrypoints/openai|Error in request"
            r"|srv\s{1,8}send_error"
            # A 4xx too: the client rule above takes it first, unless the body relays a server fault.
            r"|[\"']error[\"']\s{0,8}:\s{0,8}\{|Error code: [45]\d\d|status code:? ?[45]\d\d"
            r"|unexpected status [45]\d\d"
            r"|HTTP/1\.1\" 5\d\d|InternalServerError|BadRequestError|ServiceUnavailable"
            r"|Unsupported tool_call_parser"
            r"|EngineCore|\[core\.py|AssertionError|level=ERROR source=\w{1,80}\.go"
        ),
        "the error text comes from the serving engine",
        tier=1,
    ),
)

_VOCAB_RULE = next(rule for rule in RULES if rule.category == "vocab-download")

# Clients whose exceptions carry a server's message; the failure is still the server's.
_OFFLINE = _rx(r"air[- ]?gapped|no (?:internet|network|outbound|egress)|offline|without internet|firewall|egress")
_VOCAB_WORDS = _rx(r"vocab|tiktoken|tokenizer (?:file|vocabulary)|encoding file")

_SOURCE_SIDE: dict[str, Side] = {
    "vllm-server": "server",
    "harmony-library": "server",
    "other-server": "server",
    "client": "client",
    "model-files": "model-files",
}


@dataclass(frozen=True)
class _Finding:
    rule: Rule
    line: int
    text: str
    described: bool = False
    """Found in the user's own words (or context), not in a failing line."""


def _scan(texts: Sequence[str], *, max_tier: int = 1) -> _Finding | None:
    """The best rule match: lowest tier, then earliest line (root cause first), then rule order."""
    best: tuple[int, int, int] | None = None
    found: _Finding | None = None
    for line_no, text in enumerate(texts):
        for order, rule in enumerate(RULES):
            if rule.tier > max_tier:
                continue
            match = rule.pattern.search(text)
            if match is None or (rule.check is not None and not rule.check(match)):
                continue
            key = (rule.tier, line_no, order)
            if best is None or key < best:
                best, found = key, _Finding(rule, line_no, match.group(0))
    return found


def text_window(text: str, size: int = 100_000) -> str:
    """The part of a long input the whole-text rules read: its head and tail (errors sit at the end)."""
    if len(text) <= size:
        return text
    half = size // 2
    return text[:half] + "\n" + text[-half:]


def match_input(parsed: ParsedInput) -> _Finding | None:
    """The rule the input itself supports, if any: its failing lines first, then the user's own words.

    Context (a hardware line naming sm_121, a command line with a ``--chat-template`` path) is read
    only when the input has neither a failing line nor a sentence: then it is all there is. In a pasted
    log without either, the lines the user put among the records (``plain``) are read instead of the
    records around them.
    """
    said = (*parsed.prose, *parsed.plain)  # in a log without either, the user's undecorated lines say it
    failing = bool(parsed.signatures or said)
    context = "" if failing else parsed.account
    return _match_cached(tuple(parsed.signatures), said, context)


@lru_cache(maxsize=16)
def _match_cached(signatures: tuple[str, ...], prose: tuple[str, ...], context: str) -> _Finding | None:
    # origin, category and advice all ask about the same input: scan a large log once.
    found = _scan(signatures)
    window = "\n".join([*prose, text_window(context)]) if context else "\n".join(prose)
    if found is None or found.rule.tier > 0:
        whole = _scan([window], max_tier=0)
        if whole is not None:
            return replace(whole, described=True)
    if found is not None:
        return found
    said = "\n".join([*signatures[:5], window])  # a failing line may say it too ("... in an air-gapped cluster")
    if _OFFLINE.search(said) and _VOCAB_WORDS.search(said):
        return _Finding(_VOCAB_RULE, 0, "offline vocabulary")
    return None


def _client_name(parsed: ParsedInput) -> str | None:
    """The client that reported the error, as parse_input found it (one scan of the input, not two)."""
    return parsed.client


def _own_rule(doc: Document) -> _Finding | None:
    """The tier-0 rule a document's own error strings and title match: the same for every lookup."""
    return _own_rule_cached(tuple(doc.error_signatures), doc.title)


@lru_cache(maxsize=4096)
def _own_rule_cached(signatures: tuple[str, ...], title: str) -> _Finding | None:
    # Origin and category ask it of each lookup's top hits: scanned once per document's text, not per lookup.
    return _scan([*signatures, title], max_tier=0)


def _hit_side(doc: Document) -> tuple[Side, str] | None:
    """What one hit says about the side: its own error strings first, then its curated fields."""
    own = _own_rule(doc)
    if own is not None and own.rule.side == "environment":
        return "environment", own.rule.category
    if doc.component == "install-build":
        return "environment", "install-build"
    side = _SOURCE_SIDE.get(doc.error_source or "")
    if side is None:
        return None
    return side, doc.component or "other"


_CLIENT_APP = re.compile(
    r"\bcodex\b|\bcrew ?ai\b|\bcline\b|\bcontinue\.dev\b|\bopen-?webui\b|\blangchain\b|\blitellm\b"
    r"|pydantic-ai|openai-agents|agents sdk|llama-stack|\bsmolagents\b|\bautogen\b|\bbedrock\b|\bcursor\b",
    re.I,
)

# A product named with its version ("Acme Chat 2.4.1", "Quillbox 0.9"). When it is not a
# serving engine, a model, or the platform under both (language, GPU stack, OS, ML library), it is the
# application the user runs: a report names what it watched fail.
_VERSIONED_NAME = re.compile(r"\b([A-Z][\w+-]{1,30}(?: [A-Z][\w+-]{1,30}){0,2}) v?\d{1,4}\.\d{1,4}\b")
_PLATFORM = re.compile(
    r"^(?:python|cuda|cudnn|nccl|rocm|hip|pytorch|torch|transformers|triton|flashinfer|flash|xformers|jax"
    r"|numpy|ubuntu|debian|centos|rhel|fedora|windows|macos|mac|linux|wsl|docker|kubernetes|k8s|nvidia|driver"
    r"|node|openai|harmony|gpt|chrome|firefox|safari|ios|android|intel|amd|apple|release|version|build|tag)\b",
    re.I,
)


def _versioned_app(text: str) -> str | None:
    """The first product the input names with a version that is no engine, model or platform."""
    for match in _VERSIONED_NAME.finditer(text[:20_000]):
        name = match.group(1)
        if _PLATFORM.search(name) or detect_engines(name) or names_a_model(name):
            continue
        return name
    return None


_SERVED = re.compile(
    r"gpt-?oss|chat completions?|/v1/|streaming|tensor.parallel|\bTP\s?=?\s?\d|served|serving|endpoint", re.I
)


def _from_hits(
    hits: Sequence[Document], limit: int = 3, prior: dict[Side, float] | None = None, engines: Sequence[str] = ()
) -> tuple[Side, str, Document | None] | None:
    """Rank-weighted vote of the top hits that carry a usable side (plus an optional prior).

    A server-side thread in the tracker of an engine the input does not name counts half: that engine's
    bug is a look-alike from another stack, weaker evidence that this input's server failed than what the
    input names. A GPU, driver or model-file cause holds whatever engine runs, so those count in full.
    """
    votes: dict[Side, float] = dict(prior or {})
    first: dict[Side, tuple[str, Document]] = {}
    for rank, doc in enumerate(hits[:limit]):
        judged = _hit_side(doc)
        if judged is None:
            continue
        side, component = judged
        own = repo_engines(doc.repo or "") if side == "server" else ()
        weight = 0.5 if own and not set(own) & set(engines) else 1.0
        votes[side] = votes.get(side, 0.0) + weight / (rank + 1)
        first.setdefault(side, (component, doc))
    if not votes:
        return None
    side = max(votes, key=lambda s: votes[s])
    if side not in first:
        return side, "other", None
    component, doc = first[side]
    return side, component, doc


_MESSAGE_SHAPE = re.compile(r"\S\s+\S+\s+\S|[a-z](?:Error|Exception)\b|^(?:Unknown|Invalid|Unexpected|Missing)\s")


def _server_message(seen: str) -> bool:
    """True when a server rule matched a message the server writes ("Expected 2 output messages",
    "error parsing tool call"), not the name of a field or feature ("reasoning_content", "harmony parser").

    A user who quotes the server's error quotes what the server did; a user who names a field describes
    what the application around it shows. The rules' messages are phrases of three or more words, an
    exception's name, or start with the verdict ("Unknown recipient"); their field and feature names are
    one or two plain words.
    """
    return _MESSAGE_SHAPE.search(seen) is not None


def _only_wrapped(parsed: ParsedInput) -> str | None:
    """The wrapper line of a paste whose failing lines only wrap the error (an exception that points at a
    root cause logged before it): the cause is in lines the paste leaves out. None otherwise (the caller
    asks only when no rule reads a cause in the input's words)."""
    if not parsed.log_dump or parsed.failure_found:
        return None
    return next((e.text for e in parsed.evidence if e.kind == "wrapper" and len(e.text) > 12), None)


def _raised_in_client(parsed: ParsedInput) -> str | None:
    """The client framework whose own code raised the error: the traceback's deepest frame is in its
    package (``site-packages/litellm/llms/...``). None for an SDK, whose frames only relay the server's
    answer, and when the deepest frame is anyone else's."""
    text = text_window(parsed.account)
    if 'File "' not in text:
        return None
    frames = TRACE_FRAME.findall(text)  # (file, function) of each frame, the deepest last
    if not frames:
        return None
    path = frames[-1][0].replace("\\", "/")
    owner = detect_client(f"{path} {path.replace('/', '.')}")  # "agents/run.py" is openai-agents' agents.run
    return owner if owner is not None and owner not in SDK_CLIENTS else None


def classify_origin(parsed: ParsedInput, hits: Sequence[Document]) -> Origin:
    """Decide where the failure originates, with the component and a one-line explanation."""
    found = match_input(parsed)
    raiser = _raised_in_client(parsed) if found is None else None
    if raiser is not None:
        # No message a rule knows, and the client's own code raised it (parsing a response, building a
        # request): the client is where it starts, whatever server is behind it.
        return Origin(
            side="client",
            component="client-integration",
            explanation=f"The traceback ends in {raiser}'s own code, with no server error it relays: {raiser} "
            "raised it (while building the request or reading the answer).",
        )
    if found is None and parsed.announced is not None:
        return Origin(
            side="unknown",
            component="other",
            explanation=(
                f"The input announces an error ({parsed.announced[:160]!r}) but no line of it reads as one: paste "
                "the error or traceback itself, as it was printed."
            ),
        )
    wrapper = _only_wrapped(parsed) if found is None else None
    if wrapper is not None:
        return Origin(
            side="unknown",
            component="other",
            explanation=(
                f"The pasted lines only wrap the error ({wrapper[:160]!r}): its cause is in the lines before "
                "them. Paste the log from the first traceback or ERROR line above."
            ),
        )
    client = _client_name(parsed)
    app = client is not None and client not in SDK_CLIENTS
    if (
        found is not None
        and found.rule.tier == 0
        and found.described
        and found.rule.side == "server"
        and app
        and not _server_message(found.text)
    ):
        # A described symptom in a named client application: the words name a server-side field or
        # feature, but the application is what the user watches misbehave; it is the first suspect.
        explanation = (
            f"The input describes {client} misbehaving with no error line; {client} is the first suspect "
            f"(the description mentions {found.text!r}, which the server side also handles)."
        )
        return Origin(side="client", component="client-integration", explanation=explanation)
    if found is not None and found.rule.tier == 0:
        rule = found.rule
        explanation = f"{rule.why} (seen: {found.text!r})."
        if rule.side == "server" and client:
            explanation += f" {client} only reports what the server returned; the fix is on the server side."
        return Origin(side=rule.side, component=rule.category, explanation=explanation)
    if found is not None and found.rule.side == "client":
        # The server refused the request (a generic 4xx): what the client sent is the first suspect.
        return Origin(
            side="client", component=found.rule.category, explanation=f"{found.rule.why} (seen: {found.text!r})."
        )
    prior: dict[Side, float] = {}
    text = text_window(parsed.account)
    if found is None:
        # A described behaviour with no error text: whoever the user names is the first suspect. A
        # named client application is more specific than the engine behind it, so it leads a tie.
        # In a pasted log, the user names what the failing lines and their own sentences name: the
        # start-up lines around them name the engine of every failure in that log.
        said = parsed.failure_text if parsed.log_dump else text
        engine = bool(parsed.failure_engines)
        app = app or bool(_CLIENT_APP.search(said)) or _versioned_app(said) is not None
        if app:
            prior["client"] = 0.6 if engine else 1.0
        if engine:
            prior["server"] = 0.5 if app else 1.0
        elif not app and _SERVED.search(text):
            # gpt-oss output going wrong on an unnamed stack: the serving layer is the first suspect.
            prior["server"] = 0.5
    voted = _from_hits(hits, prior=prior, engines=parsed.failure_engines)
    if found is not None:
        # A generic server marker: the engine produced the error; the hits may name the component.
        component = voted[1] if voted is not None and voted[0] == "server" else found.rule.category
        explanation = f"{found.rule.why} (seen: {found.text!r})."
        if client:
            explanation += f" {client} only reports what the server returned."
        return Origin(side="server", component=component, explanation=explanation)
    if voted is not None:
        side, component, doc = voted
        if doc is None:
            named = "a client application" if side == "client" else "a serving engine"
            explanation = (
                f"No rule or known issue reads the input's error; what it names points to {named}."
                if parsed.signatures
                else f"The input describes the behaviour of {named} without an error string, and no known "
                "issue points elsewhere."
            )
        else:
            # The issue that decided is named with its place in the list when it is not the first: the
            # first may record no side, or be outvoted by the ones below it.
            rank = next((n for n, hit in enumerate(hits, start=1) if hit.id == doc.id), 1)
            which = f"the closest known issue {doc.id}" if rank == 1 else f"known issue #{rank}, {doc.id},"
            explanation = (
                f"The input names no error the rules know; {which} "
                f"({doc.component}, raised by {doc.error_source}) points to the {side}."
            )
        return Origin(side=side, component=component, explanation=explanation)
    return Origin(
        side="unknown",
        component="other",
        explanation="Neither the input nor a known issue says where it comes from.",
    )


_COMPONENT_CATEGORY = {"harmony-parser": "harmony-token", "tokenizer-vocab": "tokenizer-vocab"}


def categorize(parsed: ParsedInput, hits: Sequence[Document]) -> str:
    """The error family: from the input's own words when explicit, else from the top hit's component."""
    found = match_input(parsed)
    if found is not None and found.rule.tier == 0 and found.rule.category != "harmony-parser":
        return found.rule.category
    if hits:
        top = hits[0]
        own = _own_rule(top)
        if own is not None and own.rule.category != "harmony-parser":
            return own.rule.category
        if top.component:
            return _COMPONENT_CATEGORY.get(top.component, top.component)
    if found is not None:
        return found.rule.category
    return "other"
