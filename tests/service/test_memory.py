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
