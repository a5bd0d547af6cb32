"""The Chroma store against the real embedded Chroma (PersistentClient in tmp_path)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from indexer.documents import Document
from indexer.errors import StoreError, StoreLocked
from indexer.sources.cards import card_documents
from indexer.store import Store
from service.config import Settings
from tests.fakes import HashingEmbedder, commit_marks, github_mark

REPO_ROOT = Path(__file__).resolve().parents[2]


def doc(n: int, text: str | None = None, **fields: object) -> Document:
    return Document(
        id=f"openai/harmony#{n}",
        kind="issue",
        repo="openai/harmony",
        number=n,
        title=f"thread {n}",
        text=text or f"thread {n} about harmony token {n}",
        **fields,  # type: ignore[arg-type]
    )


def test_documents_round_trip_every_field(settings: Settings, embedder: HashingEmbedder) -> None:
    cards = card_documents()[:40]
    rich = doc(
        1,
        state="closed",
        labels=["bug", "gpt-oss"],
        created_at=datetime(2025, 8, 1, tzinfo=UTC),
        versions={"vllm": ["0.10.1+gptoss"]},
        heading_path=["a", "b"],
        comments=3,
        sources=["github"],
    )
    with Store.open(settings, embedder) as store:
        stats = store.upsert([*cards, rich])
        assert (stats.new, stats.updated, stats.unchanged) == (41, 0, 0)
        assert store.documents() == sorted([*cards, rich], key=lambda d: d.id)
        assert store.get(rich.id) == rich
        assert store.get("openai/harmony#999999") is None
    # A fresh process-level open reads the same data back from disk.
    with Store.open(settings, embedder, read_only=True) as again:
        assert again.get(cards[0].id) == cards[0]
        assert again.count() == 41


def test_query_returns_cosine_similarity_best_first(settings: Settings, embedder: HashingEmbedder) -> None:
    docs = [doc(1, "harmony parser unexpected token"), doc(2, "mxfp4 kernel on old gpu"), doc(3, "tool call json")]
    with Store.open(settings, embedder) as store:
        store.upsert(docs)
        vector = embedder.encode(["unexpected token in harmony parser"])[0]
        hits = store.query(vector, k=3)
    assert hits[0][0] == "openai/harmony#1"
    expected = float(vector @ embedder.encode([docs[0].text])[0])
    assert hits[0][1] == pytest.approx(expected, abs=1e-4)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_vectors_are_every_served_documents_and_search_like_the_store(
    settings: Settings, embedder: HashingEmbedder
) -> None:
    from service.vectors import VectorIndex

    docs = [doc(n, f"thread {n}: token {n} {'mxfp4 kernel' if n % 3 else 'tool call json'}") for n in range(1, 31)]
    with Store.open(settings, embedder) as store:
        assert store.vectors()[0] == [] and store.vectors()[1].shape == (0, embedder.dimension)
        store.upsert(docs)
        ids, matrix = store.vectors()
        assert sorted(ids) == sorted(d.id for d in docs) and matrix.shape == (30, embedder.dimension)
        assert matrix.dtype == np.float32
        row = ids.index(docs[4].id)
        assert matrix[row] == pytest.approx(embedder.encode([docs[4].text])[0], abs=1e-6)
        vector = embedder.encode(["a tool call in json about thread 9"])[0]
        # The engine's in-memory search finds what the store's own query finds (exact vs. HNSW: the
        # same on a collection this small), with the same similarities.
        found = VectorIndex(ids, matrix).query(vector, 30)
        assert found[0][0] == store.query(vector, k=1)[0][0] == "openai/harmony#9"
        assert dict(found) == pytest.approx(dict(store.query(vector, k=30)), abs=1e-5)


def test_unchanged_documents_are_never_re_embedded(settings: Settings, embedder: HashingEmbedder) -> None:
    docs = [doc(n) for n in range(1, 21)]
    with Store.open(settings, embedder) as store:
        store.upsert(docs)
        assert embedder.texts == 20
        stats = store.upsert(docs)
        assert (stats.new, stats.updated, stats.unchanged, stats.embedded) == (0, 0, 20, 0)
        assert embedder.texts == 20
        # Metadata-only change: stored again, not embedded again, vector kept.
        before = store.query(embedder.encode([docs[0].text])[0], k=1)
        embedder.texts = 0
        stats = store.upsert([docs[0].model_copy(update={"state": "closed", "labels": ["x"]})])
        assert (stats.updated, stats.embedded, embedder.texts) == (1, 0, 0)
        assert store.get(docs[0].id).state == "closed"  # type: ignore[union-attr]
        after = store.query(embedder.encode([docs[0].text])[0], k=1)
        assert after[0][0] == before[0][0] and after[0][1] == pytest.approx(before[0][1], abs=1e-6)
        # Text change: re-embedded.
        stats = store.upsert([docs[1].model_copy(update={"text": "completely new words"})])
        assert (stats.updated, stats.embedded) == (1, 1)
        assert store.query(embedder.encode(["completely new words"])[0], k=1)[0][0] == docs[1].id


def test_generation_changes_only_when_documents_change(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        empty = store.generation()
        store.upsert([doc(1), doc(2)])
        first = store.generation()
        assert first != empty
        store.upsert([doc(1), doc(2)])
        assert store.generation() == first
        store.upsert([doc(2, "new text")])
        second = store.generation()
        assert second != first
        store.delete(["openai/harmony#404"])
        assert store.generation() == second
        store.delete([doc(1).id])
        assert store.generation() != second
        assert [d.id for d in store.documents()] == [doc(2).id]
        # Another handle (a replica) sees the same stamp.
        with Store.open(settings, embedder, read_only=True) as replica:
            assert replica.generation() == store.generation()


def test_commit_writes_docs_then_advances_the_cursor(settings: Settings, embedder: HashingEmbedder) -> None:
    t1 = datetime(2025, 9, 1, 12, tzinfo=UTC)
    with Store.open(settings, embedder) as store:
        assert github_mark(store, "openai/harmony") is None
        g0 = store.generation()
        stats = commit_marks(store, [doc(1), doc(2)], {"openai/harmony": t1})
        assert stats.new == 2
        assert github_mark(store, "openai/harmony") == t1
        g1 = store.generation()
        assert g1 != g0
        # A batch's cursor replaces the keys it names and keeps the others (the GitHub source never
        # hands an older watermark: tests/indexer/test_github_sync.py).
        commit_marks(store, [], {"vllm-project/vllm": t1 - timedelta(days=1)})
        assert github_mark(store, "openai/harmony") == t1
        commit_marks(store, [doc(3)], {"openai/harmony": datetime(2025, 9, 2), "vllm-project/vllm": t1})
        assert github_mark(store, "openai/harmony") == datetime(2025, 9, 2, tzinfo=UTC)
        assert github_mark(store, "vllm-project/vllm") == t1
        assert store.generation() != g1
        status = store.status()
        assert status.documents == 3 and status.issues == 3
        assert status.github_synced_at is not None


def test_commit_that_fails_mid_write_keeps_the_old_cursor(
    settings: Settings, embedder: HashingEmbedder
) -> None:
    t1, t2 = datetime(2025, 9, 1, tzinfo=UTC), datetime(2025, 9, 5, tzinfo=UTC)

    class Exploding(HashingEmbedder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            if any("boom" in t for t in texts):
                raise RuntimeError("embedding died")
            return super().encode(texts)

    exploding = Exploding(dimension=64, name=embedder.name)
    with Store.open(settings, exploding) as store:
        commit_marks(store, [doc(1)], {"openai/harmony": t1})
        generation = store.generation()
        with pytest.raises(RuntimeError):
            commit_marks(store, [doc(2), doc(3, "boom")], {"openai/harmony": t2})
        assert github_mark(store, "openai/harmony") == t1
    # The next writer finds the half-applied batch and bumps the generation so replicas re-read.
    with Store.open(settings, embedder) as store:
        assert store.generation() != generation
        commit_marks(store, [doc(2), doc(3, "boom")], {"openai/harmony": t2})
        assert github_mark(store, "openai/harmony") == t2
        assert store.count() == 3


def test_full_rebuild_swaps_in_a_fresh_collection(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        store.upsert([doc(1), doc(2)])
        commit_marks(store, [doc(3, sources=["github"])], {"openai/harmony": datetime(2025, 9, 1, tzinfo=UTC)})
        before = store.generation()
        with store.rebuild(carry=lambda d: "github" in d.sources):
            store.upsert([doc(1)])
            # While the rebuild runs, readers still see the old index.
            with Store.open(settings, embedder, read_only=True) as reader:
                assert reader.generation() == before
                assert reader.count() == 3
        assert store.generation() != before
        assert sorted(d.id for d in store.documents()) == [doc(1).id, doc(3).id]
        assert github_mark(store, "openai/harmony") == datetime(2025, 9, 1, tzinfo=UTC)


def test_failed_rebuild_keeps_the_last_good_index(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        store.upsert([doc(1), doc(2)])
        before = store.generation()
        with pytest.raises(RuntimeError, match="sync died"), store.rebuild():
            store.upsert([doc(9)])
            raise RuntimeError("sync died")
        assert store.generation() == before
        assert sorted(d.id for d in store.documents()) == [doc(1).id, doc(2).id]
        # Writes after the failed rebuild go to the serving collection again.
        store.upsert([doc(4)])
        assert store.count() == 3
    with Store.open(settings, embedder, read_only=True) as reader:
        assert reader.count() == 3


def test_read_only_store_on_an_empty_dir_is_empty_and_refuses_writes(
    settings: Settings, embedder: HashingEmbedder
) -> None:
    with Store.open(settings, embedder, read_only=True) as store:
        assert store.documents() == []
        assert store.query(embedder.encode(["x"])[0], k=5) == []
        assert store.generation() == ""
        assert store.status().documents == 0
        with pytest.raises(StoreError, match="read-only"):
            store.upsert([doc(1)])
        # It notices an index built after it was opened.
        with Store.open(settings, embedder) as writer:
            writer.upsert([doc(1)])
        assert store.count() == 1
        assert store.generation() != ""


def test_record_run_and_status(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        assert store.status().last_run is None
        store.upsert([doc(1), card_documents()[0]])
        store.record_run({"kind": "index", "ok": True, "documents": 2})
        store.mark_built()
        status = store.status()
    assert status.last_run == {"kind": "index", "ok": True, "documents": 2}
    assert status.documents == 2 and status.issues == 2
    assert status.built_at is not None
    assert status.store == "embedded"


def test_a_different_embedding_dimension_is_refused_with_the_fix(settings: Settings) -> None:
    with Store.open(settings, HashingEmbedder(dimension=64)) as store:
        store.upsert([doc(1)])
    with Store.open(settings, HashingEmbedder(dimension=32)) as store, pytest.raises(
        StoreError, match="index --full"
    ):
        store.upsert([doc(2)])


def test_a_second_process_is_refused_while_the_store_is_held(settings: Settings, embedder: HashingEmbedder) -> None:
    child = textwrap.dedent(
        """
        import sys
        from indexer.errors import StoreLocked
        from indexer.store import Store
        from service.config import Settings
        from tests.fakes import HashingEmbedder
        try:
            Store.open(Settings(), HashingEmbedder())
        except StoreLocked as exc:
            print(exc)
            sys.exit(3)
        sys.exit(0)
        """
    )
    with Store.open(settings, embedder):
        held = subprocess.run(
            [sys.executable, "-c", child], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
        )
    assert held.returncode == 3, held.stderr
    assert f"held by pid {os.getpid()}" in held.stdout and "Chroma server" in held.stdout
    free = subprocess.run([sys.executable, "-c", child], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert free.returncode == 0, free.stdout + free.stderr


def test_the_lock_is_reentrant_inside_one_process(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as outer:
        with Store.open(settings, embedder) as inner:
            inner.upsert([doc(1)])
        outer.upsert([doc(2)])
        assert outer.count() == 2


def test_lock_holders_are_recorded_and_cleared_on_close(settings: Settings, embedder: HashingEmbedder) -> None:
    from indexer.lock import DataDirLock

    record = settings.data_dir / ".lock-holders" / f"{os.getpid()}.json"
    with Store.open(settings, embedder):
        assert '"mode": "write"' in record.read_text()
        with Store.open(settings, embedder, read_only=True):
            pass
        assert '"mode": "write"' in record.read_text()
    assert not record.exists()
    with Store.open(settings, embedder, read_only=True):
        assert '"mode": "read"' in record.read_text()
        # This process is not "another" holder.
        assert DataDirLock(settings.data_dir, exclusive=True).current_holders() == []
    assert not record.exists()


HOLD = textwrap.dedent(
    """
    import sys
    from indexer.store import Store
    from service.config import Settings
    from tests.fakes import HashingEmbedder
    store = Store.open(Settings(), HashingEmbedder(), read_only=sys.argv[1] == "read")
    print("held", flush=True)
    sys.stdin.readline()
    store.close()
    """
)


def hold(mode: str) -> subprocess.Popen[str]:
    """A real second process holding the store (``read`` or ``write``) until its stdin gets a line."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, mode], cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_a_writer_is_refused_while_another_process_reads(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        store.upsert([doc(1)])
    reader = hold("read")
    try:
        with pytest.raises(StoreLocked, match=rf"held by pid {reader.pid} .*reading since"):
            Store.open(settings, embedder)
        # Readers share: this process can read beside it, and still cannot upgrade to write.
        with Store.open(settings, embedder, read_only=True) as mine:
            assert mine.count() == 1
            with pytest.raises(StoreLocked):
                Store.open(settings, embedder)
            assert mine.count() == 1  # the failed upgrade kept our shared hold
        with pytest.raises(StoreLocked, match="wait"):
            Store.open(settings, embedder, lock_timeout=0.3)
    finally:
        reader.communicate("\n", timeout=60)
    with Store.open(settings, embedder) as store:
        assert store.upsert([doc(2)]).new == 1


def test_a_reader_is_refused_while_another_process_writes(settings: Settings, embedder: HashingEmbedder) -> None:
    writer = hold("write")
    try:
        with pytest.raises(StoreLocked, match=rf"being written by pid {writer.pid}"):
            Store.open(settings, embedder, read_only=True)
    finally:
        writer.communicate("\n", timeout=60)
    with Store.open(settings, embedder, read_only=True) as store:
        assert store.count() == 0


def test_a_killed_holder_releases_the_lock(settings: Settings, embedder: HashingEmbedder) -> None:
    writer = hold("write")
    writer.kill()
    writer.wait(timeout=60)
    with Store.open(settings, embedder) as store:
        assert store.upsert([doc(1)]).new == 1


def test_an_in_process_reader_upgrades_for_a_write_and_keeps_reading(
    settings: Settings, embedder: HashingEmbedder
) -> None:
    with Store.open(settings, embedder, read_only=True) as reader:
        with Store.open(settings, embedder) as writer:  # serve's scheduler, in the serving process
            writer.upsert([doc(1)])
        assert reader.count() == 1
        # Downgraded again: another process may read but not write.
        other = subprocess.run(
            [sys.executable, "-c", HOLD, "write"], cwd=REPO_ROOT, input="\n", capture_output=True, text=True,
            timeout=120,
        )
        assert other.returncode != 0 and "StoreLocked" in other.stderr
        reader_child = hold("read")
        reader_child.communicate("\n", timeout=60)
        assert reader_child.returncode == 0


def _corrupt(settings: Settings) -> None:
    sqlite = settings.chroma_dir / "chroma.sqlite3"
    sqlite.write_bytes(b"this is not a database" * 100)


def test_a_corrupt_store_raises_store_error_naming_the_fix(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        store.upsert([doc(1)])
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()  # a new process would not have the old handle either
    _corrupt(settings)
    for read_only in (True, False):
        with pytest.raises(StoreError, match=r"gptoss-doctor index --full"):
            Store.open(settings, embedder, read_only=read_only)
    # The full rebuild's open moves the broken store aside and starts empty.
    with Store.open(settings, embedder, reset_if_corrupt=True) as store:
        assert store.count() == 0
        store.upsert([doc(2)])
    assert list(settings.data_dir.glob("chroma.corrupt-*"))


def test_a_half_written_store_raises_store_error(settings: Settings, embedder: HashingEmbedder) -> None:
    from indexer.chroma_client import make_client

    client = make_client(settings)
    client.create_collection(f"{settings.collection}__g1", embedding_function=None)
    with pytest.raises(StoreError, match="no metadata.*index --full"):
        Store.open(settings, HashingEmbedder())


def test_query_vectors_are_float32_and_k_is_bounded(settings: Settings, embedder: HashingEmbedder) -> None:
    with Store.open(settings, embedder) as store:
        store.upsert([doc(1), doc(2)])
        hits = store.query(np.asarray(embedder.encode(["thread 1"])[0], dtype=np.float64), k=50)
    assert len(hits) == 2
