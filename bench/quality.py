"""Retrieval quality on the labelled eval sets: the full pipeline against two baselines, in one run.

Metrics (see ../shared/eval/README.md): hit@1, hit@5 and MRR@10 over queries with relevant ids; the
negatives' rate of answers without a high-confidence issue; the positives' rate of answers that rate
an issue high which is not a relevant one (a wrong "high"); origin accuracy over queries that state
``expect.side``; advice hit rate over queries that state ``expect.advice_any``.

Baselines: plain BM25 over the cards (title + signatures + summary/cause/fix + flags, the whole query
text) and dense retrieval alone (the bundled model over the same card text).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from indexer.sources.cards import bundled_cards

EVAL_DIR = Path(os.environ.get("GPTOSS_DOCTOR_EVAL_DIR", Path(__file__).resolve().parents[2] / "shared" / "eval"))


@dataclass
class Query:
    """One labelled query."""

    id: str
    category: str
    text: str
    relevant: list[str]
    side: str | None
    advice_any: list[str]
    no_match: bool


@dataclass
class Outcome:
    """What a system answered for one query."""

    ranked: list[str]
    high_confidence: bool = False
    side: str | None = None
    answer_text: str = ""
    high_ids: list[str] = field(default_factory=list)
    """Issues rated high; a positive counts as a wrong high when one of them is not a relevant id."""
    verdict: list[str] | None = None
    """The threads the diagnosis' problem cites (its sources and fix PRs); None when there is no diagnosis."""
    gives_verdicts: bool = False
    """True for a system that diagnoses (the pipeline): only then are the verdict figures counted."""


@dataclass
class Metrics:
    """Aggregated metrics for one system on one eval set."""

    n: int = 0
    hit1: float = 0.0
    hit5: float = 0.0
    mrr10: float = 0.0
    negatives: int = 0
    negatives_no_match: float | None = None
    positives_wrong_high: float | None = None
    origin_n: int = 0
    origin_accuracy: float | None = None
    advice_n: int = 0
    advice_hit: float | None = None
    verdict_on_label: float | None = None
    """Positives whose diagnosis is a problem that cites one of their labelled threads."""
    verdict_off_label: float | None = None
    """Positives whose diagnosis cites none of their labelled threads (a wrong headline, or a right problem
    the labels do not reach: read the misses)."""
    negatives_verdict: float | None = None
    """Negatives that got a diagnosis (uncovered or unrelated inputs should get none)."""
    misses: list[str] = field(default_factory=list)
    tops: dict[str, str | None] = field(default_factory=dict)
    """Each positive's first answer (query id -> issue id, None when nothing was answered)."""
    top_high: set[str] = field(default_factory=set)
    """The positives whose first answer was rated high."""

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data.pop("misses")
        data.pop("tops")
        data.pop("top_high")
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in data.items()}


def query_from_record(raw: dict[str, Any]) -> Query:
    """One labelled query from its JSON record (the eval README's format)."""
    expect = raw.get("expect") or {}
    return Query(
        id=raw["id"],
        category=raw["category"],
        text=raw["query"],
        relevant=list(raw.get("relevant") or []),
        side=expect.get("side"),
        advice_any=list(expect.get("advice_any") or []),
        no_match=bool(expect.get("no_match")),
    )


def load_queries(name: str, eval_dir: Path = EVAL_DIR) -> list[Query]:
    """Read one eval file (``dev.jsonl`` or ``dev-hard.jsonl``)."""
    lines = (eval_dir / name).read_text(encoding="utf-8").splitlines()
    return [query_from_record(json.loads(line)) for line in lines if line.strip()]


def evaluate(queries: Sequence[Query], system: Callable[[Query], Outcome]) -> Metrics:
    """Run a system over the queries and aggregate the metrics."""
    m = Metrics()
    origin_ok = advice_ok = negatives_ok = wrong_high = 0
    on_label = off_label = negatives_verdict = 0
    verdicts = False
    for q in queries:
        out = system(q)
        verdicts = verdicts or out.gives_verdicts
        if out.gives_verdicts and out.verdict is not None:
            if q.relevant and set(out.verdict) & set(q.relevant):
                on_label += 1
            elif q.relevant:
                off_label += 1
                m.misses.append(f"{q.id} diagnosis cites none of {q.relevant[:3]}")
            if q.no_match:
                negatives_verdict += 1
        if q.relevant:
            m.n += 1
            m.tops[q.id] = out.ranked[0] if out.ranked else None
            if out.ranked and out.ranked[0] in out.high_ids:
                m.top_high.add(q.id)
            relevant = set(q.relevant)
            rank = next((i for i, doc_id in enumerate(out.ranked[:10]) if doc_id in relevant), None)
            if rank == 0:
                m.hit1 += 1
            if rank is not None and rank < 5:
                m.hit5 += 1
            if rank is not None:
                m.mrr10 += 1 / (rank + 1)
            if rank is None or rank > 0:
                m.misses.append(f"{q.id} rank={rank} top={out.ranked[:3]} want={q.relevant[:3]}")
            wrong = [i for i in out.high_ids if i not in relevant]
            if wrong:
                wrong_high += 1
                m.misses.append(f"{q.id} positive with a wrong high-confidence issue: {wrong[:2]}")
        if q.no_match:
            m.negatives += 1
            negatives_ok += not out.high_confidence
            if out.high_confidence:
                m.misses.append(f"{q.id} negative answered with high confidence: {out.ranked[:2]}")
        if q.side:
            m.origin_n += 1
            origin_ok += out.side == q.side
            if out.side != q.side:
                m.misses.append(f"{q.id} origin {out.side} != {q.side}")
        if q.advice_any:
            m.advice_n += 1
            hit = any(a.lower() in out.answer_text.lower() for a in q.advice_any)
            advice_ok += hit
            if not hit:
                m.misses.append(f"{q.id} advice missing any of {q.advice_any}")
    if m.n:
        m.hit1, m.hit5, m.mrr10 = m.hit1 / m.n, m.hit5 / m.n, m.mrr10 / m.n
    m.negatives_no_match = negatives_ok / m.negatives if m.negatives else None
    m.positives_wrong_high = wrong_high / m.n if m.n else None
    m.origin_accuracy = origin_ok / m.origin_n if m.origin_n else None
    m.advice_hit = advice_ok / m.advice_n if m.advice_n else None
    if verdicts:
        m.verdict_on_label = on_label / m.n if m.n else None
        m.verdict_off_label = off_label / m.n if m.n else None
        m.negatives_verdict = negatives_verdict / m.negatives if m.negatives else None
    return m


def card_baseline_text(card: Any) -> str:
    """The baselines' card text: title + signatures + summary/cause/fix + flags (as the eval README)."""
    parts = [card.title, *card.error_signatures, card.summary or "", card.cause or "", card.fix or "", *card.flags]
    return "\n".join(parts)


class BM25Baseline:
    """Plain BM25 over the cards with the whole query text, bm25s defaults (English stopwords)."""

    def __init__(self) -> None:
        self.cards = list(bundled_cards())
        self.ids = [c.id for c in self.cards]
        self.retriever = bm25s.BM25()
        corpus = bm25s.tokenize([card_baseline_text(c) for c in self.cards], stopwords="en", show_progress=False)
        self.retriever.index(corpus, show_progress=False)

    def __call__(self, q: Query) -> Outcome:
        tokens = bm25s.tokenize([q.text], stopwords="en", show_progress=False)
        docs, _ = self.retriever.retrieve(tokens, k=10, show_progress=False)
        return Outcome(ranked=[self.ids[i] for i in docs[0]])


class DenseBaseline:
    """Dense retrieval alone: the bundled model over the card text, the whole query text."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray]) -> None:
        self.cards = list(bundled_cards())
        self.ids = [c.id for c in self.cards]
        self.encode = encode
        self.matrix = encode([card_baseline_text(c) for c in self.cards])

    def __call__(self, q: Query) -> Outcome:
        vector = self.encode([q.text])[0]
        order = np.argsort(-(self.matrix @ vector))[:10]
        return Outcome(ranked=[self.ids[i] for i in order])


class PipelineSystem:
    """The full pipeline through ``LookupEngine`` on a real built index (adapter added by the bench).

    Ranked ids are the answer's ``issues``; ``high_confidence`` is true when any issue is rated high;
    ``side`` is ``analysis.origin.side``; the answer text is every fix (summary + steps), every
    advice item (summary + flags) and the diagnosis' actions, which is what ``expect.advice_any`` is
    matched against.
    """

    def __init__(self, engine: Any, *, top_k: int = 10) -> None:
        self.engine = engine
        self.top_k = top_k

    def __call__(self, q: Query) -> Outcome:
        answer = self.engine.lookup(q.text, top_k=self.top_k)
        parts: list[str] = []
        for fix in answer.fixes:
            parts += [fix.summary, *fix.steps]
        for advice in answer.advice:
            parts += [advice.summary, *(flag.text() for flag in advice.flags)]
        verdict = None
        if answer.diagnosis is not None:
            for action in answer.diagnosis.actions:
                parts += [action.text, action.label()]
            verdict = self._cited(answer.diagnosis.problem)
        return Outcome(
            ranked=[issue.id for issue in answer.issues],
            high_confidence=any(issue.confidence == "high" for issue in answer.issues),
            high_ids=[issue.id for issue in answer.issues if issue.confidence == "high"],
            side=answer.analysis.origin.side,
            answer_text="\n".join(parts),
            verdict=verdict,
            gives_verdicts=True,
        )

    def _cited(self, problem: str) -> list[str]:
        """Every thread the diagnosed problem cites (the answer shows at most six of them)."""
        anchor = "reference/" + problem.removeprefix("references/")  # public_source, undone
        return sorted(set(self.engine._snapshot.problems.by_id[anchor].threads))  # the served generation
