"""Package versions as users write them: ``0.10.1+gptoss``, ``v0.11.0``, ``0.11.1.dev5+gabc1234``."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_VERSION = re.compile(r"v?(\d{1,4}(?:\.\d{1,6}){1,3}(?:\.?(?:dev|rc|post)\d{0,8})?)")


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
