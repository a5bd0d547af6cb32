"""Hostile HTTP clients (issue 16, findings 5 to 8), against the server `serve` really starts.

- Slow clients: half-sent headers and slow-drip bodies are cut off after their deadline, and
  connections beyond the cap are closed on arrival (the server `serve` configures, on a real socket).
- /mcp behind a reverse proxy: the Host it forwards is accepted once listed in
  GPTOSS_DOCTOR_MCP_ALLOWED_HOSTS, and still refused when not.
- A client that hangs up mid-body is one debug line, not an error with tracebacks.
- A JSON number of 4,301 digits is a 400, not a 500.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from service.config import Settings
from tests.reliability.conftest import FastComponents, LiveServer, RecordingRunner, wait_until

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class ServedApp:
    """The app under the uvicorn configuration `serve` builds (service.cli.serve.server_config)."""

    def __init__(self, app: Any, settings: Settings) -> None:
        import uvicorn

        from service.cli.serve import server_config

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        config = server_config(app, settings.model_copy(update={"host": "127.0.0.1", "port": self.port}))
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread.start()
        wait_until(lambda: self.server.started, timeout=30)
        wait_until(lambda: app.state.runtime.state == "ready", timeout=30)

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return sock

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def served(fast_components: FastComponents, runner: RecordingRunner) -> Iterator[Callable[[Settings], ServedApp]]:
    from service.app import create_app

    started: list[ServedApp] = []

    def serve(settings: Settings) -> ServedApp:
        app = create_app(settings, loader=lambda s, note: fast_components.engine(s), runner=runner)
        started.append(ServedApp(app, settings))
        return started[-1]

    yield serve
    for server in started:
        server.stop()


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes ``sock`` (EOF or reset) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_half_sent_headers_are_cut_off_after_the_header_timeout(
    served: Callable[[Settings], ServedApp], settings: Settings
) -> None:
    server = served(settings.model_copy(update={"header_timeout": 0.5, "body_timeout": 60}))
    with server.connect() as sock:
        sock.sendall(b"POST /lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n")
        assert closed_by_server(sock, within=5), "a client that never finishes its headers kept its connection"
    with server.connect() as idle:  # a connection that sends nothing at all is cut off too
        assert closed_by_server(idle, within=5)


def test_a_slow_drip_body_is_cut_off_after_the_body_timeout(
    served: Callable[[Settings], ServedApp], settings: Settings
) -> None:
    server = served(settings.model_copy(update={"header_timeout": 60, "body_timeout": 1.0}))
    with server.connect() as sock:
        sock.sendall(
            b"POST /lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 5000\r\n\r\n"
        )
        started = time.monotonic()
        sock.settimeout(0.2)
        closed = False
        while time.monotonic() - started < 6 and not closed:
            try:
                sock.sendall(b"x")  # one byte every 0.2 s: the body would take 1,000 s
                closed = sock.recv(65536) == b""
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                closed = True
        assert closed, "a body sent one byte at a time was held open past its deadline"
    # A normal client on the same server is unaffected.
    answer = httpx.post(f"{server.url}/lookup", json={"error": ERROR}, timeout=30)
    assert answer.status_code == 200


def test_connections_beyond_the_cap_are_closed_on_arrival(
    served: Callable[[Settings], ServedApp], settings: Settings
) -> None:
    server = served(settings.model_copy(update={"max_connections": 4, "header_timeout": 1.5}))
    held = [server.connect() for _ in range(4)]
    try:
        time.sleep(0.2)
        with server.connect() as extra:
            assert closed_by_server(extra, within=1.0), "a fifth connection was kept beyond the cap of 4"
        # The held ones time out (header deadline), and the server takes new clients again.
        assert all(closed_by_server(sock, within=5) for sock in held)
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    ("allowed", "host", "expected_ok"),
    [
        ([], "doctor.example.com", False),
        (["doctor.example.com"], "doctor.example.com", True),
        (["doctor.example.com:*"], "doctor.example.com:8443", True),
        (["doctor.example.com"], "evil.example", False),
        ([], "127.0.0.1:8000", True),
    ],
)
def test_mcp_accepts_the_hosts_a_reverse_proxy_forwards_once_allowed(
    make_app: Callable[..., Any], settings: Settings, allowed: list[str], host: str, expected_ok: bool
) -> None:
    from fastapi.testclient import TestClient

    app = make_app(settings.model_copy(update={"mcp_allowed_hosts": allowed}))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        response = client.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, "Host": host})
    if expected_ok:
        assert response.status_code == 200, response.text
        assert response.json()["result"]["serverInfo"]["name"] == "gptoss-doctor"
    else:
        assert response.status_code == 421


def test_mcp_allowed_hosts_setting_reads_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_MCP_ALLOWED_HOSTS", "doctor.example.com, doctor.internal:*")
    assert Settings().mcp_allowed_hosts == ["doctor.example.com", "doctor.internal:*"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_client_that_hangs_up_mid_body_is_one_debug_line(
    serve_live: Callable[..., LiveServer], settings: Settings
) -> None:
    server = serve_live(settings)
    records = _Records()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn.error"), logging.getLogger("uvicorn")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(records)
    logging.getLogger("service").setLevel(logging.DEBUG)
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                sock.sendall(
                    b"POST /lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: 100000\r\n\r\n" + b"x" * 1000
                )
                time.sleep(0.2)
        wait_until(lambda: sum("client disconnected" in r.getMessage() for r in records.records) >= 3)
        time.sleep(0.3)
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(records)
            logger.setLevel(level)
        logging.getLogger("service").setLevel(logging.NOTSET)
    loud = [r for r in records.records if r.levelno >= logging.WARNING]
    assert not loud, [f"{r.name}: {r.getMessage()}" for r in loud]
    assert not any(r.exc_info for r in records.records), "a disconnect was logged with a traceback"
    gone = [r for r in records.records if "client disconnected" in r.getMessage()]
    assert all(r.levelno == logging.DEBUG for r in gone)


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": "x", "top_k": ' + b"9" * 4301 + b"}",
        b'{"error": "x", "extra": -' + b"1" * 5000 + b"}",
    ],
)
def test_a_number_of_thousands_of_digits_is_a_400(
    make_app: Callable[..., Any], settings: Settings, body: bytes
) -> None:
    from fastapi.testclient import TestClient

    with TestClient(make_app(settings), raise_server_exceptions=False) as client:
        response = client.post("/lookup", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "number" in response.json()["detail"]
