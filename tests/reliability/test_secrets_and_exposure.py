"""Security (issue 7): tokens never leak, admin runs need the admin token, CORS is opt-in, no endpoint
fetches a URL a client supplies, and the page never parses data as HTML.

Constant-time comparison and the 401/403 matrix are pinned in ``tests/service/test_security.py``; here
the same guarantees are checked end to end: real uvicorn, real store and indexer, real GitHub sync
(against the fake GitHub server), every log record and every byte written to stdout/stderr.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

import service.deps
from service.config import PROJECT_ROOT, Settings, load_settings
from service.errors import ConfigError
from tests.fakes import HashingEmbedder
from tests.github_fake import FakeGitHub, FakeThread
from tests.reliability.conftest import LiveServer, wait_until

ADMIN = "adm1n-" + "Q7v" * 12
READ = "r3ad-" + "Zp4" * 12
GITHUB = "ghp_" + "Kx9" * 12
TOKENS = {"admin": ADMIN, "read": READ, "github": GITHUB}
ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
STATIC = PROJECT_ROOT / "service" / "api" / "static"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_no_token(text: str, where: str) -> None:
    for name, token in TOKENS.items():
        assert token not in text, f"the {name} token appears in {where}"


class Everything(logging.Handler):
    """Keeps every record of every logger, formatted with its arguments."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        self.lines.append(f"{record.name}: {text}")


@pytest.fixture
def all_logs() -> Iterator[Everything]:
    root = logging.getLogger()
    handler = Everything()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(["vllm-project/vllm", "openai/harmony"]) as fake:
        at = datetime(2026, 1, 5, tzinfo=UTC)
        fake.add_thread(
            FakeThread("openai/harmony", 901, "HarmonyError on tool call", ERROR, created_at=at, updated_at=at)
        )
        fake.add_thread(
            FakeThread(
                "vllm-project/vllm", 70001, "[Bug]: gpt-oss stops", "Error: x", labels=["gpt-oss"],
                created_at=at, updated_at=at,
            )
        )
        yield fake


@pytest.mark.slow
def test_tokens_never_reach_logs_output_or_responses_over_a_full_index_serve_and_sync(
    github: FakeGitHub,
    all_logs: Everything,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from indexer.build import build_index
    from service.app import create_app
    from service.engine import LookupEngine

    monkeypatch.setenv("GPTOSS_DOCTOR_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("GPTOSS_DOCTOR_READ_TOKEN", READ)
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB)
    monkeypatch.setenv("GPTOSS_DOCTOR_GITHUB_API_URL", github.base_url)
    monkeypatch.setenv("GPTOSS_DOCTOR_GITHUB_TIMEOUT", "2")
    settings = load_settings()
    embedder = HashingEmbedder()
    build_index(settings, embedder=embedder, github=True, progress=False)
    assert any(GITHUB in r.headers.get("Authorization", "") for r in github.requests), "the token is used"

    app = create_app(settings, loader=lambda s, note: LookupEngine.open(s, embedder=embedder))
    answers: list[str] = []
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        wait_until(lambda: app.state.runtime.state == "ready", timeout=60)

        def call(method: str, path: str, expect: int, **kwargs: object) -> httpx.Response:
            response = http.request(method, path, **kwargs)  # type: ignore[arg-type]
            assert response.status_code == expect, (method, path, response.status_code, response.text)
            answers.append(f"{response.headers}\n{response.text}")
            return response

        for wrong in ({}, bearer("guess"), bearer(READ), bearer(ADMIN + "x"), {"Authorization": ADMIN}):
            call("POST", "/v1/index/sync", 401, headers=wrong)
            call("POST", "/v1/index/rebuild", 401, headers=wrong)
        for wrong in ({}, bearer("guess"), bearer(READ[:-1])):
            call("POST", "/lookup", 401, json={"error": ERROR}, headers=wrong)
            call("GET", "/v1/index/status", 401, headers=wrong)
        call("POST", "/lookup", 200, json={"error": ERROR}, headers=bearer(READ))
        call("POST", "/lookup", 200, content=ERROR, headers={**bearer(READ), "content-type": "text/plain"})
        call("POST", "/lookup", 422, json={"error": ""}, headers=bearer(READ))
        call("POST", "/lookup", 400, content=b"{not json", headers={**bearer(READ), "content-type": "application/json"})
        call("POST", "/lookup", 413, content=b"x" * (settings.max_body_bytes + 1), headers=bearer(READ))
        # A real sync and a real rebuild, started by the admin token, in the serving process.
        for kind in ("sync", "rebuild"):
            call("POST", f"/v1/index/{kind}", 202, headers=bearer(ADMIN))
            wait_until(
                lambda kind=kind: (  # type: ignore[misc]
                    (status := http.get("/v1/index/status", headers=bearer(READ)).json())["scheduler"]["running"]
                    is False
                    and (status["last_run"] or {}).get("kind") == kind
                ),
                timeout=120,
            )
        status = call("GET", "/v1/index/status", 200, headers=bearer(READ))
        assert status.json()["last_run"]["ok"] is True, status.json()
        for path in ("/health", "/openapi.json", "/", "/ui/app.js", "/docs"):
            call("GET", path, 200)

    out = capfd.readouterr()
    assert len(all_logs.lines) > 20, "nothing was logged: the test would prove nothing"
    assert_no_token("\n".join(all_logs.lines), "a log record")
    assert_no_token(out.out + out.err, "stdout/stderr")
    for answer in answers:
        assert_no_token(answer, "a response")


def test_settings_never_show_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("GPTOSS_DOCTOR_READ_TOKEN", READ)
    monkeypatch.setenv("GPTOSS_DOCTOR_GITHUB_TOKEN", GITHUB)
    settings = load_settings()
    assert settings.admin_token is not None and settings.admin_token.get_secret_value() == ADMIN
    for view in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert_no_token(view, "a view of the settings")
    # A configuration error elsewhere must not echo the secrets next to it.
    monkeypatch.setenv("GPTOSS_DOCTOR_PORT", "not-a-port")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert_no_token(str(err.value) + repr(err.value), "a configuration error")


def test_admin_runs_need_the_token_and_are_compared_in_constant_time(
    make_app: Callable[..., FastAPI], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = service.deps.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(service.deps.hmac, "compare_digest", spy)
    off = TestClient(make_app(settings))
    assert off.post("/v1/index/sync", headers=bearer(ADMIN)).status_code == 403  # unset: disabled
    assert compared == []
    on = TestClient(make_app(settings.model_copy(update={"admin_token": SecretStr(ADMIN)})))
    assert on.post("/v1/index/rebuild", headers=bearer("nope")).status_code == 401
    assert (b"nope", ADMIN.encode()) in compared
    assert on.post("/v1/index/rebuild", headers=bearer(ADMIN)).status_code == 202
    assert on.post("/lookup", json={"error": ERROR}).status_code == 200  # no read token: open


def _preflight(client: TestClient, origin: str) -> Any:
    return client.options(
        "/lookup",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )


def test_cors_is_off_by_default_and_set_from_the_environment(
    make_app: Callable[..., FastAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    default = TestClient(make_app(load_settings()))
    for response in (
        _preflight(default, "https://evil.example"),
        default.post("/lookup", json={"error": ERROR}, headers={"Origin": "https://evil.example"}),
    ):
        assert "access-control-allow-origin" not in response.headers
    monkeypatch.setenv("GPTOSS_DOCTOR_CORS_ORIGINS", "https://ui.example, https://ops.example")
    configured = TestClient(make_app(load_settings()))
    allowed = _preflight(configured, "https://ops.example")
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://ops.example"
    assert "access-control-allow-origin" not in _preflight(configured, "https://evil.example").headers


class Listener:
    """A TCP socket on 127.0.0.1 that counts every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def test_no_endpoint_fetches_a_url_the_client_supplies(
    make_app: Callable[..., FastAPI], settings: Settings
) -> None:
    listener = Listener()
    try:
        # GitHub itself points at the listener too: an on-demand fetch of a cited issue would show.
        base = f"http://127.0.0.1:{listener.port}"
        app = make_app(settings.model_copy(update={"github_api_url": base}))
        client = TestClient(app)
        urls = [
            f"{base}/steal", f"https://127.0.0.1:{listener.port}/", f"127.0.0.1:{listener.port}",
            f"//127.0.0.1:{listener.port}/x", f"{base}/repos/vllm-project/vllm/issues/1",
            "https://github.com/vllm-project/vllm/issues/22519", "file:///etc/passwd",
        ]
        for url in urls:
            text = f"{ERROR}\nsee {url}\nFailed to fetch {url}: ConnectionError"
            assert client.post("/lookup", json={"error": text, "repos": ["vllm-project/vllm"]}).status_code == 200
            assert client.post("/lookup", content=text, headers={"content-type": "text/plain"}).status_code == 200
            client.post("/lookup", json={"error": ERROR, "repos": [url]})  # refused (422), never fetched
            client.post("/lookup", params={"repos": url}, content=ERROR, headers={"content-type": "text/plain"})
            client.post(
                "/lookup",
                json={"error": ERROR},
                headers={"Referer": url, "Origin": base, "X-Forwarded-Host": f"127.0.0.1:{listener.port}"},
            )
            client.get(f"/ui/{url}")
            client.get("/health", headers={"Host": f"127.0.0.1:{listener.port}"})
        time.sleep(0.5)  # room for a fetch made in the background after the answer
        assert listener.connections == 0, f"{listener.connections} connection(s) to a client-supplied address"
        # The check is live: a connection to the listener is counted.
        socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
        wait_until(lambda: listener.connections == 1, timeout=5)
    finally:
        listener.close()


_HTML_SINKS = re.compile(
    r"\.(?:innerHTML|outerHTML)\s*[+]?=|insertAdjacentHTML|document\.write|\beval\s*\(|new\s+Function\s*\("
    r"|createContextualFragment|DOMParser|\.srcdoc\b|setTimeout\s*\(\s*['\"`]|setInterval\s*\(\s*['\"`]"
)


def test_the_page_never_parses_data_as_html() -> None:
    scripts = sorted(STATIC.glob("*.js"))
    assert scripts, f"no page script under {STATIC}"
    for script in scripts:
        source = script.read_text()
        found = [m.group(0) for m in _HTML_SINKS.finditer(source)]
        assert not found, f"{script.name} uses HTML-parsing sinks: {found}"
        # Attributes never name an event handler (onclick=...), whether set directly or through el().
        assert not re.search(r"setAttribute\(\s*['\"]on", source), script.name
        assert not re.search(r"\bel\(\s*['\"]\w+['\"]\s*,\s*\{[^}]*\bon[a-z]+\s*:", source), script.name
    page = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), "inline script in index.html"
    assert not re.search(r"\son[a-z]+\s*=", page), "inline event handler in index.html"


def test_static_sink_check_catches_an_injection() -> None:
    """The pattern above is live: each sink it names is found in a line that uses it."""
    for line in (
        "results.innerHTML = issue.title;",
        "node.outerHTML += x;",
        "el.insertAdjacentHTML('beforeend', t)",
        "document.write(t)",
        "eval(code)",
        "frame.srcdoc = html",
    ):
        assert _HTML_SINKS.search(line), line


@pytest.mark.parametrize(
    "value",
    [b"Bearer \xe9t\xe9", b"Bearer " + b"\xff" * 64, b"Bearer " + b"a" * 8000, b"Bearer", b"Bearer  "],
    ids=["latin-1", "latin-1-long", "8k", "no-token", "blank-token"],
)
def test_a_strange_authorization_header_is_refused_not_crashed_on(
    value: bytes, make_app: Callable[..., FastAPI], settings: Settings
) -> None:
    client = TestClient(
        make_app(settings.model_copy(update={"admin_token": SecretStr(ADMIN), "read_token": SecretStr(READ)})),
        raise_server_exceptions=False,
    )
    headers = [(b"authorization", value), (b"content-type", b"application/json"), (b"accept", b"application/json")]
    for method, path in (
        ("POST", "/lookup"), ("GET", "/v1/index/status"), ("POST", "/v1/index/sync"), ("POST", "/mcp"),
    ):
        response = client.request(method, path, headers=headers, content=b'{"error": "x"}')
        assert response.status_code == 401, (path, response.status_code, response.text[:200])
        assert response.headers["content-type"].startswith("application/problem+json"), path
