"""Understanding what a user pasted: error signatures, versions, server flags, model and client.

Input is bounded (the API caps it at 1 MB) and every pattern is linear-time, so a pathological log
costs milliseconds, not seconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from indexer.signatures import CHAINING, LEAD_IN, MAX_LINE, POINTER, keyed_error_lines, normalize_signature
from service.analysis.distill import Distilled, distill, unwrap_log
from service.analysis.engines import detect_client, detect_engines
from service.analysis.needles import Needled
from service.analysis.needles import folded as _folded
from service.analysis.platforms import detect_platform
from service.flag_names import vllm_flag
from service.versions import VLLM_LOGO_VERSION

MAX_QUERY_CHARS = 2000
"""The reduced query text never grows past this: long logs are reduced to their error lines."""


class EvidenceLine(BaseModel):
    """One error-looking line of the input and how much it counts."""

    text: str
    weight: float
    kind: str
    said: bool = False
    """The user's own sentence (no log record around it), not a line the software wrote."""


class ParsedInput(BaseModel):
    """Everything the analysis and retrieval steps need from one pasted error or log."""

    text: str = Field(
        description="The input, bounded, as the parser reads it: without terminal colour codes or the prefix a "
        "log collector (docker compose, kubectl --timestamps, journald) put on its lines"
    )
    signatures: list[str] = Field(default=[], description="Error lines, prefix-stripped, root cause first")
    normalized: list[str] = Field(default=[], description="normalize_signature() of each signature")
    evidence: list[EvidenceLine] = Field(default=[], description="Every error-looking line with its weight")
    query_text: str = Field(default="", description="Reduced text used for BM25 and embedding")
    is_log: bool = Field(default=False, description="True when the input carries error lines")
    versions: dict[str, str] = Field(default={}, description="Component -> version seen in the input")
    flags: list[str] = Field(default=[], description="Server flags, request params and env vars seen")
    model: str | None = Field(default=None, description="Model name or path seen in the input")
    client: str | None = Field(default=None, description="Client framework that reported the error")
    engines: list[str] = Field(default=[], description="Serving engines the input names, the failing one first")
    platform: str | None = Field(
        default=None, description="Accelerator platform the input shows: amd, gaudi, ascend or nvidia (platforms.py)"
    )
    failure_engines: list[str] = Field(
        default=[],
        description="Serving engines the failure itself names: in a pasted log, its failing lines and the user's "
        "sentences (not the start-up and access lines around them); otherwise the same as engines",
    )
    token_ids: list[int] = Field(default=[], description="Token ids the text names")
    prose: list[str] = Field(default=[], description="The user's own sentences in the input")
    failure_found: bool = Field(
        default=True, description="False for a pasted log with no failure line and no sentence describing one"
    )
    other_model: str | None = Field(
        default=None, description="Another model family the input names while it carries no gpt-oss signal"
    )
    log_dump: bool = Field(default=False, description="True when most of the input is log records (a pasted log)")
    threads: list[str] = Field(
        default=[],
        description="GitHub threads the user names (an issue or PR URL, owner/name#number), as owner/name#number, "
        "outside log records",
    )
    response_shows: list[str] = Field(
        default=[],
        description="What a pasted chat completion shows (raw Harmony in its content, in a tool name, no content "
        "with finish_reason stop, a Responses API object cut off by max_output_tokens), as the titles of the "
        "reference sections that cover it; only for an input with no error line",
    )
    numbers: list[int] = Field(
        default=[],
        description='Thread numbers the user names without a repository ("#22403", "issue 22403"), outside log '
        "records; the index resolves them in the tracker of the engine the input names",
    )
    body: str = Field(
        default="",
        description="The input without a bug report's environment sections (collect_env output, OS, GPU and "
        "package fields): what the rules that read the whole input read; empty when it has none",
    )
    announced: str | None = Field(
        default=None,
        description="The user's line that announces an error (ending 'the following error:') when no line of "
        "the input reads as an error: the paste may have left the error out",
    )
    plain: list[str] = Field(
        default=[],
        description="In a pasted log with no failing line and no sentence: the undecorated lines among the "
        "records (text the user put there), which then stand for the failure",
    )

    @property
    def account(self) -> str:
        """The input as the user's account of the failure: without its environment sections, if any."""
        return self.body or self.text

    @property
    def failure_text(self) -> str:
        """What names the failure itself: the failing lines and the user's sentences (no log context)."""
        return "\n".join([*[e.text for e in self.evidence if e.weight >= 1.0][:5], *self.prose, *self.plain[:5]])

    def named_by_failure(
        self, engines: list[str], named: Callable[[str], Sequence[str | None]], records: Sequence[str] = ()
    ) -> list[str]:
        """Which of ``engines`` the failure names: all of them, unless the input is a log whose failing
        lines and sentences (``named`` reads their names) leave some only to the records around them.

        ``records``: the decorations of the failing lines (:attr:`ErrorLine.record`): a record's own process
        tag (vLLM's API server or engine core tag) names the engine that failed, as the start-up lines do not.
        """
        if not self.log_dump or not engines:
            return engines
        found = named("\n".join([self.failure_text, *records]))
        return [e for e in engines if e in found]

    @property
    def engine(self) -> str | None:
        """The serving engine the input is about, when it names one."""
        return self.engines[0] if self.engines else None


_VERSION = r"v?(\d{1,3}\.\d{1,4}(?:\.\d{1,6}){0,2}(?:[.+-]?(?:dev|rc|post|a|b)\d{0,8})?(?:\+[\w.]{1,40})?)"
# Each pattern with the literals one of which its every match holds (service/analysis/needles.py): on a
# long log most are absent, and the pattern is not run.
_VERSION_PATTERNS: list[tuple[str, Needled]] = [
    # vLLM 0.15.0+'s banner ("<logo>  version 0.19.1"): the start-up log's own word, so it comes first.
    ("vllm", Needled(VLLM_LOGO_VERSION.pattern, ("version",), VLLM_LOGO_VERSION.flags)),
    # The engine core's own start-up and crash-dump records, which give the release in parentheses after
    # the engine's name (in every V1 release read).
    ("vllm", Needled(r"\bV1 LLM engine \(" + _VERSION + r"\)", ("v1 llm engine (",))),
    ("vllm", Needled(r"\bvLLM\b[\w ]{0,20}? version " + _VERSION, (" version ",))),
    (
        "vllm",
        # Not another image's tag that ends in the name ("intel/llm-scaler-vllm:0.11.1-b7").
        Needled(
            r"(?<![\w-])vllm(?:-openai)?[=:]{1,2}" + _VERSION, ("vllm=", "vllm:", "vllm-openai=", "vllm-openai:"), re.I
        ),
    ),
    ("vllm", Needled(r"^vllm\s{1,40}" + _VERSION + r"\s*$", ("vllm",), re.I | re.M)),
    ("vllm", Needled(r"\bvllm(?: version)? `?" + _VERSION + r"\b", ("vllm ",), re.I)),  # "vLLM `v0.26.0`" too
    ("vllm", Needled(r"\bvllm \(" + _VERSION + r"\)", ("vllm (",), re.I)),  # "against vllm (0.19.0)"
    (
        "openai-harmony",
        # also a wheel's or sdist's file name: "openai_harmony-0.0.4-cp38-abi3-manylinux_2_28_aarch64.whl"
        Needled(r"\bopenai[-_]harmony(?:[= :]{1,40}|-(?=\d))" + _VERSION, ("openai-harmony", "openai_harmony"), re.I),
    ),
    (
        "transformers",
        Needled(r"\btransformers[= :]{1,40}" + _VERSION, ("transformers=", "transformers ", "transformers:"), re.I),
    ),
    ("torch", Needled(r"^torch\s{1,40}" + _VERSION, ("torch",), re.I | re.M)),
    ("torch", Needled(r"\btorch==" + _VERSION, ("torch==",), re.I)),
    ("triton", Needled(r"^triton\s{1,40}" + _VERSION, ("triton",), re.I | re.M)),
    ("sglang", Needled(r"\bsglang[= :]{1,40}" + _VERSION, ("sglang=", "sglang ", "sglang:"), re.I)),
    (
        "ollama",
        Needled(r"\bollama(?: version(?: is)?)?[= :]{1,10}" + _VERSION, ("ollama=", "ollama ", "ollama:"), re.I),
    ),
    # Ollama's start-up record: the address it listens on, then its release in parentheses.
    ("ollama", Needled(r"\bListening on \S{1,80} \(version " + _VERSION + r"\)", ("listening on ",), re.I)),
    # Ollama's issue template: the answer under its "### Ollama version" heading.
    (
        "ollama",
        Needled(
            r"^#{1,4}\s{0,3}Ollama version\s{0,3}\n(?:\s{0,8}\n){0,3}\s{0,8}" + _VERSION,
            ("ollama version",),
            re.I | re.M,
        ),
    ),
    ("lmdeploy", Needled(r"\blmdeploy(?: version)?[= :]{1,10}" + _VERSION, ("lmdeploy",), re.I)),
    ("vllm-mlx", Needled(r"\bvllm[-_]mlx(?: version)?[= :]{1,10}" + _VERSION, ("vllm-mlx", "vllm_mlx"), re.I)),
    ("cuda", Needled(r"\bCUDA(?: Version)?:? " + _VERSION, ("cuda ", "cuda:"))),
    # llama.cpp's build number: llama-server's start-up "build: 6992 (aa3b7a90b) with ...", "--version"'s
    # "version: 6992 (aa3b7a90b)", or a tag the user names ("llama.cpp b6680"); read as the tag, b6992.
    ("llama.cpp", Needled(r"(?m:^\s{0,8}(?:build|version): (\d{3,5}) \([0-9a-f]{6,12}\))", ("build: ", "version: "))),
    (
        "llama.cpp",
        Needled(
            r"\bllama(?:\.cpp|-server|-cpp)[ :=@-]{1,3}b(\d{3,5})\b", ("llama.cpp", "llama-server", "llama-cpp"), re.I
        ),
    ),
    (
        "tensorrt-llm",
        Needled(r"\bTensorRT[- ]LLM version:? " + _VERSION, ("tensorrt-llm version", "tensorrt llm version"), re.I),
    ),
    ("tensorrt-llm", Needled(r"\btensorrt[-_]llm[=: ]{1,3}" + _VERSION, ("tensorrt-llm", "tensorrt_llm"), re.I)),
    (
        "lm-studio",
        Needled(r"\bLM ?Studio(?: version)?:? v?(\d{1,3}\.\d{1,4}\.\d{1,6})\b", ("lm studio", "lmstudio"), re.I),
    ),
    # collect_env's "vLLM Version : X.Y.Z" (after the user's own mention, which wins).
    ("vllm", Needled(r"\bvLLM Version\s{0,40}:\s{0,4}" + _VERSION, ("vllm version",), re.I)),
]

_CLI_FLAG = re.compile(
    r"(?<![\w-])(--[a-z][a-z0-9_]{0,30}(?:[-.][a-z0-9_]{1,30}){0,8})(?:[ =]([^\s\-'\"][^\s'\"]{0,80}))?"
)
_ARG_DICT_ITEM = re.compile(r"'([a-z][a-z0-9_]{1,60})': ('[^']{0,200}'|True|False|-?\d[\d.]{0,20}|None)")
_REQUEST_PARAM = re.compile(
    r"""(?<![\w])["']?(tool_choice|reasoning_effort|ignore_eos|stream|store|include_stop_str_in_output|"""
    r"""parallel_tool_calls|max_tokens|max_completion_tokens|min_tokens|response_format|background|think)"""
    r"""["']?\s{0,3}[:=]\s{0,3}["']?([\w.-]{1,40})"""
)
_THINK_VALUES = frozenset({"true", "false", "low", "medium", "high"})
"""Values of Ollama's ``think`` (a switch, or a reasoning level for gpt-oss)."""
_ENV_VAR = re.compile(r"\b((?:VLLM|TIKTOKEN|OLLAMA|CUDA|NCCL|TRITON|HF|CODEX)_[A-Z0-9_]{2,60})(?:=(\S{1,120}))?")
# The literals every match of the two case-sensitive patterns above holds: without one, the scan of
# the input's head (no literal prefix for re to search by) is skipped.
_REQUEST_NAMES = (
    "tool_choice", "reasoning_effort", "ignore_eos", "stream", "store", "include_stop_str_in_output",
    "parallel_tool_calls", "max_tokens", "max_completion_tokens", "min_tokens", "response_format", "background",
    "think",  # Ollama's reasoning switch
)  # fmt: skip
# Words before a variable's name when a library advises setting it rather than the user having set it:
# PyTorch's CUDA advice, NCCL's and Hugging Face's hints.
_ENV_HINT = re.compile(
    r"(?:consider (?:passing|setting)|run with|(?:please|you can|try) set(?:ting)?(?: an?)?)\s+\W?$", re.I
)
# Ollama's start-up record lists its variables as a Go map: ``env="map[OLLAMA_DEBUG:INFO HF_HOME: ...]"``.
# A value runs to the next variable's name (a path may hold spaces: "OLLAMA_MODELS:/Volumes/WD SN850X/...").
_ENV_MAP_PAIR = re.compile(r":((?:(?! [A-Za-z_][A-Za-z0-9_]{1,60}:)[^\]\"\n]){0,200})")
_ENV_MAP_UNSET = frozenset({"", "false", "0", "[]", "map[]", "0s"})
# Values the map shows for variables left unset, per the defaults in the help text of Ollama's envconfig
# (the loopback address on port 11434, keep-alive and load timeout "5m"), its queue size and its log level.
_ENV_MAP_DEFAULTS = frozenset(
    {
        ("OLLAMA_HOST", "http://127.0.0.1:11434"),
        ("OLLAMA_KEEP_ALIVE", "5m0s"),
        ("OLLAMA_LOAD_TIMEOUT", "5m0s"),
        ("OLLAMA_MAX_QUEUE", "512"),
        ("OLLAMA_DEBUG", "INFO"),
    }
)
_ENV_PREFIXES = ("VLLM_", "TIKTOKEN_", "OLLAMA_", "CUDA_", "NCCL_", "TRITON_", "HF_", "CODEX_")
# "openai/gpt-oss-120b", "gpt-oss-20b-GGUF", Ollama's "gpt-oss:20b"; after "_" too ("openai_gpt-oss-20b"),
# and a folder of a path is no owner ("/mnt/gpt-oss-120b" is gpt-oss-120b).
_MODEL = re.compile(
    r"(?<![A-Za-z0-9])((?:(?<![/\w.-])[\w.-]{1,40}/)?gpt-oss(?:-(?:20b|120b)[\w.:-]{0,40}|:(?:20b|120b|latest)\b))",
    re.I | re.ASCII,  # "gpt-oss-20b使用出错": the name ends where the Chinese text starts
)
_MODEL_TAG = re.compile(r"'model(?:_tag)?': '([^']{1,200})'")
# "token 200002", "token_id=13"; not an option's name ("--max-num-batched-tokens 2048").
_TOKEN_ID = re.compile(r"(?<![-_])\btokens? (?:id )?(\d{1,6})\b|\btoken_id[=: ]{1,3}(\d{1,6})\b", re.I)
_TOKEN_LIST = re.compile(r"\[(\d{1,6}(?:, ?\d{1,6}){1,400})\]")
_DEFAULTS_OFF = {"False", "None", "0", "''", "[]"}


# Forks of llama.cpp that print their own build numbers in llama.cpp's format ("version: 4177 (9c1c74ac)"):
# such a number is not upstream's b-tag, and a fix's release in upstream says nothing about it.
_LLAMA_FORKS = ("ik_llama",)


def _versions(text: str, folded: str | None = None) -> dict[str, str]:
    folded = _folded(text) if folded is None else folded
    found: dict[str, str] = {}
    fork = any(name in folded for name in _LLAMA_FORKS)
    for name, pattern in _VERSION_PATTERNS:
        if name in found or (fork and name == "llama.cpp"):
            continue
        match = pattern.search(text, folded)
        if match:
            found[name] = f"b{match.group(1)}" if name == "llama.cpp" else match.group(1)
    return found


MAX_FLAGS = 60
"""Flags kept per input; scanning stops once this many distinct ones are seen."""
_FLAG_SCAN_CHARS = 200_000
"""Request params and env vars are looked for in this much of the input (they sit near the top)."""
_SERVE_LINE = re.compile(r"\b(?:vllm|serve|api_server|sglang|launch_server|python3? -m|llama-server)\b")
# A line of options with no program name: the continuation lines of a command split with a trailing
# backslash are joined to it first, but a paste may give the options alone or after a label
# ("Serving Arguments: --enable-auto-tool-choice ...").
_OPTIONS_LINE = re.compile(r"^\s{0,8}(?:[A-Za-z][\w ]{0,40}:\s{0,4})?--[a-z]")
# A top-level key of a YAML options file with a scalar value, its name in two words or more
# ("stream-interval: 20", "max_num_batched_tokens: 8192"): one-word keys (model, port) are left out.
_CONFIG_ITEM = re.compile(
    r"^([a-z][a-z0-9]{0,30}(?:[-_][a-z0-9]{1,30}){1,6}):[ \t]{1,8}(\S[^\n#]{0,200}?)[ \t]*$", re.M
)
_CONTINUATION = re.compile(r"(?:\\|(?<=[ \t])`)[ \t]*\r?\n")  # a shell's backslash, PowerShell's backtick
# A container run: the options before the image are the container runtime's (--gpus, --ulimit, --name), not
# the server's; the image is the first word after ``docker run`` that reads as one ([registry/]org/name[:tag]).
_CONTAINER_RUN = re.compile(r"\b(?:docker|podman) run\b")
_IMAGE = re.compile(
    r"(?<!\S)(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9._-]+(?:/[a-z0-9._-]+)+(?::[\w.-]+)?(?:@sha256:[a-f0-9]+)?(?!\S)"
)


# ``docker run``'s options that take no value (the docker run reference): the word after any other option is
# that option's value (``--name acme``, ``--model openai/gpt-oss-20b``), never the image.
_CONTAINER_SWITCHES = frozenset(
    "-d -i -t -it -ti -itd -dit --rm --detach --interactive --tty --privileged --init --read-only --sig-proxy "
    "--no-healthcheck --oom-kill-disable --publish-all -P".split()
)


def _server_part(line: str) -> str:
    """The part of a command line the server reads: from the image on, for a container run whose image shows."""
    run = _CONTAINER_RUN.search(line)
    if run is None:
        return line
    for image in _IMAGE.finditer(line, run.end()):
        before = line[run.end() : image.start()].split()
        if before and before[-1].startswith("-") and "=" not in before[-1] and before[-1] not in _CONTAINER_SWITCHES:
            continue  # an option's value
        return line[image.start() :]
    return line


# llama-server's short options, as its long names (common/arg.cpp's option table): "-c 0 -fa on -ngl 99".
_LLAMA_LINE = re.compile(r"\bllama-(?:server|cli)\b")
_SHORT_OPTION = re.compile(r"(?<![\w-])(-[a-z]{1,5})(?:[ =]([^\s\-'\"][^\s'\"]{0,80}))?")
_ANY_OPTION = re.compile(r"(?<!\S)--?[a-z]")
_LLAMA_SHORT = {
    "-m": "--model",
    "-a": "--alias",
    "-c": "--ctx-size",
    "-n": "--predict",
    "-t": "--threads",
    "-b": "--batch-size",
    "-ub": "--ubatch-size",
    "-np": "--parallel",
    "-ngl": "--gpu-layers",
    "-fa": "--flash-attn",
    "-ctk": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "-dev": "--device",
    "-sm": "--split-mode",
    "-ncmoe": "--n-cpu-moe",
}
_ARGS_HEADER = ("non-default args", "server_args=")


# A deployment's environment that names vLLM's options (RunPod's worker-vllm turns each of its variables into
# the flag of the same name, lower-cased with dashes: TOOL_CALL_PARSER=openai -> --tool-call-parser openai).
_OPTION_ENV = re.compile(
    r"^\s{0,12}(?:-\s{1,4})?(?:export\s{1,4})?[\"']?(TOOL_CALL_PARSER|ENABLE_AUTO_TOOL_CHOICE|REASONING_PARSER)"
    r"[\"']?\s{0,3}[=:]\s{0,3}[\"']?([\w.-]{1,40})",
    re.M,
)


def _option(name: str, value: str | None) -> str:
    """``--name value`` as read off a command line; a sentence's colon, comma or full stop after the value is not
    it ("... is --moe-runner-backend triton_kernel."; a lone "." or ".." is a path and stays)."""
    value = value.rstrip(":,;`") if value else value
    if value and len(value) > 1 and value.endswith(".") and value[-2] not in "./":
        value = value[:-1].rstrip(":,;`")  # "vllm`." closes a quote, then the sentence
    return f"{name} {value}" if value else name


def _flags(text: str) -> list[str]:
    # An insertion-ordered dict is the set: membership is O(1), and the cap is checked while scanning,
    # so a megabyte of distinct flags costs one pass that stops at the cap, not a quadratic scan.
    flags: dict[str, None] = {}

    def full() -> bool:
        return len(flags) >= MAX_FLAGS

    def scan_lines() -> None:
        has_args = any(header in text for header in _ARGS_HEADER)
        joined = _CONTINUATION.sub(" ", text) if "\\" in text or " `" in text else text
        header_above = False  # vLLM's args dict may sit on the line after its header once pasted
        for line in joined.splitlines() if ("--" in text or has_args or "llama-" in text) else ():
            line = line[:MAX_LINE]
            if " run" in line:
                line = _server_part(line)
            if "--" in line and (_SERVE_LINE.search(line) or _OPTIONS_LINE.match(line)):
                ours = "vllm" in line.lower()  # vLLM reads --max_model_len as --max-model-len; argparse does not
                for match in _CLI_FLAG.finditer(line):
                    name = vllm_flag(match.group(1)) if ours else match.group(1)
                    flags[_option(name, match.group(2))] = None
                    if full():
                        return
            if _LLAMA_LINE.search(line) and len(_ANY_OPTION.findall(line)) >= 2:  # a command, not a mention
                for match in _SHORT_OPTION.finditer(line):
                    name = _LLAMA_SHORT.get(match.group(1))
                    if name is not None:
                        flags[_option(name, match.group(2))] = None
                        if full():
                            return
            if not has_args or not line.strip() or line.lstrip().startswith(("```", "~~~")):
                continue
            in_line = any(header in line for header in _ARGS_HEADER)
            if in_line or (header_above and line.lstrip().startswith("{")):
                for match in _ARG_DICT_ITEM.finditer(line):
                    key, value = match.groups()
                    if key in {"model", "model_tag", "host", "port", "served_model_name"} or value in _DEFAULTS_OFF:
                        continue
                    flag = "--" + key.replace("_", "-")
                    flags[flag if value == "True" else f"{flag} {value.strip(chr(39))}"] = None
                    if full():
                        return
            header_above = in_line and "{" not in line

    scan_lines()
    if not full() and any(flag.startswith("--config ") for flag in flags):
        # vLLM's --config file holds its options as top-level YAML keys: a pasted one is read as options.
        for match in _CONFIG_ITEM.finditer(text[:_FLAG_SCAN_CHARS]):
            key, value = match.group(1), match.group(2).strip().strip("'\"")
            if value.startswith(("{", "[")):
                continue  # a JSON value (compilation-config) is not one setting to show
            name = vllm_flag("--" + key)
            flags[name if value.lower() == "true" else _option(name, value)] = None
            if full():
                break
    head = text[:_FLAG_SCAN_CHARS]
    for match in _OPTION_ENV.finditer(head) if not full() and ("_PARSER" in head or "AUTO_TOOL" in head) else ():
        name, value = "--" + match.group(1).lower().replace("_", "-"), match.group(2)
        if value.lower() in {"false", "0", "no", "off"}:
            continue
        flags[name if value.lower() in {"true", "1", "yes", "on"} else f"{name} {value}"] = None
        if full():
            break
    for match in _REQUEST_PARAM.finditer(head) if not full() and any(n in head for n in _REQUEST_NAMES) else ():
        if match.group(1) == "think" and match.group(2).lower() not in _THINK_VALUES:
            continue  # "I think: ..." is a sentence
        flags[f"{match.group(1)}={match.group(2)}"] = None
        if full():
            break
    for match in _ENV_VAR.finditer(head) if not full() and any(n in head for n in _ENV_PREFIXES) else ():
        key, value = match.groups()
        line_start = head.rfind("\n", 0, match.start()) + 1
        if _ENV_HINT.search(head[max(line_start, match.start() - 80) : match.start()]):
            continue  # a library's advice names the variable ("consider passing CUDA_LAUNCH_BLOCKING=1")
        in_map = value is None and "map[" in head[line_start : match.start()]
        if in_map and (pair := _ENV_MAP_PAIR.match(head, match.end())) is not None:
            value = pair.group(1).strip()
            # Ollama's start-up map lists every variable, unset and default ones too, and lists (its allowed
            # origins) with their defaults.
            if value.lower() in _ENV_MAP_UNSET or (key, value) in _ENV_MAP_DEFAULTS or value.startswith("["):
                continue
        elif value:
            value = value.rstrip(",;.)").strip("`'\"")  # a sentence's quote marks and stops ("`OLLAMA_X=1`,")
        flags[f"{key}={value}" if value else key] = None
        if full():
            break
    return list(flags)


# The model as people write it in a sentence: "gpt oss 20b", "GPT-OSS 120B", "gpt-oss 20B".
_MODEL_SPOKEN = re.compile(r"(?<![\w/.-])gpt[- ]oss[- ](20|120)b\b", re.I)


def _model(text: str, folded: str | None = None) -> str | None:
    folded = _folded(text) if folded is None else folded
    tag = _MODEL_TAG.search(text) if "'model" in folded else None
    if tag and tag.group(1).lower() not in {"true", "false", "none", ""}:  # a stray boolean taken as the model
        return tag.group(1)
    match = _MODEL.search(text) if "gpt-oss" in folded else None
    # "gpt-oss-20b:latest" is an Ollama tag; the colon or dot of "serving gpt-oss-120b: tools ..." is not.
    if match:
        return match.group(1).rstrip(":.-")
    spoken = _MODEL_SPOKEN.search(text) if "gpt" in folded else None
    return f"gpt-oss-{spoken.group(1)}b" if spoken else None


MAX_TOKEN_IDS = 64
"""Token ids kept per input; the engine decodes no more than this."""


def _token_ids(text: str, signatures: list[str]) -> list[int]:
    ids: dict[int, None] = {}  # ordered set, capped while scanning
    for source in signatures[:20] or [text[:20_000]]:
        for match in _TOKEN_ID.finditer(source):
            ids[int(match.group(1) or match.group(2))] = None
            if len(ids) >= MAX_TOKEN_IDS:
                return list(ids)
        for match in _TOKEN_LIST.finditer(source):
            for part in match.group(1).split(","):
                ids[int(part)] = None
                if len(ids) >= MAX_TOKEN_IDS:
                    return list(ids)
    return list(ids)


# Signs that an input is about gpt-oss: its name, its Harmony format, its special tokens.
_GPT_OSS = re.compile(
    r"gpt-?oss|harmony|<\|(?:start|end|message|channel|return|call|constrain)\|>|o200k|\b(?:20|120)b\b", re.I
)
# Other open-weight model families: an input about one of them (and not gpt-oss) is outside our scope.
# The last line holds the other reasoning-model series of vLLM's reasoning-outputs page
# (docs/features/reasoning_outputs.md: QwQ-32B, ERNIE-4.5, Hunyuan A13B, MiniMax-M2, Holo2, Cohere
# Command A): models whose reasoning and tool-call failures read like gpt-oss's.
_OTHER_MODEL = re.compile(
    r"\b(llama[- ]?[234](?:\.\d)?|qwen\d?(?:\.\d)?|mistral|mixtral|deepseek|gemma\d?|phi-?[234]|granite"
    r"|glm-?4(?:\.\d)?|kimi|falcon|command-r"
    r"|qwq|ernie[- ]?\d(?:\.\d)?|hunyuan|minimax|holo\d|command-a)\b",
    re.I,
)


def names_a_model(text: str) -> bool:
    """True when ``text`` names gpt-oss (or its Harmony format) or another model family."""
    return _GPT_OSS.search(text) is not None or _OTHER_MODEL.search(text) is not None


def _other_model(text: str) -> str | None:
    """Another model family named by an input that carries no gpt-oss or Harmony signal."""
    window = text[:100_000]
    if _GPT_OSS.search(window):
        return None
    match = _OTHER_MODEL.search(window)
    return match.group(1) if match else None


# A chat completion the user pasted (JSON or a Python dict): what its fields show, in the words of the
# reference sections that cover it (reference/known-issues.md), for an input with no error line or sentence.
_CONTENT_HARMONY = re.compile(
    r"""["']content["']\s{0,3}:\s{0,3}["'][^"']{0,2000}?<\|(?:channel|start|message|constrain|call)\|>"""
)
# A tool call's markers, or JSON arguments opened on the commentary channel (where Harmony puts tool calls).
_CONTENT_TOOL = re.compile(
    r"""<\|(?:constrain|call)\|>|\bto=functions\.|<\|channel\|>commentary<\|message\|>\s{0,3}\{"""
)
_NO_TOOL_CALLS = re.compile(r"""["']tool_calls["']\s{0,3}:\s{0,3}(?:\[\s{0,3}\]|null|None)""")
_TOOL_NAME_HARMONY = re.compile(r"""["']name["']\s{0,3}:\s{0,3}["'][^"']{0,200}?<\|""")
_NULL_CONTENT_STOP = re.compile(
    r"""["']content["']\s{0,3}:\s{0,3}(?:null|None)\b.{0,2000}?["']finish_reason["']\s{0,3}:\s{0,3}["']stop""", re.S
)
# The model's raw Harmony output as a client showed it, a line of its own (no JSON around it): the server
# returned the markup instead of parsing it.
_RAW_HARMONY = re.compile(r"^\s{0,8}(?:<\|start\|>assistant)?<\|channel\|>(?:analysis|commentary|final)\b", re.M)
_RAW_TOOL = re.compile(r"[^\n]{0,200}?(?:\bto=|<\|constrain\|>|<\|call\|>)")
# A Responses API object cut off by its token budget (``status='incomplete'``, ``reason='max_output_tokens'``).
_STATUS_INCOMPLETE = re.compile(r"""\bstatus["']?\s{0,3}[:=]\s{0,3}["']incomplete["']""")
_REASON_BUDGET = re.compile(r"""\breason["']?\s{0,3}[:=]\s{0,3}["']max_output_tokens["']""")
_RESPONSE_WINDOW = 20_000


def _with_facts(query: str, shows: list[str], lead: bool) -> str:
    """The query text with what a pasted response shows: leading it, or after the user's words (``lead``
    False) that say the symptom first."""
    if not shows:
        return query
    return "\n".join([*shows, query] if lead else [query, *shows])[:MAX_QUERY_CHARS]


def _response_facts(text: str) -> list[str]:
    """What a pasted chat completion shows, as the titles of the reference sections that cover it: raw
    Harmony in its content (a tool call with no tool_calls, or reasoning), Harmony tokens in a tool name,
    or no content with finish_reason stop; empty for anything else."""
    window = text[:_RESPONSE_WINDOW]
    incomplete = "incomplete" in window and _STATUS_INCOMPLETE.search(window) and _REASON_BUDGET.search(window)
    raw = _RAW_HARMONY.search(window) if "<|channel|>" in window else None
    if "content" not in window and "name" not in window and raw is None:
        return ["Responses API output status and truncation"] if incomplete else []
    facts = []
    harmony = _CONTENT_HARMONY.search(window) or raw
    if harmony is not None:
        if _CONTENT_TOOL.search(window, harmony.start()) or (harmony is raw and _RAW_TOOL.match(window, raw.end())):
            empty = _NO_TOOL_CALLS.search(window) is not None or "tool_calls" not in window
            if empty:
                facts.append("Tool call JSON in content and tool_calls empty")
        else:
            facts.append("Reasoning appears in content")
    if _TOOL_NAME_HARMONY.search(window):
        facts.append("Harmony tokens leak into tool names")
    if _NULL_CONTENT_STOP.search(window):
        facts.append("Content is null with finish reason stop")
    if incomplete:
        facts.append("Responses API output status and truncation")
    return facts


def _query_text(text: str, lines: list[EvidenceLine], distilled: Distilled) -> str:
    """What the lexical and dense legs see: the failure lines and the user's words, no boilerplate."""
    strong = [e.text for e in lines if e.weight >= 1.0][:3]
    chosen = strong or [e.text for e in lines if e.kind in {"warning", "notice"}][:3]
    if not chosen and distilled.is_log_dump:
        # A log with only weak failing lines (a wrapper's "EngineCore failed to start"): they say what failed,
        # more than the start-up records around them do; beside the user's sentence, the two that say most.
        if distilled.prose:
            weak = (e.text for e in lines if e.kind in {"wrapper", "error"} and not CHAINING.match(e.text))
            chosen = [text for text in weak if len(text.split()) >= 3][:2]
        else:
            chosen = [e.text for e in lines][:3]
    chosen += distilled.prose
    if not chosen:
        if distilled.is_log_dump or distilled.dropped:
            # In a log, the text the user put among the records says more than the records do.
            plain = set(distilled.plain)
            chosen = [*distilled.plain, *(line for line in distilled.kept if line not in plain)][:20]
        else:
            return text.strip()[:MAX_QUERY_CHARS]
    return "\n".join(chosen)[:MAX_QUERY_CHARS]


MAX_THREADS = 10
"""Threads kept per input."""
_THREAD_URL = re.compile(r"github\.com/([\w.-]{1,39})/([\w.-]{1,100})/(?:issues|pull|discussions)/(\d{1,7})\b")
_THREAD_REF = re.compile(r"(?<![\w/.-])([A-Za-z0-9][\w-]{0,38})/([\w.-]{1,100})#(\d{1,7})\b")


# A bare thread number: "#22403" (four digits or more: "#1" is a list item) or "issue 22403" / "PR #23318".
_THREAD_NUMBER = re.compile(
    r"(?<![\w/#-])#(\d{4,7})\b|\b(?:issues?|PRs?|pull(?: request)?|tickets?)\s{0,2}#?(\d{3,7})\b", re.I
)


_NUMBER_WORDS = ("issue", "pr", "pull", "ticket")


def _named_threads(lines: list[str], errors: set[str]) -> tuple[list[str], list[int]]:
    """The threads the lines name, in order, at most ``MAX_THREADS`` of each kind: by URL or
    ``owner/name#number``, and by a bare number (``#22403``, ``issue 12187``) outside an error line
    (``errors``: the input's error lines, normalised; "CUDA error #2000" is the error's number)."""
    threads: dict[str, None] = {}
    numbers: dict[int, None] = {}
    for line in lines:
        low = line.lower()
        if "/" not in line and "#" not in line and not any(word in low for word in _NUMBER_WORDS):
            continue
        for pattern in (_THREAD_URL, _THREAD_REF):
            for owner, name, number in pattern.findall(line):
                threads[f"{owner}/{name}#{int(number)}"] = None
        bare = _THREAD_REF.sub(" ", line)  # owner/name#number is a named thread, not a bare number
        found = _THREAD_NUMBER.findall(bare)
        if found and normalize_signature(line) not in errors:
            for hashed, worded in found:
                numbers[int(hashed or worded)] = None
        if len(threads) >= MAX_THREADS and len(numbers) >= MAX_THREADS:
            break
    return list(threads)[:MAX_THREADS], list(numbers)[:MAX_THREADS]


# A sentence that says where the model runs fine ("Running gguf on llama.cpp without problem"): the engine it
# names is the comparison, not the one that fails.
_WORKS = Needled(
    r"\b(?:without (?:any )?(?:problems?|issues?|errors?)|works? (?:fine|well|perfectly|great)"
    r"|no (?:problems?|issues?) (?:with|on|in))\b",
    ("without ", "work fine", "works fine", "work well", "works well", "work perfectly", "works perfectly",
     "work great", "works great", "no problem", "no issue"),
    re.I,
)  # fmt: skip
_FAILS = re.compile(
    r"\b(?:fail|error|crash|broke|die[sd]?\b|hang|stuck|garbage|wrong|not work|doesn't work|does not work|can't"
    r"|cannot)",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n")


def _without_working(text: str) -> str:
    """``text`` without its sentences that only say where things work (the caller checks that the input
    holds one of ``_WORKS``'s needles first)."""
    head = text[:_FLAG_SCAN_CHARS]
    if not _WORKS.pattern.search(head):
        return text
    parts = _SENTENCE_END.split(head)
    kept = (part for part in parts if not (_WORKS.pattern.search(part) and not _FAILS.search(part)))
    return "\n".join(kept) + text[_FLAG_SCAN_CHARS:]


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the line spans ``[start, end)`` (a report's environment sections)."""
    if not spans:
        return ""
    lines = text.splitlines()
    for start, end in reversed(spans):
        del lines[start:end]
    return "\n".join(lines)


def parse_input(text: str) -> ParsedInput:
    """Parse one pasted error line, client exception, traceback or whole log."""
    text = unwrap_log(text)
    keyed = keyed_error_lines(text)
    lines = [EvidenceLine(text=e.text, weight=e.weight, kind=e.kind, said=e.said) for e, _ in keyed]
    # Each error line's normalize_signature() comes with it (error_lines computes it to deduplicate).
    signature_keys = [(e.text, key) for e, key in keyed if e.kind in {"exception", "message", "error", "warning"}]
    signatures = [line for line, _ in signature_keys]
    folded = _folded(text)
    distilled = distill(text)
    body = _without(text, distilled.environment)
    strong = [e.text for e in lines if e.weight >= 1.0]
    # A sentence that is itself an error line is already evidence: prose is what the user adds to it.
    seen = {key for _, key in keyed}
    distilled.prose = [line for line in distilled.prose if normalize_signature(line) not in seen]
    # A pasted response with no error line: its fields say what went wrong, beside any sentence of the user.
    shows = [] if strong else _response_facts(text)
    # The user's lines (a log record that links an issue is the engine's remark, not the user's).
    # An undecorated error line is the user's too when it links a thread ("... (github.com/...) seems related
    # to this error").
    users = [e.text for e, _ in keyed if e.kind == "error" and not e.record]
    threads, numbers = _named_threads([*distilled.prose, *distilled.plain, *users], seen)
    # A lead-in to an error ("... is:") with no error line anywhere: the paste may have left the error out.
    # A notice (a deprecation, a hint) or an access line is no error line: the announced error is still missing.
    announced = (
        next((p for p in distilled.prose if (p.endswith(":") and LEAD_IN.search(p)) or POINTER.search(p)), None)
        if not signatures
        else None
    )
    # Where the user says the model works is no failing engine; the needles of that phrasing are rare in logs.
    works = _WORKS.possible(folded)
    told = detect_engines(_without_working(body) if works else body, strong[:5]) if body else []
    named = detect_engines(_without_working(text) if works else text, strong[:5])
    parsed = ParsedInput(
        text=text,
        signatures=signatures,
        normalized=[key for _, key in signature_keys],
        evidence=lines,
        query_text=_with_facts(_query_text(text, lines, distilled), shows, lead=not distilled.prose),
        response_shows=shows,
        is_log=any(e.weight >= 1.0 for e in lines),
        versions=_versions(text, folded),
        flags=_flags(text),
        model=_model(text, folded),
        client=detect_client(body or text),  # a package list names libraries installed, not the client
        # A report's account names the failing engine first; its environment section, what is installed.
        engines=[*told, *(e for e in named if e not in told)],
        token_ids=_token_ids(text, signatures),
        prose=distilled.prose,
        failure_found=not announced and (bool(strong or distilled.prose) or not distilled.is_log_dump),
        announced=announced,
        other_model=_other_model(text),
        platform=detect_platform(text),
        log_dump=distilled.is_log_dump,
        body=body,
        threads=threads,
        numbers=numbers,
        plain=distilled.plain if distilled.is_log_dump and not (strong or distilled.prose) else [],
    )
    records = [e.record for e, _ in keyed if e.weight >= 1.0 and e.record][:5]
    parsed.failure_engines = parsed.named_by_failure(parsed.engines, detect_engines, records)
    if told:  # the failure's engines are the ones the report's account names
        parsed.failure_engines = [e for e in parsed.failure_engines if e in told] or parsed.failure_engines
    return parsed
