"""A store that hangs (a paused Chroma server) costs one bounded wait, not one per request.

Fast counterpart of ``test_chroma_outage.py``: the engine over an in-memory store whose calls stall
like requests to a paused server and then fail like the HTTP client's read timeout. Lookups answer from
the generation the engine loaded (documents and vectors in memory), so the hang costs one bounded
generation check, not a worse answer. Once the engine has seen the store hang, a background probe
watches for it; /health's reasons say so until the store answers again.
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
        time.sleep(0.06)  # past the check interval: this lookup checks the generation
        first, elapsed = _timed_lookup(engine)
        # The answer is the whole hybrid one: nothing it needs is read from the store.
        assert first.degraded is False and first.issues == healthy.issues
        assert elapsed < READ_TIMEOUT + PROBE_TIMEOUT + 1.0, elapsed
        assert engine.store_health == "hung" and engine.degraded_reasons()
        # Every later request answers without waiting on the store, while background probes (one at
        # a time, each stalled READ_TIMEOUT) keep checking whether it is back. Counting calls, not
        # timing lookups, keeps this exact on a loaded machine: 15 lookups past the check interval
        # would make 15 generation checks if each waited for its own.
        probes_before = store.calls.get("generation", 0)
        for _ in range(15):
            time.sleep(0.06)  # past the check interval, so each lookup would probe if it could
            answer, _ = _timed_lookup(engine)
            assert answer.degraded is False and answer.issues == healthy.issues
        assert store.calls.get("generation", 0) - probes_before < 10, "lookups waited on the hung store"
        wait_until(lambda: store.calls.get("generation", 0) > probes_before, timeout=10)

        store.paused.clear()
        wait_until(lambda: engine.lookup(ERROR) is not None and engine.degraded_reasons() == [], timeout=10)
        assert engine.store_health == "ok"
    finally:
        store.paused.clear()
        engine.close()
