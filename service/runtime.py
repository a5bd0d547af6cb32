"""The serving process's state: start-up in the background, then the engine and the scheduler.

The port answers at once; ``/lookup`` returns 503 + Retry-After until :meth:`Runtime.start` has opened
the embedder, the store (building the index first on an empty data dir) and Harmony. A failed start
is retried with backoff, so a Chroma server that comes up late is picked up without a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Literal

from service.config import Settings
from service.engine import LookupEngine
from service.scheduler import Runner, Scheduler, default_runner

log = logging.getLogger(__name__)

Loader = Callable[[Settings, Callable[[str], None]], LookupEngine]
RETRY_DELAYS = (2.0, 5.0, 10.0, 30.0, 60.0)


def clip(text: str, limit: int) -> str:
    """``text`` shortened in the middle: an error's end usually says how to fix it, so it is kept."""
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def default_loader(settings: Settings, note: Callable[[str], None]) -> LookupEngine:
    """Open everything for real; builds the index offline first when the store is empty.

    The embedded store is opened in a bounded probe process first (indexer/probe.py), while this
    process loads the model, so the probe adds no time to a healthy start-up. A store chromadb hangs or
    fails on then fails this attempt with the reason (shown on /health, retried with backoff) instead
    of freezing the server with the GIL held.
    """
    from indexer.chroma_client import FIX
    from indexer.diskspace import is_disk_full
    from indexer.embedding import load_embedder, query_threads
    from indexer.errors import StoreError
    from indexer.probe import RunningProbe

    probe = RunningProbe(settings, timeout=settings.store_probe_timeout)
    # A long-lived process: a lookup that encodes alone uses a second, multi-threaded session.
    embedder = load_embedder(settings, query_threads=query_threads())
    note("checking the index store in a probe process")
    verdict = probe.result()
    if verdict.verdict == "timeout":
        raise StoreError(f"store probe timed out: {verdict.detail}; the server stays up and retries")
    if verdict.verdict == "unreadable" and not is_disk_full(RuntimeError(verdict.detail), settings.data_dir):
        raise StoreError(f"{verdict.detail}; {FIX}")
    # On a full disk chromadb cannot open even a sound index: the store serves a read-only copy of it.
    note("loading the index")
    return LookupEngine.open(settings, embedder=embedder, on_build=note)


class Runtime:
    """Holds the engine and the scheduler once start-up succeeded, and says why not before that."""

    def __init__(
        self,
        settings: Settings,
        *,
        loader: Loader = default_loader,
        runner: Runner = default_runner,
        retry_delays: Sequence[float] = RETRY_DELAYS,
    ) -> None:
        self.settings = settings
        self.loader = loader
        self.runner = runner
        self.retry_delays = tuple(retry_delays)
        self.state: Literal["starting", "ready", "failed"] = "starting"
        self.phase = "loading the model and the index"
        self.error: str | None = None
        self.engine: LookupEngine | None = None
        self.scheduler: Scheduler | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start_background(self) -> threading.Thread:
        """Run :meth:`start` in a daemon thread so the server answers meanwhile."""
        self._thread = threading.Thread(target=self.start, name="gptoss-doctor-startup", daemon=True)
        self._thread.start()
        return self._thread

    def start(self) -> None:
        """Open the engine (retrying with backoff on failure), then start the scheduler."""
        attempt = 0
        while not self._stop.is_set():
            try:
                engine = self.loader(self.settings, self._note)
            except Exception as exc:  # reported on /health and in the 503 detail, then retried
                delay = self.retry_delays[min(attempt, len(self.retry_delays) - 1)]
                self.error = f"{type(exc).__name__}: {clip(str(exc), 400)}"
                self.state = "failed"
                log.error("start-up failed (%s); retrying in %gs", self.error, delay)
                attempt += 1
                if self._stop.wait(delay):
                    return
                continue
            try:  # before ready, so /health never calls a damaged index ok
                engine.check_vectors()
            except Exception as exc:  # the check only informs; the engine serves either way
                log.warning("vector self-check failed to run: %s", exc)
            scheduler = Scheduler(
                self.settings,
                embedder=engine.embedder,
                runner=self.runner,
                on_finished=engine.after_index_run,
            )
            self.scheduler = scheduler
            self.engine = engine
            self.error = None
            self.state = "ready"
            log.info("ready: index generation %s", engine.generation)
            if self._stop.is_set():  # shut down while we were loading
                return
            if engine.index_needs_repair():
                # A run was killed mid-write (or the vectors fail their self-check): a local writer run
                # repairs it now rather than at the next scheduled or manual run; lookups keep answering.
                log.warning("the index needs repair; starting a local index run")
                scheduler.trigger("repair")
            scheduler.start()
            return

    def _note(self, message: str) -> None:
        self.phase = message
        log.info("%s", message)

    def not_ready_detail(self) -> str:
        """Why lookups cannot be answered yet, for the 503 body."""
        if self.state == "failed":
            return f"The service could not open its index ({self.error}); retrying. See /health."
        return f"The service is starting ({self.phase}); retry shortly."

    def shutdown(self) -> None:
        """Stop the scheduler and release the store."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.engine is not None:
            self.engine.close()
