"""The error-family model learnt from the KB cards."""

from __future__ import annotations

from indexer.sources.cards import card_documents
from service.analysis.components import ComponentModel
from service.retrieval import tokenize


def test_error_families_come_from_the_cards_words() -> None:
    model = ComponentModel(card_documents(), tokenize)
    assert model.rank("the vocab file download fails offline, tiktoken cannot fetch o200k_base")[0] == (
        "tokenizer-vocab"
    )
    assert "attention-backend" in model.rank("FlashAttention 3 sinks assertion on an RTX 4090")
    assert model.rank("zzqx qqzv") == []
