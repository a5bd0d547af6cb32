"""Admin and read tokens (constant-time, disabled when unset) and CORS (off by default)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

import service.deps
from service.config import Settings
from tests.service.support import RecordingRunner, wait_until

ADMIN = "admin-" + "x" * 40
READ = "read-" + "y" * 40


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_admin_endpoints_are_disabled_without_a_token(client: TestClient, runner: RecordingRunner) -> None:
    for path in ("/v1/index/sync", "/v1/index/rebuild"):
        response = client.post(path, headers=bearer("anything"))
        assert response.status_code == 403
        assert "GPTOSS_DOCTOR_ADMIN_TOKEN" in response.json()["detail"]
    assert runner.calls == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("wrong"),
        bearer(ADMIN + "x"),
        bearer(ADMIN[:-1]),
        {"Authorization": ADMIN},
        {"Authorization": f"Basic {ADMIN}"},
    ],
    ids=["missing", "wrong", "longer", "prefix", "no-scheme", "basic"],
)
def test_admin_endpoints_refuse_a_missing_or_wrong_token(
    make_client: Callable[..., TestClient],
    settings: Settings,
    runner: RecordingRunner,
    headers: dict[str, str],
) -> None:
    client = make_client(settings.model_copy(update={"admin_token": SecretStr(ADMIN)}))
    response = client.post("/v1/index/sync", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert ADMIN not in response.text
    assert runner.calls == []


def test_admin_token_starts_runs_one_at_a_time(
    make_client: Callable[..., TestClient], settings: Settings, runner: RecordingRunner
) -> None:
    client = make_client(settings.model_copy(update={"admin_token": SecretStr(ADMIN)}))
    runner.release.clear()
    started = client.post("/v1/index/sync", headers=bearer(ADMIN))
    assert started.status_code == 202 and started.json()["kind"] == "sync"
    assert runner.started.wait(5)
    assert client.get("/v1/index/status").json()["scheduler"]["running"] is True
    busy = client.post("/v1/index/rebuild", headers=bearer(ADMIN))
    assert busy.status_code == 409
    runner.release.set()
    wait_until(lambda: client.get("/v1/index/status").json()["scheduler"]["running"] is False)
    assert client.post("/v1/index/rebuild", headers=bearer(ADMIN)).status_code == 202
    wait_until(lambda: len(runner.calls) == 2 and not client.get("/v1/index/status").json()["scheduler"]["running"])
    assert runner.calls == ["sync", "rebuild"]
    last = client.get("/v1/index/status").json()["last_run"]
    assert last["ok"] is True and last["kind"] == "rebuild" and "summary" in last
    offline = client.post("/v1/index/rebuild", params={"github": "false"}, headers=bearer(ADMIN))
    assert offline.status_code == 202 and offline.json()["kind"] == "rebuild-local"
    wait_until(lambda: len(runner.calls) == 3 and not client.get("/v1/index/status").json()["scheduler"]["running"])
    assert runner.calls[-1] == "rebuild-local"
    assert ADMIN not in client.get("/v1/index/status").text


def test_tokens_are_compared_in_constant_time(
    make_client: Callable[..., TestClient], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = service.deps.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(service.deps.hmac, "compare_digest", spy)
    client = make_client(settings.model_copy(update={"admin_token": SecretStr(ADMIN), "read_token": SecretStr(READ)}))
    client.post("/v1/index/sync", headers=bearer("guess"))
    client.post("/lookup", json={"error": "x"}, headers=bearer("guess2"))
    assert (b"guess", ADMIN.encode()) in seen
    assert (b"guess2", READ.encode()) in seen


def test_read_token_guards_lookups_but_not_health(make_client: Callable[..., TestClient], settings: Settings) -> None:
    client = make_client(settings.model_copy(update={"read_token": SecretStr(READ)}))
    assert client.post("/lookup", json={"error": "HarmonyError"}).status_code == 401
    assert client.post("/lookup", json={"error": "HarmonyError"}, headers=bearer("nope")).status_code == 401
    assert client.post("/lookup", json={"error": "HarmonyError"}, headers=bearer(READ)).status_code == 200
    assert client.get("/v1/index/status").status_code == 401
    assert client.get("/v1/index/status", headers=bearer(READ)).status_code == 200
    assert client.get("/health").status_code == 200


def test_lookups_are_open_without_a_read_token(client: TestClient) -> None:
    response = client.post("/lookup", json={"error": "HarmonyError: Unexpected token 200002"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "200002" in body["query"]["normalized"] and body["index"]["documents"] > 0


def test_cors_is_off_by_default(client: TestClient) -> None:
    origin = {"Origin": "https://evil.example"}
    response = client.post("/lookup", json={"error": "HarmonyError"}, headers=origin)
    assert "access-control-allow-origin" not in response.headers
    preflight = client.options("/lookup", headers={**origin, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_allows_only_the_configured_origins(make_client: Callable[..., TestClient], settings: Settings) -> None:
    client = make_client(settings.model_copy(update={"cors_origins": ["https://ui.example"]}))
    allowed = client.post("/lookup", json={"error": "HarmonyError"}, headers={"Origin": "https://ui.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://ui.example"
    other = client.post("/lookup", json={"error": "HarmonyError"}, headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    preflight = client.options(
        "/lookup", headers={"Origin": "https://ui.example", "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 200


def test_settings_repr_and_status_never_show_tokens(make_client: Callable[..., TestClient], settings: Settings) -> None:
    secured = settings.model_copy(update={"admin_token": SecretStr(ADMIN), "read_token": SecretStr(READ)})
    assert ADMIN not in repr(secured) and READ not in repr(secured)
    client = make_client(secured)
    for path in ("/health", "/v1/index/status", "/openapi.json"):
        text = client.get(path, headers=bearer(READ)).text
        assert ADMIN not in text and READ not in text
