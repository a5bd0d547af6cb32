"""The README's quick start on a vLLM host: port 8000 is taken, and serve and lookup still work (issue 13).

A dummy HTTP server stands in for vLLM on 8000 (it answers 404 to /lookup, as vLLM does). Then the
quick start's serve and lookup steps run as a newcomer runs them, with every default: `gptoss-doctor
serve` in its own process on its default port, `gptoss-doctor lookup` and the skill script without a URL.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from service.config import DEFAULT_PORT, Settings
from tests.interfaces.conftest import share_caches

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
CLI = [sys.executable, "-m", "service.cli"]


class _VllmLike(BaseHTTPRequestHandler):
    def _not_found(self) -> None:
        length = int(self.headers.get("Content-Length", "0") or 0)
        if length:
            self.rfile.read(length)
        body = b'{"detail":"Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _not_found  # noqa: N815 (http.server naming)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (base class signature)
        pass


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def vllm_on_8000() -> Iterator[None]:
    """Port 8000 held by an HTTP server that is not gptoss-doctor (ours, unless something holds it already)."""
    if _port_taken(8000):
        yield  # already taken on this machine: the situation under test
        return
    server = ThreadingHTTPServer(("127.0.0.1", 8000), _VllmLike)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield
    server.shutdown()
    server.server_close()


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env.update(GPTOSS_DOCTOR_DATA_DIR=str(data_dir), PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1")
    return env


def test_quick_start_on_a_host_where_vllm_holds_8000(vllm_on_8000: None, built_index: Settings, tmp_path: Path) -> None:
    assert not _port_taken(DEFAULT_PORT), f"something already listens on {DEFAULT_PORT}; cannot run the quick start"
    data_dir = tmp_path / "data"
    share_caches(built_index, data_dir, index=True)
    env = _env(data_dir)
    serve = subprocess.Popen(
        [*CLI, "serve"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{DEFAULT_PORT}"
        deadline = time.monotonic() + 120
        while True:
            assert serve.poll() is None, serve.communicate()[0].decode(errors="replace")[-2000:]
            try:
                with urllib.request.urlopen(url + "/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "serve was not ready within 120 s"
            time.sleep(0.2)

        lookup = subprocess.run(
            [*CLI, "lookup", ERROR], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert lookup.returncode == 0, lookup.stderr
        assert f"answered by the gptoss-doctor service at {url}" in lookup.stderr
        assert "vllm-project/vllm#" in lookup.stdout

        script = [sys.executable, str(REPO_ROOT / "skill" / "scripts" / "lookup.py"), ERROR]
        skill = subprocess.run(script, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert skill.returncode == 0, skill.stderr
        assert "vllm-project/vllm#" in skill.stdout

        # Pointed at vLLM's port by mistake, the script says "unreachable" (exit 2), not "refused".
        wrong = subprocess.run(
            script,
            env={**env, "GPTOSS_DOCTOR_URL": "http://127.0.0.1:8000"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert wrong.returncode == 2, wrong.stderr
        assert "references/known-issues.md" in wrong.stderr
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(10)


def test_serve_on_a_taken_port_stops_before_touching_the_data_dir(vllm_on_8000: None, tmp_path: Path) -> None:
    data_dir = tmp_path / "untouched"
    started = time.monotonic()
    result = subprocess.run(
        [*CLI, "serve", "--port", "8000"],
        cwd=REPO_ROOT,
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "--port" in result.stderr and "GPTOSS_DOCTOR_PORT" in result.stderr
    assert not data_dir.exists()  # nothing was loaded or built
    assert time.monotonic() - started < 30
