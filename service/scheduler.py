"""Index runs inside ``serve``: the periodic GitHub re-sync and the admin-triggered sync/rebuild.

One lock covers every run, periodic or triggered, so two never overlap in this process (the indexer's
file lock, or on a Chroma server its writer lease, guards against other processes; a run that finds
another process writing a shared server's index is recorded as skipped). Each run's outcome is kept
for ``/v1/index/status``; a failed run leaves the last good index serving.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from indexer.errors import StoreLocked
from service.config import Settings
from service.memory import release_free_heap
from service.models import SchedulerState

if TYPE_CHECKING:
    from indexer.embedding import Embedder

log = logging.getLogger(__name__)

RunKind = Literal["sync", "rebuild", "rebuild-local", "first-build", "repair"]
"""sync: docs + KB + GitHub; rebuild: all of it from scratch; rebuild-local: docs + KB from scratch, no
network (synced threads are carried over); first-build: docs + KB on an empty data dir; repair: docs +
KB, no network, run because the index was left damaged (opening it for writing repairs it)."""
Runner = Callable[..., Any]


def default_runner(settings: Settings, *, kind: RunKind, embedder: Embedder | None) -> Any:
    """The indexer: a GitHub sync, a full rebuild (with or without GitHub), or (first start) docs + KB."""
    from indexer.api import RunKind as IndexRun
    from indexer.api import run_index

    return run_index(settings, IndexRun(kind), embedder=embedder)


class Scheduler:
    """Runs index jobs one at a time in background threads; periodic when ``reindex_interval`` is set."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        runner: Runner = default_runner,
        on_finished: Callable[[], object] | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.runner = runner
        self.on_finished = on_finished
        self.interval: timedelta | None = settings.reindex_interval
        self.last_run: dict[str, Any] | None = None
        self.next_run_at: datetime | None = None
        self._run_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic loop (no-op when no interval is configured)."""
        if self.interval is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="gptoss-doctor-reindex", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop; a run in progress finishes on its own (the indexer commits in batches)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for worker in self._workers:
            worker.join(timeout)

    def _loop(self) -> None:
        assert self.interval is not None
        period = self.interval.total_seconds()
        while True:
            self.next_run_at = datetime.now(UTC) + self.interval
            if self._stop.wait(period):
                return
            if self.run("sync") is None:
                log.info("scheduled re-sync skipped: another run is in progress")

    # -- runs --------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while a run holds the lock."""
        return self._run_lock.locked()

    def run(self, kind: RunKind) -> dict[str, Any] | None:
        """Run now in this thread; None (without waiting) when another run is in progress."""
        if not self._run_lock.acquire(blocking=False):
            return None
        try:
            return self._execute(kind)
        finally:
            self._run_lock.release()

    def trigger(self, kind: RunKind) -> bool:
        """Start a run in a background thread; False when another run is in progress."""
        if not self._run_lock.acquire(blocking=False):
            return False

        def work() -> None:
            try:
                self._execute(kind)
            finally:
                self._run_lock.release()

        worker = threading.Thread(target=work, name=f"gptoss-doctor-{kind}", daemon=True)
        self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        worker.start()
        return True

    def _execute(self, kind: RunKind) -> dict[str, Any]:
        started = datetime.now(UTC)
        t0 = time.monotonic()
        outcome: dict[str, Any] = {"kind": kind, "ok": False, "started_at": started.isoformat()}
        try:
            summary = self.runner(self.settings, kind=kind, embedder=self.embedder)
            line = summary.line() if hasattr(summary, "line") else str(summary)
            outcome.update(ok=True, summary=line)
            log.info("%s finished: %s", kind, line)
        except Exception as exc:  # any failure is recorded and reported; the old index keeps serving
            if isinstance(exc, StoreLocked) and self.settings.chroma_url:
                # A shared Chroma server: another replica or the indexer job is writing this index right
                # now, so the work is being done. Not a failure; the reason is kept.
                outcome.update(ok=True, skipped=True, summary=f"skipped: {str(exc)[:300]}")
                log.info("%s skipped: %s", kind, exc)
            else:
                outcome.update(error=f"{type(exc).__name__}: {str(exc)[:300]}")
                log.warning("%s failed: %s", kind, outcome["error"])
        outcome.update(finished_at=datetime.now(UTC).isoformat(), seconds=round(time.monotonic() - t0, 2))
        self.last_run = outcome
        reloaded: object = False
        if self.on_finished is not None:
            try:
                reloaded = self.on_finished()
            except Exception:
                log.exception("reload after %s failed", kind)
        if reloaded is not True:  # a reload that swapped generations (True) has released it already
            release_free_heap()  # the run's buffers are garbage now
        return outcome

    def state(self) -> SchedulerState:
        """What ``/v1/index/status`` shows about scheduling."""
        return SchedulerState(
            enabled=self.interval is not None,
            interval_seconds=self.interval.total_seconds() if self.interval else None,
            running=self.running,
            next_run_at=self.next_run_at if self.interval else None,
        )
