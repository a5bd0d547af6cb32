"""The service fits the operator's host (issue 13): its own port, readiness, an identity, clean 413s.

Real HTTP where it matters: the skill script and urllib talk to a real uvicorn server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from service.api.identity import SERVICE_HEADER
from service.app import create_app
from service.cli import main
from service.config import DEFAULT_PORT, Settings
from service.engine import LookupEngine
from tests.service.support import FastComponents, LiveServer, wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
ERROR = "openai_harmony.HarmonyError: unexpected tokens remaining in message header"
LLM_SERVER_PORTS = {8000, 8001, 8080, 3000, 30000, 11434, 1234, 5000, 7860, 8888}


def test_default_port_is_no_common_llm_server_port() -> None:
    assert DEFAULT_PORT not in LLM_SERVER_PORTS
    assert Settings().port == DEFAULT_PORT
    low, _ = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert DEFAULT_PORT < low  # never handed out as some client's ephemeral port


def test_ready_is_503_until_the_index_is_loaded(settings: Settings, fast_components: FastComponents) -> None:
    gate = threading.Event()

    def loader(s: Settings, note: Callable[[str], None]) -> LookupEngine:
        note("loading the index for the test")
        gate.wait(10)
        return fast_components.engine(s)

    app = create_app(settings, loader=loader)
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200  # alive
        waiting = client.get("/ready")
        assert waiting.status_code == 503
        assert waiting.headers["content-type"].startswith("application/problem+json")
        assert waiting.headers["retry-after"].isdigit()
        assert "loading the index for the test" in waiting.json()["detail"]
        gate.set()
        wait_until(lambda: app.state.runtime.state == "ready")
        ready = client.get("/ready")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready" and ready.json()["generation"]
        assert "/ready" in client.get("/openapi.json").json()["paths"]


def test_every_answer_names_the_service(live_app: LiveServer) -> None:
    for method, path, body in (("GET", "/health", None), ("GET", "/nowhere", None), ("POST", "/lookup", b"{")):
        request = urllib.request.Request(live_app.url + path, data=body, method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                headers = response.headers
        except urllib.error.HTTPError as exc:
            headers = exc.headers
        assert headers[SERVICE_HEADER], (method, path)


def _script(args: list[str], url: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env["GPTOSS_DOCTOR_URL"] = url
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "skill" / "scripts" / "lookup.py"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_skill_script_recognises_the_real_service(live_app: LiveServer) -> None:
    result = _script([ERROR], live_app.url)
    assert result.returncode == 0, result.stderr
    assert "Origin:" in result.stdout


def test_the_skill_script_sends_a_long_log_tail_the_real_service_accepts(live_app: LiveServer) -> None:
    log = "INFO 12:00:00 GET /v1/models 200\n" * 90_000 + ERROR + "\n"  # 3 MB
    result = _script(["-"], live_app.url, stdin=log)
    assert result.returncode == 0, result.stderr
    assert "sending its last" in result.stderr


def test_urllib_reads_the_413_for_a_5_mb_body(live_app: LiveServer, settings: Settings) -> None:
    body = json.dumps({"error": "E" * (5 * 1024 * 1024)}).encode()
    request = urllib.request.Request(
        live_app.url + "/lookup", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 413
    assert caught.value.headers["Content-Type"].startswith("application/problem+json")
    problem = json.loads(caught.value.read())
    assert problem["status"] == 413 and problem["max_body_bytes"] == settings.max_body_bytes
    # The server stays healthy and serves the next client.
    with urllib.request.urlopen(live_app.url + "/health", timeout=10) as response:
        assert response.status == 200


def test_urllib_reads_the_413_from_mcp_too(live_app: LiveServer) -> None:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "' + b"x" * (8 * 1024 * 1024) + b'"}}'
    request = urllib.request.Request(
        live_app.url + "/mcp",
        data=body,
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 413


def test_serve_on_a_taken_port_fails_before_loading_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    import service.app

    def must_not_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("serve went on to build the app on a taken port")

    monkeypatch.setattr(uvicorn, "run", must_not_run)
    monkeypatch.setattr(uvicorn.Server, "run", must_not_run)
    monkeypatch.setattr(service.app, "create_app", must_not_run)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args, env in ((["serve", "--port", str(port)], {}), (["serve"], {"GPTOSS_DOCTOR_PORT": str(port)})):
            result = CliRunner().invoke(main, args, env=env)
            assert result.exit_code == 1, result.output
            assert f"127.0.0.1:{port}" in result.output
            assert "--port" in result.output and "GPTOSS_DOCTOR_PORT" in result.output


def test_bm25s_debug_lines_stay_out_of_an_info_log() -> None:
    import logging

    import bm25s

    import service.retrieval  # noqa: F401  (importing it is what quiets bm25s)

    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger()
    handler, level = Collect(), root.level
    root.addHandler(handler)  # as `serve` sets it up: logging.basicConfig(level=INFO), a handler at NOTSET
    root.setLevel(logging.INFO)
    try:
        bm25s.BM25().index(
            bm25s.tokenize(["harmony error token", "tool call parser"], show_progress=False), show_progress=False
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert [r.getMessage() for r in records if r.name.startswith("bm25s") and r.levelno < logging.INFO] == []


# --- gptoss-doctor lookup: a running service, --repo checks ----------------------------------------


def test_cli_lookup_uses_the_service_running_on_this_host(live_app: LiveServer) -> None:
    port = live_app.url.rsplit(":", 1)[1]
    result = CliRunner().invoke(main, ["lookup", "--json", ERROR], env={"GPTOSS_DOCTOR_PORT": port})
    assert result.exit_code == 0, result.output
    assert f"answered by the gptoss-doctor service at {live_app.url}" in result.stderr
    assert json.loads(result.stdout)["analysis"]["origin"]["side"]


def test_cli_lookup_refuses_a_repo_that_is_not_owner_name() -> None:
    result = CliRunner().invoke(main, ["lookup", "--local", "--repo", "vllm", ERROR])
    assert result.exit_code == 2, result.output
    assert "'vllm' is not owner/name" in result.output


def test_cli_lookup_warns_about_a_repo_nothing_matched(live_app: LiveServer) -> None:
    result = CliRunner().invoke(main, ["lookup", "--url", live_app.url, "--repo", "nobody/nothing", ERROR])
    assert result.exit_code == 0, result.output
    assert "warning: no issue from nobody/nothing matched" in result.stderr


def test_cli_lookup_refuses_another_program_at_url() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Other(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = CliRunner().invoke(main, ["lookup", "--url", url, ERROR])
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1
    assert "not as gptoss-doctor" in result.output
