"""When an action applies, and what a setup's value for an action's target is.

The known problems in ``reference/`` name, for each action, a ``when`` condition from a closed
vocabulary and a ``target`` (a server flag, an environment variable, a request parameter, a package
or a model file). This module is the one place that knows how to read those from a :class:`Setup`.
A condition is three-valued: True (the setup shows it), False (it shows the opposite) or None (the
input does not say, e.g. a command line says nothing about whether requests carry tools).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from service.check.facts import Api, InputKind, Setup

# Tool types that the Responses API runs server-side (built-in tools and MCP), as opposed to functions.
_BUILTIN_TOOL_TYPES = frozenset(
    {"web_search_preview", "web_search", "code_interpreter", "browser", "python", "container", "mcp"}
)
_OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_MIRROR_ENV = ("HF_ENDPOINT",)
_TRUE = {"1", "true", "yes", "on"}


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
    return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False


def _reasoning(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return True  # every gpt-oss answer carries reasoning; whether it is split is the server's call
    return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False


def _streaming(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return bool(_request(setup).get("stream"))
    return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False


def _responses_api(setup: Setup) -> bool | None:
    if setup.kind is InputKind.REQUEST:
        return setup.api is Api.RESPONSES
    return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False


def _responses_store(setup: Setup) -> bool | None:
    """A Responses request that relies on the response store (store defaults to true there)."""
    if setup.kind is not InputKind.REQUEST:
        return None if setup.kind in {InputKind.COMMAND, InputKind.ARGS_LINE} else False
    request = _request(setup)
    if setup.api is not Api.RESPONSES:
        return False
    return bool(request.get("store", True) or request.get("background") or request.get("previous_response_id"))


def _offline(setup: Setup) -> bool | None:
    if any(setup.env.get(name, "").lower() in _TRUE for name in _OFFLINE_ENV):
        return True
    if any(setup.env.get(name) for name in _MIRROR_ENV):
        return True
    return None


def _benchmark(setup: Setup) -> bool | None:
    if setup.kind is InputKind.COMMAND and "--ignore-eos" in setup.flags:
        return True
    return None


def _always(setup: Setup) -> bool | None:
    return True


CONDITIONS: dict[str, Callable[[Setup], bool | None]] = {
    "always": _always,
    "tools": _uses_tools,
    "builtin-tools": _builtin_tools,
    "reasoning": _reasoning,
    "streaming": _streaming,
    "responses-api": _responses_api,
    "responses-store": _responses_store,
    "offline": _offline,
    "benchmark": _benchmark,
}
"""Every ``when`` the reference docs may use. A test checks the docs use no other."""

WARN_WHEN_UNKNOWN = frozenset({"tools", "reasoning"})
"""Conditions a server start-up should prepare for even when the input cannot tell (most gpt-oss
deployments serve tool calls and want reasoning apart). Others, unknown, raise nothing."""


def condition(name: str, setup: Setup) -> bool | None:
    """The value of one ``when`` condition for this setup; KeyError names an unknown condition."""
    return CONDITIONS[name](setup)


# --- targets ----------------------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{1,80}$")
_PARAM_NAME = re.compile(r"^[a-z][a-z0-9_.]{1,60}$")
PACKAGES = frozenset({"vllm", "openai-harmony", "transformers"})


def target_value(target: str, setup: Setup) -> str | None:
    """What the setup sets ``target`` to, as text; None when it does not set it.

    A request parameter is also read from the matching server or benchmark flag (``ignore_eos`` from
    ``--ignore-eos``), so the same rule catches it on either side.
    """
    if target.startswith("--"):
        return setup.flags.get(target)
    if target in PACKAGES:
        return setup.versions.get(target)
    if _ENV_NAME.match(target):
        return setup.env.get(target)
    if _PARAM_NAME.match(target):
        value = _dig(_request(setup), target)
        if value is None:
            value = setup.flags.get("--" + target.replace("_", "-"))
        return None if value is None else _text(value)
    return None


def _dig(data: dict[str, Any], dotted: str) -> Any:
    current: Any = data
    for part in dotted.split("."):
        if not isinstance(current, dict):
            return None
        current = current.get(part)
    return current


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return str(value.get("type", "")) or "object"
    return str(value)
