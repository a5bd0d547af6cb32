"""Package versions as users write them: ``0.10.1+gptoss``, ``v0.11.0``, ``0.11.1.dev5+gabc1234``."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_VERSION = re.compile(r"v?(\d{1,4}(?:\.\d{1,6}){1,3}(?:\.?(?:dev|rc|post)\d{0,8})?)")


# vLLM's start-up banner from 0.15.0 (read in the release packages): unless VLLM_DISABLE_LOG_LOGO=1 or
# another logger formats the record, the version is not on a "vLLM server version X" line but beside a
# logo drawn in block characters, every line under the record's prefix:
#   <record prefix> [utils.py:299]  <blocks>  version 0.19.1
#   <record prefix> [utils.py:299]  <blocks>  model   openai/gpt-oss-120b
# The coloured form wraps the value in ANSI escapes; pasted from a terminal they are gone, from a raw
# capture they may stay (with or without the escape character itself).
VLLM_LOGO_VERSION = re.compile(
    r"[\u2580-\u259f]\s{1,8}version\s{1,8}(?:\x1b?\[[\d;]{0,8}m)?v?(\d{1,4}\.\d{1,6}(?:\.\d{1,6})?[\w.+-]{0,40}?)"
    r"(?:\x1b?\[[\d;]{0,8}m|\s|$)",
    re.M,
)
"""vLLM's banner line with its version (group 1), from 0.15.0 on."""


def parse_version(text: str | None) -> Version | None:
    """The comparable release in ``text`` (a local ``+tag`` dropped); None when absent or unreadable.

    ``0.10.1+gptoss`` -> 0.10.1, ``v0.11.0`` -> 0.11.0, ``0.11.1.dev5+gabc1234`` -> 0.11.1.dev5.
    """
    match = _VERSION.match(text.strip()) if text else None
    if not match:
        return None
    try:
        return Version(match.group(1))
    except InvalidVersion:
        return None
