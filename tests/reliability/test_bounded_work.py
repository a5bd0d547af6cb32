"""Bounded work per request (issue 16, finding 1): lanes keep long logs from starving short lookups,
and a lookup over its time budget returns a partial, marked answer instead of running on.

The slow part is a store whose dense query can be held (a pasted log that takes long) or made slow (an
overloaded machine); everything else is the real fast engine and, for the HTTP cases, a real uvicorn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from service.config import Settings
from tests.reliability.conftest import FastComponents, LiveServer, MemoryStore

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
LONG_LOG = "".join(f"INFO 09-02 17:45:{i % 60:02d} [engine.py:{i}] step {i} ok\n" for i in range(200)) + ERROR


class HeldStore(MemoryStore):
    """A MemoryStore whose next dense query waits until released (or sleeps ``delay`` every time)."""

    def __init__(self, *args: Any, delay: float = 0.0) -> None:
        super().__init__(*args)
        self.delay = delay
        self.hold_next = False
        self.inside = threading.Event()
        self.release = threading.Event()

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        if self.hold_next:
            self.hold_next = False
            self.inside.set()
            self.release.wait(30)
        time.sleep(self.delay)
        return super().query(vector, k)


def held_store(fast_components: FastComponents, delay: float = 0.0) -> HeldStore:
    return HeldStore(fast_components.documents, fast_components.embedder, delay=delay)


def lane_settings(settings: Settings, **overrides: Any) -> Settings:
    values = {"lookup_concurrency": 1, "long_lookup_concurrency": 1, "long_input_chars": 2000, **overrides}
    return settings.model_copy(update=values)


def test_a_long_log_being_analysed_does_not_hold_up_a_short_lookup(
    fast_components: FastComponents, settings: Settings
) -> None:
    store = held_store(fast_components)
    engine = fast_components.engine(lane_settings(settings), store=store)
    assert engine.lane(LONG_LOG) == "long" and engine.lane(ERROR) == "short"
    store.hold_next = True
    with ThreadPoolExecutor(max_workers=2) as pool:
        long_answer = pool.submit(engine.lookup, LONG_LOG)
        assert store.inside.wait(10), "the long lookup never reached the store"
        short_answer = pool.submit(engine.lookup, ERROR)
        try:
            # One slot each: the short lookup has its own lane, so it answers while the long one is held.
            assert short_answer.result(timeout=10).issues
        finally:
            store.release.set()
        assert long_answer.result(timeout=30).issues


def test_long_logs_queue_behind_each_other_not_in_the_short_lane(
    fast_components: FastComponents, settings: Settings
) -> None:
    store = held_store(fast_components)
    engine = fast_components.engine(lane_settings(settings), store=store)
    store.hold_next = True
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(engine.lookup, LONG_LOG)
        assert store.inside.wait(10)
        second = pool.submit(engine.lookup, LONG_LOG + "\n")
        time.sleep(0.3)
        assert not second.done(), "a second long lookup ran beside the first: the long lane is unbounded"
        store.release.set()
        assert first.result(timeout=30).issues and second.result(timeout=30).issues


def test_a_lookup_over_its_budget_returns_a_partial_marked_answer(
    fast_components: FastComponents, settings: Settings
) -> None:
    # The dense query takes 0.4 s on this "overloaded" store; the budget is 0.2 s, so the search
    # (started in time) finishes, and every later step is skipped and named.
    engine = fast_components.engine(
        settings.model_copy(update={"lookup_budget": 0.2}), store=held_store(fast_components, delay=0.4)
    )
    started = time.monotonic()
    answer = engine.lookup(ERROR)
    assert time.monotonic() - started < 5
    assert answer.partial == ["tokens", "reproduction", "advice"]
    assert answer.issues, "the step that ran must still give its result"
    assert answer.analysis.tokens == [] and answer.advice == []
    assert any("budget" in reason for reason in engine.degraded_reasons())


def test_a_lookup_within_its_budget_is_complete(fast_components: FastComponents, settings: Settings) -> None:
    engine = fast_components.engine(settings, store=held_store(fast_components))
    answer = engine.lookup(ERROR)
    assert answer.partial == []
    assert answer.analysis.tokens and answer.advice
    assert not any("budget" in reason for reason in engine.degraded_reasons())


def test_queued_long_logs_leave_threads_for_health_and_short_lookups(
    fast_components: FastComponents, settings: Settings, serve_live: Callable[..., LiveServer]
) -> None:
    # 45 long logs at once, the first held inside the store: the other 44 wait for their lane. They
    # must wait without a worker thread each, or they take all 40 of the server's threads and /health
    # and short lookups stop answering.
    store = held_store(fast_components)
    server = serve_live(lane_settings(settings), store)
    store.hold_next = True
    body = {"error": LONG_LOG}
    with httpx.Client(base_url=server.url, timeout=60) as client, ThreadPoolExecutor(max_workers=45) as pool:
        try:
            longs = [pool.submit(client.post, "/lookup", json=body) for _ in range(45)]
            assert store.inside.wait(10)
            time.sleep(1.0)  # let every long request reach its lane
            started = time.monotonic()
            assert client.get("/health", timeout=10).status_code == 200
            short = client.post("/lookup", json={"error": ERROR}, timeout=10)
            assert short.status_code == 200 and short.json()["issues"]
            assert time.monotonic() - started < 10
        finally:
            store.release.set()
        assert all(f.result(timeout=120).status_code == 200 for f in longs)
