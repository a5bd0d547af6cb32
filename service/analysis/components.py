"""Which error family (card component) an input is about, learnt from the knowledge base.

A multinomial naive Bayes over the words of each component's threads (title, error strings, our
summary and cause), built once per index generation. It gives a confident "high" its second leg: a
described symptom is only a confident match for a thread of the family the input's own words point to.
No word list is written by hand: every weight comes from the threads.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from indexer.documents import Document

# Error families the input-side origin rules name, in the cards' component vocabulary.
RULE_COMPONENT = {
    "harmony-token": "harmony-parser",
    "harmony-header": "harmony-parser",
    "vocab-download": "tokenizer-vocab",
    "resources": "performance",
}


class ComponentModel:
    """P(component | words) from the threads of one index generation (multinomial, Laplace-smoothed)."""

    def __init__(self, documents: Sequence[Document], tokenize: Callable[[str], list[str]]) -> None:
        self._tokenize = tokenize
        counts: dict[str, Counter[str]] = {}
        docs: Counter[str] = Counter()
        for doc in documents:
            if doc.repo is None or not doc.component or doc.component == "other":
                continue
            text = "\n".join([doc.title, *doc.error_signatures[:10], doc.summary or "", doc.cause or ""])
            counts.setdefault(doc.component, Counter()).update(tokenize(text))
            docs[doc.component] += 1
        vocabulary = {t for c in counts.values() for t in c}
        v = len(vocabulary) or 1
        total = sum(docs.values()) or 1
        self._prior = {c: math.log(n / total) for c, n in docs.items()}
        self._log_p: dict[str, dict[str, float]] = {}
        self._unseen: dict[str, float] = {}
        for component, words in counts.items():
            denominator = sum(words.values()) + v
            self._log_p[component] = {t: math.log((n + 1.0) / denominator) for t, n in words.items()}
            self._unseen[component] = math.log(1.0 / denominator)
        self._known = vocabulary

    def rank(self, text: str, limit: int = 2) -> list[str]:
        """The most likely components for ``text``, best first (empty when it shares no word with any)."""
        tokens = [t for t in self._tokenize(text[:4000]) if t in self._known]
        if not tokens or not self._prior:
            return []
        scores = {
            c: prior + sum(self._log_p[c].get(t, self._unseen[c]) for t in tokens) for c, prior in self._prior.items()
        }
        return sorted(scores, key=lambda c: -scores[c])[:limit]
