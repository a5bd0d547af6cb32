"""Bounded work per request (issue 16, finding 1): lanes keep long logs from starving short lookups,
and a lookup over its time budget returns a partial, marked answer instead of running on.

The slow part is an embedder whose next query can be held (a pasted log that takes long) or made slow
(an overloaded machine); everything else is the real fast engine and, for the HTTP cases, a real uvicorn.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import httpx
import numpy as np

from service.config import Settings
from tests.reliability.conftest import FastComponents, LiveServer

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
LONG_LOG = "".join(f"INFO 09-02 17:45:{i % 60:02d} [engine.py:{i}] step {i} ok\n" for i in range(200)) + ERROR


class HeldEmbedder:
    """The fast embedder, but its next query waits until released (or each one sleeps ``delay``)."""

    def __init__(self, inner: Any, delay: float = 0.0) -> None:
        self._inner = inner
        self.name, self.dimension = inner.name, inner.dimension
        self.delay = delay
        self.hold_next = False
        self.inside = threading.Event()
        self.release = threading.Event()

    def encode(self, texts: Any) -> np.ndarray:
        if self.hold_next:
            self.hold_next = False
            self.inside.set()
            self.release.wait(30)
        time.sleep(self.delay)
        return np.asarray(self._inner.encode(texts))


def held_embedder(fast_components: FastComponents, delay: float = 0.0) -> HeldEmbedder:
    return HeldEmbedder(fast_components.embedder, delay=delay)


def lane_settings(settings: Settings, **overrides: Any) -> Settings:
    values = {"lookup_concurrency": 1, "long_lookup_concurrency": 1, "long_input_chars": 2000, **overrides}
    return settings.model_copy(update=values)


def test_a_long_log_being_analysed_does_not_hold_up_a_short_lookup(
    fast_components: FastComponents, settings: Settings
) -> None:
    held = held_embedder(fast_components)
    engine = fast_components.engine(lane_settings(settings), embedder=held)
    assert engine.lane(LONG_LOG) == "long" and engine.lane(ERROR) == "short"
    held.hold_next = True
    with ThreadPoolExecutor(max_workers=2) as pool:
        long_answer = pool.submit(engine.lookup, LONG_LOG)
        assert held.inside.wait(10), "the long lookup never reached the dense leg"
        short_answer = pool.submit(engine.lookup, ERROR)
        try:
            # One slot each: the short lookup has its own lane, so it answers while the long one is held.
            assert short_answer.result(timeout=10).issues
        finally:
            held.release.set()
        assert long_answer.result(timeout=30).issues


def test_long_logs_queue_behind_each_other_not_in_the_short_lane(
    fast_components: FastComponents, settings: Settings
) -> None:
    held = held_embedder(fast_components)
    engine = fast_components.engine(lane_settings(settings), embedder=held)
    held.hold_next = True
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(engine.lookup, LONG_LOG)
        assert held.inside.wait(10)
        second = pool.submit(engine.lookup, LONG_LOG + "\n")
        time.sleep(0.3)
        assert not second.done(), "a second long lookup ran beside the first: the long lane is unbounded"
        held.release.set()
        assert first.result(timeout=30).issues and second.result(timeout=30).issues


def test_a_lookup_over_its_budget_returns_a_partial_marked_answer(
    fast_components: FastComponents, settings: Settings
) -> None:
    # The query's embedding takes 0.4 s on this "overloaded" machine; the budget is 0.2 s, so the
    # search (started in time) finishes, and every later step is skipped and named.
    engine = fast_components.engine(
        settings.model_copy(update={"lookup_budget": 0.2}), embedder=held_embedder(fast_components, delay=0.4)
    )
    started = time.monotonic()
    answer = engine.lookup(ERROR)
    assert time.monotonic() - started < 5
    assert answer.partial == ["tokens", "reproduction", "advice"]
    assert answer.issues, "the step that ran must still give its result"
    assert answer.analysis.tokens == [] and answer.advice == []
    assert any("budget" in reason for reason in engine.degraded_reasons())


def test_a_lookup_within_its_budget_is_complete(fast_components: FastComponents, settings: Settings) -> None:
    engine = fast_components.engine(settings, embedder=held_embedder(fast_components))
    answer = engine.lookup(ERROR)
    assert answer.partial == []
    assert answer.analysis.tokens and answer.advice
    assert not any("budget" in reason for reason in engine.degraded_reasons())


def test_queued_long_logs_leave_threads_for_health_and_short_lookups(
    fast_components: FastComponents, settings: Settings, serve_live: Callable[..., LiveServer]
) -> None:
    # 45 long logs at once, the first held inside the dense leg: the other 44 wait for their lane. They
    # must wait without a worker thread each, or they take all 40 of the server's threads and /health
    # and short lookups stop answering.
    held = held_embedder(fast_components)
    server = serve_live(lane_settings(settings), embedder=held)
    held.hold_next = True
    body = {"error": LONG_LOG}
    with httpx.Client(base_url=server.url, timeout=60) as client, ThreadPoolExecutor(max_workers=45) as pool:
        try:
            longs = [pool.submit(client.post, "/lookup", json=body) for _ in range(45)]
            assert held.inside.wait(10)
            time.sleep(1.0)  # let every long request reach its lane
            started = time.monotonic()
            assert client.get("/health", timeout=10).status_code == 200
            short = client.post("/lookup", json={"error": ERROR}, timeout=10)
            assert short.status_code == 200 and short.json()["issues"]
            assert time.monotonic() - started < 10
        finally:
            held.release.set()
        assert all(f.result(timeout=120).status_code == 200 for f in longs)


def test_the_mcp_issue_tools_wait_in_the_short_lane(fast_components: FastComponents, settings: Settings) -> None:
    # Issue 16, finding 10: get_issue and list_known_issues read through engine.document(s), under the
    # same bound as short lookups. With the one short slot held by a lookup, a read waits for it.
    held = held_embedder(fast_components)
    engine = fast_components.engine(lane_settings(settings), embedder=held)
    doc_id = fast_components.documents[0].id
    held.hold_next = True
    with ThreadPoolExecutor(max_workers=3) as pool:
        lookup = pool.submit(engine.lookup, ERROR)
        assert held.inside.wait(10)
        one, every = pool.submit(engine.document, doc_id), pool.submit(engine.documents)
        try:
            done, _ = wait([one, every], timeout=0.5)
            assert not done, "an issue tool read ran beside a lookup holding the only short slot"
        finally:
            held.release.set()
        assert lookup.result(timeout=30).issues
        assert one.result(timeout=30) is not None and every.result(timeout=30)
