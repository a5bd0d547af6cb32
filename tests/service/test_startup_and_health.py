"""Start-up in the background (503 + Retry-After until ready), /health states, retry after a failed start."""

from __future__ import annotations

import threading
from collections.abc import Callable

from fastapi.testclient import TestClient
from pydantic import SecretStr

from service.app import create_app
from service.config import Settings
from service.engine import LookupEngine
from tests.service.support import FastComponents, MemoryStore, RecordingRunner, wait_until


def test_port_answers_503_with_retry_after_until_ready(settings: Settings, fast_components: FastComponents) -> None:
    gate = threading.Event()

    def loader(s: Settings, note: Callable[[str], None]) -> LookupEngine:
        note("building the index for the test")
        gate.wait(10)
        return fast_components.engine(s)

    app = create_app(settings, loader=loader)
    with TestClient(app) as client:
        health = client.get("/health").json()
        assert health["status"] == "starting"
        response = client.post("/lookup", json={"error": "HarmonyError"})
        assert response.status_code == 503
        assert response.headers["retry-after"].isdigit()
        assert "building the index for the test" in response.json()["detail"]
        assert client.get("/v1/index/status").json()["ready"] is False
        gate.set()
        wait_until(lambda: app.state.runtime.state == "ready")
        assert client.post("/lookup", json={"error": "HarmonyError"}).status_code == 200
        assert client.get("/health").json() == {"status": "ok", "reasons": []}


def test_failed_start_is_degraded_then_retried(settings: Settings, fast_components: FastComponents) -> None:
    attempts: list[int] = []

    def loader(s: Settings, note: Callable[[str], None]) -> LookupEngine:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("Chroma server at http://127.0.0.1:9 refused the connection")
        return fast_components.engine(s)

    app = create_app(settings, loader=loader, retry_delays=(0.05,))
    with TestClient(app) as client:
        wait_until(lambda: len(attempts) >= 1 and app.state.runtime.state != "starting")
        if app.state.runtime.state == "failed":
            health = client.get("/health").json()
            assert health["status"] == "degraded"
            assert "refused the connection" in health["reasons"][0]
        wait_until(lambda: app.state.runtime.state == "ready")
        assert len(attempts) == 3
        assert client.get("/health").json()["status"] == "ok"


def test_failed_reindex_degrades_but_does_not_break_health(
    make_client: Callable[..., TestClient], settings: Settings, runner: RecordingRunner
) -> None:
    runner.fail = RuntimeError("GitHub answered 502 three times")
    client = make_client(settings.model_copy(update={"admin_token": _secret("a" * 32)}))
    assert client.post("/v1/index/sync", headers=_bearer("a" * 32)).status_code == 202
    wait_until(lambda: client.get("/v1/index/status").json()["last_run"] is not None)
    wait_until(lambda: not client.get("/v1/index/status").json()["scheduler"]["running"])
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert "502" in health.json()["reasons"][0]
    status = client.get("/v1/index/status").json()
    assert status["last_run"]["ok"] is False and status["last_run"]["kind"] == "sync"
    assert client.post("/lookup", json={"error": "HarmonyError"}).status_code == 200


def test_dead_store_keeps_answering_from_the_loaded_index(
    make_client: Callable[..., TestClient], settings: Settings, fast_components: FastComponents
) -> None:
    store = fast_components.store()
    client = make_client(settings, store)
    error = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    healthy = client.post("/lookup", json={"error": error}).json()
    assert healthy["degraded"] is False
    store.down = True
    during = client.post("/lookup", json={"error": error})
    assert during.status_code == 200
    # Lookups read the loaded generation from memory: the same full answer; /health names the outage.
    assert during.json()["degraded"] is False
    assert during.json()["issues"] == healthy["issues"]
    wait_until(lambda: client.get("/health").json()["status"] == "degraded", timeout=5)
    assert any("unreachable" in reason for reason in client.get("/health").json()["reasons"])
    status = client.get("/v1/index/status")
    assert status.status_code == 200 and status.json()["documents"] > 600  # the last loaded status
    store.down = False
    assert client.post("/lookup", json={"error": error}).json()["degraded"] is False
    wait_until(lambda: client.get("/health").json()["status"] == "ok", timeout=5)


def test_index_status_reports_the_index_and_scheduler(client: TestClient) -> None:
    status = client.get("/v1/index/status").json()
    assert status["ready"] is True
    assert status["documents"] > 600 and status["issues"] > 600
    assert status["generation"]
    assert status["built_at"].startswith("2026-11-22")
    assert status["scheduler"] == {
        "enabled": False,
        "interval_seconds": None,
        "running": False,
        "next_run_at": None,
    }


def test_new_generation_is_picked_up_without_restart(
    make_client: Callable[..., TestClient], settings: Settings, fast_components: FastComponents
) -> None:
    from indexer.documents import Document

    store = MemoryStore(fast_components.documents, fast_components.embedder)
    client = make_client(settings, store)
    marker = "ZyxwQuux9 exploded while frobnicating the harmony header"
    before = client.post("/lookup", json={"error": marker}).json()
    assert all(i["id"] != "example/repo#1" for i in before["issues"])
    store.upsert(
        [
            Document(
                id="example/repo#1",
                kind="issue",
                repo="example/repo",
                number=1,
                title=marker,
                url="https://github.com/example/repo/issues/1",
                state="open",
                text=marker,
                error_signatures=[marker],
            )
        ]
    )
    wait_until(lambda: client.post("/lookup", json={"error": marker}).json()["issues"][0]["id"] == "example/repo#1")


def _secret(value: str) -> SecretStr:
    return SecretStr(value)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
