"""Shared fixtures for the analysis tests: the real Harmony encoding, provisioned once per run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from indexer.documents import Document
from indexer.sources.cards import card_documents
from service.analysis.advice import CuratedThreads
from service.analysis.harmony import HarmonyAnalyzer
from service.config import Settings

# Same location as tests/conftest.py's SHARED_VOCAB_CACHE: survives between runs, so the vocab is
# written (and hashed) at most once per run.
SHARED_CACHE = Path(os.environ.get("GPTOSS_DOCTOR_TEST_CACHE", "/tmp/gptoss-doctor-test-cache"))


@pytest.fixture(scope="session")
def harmony_data_dir() -> Path:
    """A data dir outside tmp_path whose harmony-vocab/ is written once per test run (and reused)."""
    return SHARED_CACHE


@pytest.fixture(scope="session")
def analyzer(harmony_data_dir: Path) -> HarmonyAnalyzer:
    """The real openai-harmony encoding, offline, loaded once for the whole session."""
    return HarmonyAnalyzer(Settings(data_dir=harmony_data_dir))


@pytest.fixture(scope="session")
def cards() -> dict[str, Document]:
    """Every bundled KB card as a Document, by id."""
    return {doc.id: doc for doc in card_documents()}


@pytest.fixture(scope="session")
def kb() -> CuratedThreads:
    """The curated threads of an index built from the bundled KB (what advice reads per generation)."""
    return CuratedThreads(card_documents())
