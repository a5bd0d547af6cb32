"""First start on an empty data dir: the real indexer and Chroma build the index offline before answering.

The embedder is the deterministic fake so this stays fast; test_e2e.py covers the real model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import indexer.embedding
from service.app import create_app
from service.cli import main
from service.config import Settings
from service.engine import LookupEngine
from tests.service.support import HashingEmbedder, wait_until

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"


def test_first_start_builds_the_index_offline_then_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_GITHUB_API_URL", "http://127.0.0.1:9")  # any GitHub call would fail
    settings = Settings(data_dir=tmp_path / "fresh")
    notes: list[str] = []

    def loader(s: Settings, note: Callable[[str], None]) -> LookupEngine:
        def record(line: str) -> None:
            notes.append(line)
            note(line)

        return LookupEngine.open(s, embedder=HashingEmbedder(dimension=64), on_build=record)

    app = create_app(settings, loader=loader)
    with TestClient(app) as client:
        early = client.post("/lookup", json={"error": ERROR})
        assert early.status_code == 503 and early.headers["retry-after"]
        wait_until(lambda: app.state.runtime.state != "starting", timeout=120)
        assert app.state.runtime.state == "ready", app.state.runtime.error
        answer = client.post("/lookup", json={"error": ERROR})
        assert answer.status_code == 200
        assert answer.json()["issues"]
        status = client.get("/v1/index/status").json()
        assert status["documents"] > 600 and status["built_at"]
    assert notes and notes[0].startswith("No index yet")
    assert "GitHub requests: 0" in notes[1]


def test_cli_builds_a_missing_index_first_and_says_so_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_DATA_DIR", str(tmp_path / "cli-fresh"))
    # The bundled model is exercised in test_e2e.py; here the fake keeps the build quick.
    monkeypatch.setattr(indexer.embedding, "load_embedder", lambda settings: HashingEmbedder(dimension=64))
    result = CliRunner().invoke(main, ["lookup", "--json", ERROR])
    assert result.exit_code == 0, result.output
    assert "No index yet" in result.stderr and "No index yet" not in result.stdout
    again = CliRunner().invoke(main, ["lookup", "--json", ERROR])
    assert again.exit_code == 0 and "No index yet" not in again.stderr


def test_open_loads_the_embedder_beside_harmony_and_keeps_the_parsed_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service.engine

    settings = Settings(data_dir=tmp_path / "fresh")
    harmony_started, embedder_started = threading.Event(), threading.Event()
    real_open_harmony = service.engine.open_harmony

    def load_embedder(s: Settings) -> HashingEmbedder:
        embedder_started.set()
        # Both wait for the other to have started: run one after the other, each would time out.
        assert harmony_started.wait(30), "Harmony did not open while the embedder loaded"
        return HashingEmbedder(dimension=64)

    def open_harmony(s: Settings):  # type: ignore[no-untyped-def]
        harmony_started.set()
        assert embedder_started.wait(30), "the embedder did not load while Harmony opened"
        return real_open_harmony(s)

    monkeypatch.setattr(indexer.embedding, "load_embedder", load_embedder)
    monkeypatch.setattr(service.engine, "open_harmony", open_harmony)
    engine = LookupEngine.open(settings)
    try:
        assert engine.lookup(ERROR).diagnosis is not None
    finally:
        engine.close()
    # The next process reads the reference docs' problems from the data dir instead of parsing them.
    assert (settings.data_dir / "cache" / "problems.json").is_file()


def test_open_raises_what_the_embedder_load_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexer.errors import EmbeddingError

    def load_embedder(s: Settings) -> HashingEmbedder:
        raise EmbeddingError("the model folder is damaged")

    monkeypatch.setattr(indexer.embedding, "load_embedder", load_embedder)
    with pytest.raises(EmbeddingError, match="damaged"):
        LookupEngine.open(Settings(data_dir=tmp_path / "fresh"))
    assert not (tmp_path / "fresh" / "chroma").exists()  # nothing was opened or built
