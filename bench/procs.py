"""Real processes for the bench: ``gptoss-doctor index`` runs and a ``gptoss-doctor serve`` on loopback.

Every wait is bounded; a process the bench started is stopped by its own pid (SIGTERM, then SIGKILL).
Memory is read from ``/proc/<pid>/status`` (VmRSS now, VmHWM the kernel's own peak), so no extra
dependency is needed on Linux; elsewhere the figures are reported as missing.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

REPO = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).parent / "gptoss-doctor"
CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-c", "from service.cli import main; main()"]
"""The console script next to this interpreter (the venv's), else the same entry point via -c."""


def child_env(data_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: offline, ambient GPTOSS_DOCTOR_* and GitHub tokens cleared."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GPTOSS_DOCTOR_") and k not in {"GITHUB_TOKEN", "GH_TOKEN"}
    }
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        GPTOSS_DOCTOR_DATA_DIR=str(data_dir),
        # Nothing in a bench run may reach the real GitHub: runs that sync get the local fake's URL.
        GPTOSS_DOCTOR_GITHUB_API_URL="http://127.0.0.1:9/api/v3",
    )
    env.update(extra or {})
    return env


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound and released; the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class CliRun:
    """One finished CLI run."""

    args: list[str]
    returncode: int
    seconds: float
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, lines: int = 6) -> str:
        """The last lines of stderr (or stdout), for a report."""
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return "\n".join(text[-lines:])


def run_cli(args: list[str], env: Mapping[str, str], *, timeout: float) -> CliRun:
    """Run ``gptoss-doctor <args>`` to completion (killed at ``timeout``) and time it."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [*CLI, *args], cwd=REPO, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -9, _text(exc.stdout), _text(exc.stderr) + f"\n(killed after {timeout:g}s)"
    return CliRun(args, code, time.perf_counter() - started, out, err)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


_STATUS_KEYS = {"VmRSS": "rss_mb", "VmHWM": "peak_mb", "RssAnon": "anon_mb", "RssFile": "file_mb"}


def proc_memory(pid: int) -> dict[str, float] | None:
    """``{"rss_mb", "peak_mb", "anon_mb", "file_mb"}`` of a live process from /proc, or None when unavailable.

    ``anon_mb`` is the heap and other private memory, where a leak would show; ``file_mb`` is mapped
    files (libraries, the model's memory-mapped word-embedding table), which the kernel can drop.
    """
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    values: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        name = _STATUS_KEYS.get(key)
        if name is not None:
            values[name] = round(int(rest.split()[0]) / 1024, 1)
    return values or None


@dataclass
class Server:
    """A ``gptoss-doctor serve`` process on 127.0.0.1; its log goes to a temp file."""

    data_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    log_path: Path | None = None
    _log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> Server:
        """Spawn the server on a free port (returns at once; see :meth:`wait_ready`)."""
        self.port = free_port()
        fd, name = tempfile.mkstemp(prefix="gptoss-doctor-serve-", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        self._log = self.log_path.open("wb")
        env = child_env(self.data_dir, {"GPTOSS_DOCTOR_LOG_LEVEL": "WARNING", **self.extra_env})
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            [*CLI, "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def wait_ready(self, probe: str, *, timeout: float) -> dict[str, float]:
        """Poll until /health says ok and a /lookup answers 200; seconds since spawn for each."""
        deadline = self.started_at + timeout
        marks: dict[str, float] = {}
        with httpx.Client(base_url=self.url, timeout=10.0) as client:
            while time.perf_counter() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"serve exited with {self.proc.returncode}: {self.log_tail()}")
                try:
                    if "health_ok" not in marks:
                        if client.get("/health").json().get("status") == "ok":
                            marks["health_ok"] = time.perf_counter() - self.started_at
                    elif client.post("/lookup", json={"error": probe}).status_code == 200:
                        marks["lookup_ok"] = time.perf_counter() - self.started_at
                        return marks
                except (httpx.HTTPError, ValueError):
                    pass  # the port is not bound yet, or the body is not JSON yet
                time.sleep(0.05)
        raise TimeoutError(f"serve was not ready within {timeout:g}s ({marks}); log: {self.log_tail()}")

    def memory(self) -> dict[str, float] | None:
        """RSS and peak RSS of the server process now."""
        return proc_memory(self.pid) if self.proc is not None else None

    def log_tail(self, lines: int = 8) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait, then SIGKILL; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._log is not None:
            self._log.close()
        return self.proc.returncode


class RssSampler:
    """Samples a process's RSS every ``interval`` seconds in a daemon thread until stopped."""

    def __init__(self, pid: int, interval: float = 0.5, *, t0: float | None = None) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self.anon: list[tuple[float, float]] = []
        """RssAnon at the same moments (private memory only)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._t0 = time.perf_counter() if t0 is None else t0

    def _loop(self) -> None:
        while not self._stop.is_set():
            mem = proc_memory(self.pid)
            if mem and "rss_mb" in mem:
                t = round(time.perf_counter() - self._t0, 2)
                self.samples.append((t, mem["rss_mb"]))
                if "anon_mb" in mem:
                    self.anon.append((t, mem["anon_mb"]))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
