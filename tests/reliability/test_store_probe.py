"""The embedded store is opened in a bounded probe process first (issue 16, finding 2).

chromadb's native code hung a retried start-up in ``Collection.count()`` with the GIL held, so
``/health`` stopped answering, and ``doctor --fix`` on a damaged sqlite failed inside chromadb's
bindings. Now ``serve``, ``doctor`` and ``index --full`` open the store in a child process killed after
``GPTOSS_DOCTOR_STORE_PROBE_TIMEOUT``. A hang is made here with the store's fault hook, where chromadb
hung: opening the embedded store sleeps in libc with the GIL held, in whichever process opens it. So
the tests fail if the server or doctor opened the store themselves (their /health or their own run
would freeze with it), not only if the probe is missing. Real Chroma and real processes otherwise.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexer.chroma_client import STALL_ENV
from service.config import Settings
from tests.reliability.conftest import wait_until
from tests.reliability.test_corrupt_data_dir import (  # noqa: F401  (built_base and _fake_model are fixtures)
    CHILD,
    ERROR,
    FIX,
    _fake_model,
    _garbage_sqlite,
    _truncated_sqlite,
    built_base,
    cli,
    damaged_copy,
)

PROBE_TIMEOUT = 2.0


def _garbled_pages(data_dir: Path) -> None:
    # Scattered garbage inside the file, as a failing disk or a torn copy leaves it.
    db = data_dir / "chroma" / "chroma.sqlite3"
    data = bytearray(db.read_bytes())
    rng = random.Random(3)
    for _ in range(40):
        offset = rng.randrange(100, len(data) - 4096)
        data[offset : offset + 512] = rng.randbytes(512)
    db.write_bytes(bytes(data))


def test_serve_answers_health_while_the_store_probe_hangs_then_recovers(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    _hermetic_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.app import create_app

    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    monkeypatch.setenv(STALL_ENV, "30")  # opening the store hangs with the GIL held, as chromadb did
    settings = Settings(data_dir=_hermetic_env, store_probe_timeout=PROBE_TIMEOUT)
    app = create_app(settings, retry_delays=(0.5,))  # the real loader, with the fake model
    with TestClient(app, raise_server_exceptions=False) as client:
        runtime = app.state.runtime
        wait_until(lambda: "probe" in runtime.phase, timeout=30)
        hanging_since = time.monotonic()
        slowest = 0.0
        while time.monotonic() - hanging_since < PROBE_TIMEOUT:  # while the probe hangs
            start = time.monotonic()
            health = client.get("/health")
            slowest = max(slowest, time.monotonic() - start)
            assert health.status_code == 200 and health.json()["status"] in ("starting", "degraded")
            time.sleep(0.1)
        assert slowest < 1.0, slowest
        wait_until(lambda: runtime.state == "failed", timeout=30)
        health = client.get("/health").json()
        assert any("store probe timed out" in reason for reason in health["reasons"]), health
        ready = client.get("/ready")
        assert ready.status_code == 503 and "store probe timed out" in ready.json()["detail"]
        assert client.post("/lookup", json={"error": ERROR}).status_code == 503

        monkeypatch.delenv(STALL_ENV)  # the store answers again: the next retry opens it
        # A sound probe still imports chromadb and opens the store: seconds on a loaded machine.
        settings.store_probe_timeout = 60.0
        wait_until(lambda: runtime.state == "ready", timeout=60)
        assert client.get("/health").json()["status"] == "ok"
        answer = client.post("/lookup", json={"error": ERROR})
        assert answer.status_code == 200 and answer.json()["issues"]


def test_doctor_reports_a_hanging_store_instead_of_hanging(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    _hermetic_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    monkeypatch.setenv(STALL_ENV, "30")
    monkeypatch.setenv("GPTOSS_DOCTOR_STORE_PROBE_TIMEOUT", str(PROBE_TIMEOUT))
    start = time.monotonic()
    code, output, _ = cli("doctor")
    assert time.monotonic() - start < 30
    assert code != 0 and "did not finish within 2s" in output and FIX in output, output


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage", [_garbage_sqlite, _truncated_sqlite, _garbled_pages], ids=["garbage", "cut in half", "garbled pages"]
)
def test_doctor_fix_repairs_a_damaged_sqlite_with_a_clear_message(
    damage: object,
    built_base: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    """The console script in its own process, so chromadb's native output would show too."""
    data_dir = damaged_copy(built_base, tmp_path / "real", damage)  # type: ignore[arg-type]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env["GPTOSS_DOCTOR_DATA_DIR"] = str(data_dir)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(CHILD), *args], env=env, capture_output=True, text=True, timeout=300)

    fixed = run("doctor", "--fix")
    output = fixed.stdout + fixed.stderr
    for noise in ("Traceback", "AttributeError", "panicked"):
        assert noise not in output, output
    assert fixed.returncode == 0, output
    assert "(full rebuild)" in fixed.stdout
    assert list(data_dir.glob("chroma.corrupt-*")), "the damaged index was not kept aside"
    again = run("doctor")
    assert again.returncode == 0, again.stdout + again.stderr
    lookup = run("lookup", "--json", ERROR)
    assert lookup.returncode == 0 and '"issues"' in lookup.stdout


def test_a_retry_in_the_same_process_opens_the_store_once_the_damage_is_cleared(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    # The root of both symptoms: chromadb cached the System that failed to start and every later open
    # of that path in the process reused it (AttributeError on 'bindings', or a hang in native code),
    # even after the file was restored or the disk cleared. Real Chroma, in this process.
    from indexer.errors import StoreError
    from indexer.store import Store
    from tests.fakes import HashingEmbedder

    data_dir = damaged_copy(built_base, tmp_path / "data", lambda data_dir: None)
    database = data_dir / "chroma" / "chroma.sqlite3"
    good = database.read_bytes()
    _garbage_sqlite(data_dir)
    settings = Settings(data_dir=data_dir)
    with pytest.raises(StoreError, match="not a database"):
        Store.open(settings, HashingEmbedder(), read_only=True)
    database.write_bytes(good)  # the damage is cleared: a restored file, a freed disk
    with Store.open(settings, HashingEmbedder(), read_only=True) as store:
        assert store.count() > 0
