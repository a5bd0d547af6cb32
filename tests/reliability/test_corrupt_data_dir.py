"""A corrupt or half-written data dir on start: a clear error naming the fix, never a traceback.

A real index is built once (real Chroma, hashing embedder), copied per test and damaged the ways a full
disk, a killed process or a careless ``rm`` damage it. Damage Chroma cannot recover from must make
``gptoss-doctor lookup`` exit with a message naming ``gptoss-doctor index --full`` and make the served
app say so on ``/health`` and in ``/lookup``'s 503 problem+json; damage Chroma rebuilds itself from
(its HNSW files) must not stop lookups at all. Following the advice must then work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from service.config import Settings
from tests.fakes import HashingEmbedder
from tests.reliability.conftest import wait_until

FIX = "gptoss-doctor index --full"
ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
CHILD = Path(__file__).with_name("cli_child.py")


@pytest.fixture(scope="module")
def built_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir holding a complete index of the docs and the bundled KB (built once per module)."""
    from indexer.build import build_index

    data_dir = tmp_path_factory.mktemp("base") / "data"
    build_index(Settings(data_dir=data_dir), embedder=HashingEmbedder(), github=False, progress=False)
    return data_dir


@pytest.fixture(autouse=True)
def _fake_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every in-process entry point gets the hashing embedder instead of the bundled model."""
    import indexer.build
    import indexer.embedding

    def fake(settings: Settings, **_: object) -> HashingEmbedder:
        return HashingEmbedder()

    monkeypatch.setattr(indexer.embedding, "load_embedder", fake)
    monkeypatch.setattr(indexer.build, "load_embedder", fake)


def _segments(data_dir: Path) -> list[Path]:
    return [p for p in (data_dir / "chroma").iterdir() if p.is_dir()]


def _garbage_sqlite(data_dir: Path) -> None:
    (data_dir / "chroma" / "chroma.sqlite3").write_bytes(b"not a database\n" * 512)


def _truncated_sqlite(data_dir: Path) -> None:
    db = data_dir / "chroma" / "chroma.sqlite3"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])


def _empty_sqlite(data_dir: Path) -> None:
    # What a full disk can leave: the file is there, with nothing in it.
    (data_dir / "chroma" / "chroma.sqlite3").write_bytes(b"")


def _chroma_dir_is_a_file(data_dir: Path) -> None:
    shutil.rmtree(data_dir / "chroma")
    (data_dir / "chroma").write_text("left over by a bad copy\n")


def _drop_collection(data_dir: Path, which: Callable[[str], bool]) -> None:
    import chromadb
    from chromadb.api.shared_system_client import SharedSystemClient
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(str(data_dir / "chroma"), settings=ChromaSettings(anonymized_telemetry=False))
    for col in client.list_collections():
        name = col if isinstance(col, str) else col.name
        if which(name):
            client.delete_collection(name)
    SharedSystemClient.clear_system_cache()


def _metadata_missing(data_dir: Path) -> None:
    # A writer that died after creating the data collection but before its metadata.
    _drop_collection(data_dir, lambda name: name.endswith("__meta"))


def _serving_collection_missing(data_dir: Path) -> None:
    # The metadata names a data collection that is gone.
    _drop_collection(data_dir, lambda name: "__g" in name)


def _segment_dirs_missing(data_dir: Path) -> None:
    for segment in _segments(data_dir):
        shutil.rmtree(segment)


def _segment_files_truncated(data_dir: Path) -> None:
    for segment in _segments(data_dir):
        for item in segment.iterdir():
            item.write_bytes(item.read_bytes()[: item.stat().st_size // 3])


def _vocab_truncated(data_dir: Path) -> None:
    from service.analysis.harmony import VOCAB_FILE, ensure_vocab

    vocab = ensure_vocab(data_dir / "harmony-vocab") / VOCAB_FILE
    vocab.write_bytes(vocab.read_bytes()[:1000])


UNRECOVERABLE = {
    "garbage chroma.sqlite3": _garbage_sqlite,
    "chroma.sqlite3 cut in half": _truncated_sqlite,
    "zero-length chroma.sqlite3": _empty_sqlite,
    "chroma dir is a file": _chroma_dir_is_a_file,
    "index metadata missing": _metadata_missing,
    "serving collection missing": _serving_collection_missing,
}
RECOVERABLE = {
    "HNSW segment dirs missing": _segment_dirs_missing,
    "HNSW segment files truncated": _segment_files_truncated,
    "Harmony vocab truncated": _vocab_truncated,
}


def damaged_copy(base: Path, target: Path, damage: Callable[[Path], None]) -> Path:
    shutil.copytree(base, target)
    for leftover in target.glob(".*lock*"):  # lock files describe the base dir's holders, not the copy's
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    damage(target)
    return target


def cli(*args: str) -> tuple[int, str, BaseException | None]:
    from service.cli import main

    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output, result.exception


@pytest.mark.parametrize("damage", sorted(UNRECOVERABLE))
def test_lookup_cli_names_the_fix_and_prints_no_traceback(
    damage: str, built_base: Path, _hermetic_env: Path
) -> None:
    damaged_copy(built_base, _hermetic_env, UNRECOVERABLE[damage])
    code, output, exc = cli("lookup", ERROR)
    assert code == 1, output
    assert isinstance(exc, SystemExit), exc  # click's own exit, not an escaped exception
    assert FIX in output and "Traceback" not in output, output


@pytest.mark.parametrize(
    ("damage", "deep"),
    [*((name, False) for name in sorted(UNRECOVERABLE)), ("garbage chroma.sqlite3", True)],
    ids=[*sorted(UNRECOVERABLE), "garbage chroma.sqlite3 under a long path"],
)
def test_served_app_says_what_is_wrong_and_how_to_fix_it(
    damage: str, deep: bool, built_base: Path, _hermetic_env: Path
) -> None:
    from service.app import create_app

    # A long data-dir path makes a long message: the fix at its end must survive any shortening.
    data_dir = _hermetic_env / ("long-" * 30) / "data" if deep else _hermetic_env
    damaged_copy(built_base, data_dir, UNRECOVERABLE[damage])
    app = create_app(Settings(data_dir=data_dir))  # the real loader, with the fake model
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_until(lambda: app.state.runtime.state == "failed", timeout=30)
        health = client.get("/health")
        assert health.status_code == 200
        assert health.json()["status"] == "degraded"
        assert any(FIX in reason for reason in health.json()["reasons"]), health.json()
        answer = client.post("/lookup", json={"error": ERROR})
        assert answer.status_code == 503
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert FIX in answer.json()["detail"] and "Traceback" not in answer.text, answer.json()
        assert answer.headers.get("retry-after")


@pytest.mark.parametrize("damage", sorted(RECOVERABLE))
def test_damage_chroma_rebuilds_itself_from_does_not_stop_lookups(
    damage: str, built_base: Path, _hermetic_env: Path
) -> None:
    damaged_copy(built_base, _hermetic_env, RECOVERABLE[damage])
    code, output, exc = cli("lookup", "--json", ERROR)
    assert code == 0 and exc is None, output
    assert '"issues"' in output and "Traceback" not in output


@pytest.mark.parametrize("damage", ["garbage chroma.sqlite3", "index metadata missing", "zero-length chroma.sqlite3"])
def test_following_the_advice_repairs_the_index(damage: str, built_base: Path, _hermetic_env: Path) -> None:
    damaged_copy(built_base, _hermetic_env, UNRECOVERABLE[damage])
    assert cli("lookup", ERROR)[0] == 1
    code, output, _ = cli("index", "--full")
    assert code == 0, output
    code, output, exc = cli("lookup", "--json", ERROR)
    assert code == 0 and exc is None, output
    assert "vllm-project/vllm#" in output or "openai/harmony#" in output


LOST_THREADS = "synced github threads"  # the warning's subject, matched case-insensitively
REFETCH = "gptoss-doctor index --github"


@pytest.mark.parametrize("damage", ["zero-length chroma.sqlite3", "garbage chroma.sqlite3"])
def test_a_rebuild_over_an_unreadable_index_says_synced_threads_are_lost(
    damage: str, built_base: Path, _hermetic_env: Path
) -> None:
    # Issue 16, finding 9: `index --full` over a zero-length chroma.sqlite3 rebuilt silently, dropping the
    # synced GitHub threads it held. The user must be told, in the run's own output, and how to get them back.
    damaged_copy(built_base, _hermetic_env, UNRECOVERABLE[damage])
    code, output, _ = cli("index", "--full")
    assert code == 0, output
    summary = output.strip().splitlines()[-1]  # stdout's summary line: shown whatever the log level
    assert LOST_THREADS in summary.lower() and REFETCH in summary, output
    assert "chroma.corrupt-" in summary, output  # where the old store went (kept for inspection)


def test_doctor_fix_over_an_empty_index_says_synced_threads_are_lost(built_base: Path, _hermetic_env: Path) -> None:
    # doctor logs only errors, so a warning in the log alone would not reach its user.
    damaged_copy(built_base, _hermetic_env, UNRECOVERABLE["zero-length chroma.sqlite3"])
    code, output, _ = cli("doctor", "--fix")
    assert LOST_THREADS in output.lower() and REFETCH in output, output


def test_a_rebuild_over_a_sound_index_warns_of_nothing_lost(built_base: Path, _hermetic_env: Path) -> None:
    # The warning above means something only if a rebuild that carries the synced threads over is quiet.
    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    code, output, _ = cli("index", "--full")
    assert code == 0, output
    assert LOST_THREADS not in output.lower() and "chroma.corrupt-" not in output, output


def test_real_process_exits_with_the_message_only(built_base: Path, tmp_path: Path) -> None:
    """The console script in its own process: exit status 1, one line on stderr, no traceback."""
    data_dir = damaged_copy(built_base, tmp_path / "real", _garbage_sqlite)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env["GPTOSS_DOCTOR_DATA_DIR"] = str(data_dir)
    done = subprocess.run(
        [sys.executable, str(CHILD), "lookup", ERROR], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert FIX in done.stderr
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.stderr.strip().startswith("Error: ") and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("damage", ["garbage chroma.sqlite3", "zero-length chroma.sqlite3"])
def test_doctor_names_index_full_for_an_unreadable_index(damage: str, built_base: Path, _hermetic_env: Path) -> None:
    # A plain `index` opens the same broken store and fails again: doctor must say --full.
    damaged_copy(built_base, _hermetic_env, UNRECOVERABLE[damage])
    code, output, _ = cli("doctor")
    assert code != 0 and FIX in output, output


def test_an_index_left_mid_write_is_reported_not_called_ok(built_base: Path, _hermetic_env: Path) -> None:
    # Issue 16, finding 4: after a writer was killed between writing documents and publishing them,
    # /health said ok while dense search was damaged. The store's dirty marker is what shows it.
    from indexer.store import Store
    from service.engine import LookupEngine

    damaged_copy(built_base, _hermetic_env, lambda data_dir: None)
    settings = Settings(data_dir=_hermetic_env)
    with Store.open(settings, HashingEmbedder()) as writer:
        writer._mark_dirty(writer._writable_target())  # what a SIGKILL between the two steps leaves
    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        assert any("mid-write" in reason and "gptoss-doctor index" in reason for reason in engine.degraded_reasons())
    finally:
        engine.close()
    with Store.open(settings, HashingEmbedder()):  # the next writer repairs it: clean again
        pass
    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        assert not any("mid-write" in reason for reason in engine.degraded_reasons())
    finally:
        engine.close()
