"""Helpers shared by the service tests: an in-memory Store, a fast engine's parts, a live server.

``MemoryStore`` is the Store interface over a list in memory, with a switch that makes every call fail
like a stopped Chroma server. ``FastComponents`` makes fast engines over the bundled KB cards (fake
embedder, real openai-harmony). ``LiveServer`` runs an app under a real uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from indexer.api import StoreStatus
from indexer.documents import Document
from service.config import Settings
from service.engine import LookupEngine
from tests.fakes import HashingEmbedder

__all__ = ["HashingEmbedder"]


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

    def vectors(self) -> tuple[list[str], np.ndarray]:
        self._call("vectors")
        ids = list(self._vectors)
        matrix = np.stack([self._vectors[i] for i in ids]) if ids else np.zeros((0, 1), dtype=np.float32)
        return ids, matrix

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

    def status(self) -> StoreStatus:
        self._call("status")
        return StoreStatus(
            documents=len(self._docs),
            issues=sum(1 for d in self._docs.values() if d.is_thread),
            built_at=self.built_at,
            generation=f"g{self._generation}",
            last_run=self._runs,
        )

    def record_run(self, outcome: dict[str, Any]) -> None:
        self._runs = outcome

    def renew_client(self, timeout: float) -> bool:
        return False  # in memory: no client to renew

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

    def engine(
        self, settings: Settings, store: MemoryStore | None = None, embedder: Any = None, **kwargs: Any
    ) -> LookupEngine:
        return LookupEngine(
            settings, embedder=embedder or self.embedder, store=store or self.store(), harmony=self.harmony, **kwargs
        )


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
