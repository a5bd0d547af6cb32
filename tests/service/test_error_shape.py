"""The one place that pins the problem+json shape (RFC 9457) of every error the API returns."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from service.app import create_app
from service.config import Settings
from service.engine import LookupEngine

PROBLEM_KEYS = {"type", "title", "status", "detail", "instance"}


def assert_problem(response: Any, status: int) -> dict[str, Any]:
    """Every error: the status, the problem media type, the RFC 9457 members, a useful detail."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert PROBLEM_KEYS <= set(body), body
    assert body["status"] == status
    assert body["type"] == "about:blank"
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and len(body["detail"]) > 10
    return body


CASES: list[tuple[str, dict, int]] = [
    ("invalid json", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400),
    ("not utf-8", {"content": b"\xff\xfe error", "headers": {"content-type": "text/plain"}}, 400),
    (
        "unsupported type",
        {"content": b"error=x", "headers": {"content-type": "application/x-www-form-urlencoded"}},
        400,
    ),
    ("blank error", {"json": {"error": "   "}}, 422),
    ("top_k too big", {"json": {"error": "HarmonyError", "top_k": 51}}, 422),
    ("over the limit", {"content": b"x" * (64 * 1024 + 1), "headers": {"content-type": "text/plain"}}, 413),
]


@pytest.mark.parametrize(("name", "request_kwargs", "status"), CASES, ids=[c[0] for c in CASES])
def test_lookup_errors_are_problem_json(client: TestClient, name: str, request_kwargs: dict, status: int) -> None:
    body = assert_problem(client.post("/lookup", **request_kwargs), status)
    assert body["instance"] == "/lookup"


def test_validation_problem_lists_the_failing_fields(client: TestClient) -> None:
    body = assert_problem(client.post("/lookup", json={"error": "x", "top_k": 0, "repos": ["not a repo"]}), 422)
    where = {tuple(err["loc"]) for err in body["errors"]}
    assert ("body", "top_k") in where and ("body", "repos") in where
    assert "top_k" in body["detail"]


def test_unknown_path_and_method_are_problem_json(client: TestClient) -> None:
    assert_problem(client.get("/nope"), 404)
    assert_problem(client.get("/lookup"), 405)


def test_auth_errors_are_problem_json(make_client: Callable[..., TestClient], settings: Settings) -> None:
    secured = settings.model_copy(update={"read_token": SecretStr("r" * 24)})
    client = make_client(secured)
    response = client.post("/lookup", json={"error": "HarmonyError"})
    assert_problem(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"
    assert_problem(client.post("/v1/index/sync"), 403)


def test_not_ready_is_problem_json_with_retry_after(settings: Settings) -> None:
    gate = threading.Event()

    def slow_loader(s: Settings, note: Callable[[str], None]) -> LookupEngine:
        gate.wait(10)
        raise RuntimeError("stopped by the test")

    with TestClient(create_app(settings, loader=slow_loader)) as client:
        response = client.post("/lookup", json={"error": "HarmonyError"})
        gate.set()
    assert_problem(response, 503)
    assert int(response.headers["retry-after"]) > 0


def test_internal_errors_do_not_leak_internals(make_client: Callable[..., TestClient], settings: Settings) -> None:
    client = make_client(settings)
    engine = client.app.state.runtime.engine  # type: ignore[attr-defined]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal state /etc/passwd")

    engine.lookup = broken
    body = assert_problem(client.post("/lookup", json={"error": "HarmonyError"}), 500)
    assert "secret" not in body["detail"] and "Traceback" not in str(body)
