"""Reliability fixtures: the fast engine, a started app, a live server, and the real Chroma server.

The fast engine (hashing embedder, in-memory store, real openai-harmony) is the service engineer's
(``tests/service/conftest.py``); the `chroma run` process fixture is the indexer engineer's
(``tests/fakes.py``). Importing a fixture function here registers it for this package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.config import Settings
from tests.fakes import _chroma_server_process, chroma_server  # noqa: F401  (fixtures)
from tests.service.conftest import (  # noqa: F401  (fast_components and runner are fixtures)
    FastComponents,
    LiveServer,
    MemoryStore,
    RecordingRunner,
    fast_components,
    runner,
    wait_until,
)

__all__ = ["FastComponents", "LiveServer", "MemoryStore", "RecordingRunner", "wait_until"]


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
