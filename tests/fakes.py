"""Shared test doubles and fixtures: a deterministic fake embedder, a real Chroma server, the real model.

Use in any test package by importing the fixtures into its conftest::

    from tests.fakes import chroma_server, real_embedder  # noqa: F401  (registers the fixtures)
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.documents import Document

_TOKEN = re.compile(r"\w+")
TEST_CACHE = Path(os.environ.get("GPTOSS_DOCTOR_TEST_CACHE", "/tmp/gptoss-doctor-test-cache"))
REPO_ROOT = Path(__file__).resolve().parents[1]
_HOLDER = textwrap.dedent(
    """
    import sys
    from indexer.store import Store
    from service.config import Settings
    from tests.fakes import HashingEmbedder
    store = Store.open(Settings(), HashingEmbedder())
    print("held", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


@contextmanager
def store_held_by_another_process() -> Iterator[int]:
    """A real child process holding the store open for writing (settings from the environment).

    Yields the child's pid once it holds the store; it lets go when the block ends.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.communicate("\n", timeout=60)


class HashingEmbedder:
    """Deterministic fake: hashed word tokens into signed buckets, L2-normalised.

    Texts sharing words get similar vectors, so nearest-neighbour tests mean something. ``calls`` and
    ``texts`` count encode calls and embedded texts (to test that unchanged documents are skipped).
    """

    def __init__(self, dimension: int = 64, name: str = "hashing-fake/v1") -> None:
        self.dimension = dimension
        self.name = name
        self.calls = 0
        self.texts = 0

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for token in _TOKEN.findall(text.lower()):
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dimension
            vector[bucket] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return vector / norm

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)


# --------------------------------------------------------------------------- a real Chroma server


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _chroma_executable() -> str:
    found = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    if not found:
        raise RuntimeError("the `chroma` CLI (package chromadb) is not installed")
    return found


class ChromaServer:
    """A `chroma run` process on 127.0.0.1 that tests can stop and restart (same port and data)."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = path.parent / f"chroma-{self.port}.log"

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and wait until its heartbeat answers."""
        if self.running():
            return
        self.path.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [_chroma_executable(), "run", "--path", str(self.path), "--host", "127.0.0.1"]
                + ["--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.process.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/api/v2/heartbeat", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"chroma run did not answer on {self.url} within {timeout}s; see {self.log}")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, kill: bool = False) -> None:
        """Stop the server (SIGTERM, or SIGKILL with ``kill``) and wait for it to exit."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


class ChromaURL(str):
    """The server's URL (a str, so it goes straight into Settings) with the server's controls."""

    server: ChromaServer

    def __new__(cls, server: ChromaServer) -> ChromaURL:
        value = super().__new__(cls, server.url)
        value.server = server
        return value

    def stop(self, kill: bool = False) -> None:
        self.server.stop(kill=kill)

    def start(self) -> None:
        self.server.start()

    def restart(self) -> None:
        self.server.restart()


_SERVER: ChromaServer | None = None


@pytest.fixture
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaURL]:
    """URL of a real `chroma run` server, started once per session (restarted if a test stopped it).

    ``chroma_server.stop()``, ``.start()``, ``.restart()`` control the process. Tests sharing the server
    should use their own collection name (``Settings(collection=...)``).
    """
    global _SERVER
    if _SERVER is None:
        _SERVER = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data")
        atexit.register(_SERVER.stop)
    _SERVER.start()
    yield ChromaURL(_SERVER)
    _SERVER.start()


# --------------------------------------------------------------------------- the real model


def install_model_cache(data_dir: Path) -> None:
    """Give a data dir the ONNX export made once per test session (the export takes ~15 s)."""
    from indexer.embedding import bundled_model_path, model_fingerprint

    source = TEST_CACHE / "models"
    target = data_dir / "models"
    target.mkdir(parents=True, exist_ok=True)
    for folder in source.glob(f"*-{model_fingerprint(bundled_model_path())}"):
        link = target / folder.name
        if not link.exists():
            link.symlink_to(folder, target_is_directory=True)


@pytest.fixture(scope="session")
def real_embedder() -> object:
    """The real bundled model as configured by default (ONNX int8, exported once into TEST_CACHE)."""
    from service.config import Settings

    TEST_CACHE.mkdir(parents=True, exist_ok=True)
    settings = Settings(data_dir=TEST_CACHE)
    from indexer.embedding import load_embedder

    return load_embedder(settings)


def github_mark(store: Any, repo: str) -> datetime | None:
    """The GitHub source's watermark for ``repo`` in ``store`` (its cursor, indexer/sources/github.py)."""
    from indexer.sources.github import GITHUB, watermark

    return watermark(store.cursor(GITHUB), repo)


def commit_marks(store: Any, docs: Sequence[Document], marks: dict[str, datetime]) -> Any:
    """Commit ``docs`` with GitHub watermarks, as the GitHub source's batches do."""
    from indexer.sources.github import GITHUB

    utc = {r: t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC) for r, t in marks.items()}
    cursor = {r: t.isoformat() for r, t in utc.items()}
    return store.commit(docs, source=GITHUB, cursor=cursor)
