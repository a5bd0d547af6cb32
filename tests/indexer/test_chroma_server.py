"""Server mode: the same Store against a real `chroma run` process (HttpClient), shared by replicas."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

import pytest
from click.testing import CliRunner

from indexer.build import build_index
from indexer.documents import Document
from indexer.errors import StoreError, StoreLocked
from indexer.lease import KEY, WriterLease
from indexer.sources.cards import bundled_cards
from indexer.store import Store
from service.cli import main
from service.config import Settings
from service.scheduler import Scheduler
from tests.fakes import ChromaURL, HashingEmbedder, store_held_by_another_process

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
        assert store.status().store == "server"
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
    # Replicas read while a writer writes (no local lock with a server); writers take turns.
    writer.close()
    with Store.open(server_settings, embedder) as other:
        other.upsert([doc(4)])
    assert replica.count() == 4
    writer = Store.open(server_settings, embedder)
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


# --------------------------------------------------------------------------- one writer at a time


def _lease_record(store: Store) -> dict[str, object]:
    got = store._meta.collection.get(ids=[KEY], include=["metadatas"])
    return dict(got["metadatas"][0]) if got["ids"] else {}


def test_a_second_writer_is_refused_naming_the_first_and_readers_are_not(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    writer = Store.open(server_settings, embedder)
    writer.upsert([doc(1)])
    with pytest.raises(StoreLocked, match=rf"pid {os.getpid()} on {socket.gethostname()}"):
        Store.open(server_settings, embedder)
    with Store.open(server_settings, embedder, read_only=True) as replica:
        assert [d.id for d in replica.documents()] == [doc(1).id]
    writer.close()
    assert _lease_record(replica) == {}  # given back on close, not left to lapse
    with Store.open(server_settings, embedder) as second:
        assert second.upsert([doc(2)]).new == 1


def test_a_waiting_writer_gets_the_lease_when_the_first_closes(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    writer = Store.open(server_settings, embedder)
    closed = threading.Event()

    def close_first() -> None:
        writer.close()
        closed.set()

    closer = threading.Timer(1.0, close_first)
    closer.start()
    try:
        with Store.open(server_settings, embedder, lock_timeout=30) as second:
            assert closed.is_set()  # it only got in after the first writer closed
            second.upsert([doc(1)])
    finally:
        closer.cancel()
        writer.close()


def test_a_dead_writers_lease_lapses_and_the_late_writer_cannot_publish(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    with Store.open(server_settings, embedder) as first:
        first.upsert([doc(1)])
        meta = first._meta.collection
    # A writer that stops renewing (killed, or paused) with a short lease, as a stand-in for the default.
    dead = WriterLease(meta, "test", ttl=1.5, settle=0.1).acquire()
    dead._stop.set()  # its heartbeat stops; the record stays, as when the process is killed
    with pytest.raises(StoreLocked, match="another indexer is writing"):
        Store.open(server_settings, embedder)
    time.sleep(1.6)
    with Store.open(server_settings, embedder) as taker:  # the lapsed lease is taken over
        taker.upsert([doc(2)])
        with pytest.raises(StoreLocked, match="lost its writer lease"):
            dead.check()
    assert dead.lost


def test_a_writer_that_lost_its_lease_mid_rebuild_publishes_nothing(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    with Store.open(server_settings, embedder) as store:
        store.upsert([doc(1), doc(2)])
        served = store.generation()
        with pytest.raises(StoreLocked, match="lost its writer lease"):
            with store.rebuild():
                store.upsert([doc(9, "rebuilt")])
                # Another writer takes the lease over (as after this one was paused past the ttl).
                intruder = WriterLease(store._meta.collection, "test", settle=0.0)
                intruder._write("now")
        assert store.generation() == served
        names = {c if isinstance(c, str) else c.name for c in store._client.list_collections()}
        assert [n for n in names if n.startswith(f"{server_settings.collection}__g")] == [served.split(":")[0]]
    with Store.open(server_settings, embedder, read_only=True) as replica:
        assert [d.id for d in replica.documents()] == [doc(1).id, doc(2).id]


def test_concurrent_full_rebuilds_on_one_server_one_wins_the_other_is_refused(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    build_index(server_settings, embedder=embedder, progress=False)
    start = threading.Barrier(2)
    outcomes: list[object] = []

    def rebuild() -> None:
        start.wait()
        try:
            outcomes.append(build_index(server_settings, embedder=embedder, full=True, progress=False))
        except StoreLocked as exc:
            outcomes.append(exc)

    workers = [threading.Thread(target=rebuild) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    summaries = [o for o in outcomes if not isinstance(o, StoreLocked)]
    refused = [o for o in outcomes if isinstance(o, StoreLocked)]
    assert len(summaries) == 1 and len(refused) == 1, outcomes
    with Store.open(server_settings, embedder, read_only=True) as replica:
        assert replica.count() == summaries[0].documents  # type: ignore[attr-defined]
        names = {c if isinstance(c, str) else c.name for c in replica._client.list_collections()}
        data = [n for n in names if n.startswith(f"{server_settings.collection}__g")]
        assert data == [replica.generation().split(":")[0]]  # no half-built collection left behind


def test_a_replicas_scheduled_run_is_skipped_not_failed_while_another_writer_works(
    server_settings: Settings, embedder: HashingEmbedder
) -> None:
    build_index(server_settings, embedder=embedder, progress=False)
    scheduler = Scheduler(server_settings, embedder=embedder)  # the real runner: build_index
    with Store.open(server_settings, embedder):  # the indexer job, writing right now
        outcome = scheduler.run("rebuild-local")
    assert outcome is not None
    assert outcome["ok"] is True and outcome["skipped"] is True, outcome
    assert "another indexer is writing" in outcome["summary"]
    # With the writer gone the same run goes through.
    outcome = scheduler.run("rebuild-local")
    assert outcome is not None and outcome["ok"] is True and "skipped" not in outcome, outcome


def test_cli_index_beside_another_hosts_writer_exits_75_naming_it(
    server_settings: Settings, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_CHROMA_URL", str(server_settings.chroma_url))
    monkeypatch.setenv("GPTOSS_DOCTOR_COLLECTION", server_settings.collection)
    with store_held_by_another_process() as pid:
        result = CliRunner().invoke(main, ["index", "--no-progress"], obj={"embedder": embedder})
        assert result.exit_code == 75, result.output
        assert f"pid {pid} on {socket.gethostname()}" in result.output
    result = CliRunner().invoke(main, ["index", "--no-progress"], obj={"embedder": embedder})
    assert result.exit_code == 0, result.output
