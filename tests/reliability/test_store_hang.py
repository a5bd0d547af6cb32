"""A store that hangs (a paused Chroma server) costs one bounded wait, not one per request.

Fast counterpart of ``test_chroma_outage.py``: the engine over an in-memory store whose calls stall
like requests to a paused server and then fail like the HTTP client's read timeout. Once the engine has
seen the store hang, lookups answer from the lexical leg at once (degraded), a background probe watches
for the store, and the dense leg comes back by itself when the store answers again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from service.config import Settings
from tests.reliability.conftest import FastComponents, MemoryStore, wait_until

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
READ_TIMEOUT = 1.0
"""How long a stalled call waits before failing, as the Chroma HTTP client's read timeout does."""
PROBE_TIMEOUT = 0.5


class HangingStore(MemoryStore):
    """MemoryStore whose calls stall while ``paused`` and fail after READ_TIMEOUT."""

    def __init__(self, documents: Sequence[Any], embedder: Any) -> None:
        super().__init__(documents, embedder)
        self.paused = threading.Event()

    def _call(self, name: str) -> None:
        super()._call(name)
        if self.paused.is_set():
            time.sleep(READ_TIMEOUT)
            if self.paused.is_set():
                raise TimeoutError(f"read timed out ({name})")


def _timed_lookup(engine: Any) -> tuple[Any, float]:
    start = time.monotonic()
    answer = engine.lookup(ERROR)
    return answer, time.monotonic() - start


def test_a_hung_store_is_waited_for_once_then_answers_come_at_once(
    fast_components: FastComponents, settings: Settings
) -> None:
    store = HangingStore(fast_components.documents, fast_components.embedder)
    engine = fast_components.engine(settings, store, store_timeout=PROBE_TIMEOUT, check_interval=0.05)
    try:
        healthy, _ = _timed_lookup(engine)
        assert healthy.degraded is False and healthy.issues

        store.paused.set()
        first, elapsed = _timed_lookup(engine)
        assert first.degraded is True and first.issues  # the lexical leg still answers
        assert elapsed < READ_TIMEOUT + PROBE_TIMEOUT + 1.0, elapsed
        assert engine.degraded_reasons()
        # Every later request answers without touching the store (so without waiting on it), while
        # background probes keep checking whether it is back. Counting calls, not timing lookups,
        # keeps this exact on a loaded machine.
        queries_before = store.calls.get("query", 0)
        probes_before = store.calls.get("generation", 0)
        for _ in range(15):
            time.sleep(0.06)  # past the check interval, so each lookup would probe if it could
            answer, _ = _timed_lookup(engine)
            assert answer.degraded is True and answer.issues
        assert store.calls.get("query", 0) == queries_before, "a lookup queried the hung store"
        wait_until(lambda: store.calls.get("generation", 0) > probes_before, timeout=10)

        store.paused.clear()
        wait_until(lambda: engine.lookup(ERROR).degraded is False, timeout=10)
        assert engine.degraded_reasons() == []
    finally:
        store.paused.clear()
        engine.close()
