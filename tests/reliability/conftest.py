"""Reliability fixtures: the fast engine, a started app, a live server, and the real Chroma server.

The fast engine (hashing embedder, in-memory store, real openai-harmony) is the service engineer's
(``tests/service/conftest.py``); the `chroma run` process fixture is the indexer engineer's
(``tests/fakes.py``), used through its ChromaServer class so this package controls its own process.
Importing a fixture function here registers it for this package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.config import Settings
from tests.fakes import ChromaServer
from tests.service.conftest import (  # noqa: F401  (fast_components and runner are fixtures)
    FastComponents,
    LiveServer,
    MemoryStore,
    RecordingRunner,
    fast_components,
    runner,
    wait_until,
)

__all__ = ["ChromaServer", "FastComponents", "LiveServer", "MemoryStore", "RecordingRunner", "wait_until"]


@pytest.fixture
def settings(_hermetic_env: Path) -> Settings:
    """Test settings: tmp data dir, the default 1 MB body limit."""
    return Settings(data_dir=_hermetic_env)


@pytest.fixture
def make_app(
    fast_components: FastComponents, runner: RecordingRunner  # noqa: F811
) -> Iterator[Callable[..., FastAPI]]:
    """``make_app(settings, store=None)``: an app on the fast engine, lifespan started and ready."""
    from service.app import create_app

    clients: list[TestClient] = []

    def make(settings: Settings, store: MemoryStore | None = None) -> FastAPI:
        app = create_app(settings, loader=lambda s, note: fast_components.engine(s, store), runner=runner)
        client = TestClient(app, raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        wait_until(lambda: app.state.runtime.state == "ready")
        return app

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """A real `chroma run` process owned by one test module, which may stop, pause and restart it."""
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data")
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        import os
        import signal

        os.killpg(server.process.pid, signal.SIGCONT)  # a paused server cannot act on SIGTERM
    server.stop()


@pytest.fixture
def serve_live(
    fast_components: FastComponents, runner: RecordingRunner  # noqa: F811
) -> Iterator[Callable[..., LiveServer]]:
    """``serve_live(settings, store=None, embedder=None)``: the fast app under a real uvicorn on 127.0.0.1, ready."""
    from service.app import create_app

    servers: list[LiveServer] = []

    def serve(settings: Settings, store: MemoryStore | None = None, embedder: Any = None) -> LiveServer:
        app = create_app(
            settings, loader=lambda s, note: fast_components.engine(s, store, embedder), runner=runner
        )
        server = LiveServer(app).__enter__()
        servers.append(server)
        wait_until(lambda: app.state.runtime.state == "ready", timeout=30)
        return server

    yield serve
    for server in servers:
        server.__exit__(None, None, None)
