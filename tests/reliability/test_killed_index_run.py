"""A run killed mid-write loses nothing, vectors included (issue 16, finding 4).

A real ``build_index`` in a child process is SIGKILLed while it writes (the store's dirty marker set,
part of the documents stored). The red-team run saw what such a kill can leave: every document readable
while dense search was damaged. Here the vectors of the stored documents are scrambled the same way
(documents and their content hashes untouched, so an incremental run sees nothing to re-embed) before
the next run. Until a writer repairs it, the engine's /health reasons and ``doctor`` say so; the next
plain ``gptoss-doctor index`` run repairs it, and then every document finds itself by its own text.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from indexer.api import StoreStatus
from indexer.build import build_index
from indexer.store import Store
from service.config import Settings
from tests.fakes import HashingEmbedder, commit_marks, github_mark
from tests.reliability.conftest import FastComponents, MemoryStore

CHILD = Path(__file__).with_name("index_kill_child.py")


def _killed_run(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env["GPTOSS_DOCTOR_DATA_DIR"] = str(data_dir)
    child = subprocess.Popen([sys.executable, str(CHILD)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "writing", f"the child never reached its writes (said {line!r})"
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL


def _scramble_vectors(settings: Settings) -> int:
    """What the killed run left in the red-team pass: the documents intact, their vectors not."""
    with Store.open(settings, HashingEmbedder(), read_only=True) as store:
        status = store.status()
        collection = status.generation.split(":", 1)[0]
        col = store._collection(collection)
        got = col.get(include=["documents", "metadatas"])
        rng = np.random.default_rng(16)
        noise = rng.normal(size=(len(got["ids"]), HashingEmbedder().dimension)).astype(np.float32)
        col.upsert(ids=got["ids"], embeddings=noise, documents=got["documents"], metadatas=got["metadatas"])
        return len(got["ids"])


def _not_found_by_their_text(settings: Settings) -> list[str]:
    embedder = HashingEmbedder()
    with Store.open(settings, embedder, read_only=True) as store:
        docs = store.documents()
        vectors = embedder.encode([d.text for d in docs])
        return [
            d.id
            for d, vector in zip(docs, vectors, strict=True)
            if not any(score >= 0.99 for _, score in store.query(vector, 3))
        ]


@pytest.mark.slow
def test_a_run_killed_mid_write_is_reported_then_repaired_by_the_next_run(tmp_path: Path) -> None:
    from service.doctor import _Context, check_index
    from service.engine import LookupEngine

    settings = Settings(data_dir=tmp_path / "data")
    _killed_run(settings.data_dir)
    with Store.open(settings, HashingEmbedder(), read_only=True) as store:
        assert store.status().dirty is True
        stored = store.count()
    assert stored > 0
    assert _scramble_vectors(settings) == stored
    assert _not_found_by_their_text(settings)  # the damage is real

    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        assert any("mid-write" in reason and "gptoss-doctor index" in reason for reason in engine.degraded_reasons())
    finally:
        engine.close()
    ctx = _Context()
    ctx.embedder = HashingEmbedder()
    vectors = [c for c in check_index(settings, ctx) if c.name == "index vectors"]
    assert vectors and vectors[0].status == "fail" and "gptoss-doctor index" in (vectors[0].fix or "")

    summary = build_index(settings, embedder=HashingEmbedder(), github=False, progress=False)
    assert summary.documents > stored  # the run completed what the killed one had not written
    assert _not_found_by_their_text(settings) == []
    with Store.open(settings, HashingEmbedder(), read_only=True) as store:
        assert store.status().dirty is False
        assert store.vector_problem() is None
    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        assert engine.degraded_reasons() == []
    finally:
        engine.close()
    assert not [c for c in check_index(settings, ctx) if c.status == "fail"]


def test_a_repair_keeps_the_watermarks_and_the_documents(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    settings = Settings(data_dir=tmp_path / "data")
    build_index(settings, embedder=HashingEmbedder(), github=False, progress=False)
    mark = datetime(2026, 1, 2, tzinfo=UTC)
    with Store.open(settings, HashingEmbedder()) as store:
        commit_marks(store, [], {"openai/harmony": mark})
        before = {d.id: d for d in store.documents()}
        generation = store.generation()
        store._mark_dirty(store._writable_target())  # a writer killed between its writes and publishing
    with Store.open(settings, HashingEmbedder()) as store:  # the next writer repairs on opening
        assert store.generation() != generation
        assert store.status().dirty is False
        assert github_mark(store, "openai/harmony") == mark
        assert {d.id: d for d in store.documents()} == before


def test_a_reader_never_repairs(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    build_index(settings, embedder=HashingEmbedder(), github=False, progress=False)
    with Store.open(settings, HashingEmbedder()) as store:
        store._mark_dirty(store._writable_target())
        generation = store.generation()
    with Store.open(settings, HashingEmbedder(), read_only=True) as store:
        assert store.generation() == generation and store.status().dirty is True


@pytest.mark.slow
def test_vectors_that_no_longer_match_their_text_are_found_and_repaired_without_a_marker(tmp_path: Path) -> None:
    # The damage can outlive the marker (a run that resumed over it, or a copy of a damaged store):
    # the sampled self-check finds it, /health says so, and the next writer run repairs it.
    from service.engine import LookupEngine

    settings = Settings(data_dir=tmp_path / "data")
    build_index(settings, embedder=HashingEmbedder(), github=False, progress=False)
    _scramble_vectors(settings)
    with Store.open(settings, HashingEmbedder(), read_only=True) as store:
        assert store.status().dirty is False
        assert "do not match their document's text" in (store.vector_problem() or "")
    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        assert engine.check_vectors() is not None and engine.index_needs_repair()
        assert any("dense search is damaged" in reason for reason in engine.degraded_reasons())
    finally:
        engine.close()

    summary = build_index(settings, embedder=HashingEmbedder(), github=False, progress=False)
    assert summary.embedded == 0  # nothing changed in the documents: the repair made the vectors
    assert _not_found_by_their_text(settings) == []
    engine = LookupEngine.open(settings, embedder=HashingEmbedder(), build_if_empty=False)
    try:
        assert engine.check_vectors() is None and engine.degraded_reasons() == []
    finally:
        engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("killed", [True, False], ids=["killed run", "scrambled vectors, no marker"])
def test_serve_repairs_a_damaged_index_on_start_and_answers_meanwhile(
    killed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    import indexer.build
    import indexer.embedding
    from service.app import create_app
    from tests.reliability.conftest import wait_until

    def fake(settings: Settings, **_: object) -> HashingEmbedder:
        return HashingEmbedder()

    monkeypatch.setattr(indexer.embedding, "load_embedder", fake)
    monkeypatch.setattr(indexer.build, "load_embedder", fake)
    settings = Settings(data_dir=tmp_path / "data")
    if killed:
        _killed_run(settings.data_dir)
    else:
        build_index(settings, embedder=HashingEmbedder(), github=False, progress=False)
    _scramble_vectors(settings)
    app = create_app(settings)  # the real loader and runner, with the fake model
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_until(lambda: app.state.runtime.state == "ready", timeout=60)
        answer = client.post("/lookup", json={"error": "HarmonyError: Unexpected token 200002"})
        assert answer.status_code == 200
        wait_until(lambda: app.state.runtime.scheduler.last_run is not None, timeout=120)
        last = app.state.runtime.scheduler.last_run
        assert last["kind"] == "repair" and last["ok"] is True, last
        wait_until(lambda: client.get("/health").json()["status"] == "ok", timeout=30)  # the run's reload
    assert _not_found_by_their_text(settings) == []


def test_health_does_not_call_the_services_own_run_in_progress_a_killed_one(
    fast_components: FastComponents, settings: Settings
) -> None:
    # A generation the engine picks up while this process's index run is still writing carries the
    # run's own mid-write marker: that is work in progress, not a run that died.
    import threading
    from typing import Any

    from fastapi.testclient import TestClient

    from service.app import create_app
    from tests.reliability.conftest import wait_until

    class MarkedStore(MemoryStore):
        dirty = False

        def status(self) -> StoreStatus:
            return dataclasses.replace(super().status(), dirty=self.dirty)

    store = MarkedStore(fast_components.documents, fast_components.embedder)
    release = threading.Event()

    def runner(settings: Settings, *, kind: str, embedder: Any) -> str:
        store.dirty = True  # the run marks the index, publishes a first batch, and writes on
        store.upsert([])
        release.wait(30)
        return "done"

    app = create_app(settings, loader=lambda s, note: fast_components.engine(s, store), runner=runner)
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_until(lambda: app.state.runtime.state == "ready")
        engine = app.state.runtime.engine
        assert app.state.runtime.scheduler.trigger("sync")
        wait_until(lambda: engine.reload_if_changed(now=True) or engine.generation == store.generation())
        health = client.get("/health").json()
        assert not any("mid-write" in reason for reason in health["reasons"]), health
        release.set()
        wait_until(lambda: not app.state.runtime.scheduler.running)
        # Still marked with no run of ours going: a run died mid-write (here: it never cleared it).
        health = client.get("/health").json()
        assert any("mid-write" in reason for reason in health["reasons"]), health
