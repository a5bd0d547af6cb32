"""Fixtures for the interfaces (MCP, web page, doctor): real servers on 127.0.0.1, a fast engine.

``fast_engine``: a real :class:`LookupEngine` over the bundled KB cards held in a small in-memory
store, embedded with the deterministic hashing embedder, with the real openai-harmony analyzer.
``live_app``: the real FastAPI app (page, /lookup, /mcp) served by uvicorn on a free port.
``built_index`` (slow): settings whose data dir holds an index built by the real indexer with the real
embedding model and Chroma, once per session.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.api import StoreStatus
from indexer.documents import Document
from indexer.sources.cards import card_documents
from service.config import Settings
from service.engine import LookupEngine
from tests.fakes import HashingEmbedder, free_port, install_model_cache, real_embedder  # noqa: F401  (fixture)

SECTION = Document(
    id="reference/known-issues.md#unexpected-token-while-expecting-start-token",
    kind="reference-section",
    title="Unexpected token ... while expecting start token 200006",
    heading_path=["Known issues", "Unexpected token ... while expecting start token 200006"],
    text="The Harmony parser saw ordinary text where a message must start with <|start|>.",
    references=["vllm-project/vllm#22519"],
    sources=["docs"],
)


class ListStore:
    """The read side of the Store interface over a list in memory (the engine never writes)."""

    def __init__(self, documents: Sequence[Document], embedder: Any) -> None:
        self._docs = {doc.id: doc for doc in documents}
        self._ids = list(self._docs)
        self._matrix = embedder.encode([self._docs[i].text for i in self._ids]).astype(np.float32)

    def documents(self) -> list[Document]:
        return list(self._docs.values())

    def get(self, doc_id: str) -> Document | None:
        return self._docs.get(doc_id)

    def vectors(self) -> tuple[list[str], np.ndarray]:
        return list(self._ids), self._matrix

    def generation(self) -> str:
        return "g1"

    def status(self) -> StoreStatus:
        return StoreStatus(
            documents=len(self._docs),
            issues=sum(1 for d in self._docs.values() if d.is_thread),
            built_at=datetime(2026, 11, 22, tzinfo=UTC),
            generation="g1",
            last_run=None,
        )

    def renew_client(self, timeout: float) -> bool:
        return False  # in memory: no client to renew

    def close(self) -> None:
        pass


@dataclass
class FastParts:
    """The expensive parts of a fast engine, made once per session."""

    documents: list[Document]
    embedder: Any
    harmony: Any
    store: ListStore

    def engine(self, settings: Settings) -> LookupEngine:
        return LookupEngine(settings, embedder=self.embedder, store=self.store, harmony=self.harmony)


@pytest.fixture(scope="session")
def fast_parts(tmp_path_factory: pytest.TempPathFactory) -> FastParts:
    from service.analysis.harmony import HarmonyAnalyzer

    settings = Settings(data_dir=tmp_path_factory.mktemp("interfaces-fast"))
    documents = [*card_documents(), SECTION]
    embedder = HashingEmbedder(dimension=64)
    return FastParts(documents, embedder, HarmonyAnalyzer(settings), ListStore(documents, embedder))


@pytest.fixture
def fast_engine(fast_parts: FastParts, _hermetic_env: Path) -> LookupEngine:
    return fast_parts.engine(Settings(data_dir=_hermetic_env))


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        time.sleep(0.02)


@dataclass
class LiveApp:
    """A running app: its base URL and the FastAPI object (for its runtime state)."""

    url: str
    app: Any


def serve_app(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free 127.0.0.1 port in a thread; yield its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, what="uvicorn start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@pytest.fixture
def make_live_app(fast_parts: FastParts) -> Iterator[Callable[..., LiveApp]]:
    """``make_live_app(settings)``: the real app on a fast engine, served by uvicorn, ready to answer."""
    from service.app import create_app

    stack: list[Iterator[str]] = []

    def make(settings: Settings, *, ready: bool = True) -> LiveApp:
        def loader(s: Settings, note: Callable[[str], None]) -> LookupEngine:
            if not ready:
                raise RuntimeError("the test keeps the engine from loading")
            return fast_parts.engine(s)

        app = create_app(settings, loader=loader, retry_delays=(60.0,))
        gen = serve_app(app)
        url = next(gen)
        stack.append(gen)
        if ready:
            wait_until(lambda: app.state.runtime.state == "ready", what="engine ready")
        else:
            wait_until(lambda: app.state.runtime.state == "failed", what="engine start failure")
        return LiveApp(url, app)

    yield make
    for gen in reversed(stack):
        next(gen, None)


@pytest.fixture
def live_app(make_live_app: Callable[..., LiveApp], _hermetic_env: Path) -> LiveApp:
    return make_live_app(Settings(data_dir=_hermetic_env))


@pytest.fixture(scope="session")
def built_index(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Settings:
    """Settings of an index built once per session with the real model, Chroma and the bundled KB.

    The data dir links the session's ONNX export, so subprocesses and the doctor load it, not redo it.
    """
    from indexer.build import build_index

    settings = Settings(data_dir=tmp_path_factory.mktemp("interfaces-built"))
    install_model_cache(settings.data_dir)
    embedder = request.getfixturevalue("real_embedder")  # tests.fakes' session fixture
    build_index(settings, embedder=embedder, github=False, progress=False)
    from service.analysis.harmony import ensure_vocab

    ensure_vocab(settings.vocab_dir)
    return settings


def share_caches(source: Settings, target_data_dir: Path, *, vocab: bool = True, index: bool = False) -> None:
    """Give a fresh data dir the session's ONNX export (and vocab, and a copy of the index).

    The export is linked (read-only use), the vocab and the index are copied (a test may break them).
    """
    target_data_dir.mkdir(parents=True, exist_ok=True)
    install_model_cache(target_data_dir)
    if vocab and source.vocab_dir.is_dir():
        shutil.copytree(source.vocab_dir, target_data_dir / "harmony-vocab", dirs_exist_ok=True)
    if index:
        shutil.copytree(source.chroma_dir, target_data_dir / "chroma")


@pytest.fixture
def caches(built_index: Settings) -> Callable[..., None]:
    """``caches(data_dir, vocab=True, index=False)``: :func:`share_caches` from the session's index."""
    return lambda target, **kwargs: share_caches(built_index, target, **kwargs)


@pytest.fixture(scope="session")
def real_app(built_index: Settings) -> Iterator[LiveApp]:
    """The real app on the real built index (real model, Chroma, Harmony), served once per session."""
    from service.app import create_app

    app = create_app(built_index)
    gen = serve_app(app)
    url = next(gen)
    try:
        wait_until(lambda: app.state.runtime.state == "ready", timeout=180, what="real engine ready")
        yield LiveApp(url, app)
    finally:
        next(gen, None)
