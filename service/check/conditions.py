"""When an action applies, and what a setup's value for an action's target is.

The known problems in ``reference/`` name, for each action, a ``when`` condition from a closed
vocabulary and a ``target`` (a server flag, an environment variable, a request parameter, a package
or a model file). This module is the one place that knows how to read those from a :class:`Setup`.
A condition is three-valued: True (the setup shows it), False (it shows the opposite) or None (the
input does not say, e.g. a command line says nothing about whether requests carry tools).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from service.check.facts import Api, InputKind, Setup, implicit_ignore_eos

# Tool types that the Responses API runs server-side (built-in tools and MCP), as opposed to functions.
_BUILTIN_TOOL_TYPES = frozenset(
    {"web_search_preview", "web_search", "code_interpreter", "browser", "python", "container", "mcp"}
)
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_MIRROR_ENV = ("HF_ENDPOINT",)
_TRUE = {"1", "true", "yes", "on"}
_HISTORY_ITEM_TYPES = frozenset({"function_call", "function_call_output", "reasoning", "message"})
_OPENAI_WEIGHTS = re.compile(r"^(?:openai/)?gpt-oss-(?:20b|120b)$", re.I)
BENCHMARK_PROGRAMS = frozenset({"vllm bench", "guidellm", "benchmark_serving.py"})


def _request(setup: Setup) -> dict[str, Any]:
    return setup.request or {}


def _tools(setup: Setup) -> list[dict[str, Any]]:
    tools = _request(setup).get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def _uses_tools(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return any(t.get("type", "function") == "function" for t in _tools(setup))
    if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE}:
        return None  # a server is started for whatever requests come
    return False


def _builtin_tools(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return any(str(t.get("type")) in _BUILTIN_TOOL_TYPES for t in _tools(setup))
    if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE}:
        return True if "--tool-server" in setup.flags else None
    return False


def _reasoning(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return True  # every gpt-oss answer carries reasoning; whether it is split is the server's call
    return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False


def _streaming(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return bool(_request(setup).get("stream"))
    return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False


def _offline(setup: Setup) -> bool | None:
    if any(setup.env.get(name, "").lower() in _TRUE for name in _OFFLINE_ENV):
        return True
    if any(setup.env.get(name) for name in _MIRROR_ENV):
        return True
    return None


def _benchmark(setup: Setup) -> bool | None:
    if setup.kind is InputKind.COMMAND:
        return setup.program in BENCHMARK_PROGRAMS or "--ignore-eos" in setup.flags
    return None


def _tool_choice_required(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return str(_request(setup).get("tool_choice", "")).lower() == "required"
    return None


def _multi_turn(setup: Setup) -> bool | None:
    """A request that carries earlier assistant turns (or Responses items) back to the server."""
    if setup.kind is not InputKind.REQUEST:
        return None
    request = _request(setup)
    history = request.get("messages") if setup.api is Api.CHAT else request.get("input")
    if not isinstance(history, list):
        return bool(request.get("previous_response_id"))
    return any(
        isinstance(item, dict) and (item.get("role") == "assistant" or item.get("type") in _HISTORY_ITEM_TYPES)
        for item in history
    )


def _api_is(api: Api) -> Callable[[Setup], bool | None]:
    def _condition(setup: Setup) -> bool | None:
        if setup.kind is InputKind.REQUEST:
            return setup.api is api
        return None

    return _condition


def _custom_checkpoint(setup: Setup) -> bool | None:
    """Weights other than OpenAI's own release (fine-tuned, merged, converted, re-quantised)."""
    if not setup.model:
        return None
    return not _OPENAI_WEIGHTS.match(setup.model)


def _multi_gpu(setup: Setup) -> bool | None:
    if setup.kind not in {InputKind.COMMAND, InputKind.ARGS_LINE}:
        return None
    for flag in ("--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "--data-parallel-size"):
        value = setup.flags.get(flag)
        if value is not None and value.isdigit() and int(value) > 1:
            return True
    return setup.flags.get("--enable-expert-parallel") == "true" or False


def _unknown(setup: Setup) -> bool | None:
    return None


def _never(setup: Setup) -> bool | None:
    return False


def _always(setup: Setup) -> bool | None:
    return True


CONDITIONS: dict[str, Callable[[Setup], bool | None]] = {
    "always": _always,
    "tools": _uses_tools,
    "built-in-tools": _builtin_tools,
    "tool-choice-required": _tool_choice_required,
    "reasoning": _reasoning,
    "multi-turn": _multi_turn,
    "streaming": _streaming,
    "chat-completions": _api_is(Api.CHAT),
    "responses-api": _api_is(Api.RESPONSES),
    "offline": _offline,
    "benchmark": _benchmark,
    "custom-checkpoint": _custom_checkpoint,
    "multi-gpu": _multi_gpu,
    # Not visible in a command, an args line, a request or model files: such rules never fire here.
    "offline-inference": _unknown,
    "gpu": _unknown,
    "install": _unknown,
    "langchain": _unknown,
    "litellm": _unknown,
    "openai-agents": _unknown,
    "codex": _unknown,
    "pydantic-ai": _unknown,
    # check reads vLLM setups: rules for code that drives openai-harmony itself, or for another
    # engine's own flags and releases, do not apply.
    "non-vllm": _never,
    "sglang": _never,
}
"""Every ``when`` of the reference docs (``indexer.problems.WHENS``); a test checks they match."""

WARN_WHEN_UNKNOWN = frozenset({"tools", "reasoning"})
"""Conditions a server start-up should prepare for even when the input cannot tell (most gpt-oss
deployments serve tool calls and want reasoning apart). Others, unknown, raise nothing."""


def conditions_hold(names: Iterable[str], setup: Setup) -> bool | None:
    """All of an action's ``when`` conditions, three-valued: False if one fails, True if all hold.

    KeyError names a condition this module does not know.
    """
    states = [CONDITIONS[name](setup) for name in names]
    if False in states:
        return False
    return None if None in states else True


def warn_when_unknown(names: Iterable[str], setup: Setup) -> bool:
    """An undecided action still warns when every undecided condition is one to prepare for."""
    return all(name in WARN_WHEN_UNKNOWN for name in names if CONDITIONS[name](setup) is None)


# --- targets ----------------------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{1,80}$")
_PARAM_NAME = re.compile(r"^[a-z][a-z0-9_.]{1,60}$")
PACKAGES = frozenset({"vllm", "openai-harmony", "transformers"})
MAX_ITEMS = 256
"""Items of one list read for a dotted target (a request's tools or messages)."""
REQUEST_PARAMS = frozenset(
    {
        "model",
        "messages",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "store",
        "background",
        "previous_response_id",
        "include",
        "truncation",
        "reasoning_effort",
        "reasoning",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "min_tokens",
        "ignore_eos",
        "stop",
        "stop_token_ids",
        "include_stop_str_in_output",
        "skip_special_tokens",
        "temperature",
        "top_p",
        "n",
        "seed",
        "logprobs",
        "response_format",
        "structured_outputs",
    }
)
"""Request body fields of the OpenAI Chat Completions / Responses APIs and vLLM's extra sampling fields.
A lower-case target outside this set (a client library's or a trainer's option) is not in a request."""


def is_benchmark_command(setup: Setup) -> bool:
    """A benchmark client's command line: its flags are the client's, not the server's."""
    return setup.kind is InputKind.COMMAND and setup.program in BENCHMARK_PROGRAMS


def observable(target: str, setup: Setup) -> bool:
    """Whether this kind of input can show ``target`` at all: a request body shows no server flag, an
    args line no environment, and a package version only when the input states it. A benchmark
    client's command shows its own flags; whether a rule is about them is the rule's ``when``
    (``benchmark``), which :func:`service.check.rules.evaluate` asks."""
    if target.startswith("--"):
        return setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE}
    if target in PACKAGES:
        return target in setup.versions
    if target.endswith((".json", ".jinja")):
        return setup.kind is InputKind.MODEL
    if _ENV_NAME.match(target):
        return setup.kind is InputKind.COMMAND
    if not is_request_param(target):
        return False
    # A command shows request fields only when it is a benchmark client that sends them (--ignore-eos).
    return setup.kind is InputKind.REQUEST or (setup.kind is InputKind.COMMAND and setup.program in BENCHMARK_PROGRAMS)


def is_request_param(target: str) -> bool:
    """True for a field of an OpenAI-compatible request body."""
    return target.split(".", 1)[0] in REQUEST_PARAMS


def target_values(target: str, setup: Setup) -> tuple[str, ...]:
    """What the setup sets ``target`` to, as text; empty when it does not set it.

    A dotted request target reads through lists (``tools.type``: the type of every tool), so it can
    hold several values. A request parameter is also read from the matching server or benchmark flag
    (``ignore_eos`` from ``--ignore-eos``), so the same rule catches it on either side.
    """
    if target.startswith("--"):
        value = setup.flags.get(target)
    elif target in PACKAGES:
        value = setup.versions.get(target)
    elif _ENV_NAME.match(target):
        value = setup.env.get(target)
    elif _PARAM_NAME.match(target):
        found = _dig(_request(setup), target.split("."))
        if found:
            return tuple(_text(v) for v in found)
        value = setup.flags.get("--" + target.replace("_", "-"))
        if value is None and target == "ignore_eos":
            value = implicit_ignore_eos(setup)
    else:
        value = None
    return () if value is None else (value,)


def _dig(data: Any, path: list[str]) -> list[Any]:
    """The values at ``path`` under ``data``; a list on the way fans out over its items."""
    if not path:
        return [] if data is None else [data]
    if isinstance(data, list):
        return [value for item in data[:MAX_ITEMS] for value in _dig(item, path)]
    if isinstance(data, dict):
        return _dig(data.get(path[0]), path[1:])
    return []


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return str(value.get("type", "")) or "object"
    return str(value)
