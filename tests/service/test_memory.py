"""Freed native memory goes back to the OS after index runs and generation swaps (service/memory.py)."""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

import pytest

from bench.procs import proc_memory
from service import engine as engine_module
from service import memory
from service import scheduler as scheduler_module
from service.config import Settings
from service.scheduler import Scheduler
from tests.service.support import FastComponents, RecordingRunner, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's (Linux)")


def _private_mb() -> float:
    memory_now = proc_memory(os.getpid())
    assert memory_now is not None and "anon_mb" in memory_now, memory_now
    return memory_now["anon_mb"]


def _count_releases(monkeypatch: Any, module: Any) -> list[int]:
    """Replace ``module``'s release_free_heap with one that records each call (a 1 per call)."""
    released: list[int] = []
    monkeypatch.setattr(module, "release_free_heap", lambda: released.append(1) or True)
    return released


def test_release_free_heap_returns_freed_heap_pages_to_the_os() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    block = 64 * 1024  # below glibc's mmap threshold: these come from the heap, not their own mappings
    blocks = [libc.malloc(block) for _ in range(1600)]  # 100 MB
    try:
        for address in blocks:
            ctypes.memset(address, 1, block)  # touch every page so it is resident
        before_free = _private_mb()
        kept = blocks[::50]  # live blocks scattered through the heap: free() alone cannot shrink it
        for i, address in enumerate(blocks):
            if i % 50:
                libc.free(address)
        freed_only = _private_mb()
        assert memory.release_free_heap() is True
        trimmed = _private_mb()
    finally:
        for address in kept:
            libc.free(address)
    assert before_free - freed_only < 30  # glibc keeps what free() returned
    assert freed_only - trimmed > 60  # release_free_heap hands it back


def test_an_index_run_then_releases_the_heap(monkeypatch: Any, settings: Settings, runner: RecordingRunner) -> None:
    released = _count_releases(monkeypatch, scheduler_module)
    scheduler = Scheduler(settings, runner=runner)
    assert scheduler.trigger("rebuild")
    wait_until(lambda: scheduler.last_run is not None and bool(released))
    runner.fail = RuntimeError("boom")  # a failed run's buffers are garbage too
    assert scheduler.trigger("sync")
    wait_until(lambda: len(released) == 2)
    scheduler.stop()


def test_a_run_whose_reload_swapped_generations_is_not_released_twice(
    monkeypatch: Any, settings: Settings, runner: RecordingRunner
) -> None:
    released = _count_releases(monkeypatch, scheduler_module)
    reloads: list[bool] = [True, False]  # the engine's reload_if_changed: swapped, then unchanged
    scheduler = Scheduler(settings, runner=runner, on_finished=lambda: reloads.pop(0))
    assert scheduler.trigger("rebuild")
    wait_until(lambda: scheduler.last_run is not None and not scheduler.state().running)
    assert released == []  # the swap released it (engine.reload_if_changed)
    assert scheduler.trigger("sync")
    wait_until(lambda: released == [1])  # nothing swapped: the scheduler releases the run's buffers
    scheduler.stop()


def test_a_generation_swap_releases_the_heap_and_an_unchanged_check_does_not(
    monkeypatch: Any, fast_components: FastComponents, settings: Settings
) -> None:
    released = _count_releases(monkeypatch, engine_module)
    store = fast_components.store()
    engine = fast_components.engine(settings, store, check_interval=60.0)
    assert engine.reload_if_changed(now=True) is False and released == []
    store.upsert(fast_components.documents[:1])  # a write moves the store's generation
    assert engine.reload_if_changed(now=True) is True
    assert released == [1]


# -- chromadb's shared System: dropped after a generation swap (real Chroma, the real engine) ----------------


def _chroma_system(settings: Settings) -> Any:
    """The chromadb System this process keeps for the embedded store (one per path), or None."""
    from chromadb.api.shared_system_client import SharedSystemClient

    return SharedSystemClient._identifier_to_system.get(str(settings.chroma_dir))


def _stopped(system: Any) -> bool:
    """True once chromadb stopped ``system``: its Rust bindings (the native state) are gone."""
    from chromadb.api import ServerAPI

    return not hasattr(system.instance(ServerAPI), "bindings")


def _real_engine(fast_components: FastComponents, settings: Settings) -> engine_module.LookupEngine:
    from indexer.api import open_reader
    from indexer.store import Store

    with Store.open(settings, fast_components.embedder) as writer:
        writer.upsert(fast_components.documents)
    return fast_components.engine(settings, open_reader(settings, fast_components.embedder), check_interval=60.0)


def test_an_index_run_in_serve_ends_with_the_chroma_system_of_the_replaced_generation_stopped(
    fast_components: FastComponents, settings: Settings
) -> None:
    from indexer.store import Store
    from service.analysis.input import parse_input

    engine = _real_engine(fast_components, settings)
    try:
        held = engine._snapshot  # a lookup that took its snapshot before the swap
        parsed = parse_input("openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token")
        before = [h.doc.id for h in engine._search(held, parsed, 5, None).hits]
        system = _chroma_system(settings)
        assert system is not None and not _stopped(system)
        # A full rebuild as `serve`'s scheduler runs it: a writer store in this process, closed at the end.
        with Store.open(settings, fast_components.embedder) as writer, writer.rebuild():
            writer.upsert(fast_components.documents[::2])
        assert engine.after_index_run() is True
        assert engine.generation.startswith(f"{settings.collection}__g2:")
        assert _stopped(system)  # the System that held the replaced collection is gone
        fresh = _chroma_system(settings)
        assert fresh is not None and fresh is not system and not _stopped(fresh)
        # The lookup holding the old snapshot completes from memory, with the answer it had before.
        result = engine._search(held, parsed, 5, None)
        assert [h.doc.id for h in result.hits] == before and not result.degraded
        # The engine reads the store through the new client, and answers from the new generation.
        assert engine.index_status().documents == len(fast_components.documents[::2])
        assert engine.lookup("KeyError: 'tool_calls'").index.documents == len(fast_components.documents[::2])

        # Another run, whose generation a lookup picks up before the run's store is closed.
        writer = Store.open(settings, fast_components.embedder)
        with writer.rebuild():
            writer.upsert(fast_components.documents[1::2])
        assert engine.reload_if_changed(now=True) is True
        assert not _stopped(fresh)  # the run's client still holds it: the renewal could not stop it
        writer.close()
        assert engine.after_index_run() is False
        assert _stopped(fresh)
        assert engine.index_status().documents == len(fast_components.documents[1::2])
        last = _chroma_system(settings)
    finally:
        engine.close()
    assert _chroma_system(settings) is None and _stopped(last)  # closing the engine closes its client too


def test_a_failed_index_run_leaves_the_last_good_index_serving_through_a_fresh_client(
    fast_components: FastComponents, settings: Settings
) -> None:
    from indexer.store import Store

    engine = _real_engine(fast_components, settings)
    try:
        generation = engine.generation
        system = _chroma_system(settings)
        with pytest.raises(RuntimeError, match="boom"):
            with Store.open(settings, fast_components.embedder) as writer, writer.rebuild():
                writer.upsert(fast_components.documents[:3])
                raise RuntimeError("boom")
        assert engine.after_index_run() is False
        assert engine.generation == generation
        assert _stopped(system) and engine.store_health is engine_module.StoreHealth.OK
        assert engine.index_status().documents == len(fast_components.documents)
        assert engine.lookup("KeyError: 'tool_calls'").index.documents == len(fast_components.documents)
    finally:
        engine.close()


def test_reads_wait_for_a_client_renewal_and_a_failed_reopen_is_retried_by_the_next_read(
    monkeypatch: Any, fast_components: FastComponents, settings: Settings
) -> None:
    import threading

    from indexer import store as store_module
    from indexer.api import open_reader
    from indexer.errors import StoreError
    from indexer.store import Store

    with Store.open(settings, fast_components.embedder) as writer:
        writer.upsert(fast_components.documents)
    reader = open_reader(settings, fast_components.embedder)
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                assert reader.status().documents == len(fast_components.documents)
                assert len(reader.vectors()[0]) == len(fast_components.documents)
            except BaseException as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for _ in range(15):
            assert reader.renew_client(timeout=10.0) is True
    finally:
        stop.set()
        thread.join(30)
    assert errors == []
    real = store_module.make_client
    monkeypatch.setattr(store_module, "make_client", lambda s: (_ for _ in ()).throw(StoreError("disk gone")))
    with pytest.raises(StoreError, match="disk gone"):
        reader.renew_client(timeout=10.0)
    with pytest.raises(StoreError, match="disk gone"):
        reader.generation()
    monkeypatch.setattr(store_module, "make_client", real)
    assert reader.generation().startswith(f"{settings.collection}__g1:")  # the next read opens a client
    reader.close()
    with pytest.raises(StoreError, match="closed"):
        reader.generation()
