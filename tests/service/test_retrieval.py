"""The hybrid retriever on the real bundled KB (lexical + signature legs; a failing dense leg)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from indexer.documents import Document
from indexer.sources.cards import card_documents
from service.analysis.input import parse_input
from service.retrieval import Retriever


class _BrokenDense:
    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        raise ConnectionError("chroma server went away")


class _OneHotEmbedder:
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever(card_documents(), None, None)


def test_exact_signature_ranks_a_thread_carrying_it_first(retriever: Retriever) -> None:
    parsed = parse_input(
        "(APIServer pid=8) ERROR 08-14 03:27:40 [serving_chat.py:1206] ValueError: Expected 2 output "
        "messages (reasoning and final), but got 3."
    )
    result = retriever.search(parsed, top_k=5)
    top = result.hits[0]
    assert any("Expected 2 output messages" in s for s in top.doc.error_signatures)
    assert top.confidence == "high"
    assert any("error signature matches" in why for why in top.why)
    assert result.confident


def test_token_ids_in_the_signature_are_distinctive(retriever: Retriever) -> None:
    result = retriever.search(
        parse_input("openai_harmony.HarmonyError: Unexpected token 200003 while expecting start token 200006")
    )
    top_sigs = " ".join(result.hits[0].doc.error_signatures)
    assert "200003" in top_sigs


def test_unrelated_error_gets_no_confident_match(retriever: Retriever) -> None:
    parsed = parse_input(
        "anthropic.AuthenticationError: Error code: 401 - {'type': 'error', 'error': "
        "{'type': 'authentication_error', 'message': 'invalid x-api-key'}}"
    )
    result = retriever.search(parsed)
    assert not result.confident
    assert all(hit.confidence != "high" for hit in result.hits)


def test_repos_filter_keeps_only_those_repositories(retriever: Retriever) -> None:
    parsed = parse_input("HarmonyError: unexpected tokens remaining in message header")
    result = retriever.search(parsed, top_k=10, repos=["openai/harmony"])
    assert result.hits
    assert {hit.doc.repo for hit in result.hits} == {"openai/harmony"}


def test_scores_are_bounded_and_sorted_by_fusion(retriever: Retriever) -> None:
    result = retriever.search(parse_input("tool calls arrive inside content instead of tool_calls"), top_k=10)
    assert len(result.hits) == 10
    assert all(0.0 <= hit.score <= 1.0 for hit in result.hits)
    assert len({hit.doc.id for hit in result.hits}) == 10


def test_a_failing_dense_leg_degrades_to_lexical_answers() -> None:
    retriever = Retriever(card_documents(), _OneHotEmbedder(), _BrokenDense())
    result = retriever.search(parse_input("Unexpected token 200002 while expecting start token 200006"))
    assert result.degraded
    assert result.hits and "200002" in " ".join(result.hits[0].doc.error_signatures)


def test_sections_pass_their_score_to_the_threads_they_cite() -> None:
    cards = card_documents()
    target = next(d for d in cards if d.id == "vllm-project/vllm#22137")
    section = Document(
        id="reference/known-issues.md#responses-store",
        kind="reference-section",
        title="Responses API store disabled",
        text="zebracorn quokkafish: the Responses API store is off by default",
        references=[target.id],
    )
    retriever = Retriever([*cards, section], None, None)
    result = retriever.search(parse_input("zebracorn quokkafish"), top_k=3)
    assert result.hits[0].doc.id == target.id
    assert any("cited by reference/known-issues.md#responses-store" in w for w in result.hits[0].why)
    assert result.sections[0].doc.id == section.id


def test_same_template_with_another_token_id_is_not_a_confident_match(retriever: Retriever) -> None:
    result = retriever.search(
        parse_input("openai_harmony.HarmonyError: Unexpected token 12606 while expecting start token 200006"),
        top_k=10,
    )
    for hit in result.hits:
        sigs = " ".join(hit.doc.error_signatures)
        if "Unexpected token 200002 while expecting" in sigs and "12606" not in sigs:
            assert hit.confidence != "high", hit.doc.id
    assert "12606" in " ".join(result.hits[0].doc.error_signatures)
    assert result.hits[0].confidence == "high"
