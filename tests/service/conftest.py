"""Service fixtures: a fast in-memory index (fake embedder) and the real, session-built index.

``fast_components``: the bundled KB cards plus a small reference section, embedded with the
deterministic hashing embedder, in ``MemoryStore`` (see support.py), and the real openai-harmony
analyzer. ``client`` / ``make_client``: the app on a fast engine, started and ready. ``live_app``: the
same over real HTTP.

``built_index`` (slow): settings whose data dir holds an index built once per session by the real
indexer from the bundled docs and KB with the real embedding model and Chroma. Reuse it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexer.sources.cards import card_documents
from service.config import Settings
from tests.service.support import (
    SECTION,
    FastComponents,
    HashingEmbedder,
    LiveServer,
    MemoryStore,
    RecordingRunner,
    wait_until,
)

# Re-exported for other test packages that imported them from here before support.py existed;
# new code should import helpers from tests.service.support.
__all__ = ["FastComponents", "LiveServer", "MemoryStore", "RecordingRunner", "wait_until"]


@pytest.fixture(scope="session")
def fast_components(tmp_path_factory: pytest.TempPathFactory) -> FastComponents:
    from service.analysis.harmony import HarmonyAnalyzer

    # The analysis tests' shared cache: the vocab is written and hashed at most once per run.
    settings = Settings(data_dir=Path(os.environ.get("GPTOSS_DOCTOR_TEST_CACHE", "/tmp/gptoss-doctor-test-cache")))
    return FastComponents(
        documents=[*card_documents(), SECTION],
        embedder=HashingEmbedder(dimension=64),
        harmony=HarmonyAnalyzer(settings),
        vocab_settings=settings,
    )


@pytest.fixture
def settings(_hermetic_env: Path) -> Settings:
    """Test settings: tmp data dir, small body limit so 413 cases stay cheap."""
    return Settings(data_dir=_hermetic_env, max_body_bytes=64 * 1024)


@pytest.fixture
def runner() -> RecordingRunner:
    return RecordingRunner()


@pytest.fixture
def make_client(fast_components: FastComponents, runner: RecordingRunner) -> Iterator[Callable[..., TestClient]]:
    """``make_client(settings, store=None)``: a started app on a fast engine, ready to answer."""
    from service.app import create_app

    clients: list[TestClient] = []

    def make(settings: Settings, store: MemoryStore | None = None, *, wait: bool = True) -> TestClient:
        app = create_app(settings, loader=lambda s, note: fast_components.engine(s, store), runner=runner)
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        if wait:
            wait_until(lambda: app.state.runtime.state == "ready")
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient], settings: Settings) -> TestClient:
    return make_client(settings)


@pytest.fixture(scope="session")
def built_index(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of an index built once per session with the real model, Chroma and the bundled KB."""
    from indexer.build import build_index

    settings = Settings(data_dir=tmp_path_factory.mktemp("built-index"))
    build_index(settings, github=False, progress=False)
    return settings


@pytest.fixture
def live_app(fast_components: FastComponents, settings: Settings, runner: RecordingRunner) -> Iterator[LiveServer]:
    """The fast app served over real HTTP, ready to answer."""
    from service.app import create_app

    app = create_app(settings, loader=lambda s, note: fast_components.engine(s), runner=runner)
    with LiveServer(app) as server:
        wait_until(lambda: app.state.runtime.state == "ready")
        yield server
