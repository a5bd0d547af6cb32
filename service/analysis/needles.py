"""Literal prechecks for patterns that scan a whole input.

A pattern that starts with ``\\b``, a lookbehind or an alternation, or that is compiled with
``re.IGNORECASE``, gets no fast literal scan from ``re``: it is tried at every position, about 2 ms
on a 13 KB log, and most of them find nothing in most logs. Every match of such a pattern contains one
of a few literals (its *needles*), so when the input, lower-cased once, holds none of them, the
pattern cannot match and is not run. A substring search is a fast C scan. The answer is the same
either way; only the time changes.
"""

from __future__ import annotations

import re

# Non-ASCII letters that re.IGNORECASE matches to an ASCII one; mapped before lower() so a needle
# precheck never skips a pattern that would have matched.
_IGNORECASE_ASCII = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def folded(text: str) -> str:
    """``text`` lower-cased for needle prechecks that agree with re.IGNORECASE.

    Lower-casing maps one character to one or more, never a line break to anything else, so the
    result has the same lines as ``text``.
    """
    if not text.isascii():
        for char, ascii_char in _IGNORECASE_ASCII:
            if char in text:
                text = text.replace(char, ascii_char)
    return text.lower()


class Needled:
    """A compiled pattern with the lower-case literals one of which every match contains.

    The needles are a claim about the pattern (tests/analysis/test_needles.py checks it on one example
    per branch and on the KB's texts); a case-sensitive pattern's needles are its literals lower-cased.
    ``start`` is for a branch anchored at the text's start that has no literal (a shell prompt): it is
    matched there instead.
    """

    __slots__ = ("needles", "pattern", "start")

    def __init__(self, pattern: str, needles: tuple[str, ...], flags: int = 0, *, start: str | None = None) -> None:
        self.pattern = re.compile(pattern, flags)
        self.needles = needles
        self.start = re.compile(start, flags) if start is not None else None

    def possible(self, low: str) -> bool:
        """False when ``low`` (``folded`` text) holds no needle: only a ``start`` branch could match."""
        return any(needle in low for needle in self.needles)

    def could_match(self, text: str, low: str) -> bool:
        """False when the pattern cannot match ``text`` (``low`` is ``folded(text)``)."""
        return self.possible(low) or (self.start is not None and self.start.match(text) is not None)

    def search(self, text: str, low: str) -> re.Match[str] | None:
        """``pattern.search(text)``; ``low`` is ``folded(text)``."""
        return self.pattern.search(text) if self.could_match(text, low) else None
