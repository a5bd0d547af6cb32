"""Server mode: the same Store against a real `chroma run` process (HttpClient), shared by replicas."""

from __future__ import annotations

import uuid

import pytest

from indexer.build import build_index
from indexer.documents import Document
from indexer.errors import StoreError
from indexer.sources.cards import bundled_cards
from indexer.store import Store
from service.config import Settings
from tests.fakes import ChromaURL, HashingEmbedder

pytestmark = pytest.mark.slow


def doc(n: int, text: str | None = None) -> Document:
    return Document(
        id=f"openai/harmony#{n}", kind="issue", repo="openai/harmony", number=n, title=f"t{n}",
        text=text or f"harmony thread {n}",
    )


@pytest.fixture
def server_settings(chroma_server: ChromaURL, settings: Settings) -> Settings:
    # Each test gets its own collection on the shared server.
    unique = f"t{uuid.uuid4().hex[:10]}"
    return settings.model_copy(update={"chroma_url": str(chroma_server), "collection": unique})


def test_store_round_trips_over_http(server_settings: Settings, embedder: HashingEmbedder) -> None:
    docs = [doc(1), doc(2, "mxfp4 kernels"), doc(3, "tool call parser")]
    with Store.open(server_settings, embedder) as store:
        assert store.upsert(docs).new == 3
        assert store.documents() == docs
        hits = store.query(embedder.encode(["mxfp4 kernels"])[0], k=2)
        assert hits[0][0] == "openai/harmony#2" and hits[0][1] == pytest.approx(1.0, abs=1e-4)
        assert store.status()["store"] == "server"
        assert store.upsert(docs).unchanged == 3
    # No data dir lock in server mode: nothing was written locally.
    assert not (server_settings.data_dir / ".lock").exists()


def test_replicas_on_one_server_agree_and_follow_a_rebuild(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    writer = Store.open(server_settings, embedder)
    writer.upsert([doc(1), doc(2)])
    replica = Store.open(server_settings, embedder, read_only=True)
    assert replica.generation() == writer.generation()
    seen = replica.generation()
    writer.upsert([doc(3)])
    assert replica.generation() == writer.generation() != seen
    assert [d.id for d in replica.documents()] == [doc(i).id for i in (1, 2, 3)]
    # A second indexer job may run beside the services (no local lock with a server).
    with Store.open(server_settings, embedder) as other:
        other.upsert([doc(4)])
    assert replica.count() == 4
    with writer.rebuild():
        writer.upsert([doc(9, "rebuilt")])
    # The replica's cached collection is gone; it follows the active pointer to the new one.
    assert replica.query(embedder.encode(["rebuilt"])[0], k=1)[0][0] == "openai/harmony#9"
    assert replica.generation() == writer.generation()
    writer.close()


def test_build_index_into_a_server(server_settings: Settings, embedder: HashingEmbedder) -> None:
    summary = build_index(server_settings, embedder=embedder, progress=False)
    assert summary.cards == len(bundled_cards())
    assert summary.documents == summary.cards + summary.sections
    again = build_index(server_settings, embedder=embedder, progress=False)
    assert again.embedded == 0 and again.generation == summary.generation


def test_a_server_restart_is_an_error_then_recovers(
    chroma_server: ChromaURL, server_settings: Settings, embedder: HashingEmbedder
) -> None:
    with Store.open(server_settings, embedder) as store:
        store.upsert([doc(1)])
        chroma_server.stop()
        with pytest.raises(StoreError, match=r"reading the index at http://127\.0\.0\.1"):
            store.documents()
        chroma_server.start()
        assert [d.id for d in store.documents()] == [doc(1).id]
        assert store.upsert([doc(2)]).new == 1


def test_an_unreachable_server_is_a_store_error(settings: Settings, embedder: HashingEmbedder) -> None:
    from tests.fakes import free_port

    down = settings.model_copy(update={"chroma_url": f"http://127.0.0.1:{free_port()}"})
    with pytest.raises(StoreError, match="127.0.0.1"):
        Store.open(down, embedder, read_only=True)
