"""Issues are shown in score order and their labels rise with the score (one monotone mapping)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.documents import Document
from service.answer import CONFIDENCE_BANDS, calibrate, confidence_for
from service.config import Settings
from service.retrieval import Hit
from tests.service.support import FastComponents

RANK = {"low": 0, "medium": 1, "high": 2}


def _hit(n: int, score: float, confidence: str) -> Hit:
    doc = Document(id=f"o/r#{n}", kind="issue", repo="o/r", number=n, title=str(n), text=str(n))
    return Hit(doc=doc, score=score, confidence=confidence, why=["x"])  # type: ignore[arg-type]


def _check(hits: list[Any]) -> None:
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True), scores
    for a, b in zip(hits, hits[1:], strict=False):
        if a.score > b.score:
            assert RANK[a.confidence] >= RANK[b.confidence], (a, b)
    for h in hits:
        assert h.confidence == confidence_for(h.score)
        low, high = CONFIDENCE_BANDS[h.confidence]
        assert low <= h.score <= high


def test_calibration_keeps_the_rank_order_and_never_raises_a_label() -> None:
    # What the issue saw: 0.95, 0.92, 0.92, 0.93; "medium" at 0.29 above "low" at 0.42.
    raw = [_hit(1, 0.95, "high"), _hit(2, 0.92, "high"), _hit(3, 0.92, "high"), _hit(4, 0.93, "high")]
    raw += [_hit(5, 0.29, "medium"), _hit(6, 0.42, "low"), _hit(7, 0.8, "high")]
    out = calibrate(raw)
    assert [h.doc.id for h in out] == [h.doc.id for h in raw]
    _check(out)
    assert [h.score for h in out[:4]] == [0.95, 0.92, 0.92, 0.92]
    assert out[4].confidence == "medium" and out[5].confidence == "low" and out[6].confidence == "low"
    for before, after in zip(raw, out, strict=True):
        assert RANK[after.confidence] <= RANK[before.confidence]


@pytest.mark.parametrize(
    "text",
    [
        "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006",
        "vLLM gpt-oss-120b: tool calls arrive as JSON text in content and tool_calls is empty",
        "the reasoning shows up in content instead of reasoning_content",
        "my printer is on fire, lp0",
    ],
)
def test_answers_are_sorted_by_the_score_they_show(
    fast_components: FastComponents, settings: Settings, text: str
) -> None:
    answer = fast_components.engine(settings).lookup(text, top_k=10)
    _check(answer.issues)
