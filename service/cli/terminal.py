"""Text made safe for a terminal: control and bidirectional-override characters removed.

Issue titles and thread text come from GitHub users. Printed raw, an escape sequence can rewrite the
screen (clear it, move the cursor, set the window title) and a bidi override can make text read
differently from what it is, so both are removed before anything reaches the terminal.
"""

from __future__ import annotations

import re
from typing import Any

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 (but tab and newline) and C1 controls, DEL; ESC starts a sequence
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # bidi marks, embeddings, overrides and isolates
)


def terminal_safe(text: str) -> str:
    """``text`` without control characters (tab and newline kept) and bidi controls."""
    return _UNSAFE.sub("", text)


def terminal_safe_data(value: Any) -> Any:
    """Every string inside a JSON-like value (dicts, lists) made :func:`terminal_safe`."""
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        return {terminal_safe_data(k): terminal_safe_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [terminal_safe_data(v) for v in value]
    return value
