"""What a setup says about itself: the facts ``gptoss-doctor check`` tests the known problems against.

Four kinds of input are read, and which one arrived is detected from the text:

- a ``vllm serve`` command line (with ``VAR=value`` prefixes, ``export`` lines, ``docker run -e``),
- the ``non-default args: {...}`` line vLLM logs at start-up,
- a request body for Chat Completions (``messages``) or the Responses API (``input``),
- a model folder, or the text of its ``generation_config.json`` / ``config.json``.

Everything is bounded: inputs are capped before parsing and no step is worse than linear.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from packaging.version import Version

from service.flag_names import vllm_flag
from service.versions import VLLM_LOGO_VERSION, parse_version

MAX_CHECK_CHARS = 262_144
"""The largest text ``check`` reads: a command, a request body or a config file is far smaller."""
MAX_FLAGS = 400
"""Flags kept from one command line; a longer list is not a real command."""
MAX_MODEL_FILE_BYTES = 4_194_304
"""The largest model-folder file read (a chat template or config); weights are never opened."""


class CheckInputError(ValueError):
    """The input is none of the kinds ``check`` reads, or it is malformed: the message says which and why."""


class InputKind(StrEnum):
    """Which kind of setup description arrived."""

    COMMAND = "command"
    ARGS_LINE = "args-line"
    REQUEST = "request"
    MODEL = "model"


class Api(StrEnum):
    """The OpenAI-compatible API a request body targets."""

    CHAT = "chat-completions"
    RESPONSES = "responses"


@dataclass
class Setup:
    """The facts read from one input. Unknown facts stay unknown (None), never guessed."""

    kind: InputKind
    flags: dict[str, str] = field(default_factory=dict)
    """Server flags by name (``--tool-call-parser``) -> value (``"true"`` for a bare switch)."""
    env: dict[str, str] = field(default_factory=dict)
    request: dict[str, Any] | None = None
    api: Api | None = None
    model: str | None = None
    program: str | None = None
    """What a command line runs: ``vllm serve``, ``vllm bench``, ``guidellm`` ..."""
    versions: dict[str, str] = field(default_factory=dict)
    generation_config: dict[str, Any] | None = None
    model_config: dict[str, Any] | None = None
    chat_template: str | None = None
    notes: list[str] = field(default_factory=list)
    """What was read and what was skipped, for the answer's ``read`` section."""

    def version(self, package: str) -> Version | None:
        """The parsed version of ``package`` (``vllm``, ``openai-harmony``) when the input states it."""
        return parse_version(self.versions.get(package))


# --- detection ---------------------------------------------------------------------------------------

_ARGS_LINE = re.compile(r"non-default args:\s{0,8}(\{.*)", re.S)
_COMMAND = re.compile(
    r"\bvllm\s+(?:bench\s+)?serve\b|vllm\.entrypoints\.openai\.api_server|\bvllm/vllm-openai\b"
    r"|(?m:^\s*(?:\S*/)?guidellm\s)|\bbenchmark_serving\.py\b"
)
# vLLM's start-up line: "vLLM API server version X" up to 0.14.x; from 0.15.0 (read in the release
# packages) the banner's "<logo>  version X" (service.versions.VLLM_LOGO_VERSION), or "vLLM server version
# X, serving model Y" when VLLM_DISABLE_LOG_LOGO=1 or another logger formats it.
_VERSION_LINE = re.compile(
    r"vLLM (?:API )?server version\s+(\d[\w.+-]{0,40})|\bvllm[=@:]{1,2}v?(\d[\w.+-]{1,40})", re.I
)


def _vllm_version(text: str) -> str | None:
    """The vLLM version a command line or start-up log shows."""
    if version := _VERSION_LINE.search(text):
        return version.group(1) or version.group(2)
    if version := VLLM_LOGO_VERSION.search(text):
        return version.group(1)
    return None


def read_setup(text: str) -> Setup:
    """Detect the kind of ``text`` and read its facts; CheckInputError when it is none of them."""
    if not text or not text.strip():
        raise CheckInputError("nothing to check: pass a vllm serve command, a request body or a model folder")
    if len(text) > MAX_CHECK_CHARS:
        raise CheckInputError(
            f"input is {len(text):,} characters; check reads at most {MAX_CHECK_CHARS:,} "
            "(a command, a request body or a config file)"
        )
    stripped = text.strip()
    if stripped.startswith("{") or stripped.startswith("["):
        data = _load_json(stripped)
        if isinstance(data, dict) and ("messages" in data or "input" in data):
            return _request_setup(data)
        if isinstance(data, dict) and ("eos_token_id" in data or "model_type" in data):
            return _model_setup_from_json(data)
        raise CheckInputError(
            "this JSON is neither a request body (it has no 'messages' or 'input') nor a "
            "generation_config.json / config.json (no 'eos_token_id' or 'model_type')"
        )
    args = _ARGS_LINE.search(text)
    if args:
        return _args_line_setup(args.group(1), text)
    if _COMMAND.search(text) or re.search(r"(?m)^\s*(?:export\s+)?[A-Z][A-Z0-9_]{1,60}=\S", text):
        return _command_setup(text)
    raise CheckInputError(
        "could not tell what this is: pass a `vllm serve ...` command, vLLM's 'non-default args: {...}' "
        "start-up line, a JSON request body, or a model folder / its generation_config.json"
    )


def read_model_folder(path: Path) -> Setup:
    """A model folder's generation_config.json, config.json and chat template (never the weights)."""
    if not path.is_dir():
        raise CheckInputError(f"{path} is not a folder")
    setup = Setup(kind=InputKind.MODEL, model=path.name)
    for name in ("generation_config.json", "config.json"):
        file = path / name
        if not file.is_file():
            setup.notes.append(f"{name}: not found in {path}")
            continue
        data = _load_json(_read_small(file), what=name)
        if not isinstance(data, dict):
            raise CheckInputError(f"{file}: expected a JSON object")
        if name == "generation_config.json":
            setup.generation_config = data
        else:
            setup.model_config = data
        setup.notes.append(f"{name}: read")
    for name in ("chat_template.jinja", "tokenizer_config.json"):
        file = path / name
        if not file.is_file():
            continue
        raw = _read_small(file)
        if name.endswith(".json"):
            config = _load_json(raw, what=name)
            template = config.get("chat_template") if isinstance(config, dict) else None
            if isinstance(template, str):
                setup.chat_template = template
        else:
            setup.chat_template = raw
        if setup.chat_template is not None:
            setup.notes.append(f"chat template: read from {name}")
            break
    if setup.generation_config is None and setup.model_config is None:
        raise CheckInputError(f"{path} has neither generation_config.json nor config.json: is it a model folder?")
    return setup


def _read_small(file: Path) -> str:
    size = file.stat().st_size
    if size > MAX_MODEL_FILE_BYTES:
        raise CheckInputError(f"{file} is {size:,} bytes; check reads config files of at most {MAX_MODEL_FILE_BYTES:,}")
    return file.read_text(encoding="utf-8", errors="replace")


def _load_json(text: str, *, what: str = "the input") -> Any:
    try:
        return json.loads(text, parse_int=_bounded_int)
    except (json.JSONDecodeError, ValueError) as exc:
        raise CheckInputError(f"{what} looks like JSON but does not parse: {exc}") from None


def _bounded_int(text: str) -> int:
    if len(text) > 40:
        raise ValueError(f"a number of {len(text)} digits is not a setting")
    return int(text)


# --- command lines -----------------------------------------------------------------------------------

_PROGRAMS = frozenset({"guidellm", "benchmark_serving.py"})
IGNORE_EOS_DATASETS = frozenset({"random", "random-mm"})
"""Datasets on which ``vllm bench serve`` turns ignore_eos on by itself, with no flag to turn it off
(vllm-project/vllm#28227; first in vLLM 0.11.1, per the release packages). ``random`` is its default."""
IGNORE_EOS_SINCE = "0.11.1"
_ENV_ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]{1,60})=(.{0,400})$")


def _command_setup(text: str) -> Setup:
    setup = Setup(kind=InputKind.COMMAND)
    joined = re.sub(r"\\\r?\n", " ", text)
    for line in joined.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise CheckInputError(f"cannot split this command line: {exc} (an unclosed quote?)") from None
        # vLLM's own command lines (vllm serve, its api_server module, its image), not a benchmark client's.
        _read_words(words, setup, vllm="vllm" in line.lower() and not any(p in line for p in _PROGRAMS))
    if version := _vllm_version(text):
        setup.versions["vllm"] = version
    setup.notes.append(f"command line: {len(setup.flags)} flags, {len(setup.env)} environment variables")
    if setup.program == "guidellm":
        setup.notes.append(
            "guidellm's openai_http backend sends ignore_eos whenever an output length is set; "
            "extras.body.ignore_eos=false in --backend turns it off (documented by vllm-project/guidellm#982)"
        )
    if setup.program == "vllm bench" and "--ignore-eos" not in setup.flags and implicit_ignore_eos(setup) == "true":
        setup.notes.append(
            f"vllm bench serve on the {setup.flags.get('--dataset-name', 'random')} dataset sends ignore_eos=true "
            f"without --ignore-eos (vllm-project/vllm#28227, vLLM {IGNORE_EOS_SINCE} and later); another dataset "
            "leaves it off"
        )
    return setup


_GUIDELLM_EOS_OFF = re.compile(r"ignore_eos[\"']?\s*[:=]\s*false", re.I)


def implicit_ignore_eos(setup: Setup) -> str | None:
    """What a benchmark client's command sends as ignore_eos without a flag for it, when the command shows it.

    ``vllm bench serve`` on a random dataset sends true (vllm-project/vllm#28227), unless the input shows a
    vLLM older than the release that added that default. guidellm's openai_http backend sends true when
    ``--data`` sets an output length, unless ``--backend`` carries ``extras.body.ignore_eos=false``.
    """
    if setup.kind is not InputKind.COMMAND:
        return None
    if setup.program == "vllm bench":
        if setup.flags.get("--dataset-name", "random") not in IGNORE_EOS_DATASETS:
            return None
        have, since = setup.version("vllm"), parse_version(IGNORE_EOS_SINCE)
        return "true" if have is None or since is None or have >= since else None
    if setup.program == "guidellm" and "output_tokens" in setup.flags.get("--data", ""):
        return "false" if _GUIDELLM_EOS_OFF.search(setup.flags.get("--backend", "")) else "true"
    return None


def _read_words(words: list[str], setup: Setup, *, vllm: bool = False) -> None:
    """Environment assignments, ``-e VAR=value`` (docker), the model argument and ``--flags``; ``vllm``:
    the line is vLLM's own command, whose parser reads underscores in a flag's name as dashes."""
    index = 0
    after_serve = False
    while index < len(words):
        word = words[index]
        nxt = words[index + 1] if index + 1 < len(words) else None
        runner = index == 1 and Path(words[0]).name.startswith("python")
        if (index == 0 or runner) and setup.program is None and Path(word).name in _PROGRAMS:
            setup.program = Path(word).name
        if word == "export":
            index += 1
            continue
        if (assign := _ENV_ASSIGN.match(word)) and not after_serve:
            setup.env[assign.group(1)] = assign.group(2)
        elif word in {"-e", "--env"} and nxt and (assign := _ENV_ASSIGN.match(nxt)):
            setup.env[assign.group(1)] = assign.group(2)
            index += 1
        elif word in {"serve", "bench"} and index > 0 and words[index - 1].endswith("vllm"):
            setup.program = setup.program or f"vllm {word}"
            after_serve = True
            if word == "bench" and nxt == "serve":
                index += 1
                nxt = words[index + 1] if index + 1 < len(words) else None
            if nxt and not nxt.startswith("-"):
                setup.model = nxt
                index += 1
        elif word == "serve":
            after_serve = True
            if nxt and not nxt.startswith("-"):
                setup.model = nxt
                index += 1
        elif word.startswith("--") and len(word) > 2:
            name, eq, value = word.partition("=")
            if vllm:
                name = vllm_flag(name)  # vLLM reads --tool_call_parser as --tool-call-parser
            if not eq:
                value = "true" if nxt is None or nxt.startswith("-") else nxt
                if value != "true":
                    index += 1
            if name in {"--model"}:
                setup.model = value
            if len(setup.flags) < MAX_FLAGS:
                setup.flags.setdefault(name, value)
        index += 1


# --- the start-up args line ----------------------------------------------------------------------------


def _args_line_setup(body: str, text: str) -> Setup:
    """vLLM's ``non-default args: {'tool_call_parser': 'openai', ...}``: keys become ``--flags``."""
    body = body[: body.rfind("}") + 1]
    if len(body) > 65_536:
        raise CheckInputError("the 'non-default args:' dict is over 64 KB: that is not a start-up line")
    try:
        args = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise CheckInputError(
            "the 'non-default args:' line does not parse as a Python dict literal (was the line cut?)"
        ) from None
    if not isinstance(args, dict):
        raise CheckInputError("the 'non-default args:' line does not hold a dict")
    setup = Setup(kind=InputKind.ARGS_LINE)
    for key, value in list(args.items())[:MAX_FLAGS]:
        if not isinstance(key, str):
            continue
        if key in {"model", "model_tag"} and isinstance(value, str):
            setup.model = value
            continue
        setup.flags["--" + key.replace("_", "-")] = _flag_value(value)
    if version := _vllm_version(text):
        setup.versions["vllm"] = version
    setup.notes.append(f"start-up args line: {len(setup.flags)} non-default settings")
    return setup


def _flag_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


# --- request bodies ------------------------------------------------------------------------------------


def _request_setup(data: dict[str, Any]) -> Setup:
    api = Api.CHAT if "messages" in data else Api.RESPONSES
    setup = Setup(kind=InputKind.REQUEST, request=data, api=api)
    if isinstance(data.get("model"), str):
        setup.model = data["model"]
    setup.notes.append(f"request body for the {api.value} API")
    return setup


# --- model files -----------------------------------------------------------------------------------------


def _model_setup_from_json(data: dict[str, Any]) -> Setup:
    setup = Setup(kind=InputKind.MODEL)
    if "eos_token_id" in data:
        setup.generation_config = data
        setup.notes.append("generation_config.json: read")
    else:
        setup.model_config = data
        setup.notes.append("config.json: read")
    return setup
