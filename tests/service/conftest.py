"""Service fixtures: a fast in-memory index (fake embedder) and the real, session-built index.

``fast_components``: the bundled KB cards plus a small reference section, embedded with the
deterministic hashing embedder, in :class:`MemoryStore` (the Store interface in memory, with a switch
that makes it fail like a stopped Chroma server), and the real openai-harmony analyzer.

``built_index`` (slow): settings whose data dir holds an index built once per session by the real
indexer from the bundled docs and KB with the real embedding model and Chroma. Reuse it.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from indexer.documents import Document
from indexer.sources.cards import card_documents
from service.config import Settings
from service.engine import LookupEngine

try:  # the indexer engineer's deterministic fake (tests/fakes.py)
    from tests.fakes import HashingEmbedder
except ImportError:  # TEMPORARY until tests/fakes.py lands: same idea, token hashing
    import re as _re

    class HashingEmbedder:  # type: ignore[no-redef]
        name = "hashing"

        def __init__(self, dimension: int = 64) -> None:
            self.dimension = dimension

        def encode(self, texts: Sequence[str]) -> np.ndarray:
            out = np.zeros((len(texts), self.dimension), dtype=np.float32)
            for row, text in enumerate(texts):
                for token in _re.findall(r"\w+", text.lower()):
                    out[row, int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dimension] += 1.0
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            return out / np.where(norms == 0, 1, norms)


class StoreDown(ConnectionError):
    """What a stopped Chroma server looks like to the caller: a connection error."""


class MemoryStore:
    """The Store interface over a list in memory; ``down = True`` makes every call fail."""

    def __init__(self, documents: Sequence[Document], embedder: Any) -> None:
        self.embedder = embedder
        self.down = False
        self.calls: dict[str, int] = {}
        self._docs: dict[str, Document] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._generation = 0
        self._runs: dict[str, Any] | None = None
        self.built_at = datetime(2026, 11, 22, tzinfo=UTC)
        self.upsert(documents)

    def _call(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.down:
            raise StoreDown(f"Could not connect to a Chroma server ({name})")

    def documents(self) -> list[Document]:
        self._call("documents")
        return list(self._docs.values())

    def get(self, doc_id: str) -> Document | None:
        self._call("get")
        return self._docs.get(doc_id)

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        self._call("query")
        ids = list(self._vectors)
        if not ids:
            return []
        matrix = np.stack([self._vectors[i] for i in ids])
        sims = matrix @ vector
        order = np.argsort(-sims)[:k]
        return [(ids[i], float(sims[i])) for i in order]

    def upsert(self, docs: Sequence[Document]) -> None:
        docs = list(docs)
        vectors = self.embedder.encode([d.text for d in docs]) if docs else []
        for doc, vec in zip(docs, vectors, strict=True):
            self._docs[doc.id] = doc
            self._vectors[doc.id] = np.asarray(vec, dtype=np.float32)
        self._generation += 1

    def generation(self) -> str:
        self._call("generation")
        return f"g{self._generation}"

    def status(self) -> dict[str, Any]:
        self._call("status")
        return {
            "documents": len(self._docs),
            "issues": sum(1 for d in self._docs.values() if d.kind != "reference-section"),
            "built_at": self.built_at.isoformat(),
            "github_synced_at": None,
            "generation": f"g{self._generation}",
            "last_run": self._runs,
        }

    def record_run(self, outcome: dict[str, Any]) -> None:
        self._runs = outcome

    def close(self) -> None:
        pass


SECTION = Document(
    id="reference/known-issues.md#unexpected-token-200002",
    kind="reference-section",
    title="Unexpected token 200002 while expecting start token 200006",
    heading_path=["Known issues", "Unexpected token 200002 while expecting start token 200006"],
    text="The model kept generating after <|return|>.\n\n- Do not send ignore_eos=true\n- Upgrade vLLM\n",
    references=["vllm-project/vllm#46464"],
    sources=["docs"],
)


@dataclass
class FastComponents:
    """Shared, expensive-to-make parts of a fast engine (made once per session)."""

    documents: list[Document]
    embedder: Any
    harmony: Any
    vocab_settings: Settings

    def store(self) -> MemoryStore:
        return MemoryStore(self.documents, self.embedder)

    def engine(self, settings: Settings, store: MemoryStore | None = None, **kwargs: Any) -> LookupEngine:
        return LookupEngine(
            settings, embedder=self.embedder, store=store or self.store(), harmony=self.harmony, **kwargs
        )


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


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll until ``predicate()`` holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


class RecordingRunner:
    """An index runner for the scheduler that records calls and can block or fail on demand."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.fail: Exception | None = None
        self.started = threading.Event()

    def __call__(self, settings: Settings, *, kind: str, embedder: Any) -> Any:
        self.calls.append(kind)
        self.started.set()
        self.release.wait(10)
        if self.fail is not None:
            raise self.fail
        return f"{kind}: 0 documents changed"


@pytest.fixture
def runner() -> RecordingRunner:
    return RecordingRunner()


@pytest.fixture
def make_client(
    fast_components: FastComponents, runner: RecordingRunner
) -> Iterator[Callable[..., TestClient]]:
    """``make_client(settings, store=None)``: a started app on a fast engine, ready to answer."""
    from service.app import create_app

    clients: list[TestClient] = []

    def make(settings: Settings, store: MemoryStore | None = None, *, wait: bool = True) -> TestClient:
        app = create_app(
            settings, loader=lambda s, note: fast_components.engine(s, store), runner=runner
        )
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



class LiveServer:
    """A real uvicorn server on 127.0.0.1 in a thread, for tests that need real HTTP."""

    def __init__(self, app: Any) -> None:
        import socket

        import uvicorn

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        wait_until(lambda: self.server.started)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live_app(fast_components: FastComponents, settings: Settings, runner: RecordingRunner) -> Iterator[LiveServer]:
    """The fast app served over real HTTP, ready to answer."""
    from service.app import create_app

    app = create_app(settings, loader=lambda s, note: fast_components.engine(s), runner=runner)
    with LiveServer(app) as server:
        wait_until(lambda: app.state.runtime.state == "ready")
        yield server
