"""A full disk: one message naming the data dir and its free space, and the last index keeps serving.

Issue 16, finding 9: a full disk ended a run in a long traceback about chromadb's compaction that said
nothing about space, and while the disk was full the last committed index was not served. A full
disk cannot be made here without root, so the fault is injected at the store's write seam
(``Store._write``, every document write goes through it) in the forms it takes for real: sqlite's
``database or disk is full``, an ``ENOSPC`` OSError under chromadb's compaction error, and the
compaction error alone while the data dir's disk has almost nothing free.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.config import Settings
from tests.fakes import HashingEmbedder
from tests.reliability.conftest import wait_until
from tests.reliability.test_corrupt_data_dir import ERROR, built_base, cli, damaged_copy  # noqa: F401

COMPACTION = "Error in compaction: Failed to apply logs to the metadata segment"
LOW = 10 * 1024 * 1024


def _sqlite_full() -> BaseException:
    return sqlite3.OperationalError("database or disk is full")


def _enospc_under_compaction() -> BaseException:
    try:
        raise OSError(errno.ENOSPC, "No space left on device")
    except OSError as cause:
        try:
            raise RuntimeError(COMPACTION) from cause
        except RuntimeError as exc:
            return exc


def _compaction_alone() -> BaseException:
    return RuntimeError(COMPACTION)


FAULTS: dict[str, Callable[[], BaseException]] = {
    "sqlite database or disk is full": _sqlite_full,
    "ENOSPC under a compaction error": _enospc_under_compaction,
    "compaction error on a disk with 10 MB free": _compaction_alone,
}


@pytest.fixture(autouse=True)
def _fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import indexer.build
    import indexer.embedding

    def fake(settings: Settings, **_: object) -> HashingEmbedder:
        return HashingEmbedder()

    monkeypatch.setattr(indexer.embedding, "load_embedder", fake)
    monkeypatch.setattr(indexer.build, "load_embedder", fake)


def _fill_disk(monkeypatch: pytest.MonkeyPatch, fault: str) -> None:
    """Every document write fails as ``fault``; the compaction-only fault also reports a nearly full disk."""
    import indexer.diskspace
    from indexer.store import Store

    def write(*_: object, **__: object) -> None:
        raise FAULTS[fault]()

    monkeypatch.setattr(Store, "_write", staticmethod(write))
    if fault.endswith("10 MB free"):
        monkeypatch.setattr(indexer.diskspace, "free_bytes", lambda path: LOW)


def test_a_lock_refusal_on_a_nearly_full_disk_stays_a_lock_refusal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Little free space explains an unexplained failed write, not another process holding the store:
    # `index` beside a running serve must exit 75 ("retry later"), not say the disk is full. Found on the
    # real full disk below, once the space came back but stayed under 64 MB.
    import indexer.diskspace
    from indexer.diskspace import disk_full_errors
    from indexer.errors import StoreLocked

    monkeypatch.setattr(indexer.diskspace, "free_bytes", lambda path: LOW)
    with pytest.raises(StoreLocked), disk_full_errors(tmp_path):
        raise StoreLocked("the index is in use by pid 1")


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_index_says_the_disk_is_full_in_one_line_and_lookups_keep_working(
    fault: str,
    built_base: Path,  # noqa: F811 (the fixture imported above)
    _hermetic_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    code, before, _ = cli("lookup", "--json", ERROR)
    assert code == 0, before
    with monkeypatch.context() as full:
        _fill_disk(full, fault)
        code, output, exc = cli("index", "--full")
    assert code == 1 and isinstance(exc, SystemExit), output
    message = output.strip().splitlines()[-1]
    assert "is full" in message and str(_hermetic_env) in message and " free" in message, output
    assert "Traceback" not in output and "compaction" not in message.lower(), output
    if fault.endswith("10 MB free"):
        assert "10.0 MB free" in message
    # The last committed index serves on, the same as before the failed run.
    code, after, _ = cli("lookup", "--json", ERROR)
    assert code == 0 and after == before


def test_a_full_disk_is_not_taken_for_corruption_by_a_full_rebuild(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    _hermetic_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `index --full` moves an unreadable index aside; one that only could not be written must stay put.
    from indexer.store import Store

    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    with monkeypatch.context() as full:

        def load(self: Store) -> None:
            raise _sqlite_full()

        full.setattr(Store, "_load", load)
        code, output, _ = cli("index", "--full")
    assert code == 1 and "is full" in output, output
    assert not list(_hermetic_env.glob("chroma.corrupt-*")), "the index was moved aside"
    assert cli("lookup", "--json", ERROR)[0] == 0


def test_the_service_keeps_serving_the_last_index_while_a_run_hits_a_full_disk(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    _hermetic_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.app import create_app

    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    app = create_app(Settings(data_dir=_hermetic_env))  # the real loader and runner, with the fake model
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_until(lambda: app.state.runtime.state == "ready", timeout=60)
        before = client.post("/lookup", json={"error": ERROR}).json()
        with monkeypatch.context() as full:
            _fill_disk(full, "ENOSPC under a compaction error")
            outcome = app.state.runtime.scheduler.run("rebuild-local")
        assert outcome["ok"] is False and "is full" in outcome["error"], outcome
        health = client.get("/health").json()
        assert health["status"] == "degraded"
        assert any("is full" in r and "previous index is serving" in r for r in health["reasons"]), health
        answer = client.post("/lookup", json={"error": ERROR})
        assert answer.status_code == 200
        after = answer.json()
        assert after["degraded"] is False and after["issues"] == before["issues"]


def test_a_reader_serving_a_copy_goes_back_to_the_real_store_once_it_opens(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    _hermetic_env: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A serve that started on a full disk answered from its read-only copy until restarted, while index
    # runs published to the real store once space came back. The fault is injected where chromadb fails on
    # a full disk (opening the store, in this process only: the probe process sees the store as it is);
    # the slow test below does the same on a real full file system.
    from indexer.build import build_index
    from indexer.diskspace import OPEN_FAILED, disk_full
    from indexer.store import Store
    from service.engine import LookupEngine

    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    settings = Settings(data_dir=_hermetic_env)
    real_load = Store._load
    disk = {"full": True}

    def load(self: Store) -> None:
        if disk["full"] and self.settings.data_dir == _hermetic_env:
            raise disk_full(_hermetic_env, OPEN_FAILED) from _sqlite_full()  # what _load makes of it
        real_load(self)

    monkeypatch.setattr(Store, "_load", load)
    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        copy = getattr(engine.store, "_copy", None)
        assert copy is not None and copy.is_dir()
        assert any("read-only copy" in reason for reason in engine.degraded_reasons())
        assert engine.reopen_real_store() is False  # still full: the copy serves on
        assert any("read-only copy" in reason for reason in engine.degraded_reasons())

        disk["full"] = False  # space comes back, and an index run publishes to the real store
        published = build_index(settings, embedder=HashingEmbedder(), full=True, progress=False).generation
        assert published != engine.generation
        engine.reload_if_changed(now=True)  # what a lookup or /health does: the way back starts there
        wait_until(lambda: engine.generation == published and not copy.exists(), timeout=60)
        assert not any("copy" in reason or "is full" in reason for reason in engine.degraded_reasons())
        assert getattr(engine.store, "_copy", None) is None
        assert engine.lookup(ERROR).issues
    finally:
        engine.close()


def _namespace_command() -> list[str] | None:
    """``unshare`` arguments that give a child its own mount namespace where it may mount a tmpfs."""
    import shutil
    import subprocess

    if shutil.which("unshare") is None:
        return None
    trial = "mount -t tmpfs -o size=1m tmpfs /mnt"
    for command in (["unshare", "--mount"], ["unshare", "--mount", "--map-root-user"]):
        probe = subprocess.run(
            [*command, "sh", "-c", trial],
            capture_output=True,
            timeout=30,
        )
        if probe.returncode == 0:
            return command
    return None


@pytest.mark.slow
def test_a_real_full_disk_serves_the_last_index_and_names_the_disk_everywhere(
    built_base: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    # The faults above are injected; this is the real thing: a 48 MB tmpfs holding the index, filled to
    # the last byte. chromadb cannot even open a store there to read it, so lookups (CLI and served app)
    # must answer from a read-only copy elsewhere, say so, and every command must name the disk, not
    # corruption. Then the space comes back (while the app serves: it goes back to the real store) and a
    # plain `index` works again.
    import json
    import os
    import subprocess
    import sys

    namespace = _namespace_command()
    if namespace is None:
        pytest.skip("cannot mount a small file system here (needs root or unprivileged user namespaces)")
    mount, scratch = tmp_path / "disk", tmp_path / "tmp"
    mount.mkdir()
    scratch.mkdir()
    child = Path(__file__).with_name("full_disk_child.py")
    script = f'mount -t tmpfs -o size=48m tmpfs "{mount}" && exec "{sys.executable}" "{child}" "{built_base}" "{mount}"'
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")} | {"TMPDIR": str(scratch)}
    done = subprocess.run([*namespace, "sh", "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["free"] < 1024 * 1024, report["free"]

    lookup = report["lookup"]
    assert lookup["code"] == 0 and json.loads(lookup["stdout"])["issues"], lookup
    assert "is full" in lookup["stderr"] and "read-only copy" in lookup["stderr"], lookup["stderr"]

    index = report["index"]
    assert index["code"] == 1 and "Traceback" not in index["stderr"] + index["stdout"], index
    last = index["stderr"].strip().splitlines()[-1]
    assert "is full" in last and str(mount) in last and " free" in last, last

    doctor = [line for line in report["doctor"]["stdout"].splitlines() if "index" in line or "fix:" in line]
    index_line = next(i for i, line in enumerate(doctor) if line.split()[1:2] == ["index"])
    assert "is full" in doctor[index_line] and "--full" not in doctor[index_line + 1], doctor

    serve = report["serve"]
    assert serve["state"] == "ready" and serve["lookup_status"] == 200 and serve["issues"], serve
    assert any("is full" in r and "read-only copy" in r for r in serve["health"]["reasons"]), serve["health"]

    # Space came back while serving and an index run published a new generation to the real store: the
    # service goes back to it (it no longer says "copy", answers from the new generation, drops the copy)
    # instead of serving the old copy until restarted.
    rebuild = serve["rebuild"]
    assert rebuild["code"] == 0, rebuild
    published = json.loads(rebuild["stdout"])["generation"]
    assert published != serve["generation"], serve
    assert not any("copy" in r or "is full" in r for r in serve["health_after"]["reasons"]), serve["health_after"]
    assert serve["generation_after"] == published, serve
    assert serve["lookup_after_status"] == 200 and serve["issues_after"], serve
    assert serve["copies_while_serving"] == [], serve
    assert serve["index_beside"]["code"] == 75, serve["index_beside"]  # back to holding the shared lock

    assert report["index_after"]["code"] == 0, report["index_after"]
    after = report["lookup_after"]
    assert after["code"] == 0 and "is full" not in after["stderr"], after
    assert report["copies_left"] == [], "a read-only copy was left behind"
