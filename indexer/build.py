"""Orchestration: every registered source (indexer/sources/base.py) into the store, with a summary.

The complete sources (markdown docs, bundled KB cards) run first; then what only they produced and no
longer produce is removed; then the incremental ones (the GitHub sync, with ``github``).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from indexer.chroma_client import THREADS_LOST
from indexer.diskspace import disk_full_errors
from indexer.documents import Document, SourceName
from indexer.embedding import Embedder, load_embedder
from indexer.sources.base import Source, SourceRun, registered
from indexer.store import Store, UpsertStats

if TYPE_CHECKING:
    from indexer.config import IndexSettings

log = logging.getLogger(__name__)


@dataclass
class BuildSummary:
    """What one index run did."""

    documents: int = 0
    sections: int = 0
    cards: int = 0
    issues_new: int = 0
    issues_updated: int = 0
    issues_unchanged: int = 0
    sections_changed: int = 0
    removed: int = 0
    embedded: int = 0
    github_requests: int = 0
    github_stopped: str | None = None
    moved_aside: str | None = None
    """Where a full rebuild moved an unreadable index (its synced threads were not carried over)."""
    full: bool = False
    embedder: str = ""
    generation: str = ""
    seconds: float = 0.0

    def line(self) -> str:
        """The closing summary line."""
        text = (
            f"indexed {self.documents} documents ({self.sections} doc sections, {self.cards} KB cards); "
            f"issues: {self.issues_new} new, {self.issues_updated} updated, {self.issues_unchanged} unchanged; "
            f"removed {self.removed}; embedded {self.embedded}; GitHub requests: {self.github_requests}; "
            f"{self.seconds:.1f} s"
        )
        if self.full:
            text += " (full rebuild)"
        if self.github_stopped:
            text += f"; GitHub sync stopped: {self.github_stopped}"
        if self.moved_aside:
            text += f"; the unreadable index was moved to {self.moved_aside}: {THREADS_LOST}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Reporter:
    """A rich progress bar on a terminal; otherwise one structured log line per step."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None

    @contextmanager
    def running(self) -> Iterator[_Reporter]:
        if not self.enabled:
            yield self
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
            console=Console(stderr=True),  # stdout carries only the summary line
        ) as progress:
            self._progress = progress
            try:
                yield self
            finally:
                self._progress = None

    def step(self, description: str, total: int | None = None) -> Callable[[int], None]:
        """Announce a step; returns an ``advance(n)`` callback."""
        log.info("index step: %s", description, extra={"step": description, "total": total})
        if self._progress is None:
            return lambda n: None
        task = self._progress.add_task(description, total=total)
        return lambda n: self._progress.advance(task, n)


class _Offline:
    """The empty index an embedder's corpus sample is fetched against (before the store is open)."""

    def get(self, doc_id: str) -> Document | None:
        return None

    def get_many(self, ids: Sequence[str]) -> dict[str, Document]:
        return {}

    def documents(self) -> list[Document]:
        return []


def _check_corpus(settings: IndexSettings, sources: Sequence[Source]) -> list[str]:
    """A sample of the offline sources' texts (16 doc sections, 48 across the KB cards): the embedder
    checks its backend against it once."""
    fetched = {
        s.name: [d for batch in s.fetch(SourceRun(settings, _Offline()), {}) for d in batch.documents]
        for s in sources
        if s.name in (SourceName.DOCS, SourceName.SNAPSHOT)
    }
    sections, cards = fetched.get(SourceName.DOCS, []), fetched.get(SourceName.SNAPSHOT, [])
    step = max(1, len(cards) // 48)
    return [d.text for d in sections[:16]] + [d.text for d in cards[::step][:48]]


@dataclass
class _Tally:
    """What one source's run did."""

    yielded: int = 0
    stats: UpsertStats = field(default_factory=UpsertStats)
    produced: set[str] = field(default_factory=set)


_STEP: dict[str, str] = {
    SourceName.DOCS: "doc sections",
    SourceName.SNAPSHOT: "KB cards",
    SourceName.GITHUB: "GitHub sync",
}


def _run_source(store: Store, source: Source, run: SourceRun, reporter: _Reporter) -> _Tally:
    """Fetch a source's batches from its stored cursor and commit each before asking for the next."""
    tally = _Tally()
    advance = reporter.step(_STEP.get(source.name, f"source {source.name}"))
    batches = source.fetch(run, store.cursor(source.name))
    try:
        for batch in batches:
            docs = batch.documents
            tally.yielded += len(docs)
            tally.produced.update(d.id for d in docs)
            if batch.cursor is None:
                tally.stats += store.upsert(docs, progress=advance)
            else:
                tally.stats += store.commit(docs, source=source.name, cursor=batch.cursor, progress=advance)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:  # a failed commit closes the source's fetch (its transport, its files)
            close()
    return tally


def _vanished(store: Store, complete: Sequence[Source], produced: set[str]) -> list[str]:
    """Ids stored from complete sources alone (docs, the snapshot) that those sources no longer produce."""
    names = {s.name for s in complete}
    return [d.id for d in store.documents() if d.id not in produced and d.sources and set(d.sources) <= names]


def _summarize(summary: BuildSummary, source: Source, tally: _Tally, run: SourceRun) -> None:
    """Fold one source's run into the summary: doc sections count apart, everything else as threads."""
    stats = tally.stats
    summary.embedded += stats.embedded
    if source.name == SourceName.DOCS:
        summary.sections = tally.yielded
        summary.sections_changed = stats.new + stats.updated
        return
    if source.name == SourceName.SNAPSHOT:
        summary.cards = tally.yielded + run.skipped
    summary.issues_new += stats.new
    summary.issues_updated += stats.updated
    summary.issues_unchanged += stats.unchanged + run.skipped
    if source.network:
        summary.github_requests += run.requests
        summary.github_stopped = summary.github_stopped or run.stopped


def build_index(
    settings: IndexSettings,
    *,
    embedder: Embedder | None = None,
    github: bool = False,
    full: bool = False,
    progress: bool | None = None,
    store: Store | None = None,
    lock_timeout: float = 0.0,
    github_client: Any = None,
) -> BuildSummary:
    """Index docs + bundled cards (+ GitHub when asked) and return what was done.

    ``full`` rebuilds into a fresh collection that replaces the serving one only when the run completes.
    ``store``: an already open writable Store (``serve`` passes its own); otherwise one is opened, which
    takes the embedded store's write lock (StoreLocked when another process holds it).
    """
    started = time.perf_counter()
    reporter = _Reporter(sys.stderr.isatty() if progress is None else progress)
    summary = BuildSummary(full=full)
    sources = registered(network=github)
    own_store = store is None
    # A full disk surfaces as whatever write hit it first (often chromadb's compaction error): one
    # message names it instead (the embedded store's disk; a Chroma server's disk is the server's).
    disk: AbstractContextManager[None] = nullcontext() if settings.chroma_url else disk_full_errors(settings.data_dir)
    with reporter.running(), disk:
        if embedder is None:
            reporter.step("loading the embedding model")
            embedder = load_embedder(settings, corpus=_check_corpus(settings, sources))
        summary.embedder = embedder.name
        if store is None:
            store = Store.open(settings, embedder, lock_timeout=lock_timeout, reset_if_corrupt=full)
            summary.moved_aside = str(store.moved_aside) if store.moved_aside else None
        try:
            complete = [s for s in sources if s.complete]
            incremental = [s for s in sources if not s.complete]
            # A rebuild carries over what incremental sources stored (with their cursors): a run without
            # them keeps their documents, and a run with them that stops early loses nothing.
            rebuilt = {s.name for s in complete}
            rebuild: AbstractContextManager[None] = (
                store.rebuild(carry=lambda d: not set(d.sources) <= rebuilt) if full else nullcontext()
            )
            with rebuild:
                produced: set[str] = set()
                for source in complete:
                    run = SourceRun(settings, store, full=full, github_client=github_client)
                    tally = _run_source(store, source, run, reporter)
                    produced |= tally.produced
                    _summarize(summary, source, tally, run)
                gone = _vanished(store, complete, produced)
                if gone:
                    store.delete(gone)
                summary.removed = len(gone)
                for source in incremental:
                    run = SourceRun(settings, store, full=full, github_client=github_client)
                    _summarize(summary, source, _run_source(store, source, run, reporter), run)
                store.mark_built()
            summary.documents = store.count()
            summary.generation = store.generation()
            summary.seconds = round(time.perf_counter() - started, 2)
            store.record_run(_outcome(summary, ok=True))
        except BaseException as exc:
            summary.seconds = round(time.perf_counter() - started, 2)
            try:
                store.record_run(_outcome(summary, ok=False, error=f"{type(exc).__name__}: {exc}"))
            except Exception as record_exc:  # the store itself may be what failed
                log.warning("could not record the failed run: %s", record_exc)
            raise
        finally:
            if own_store:
                store.close()
    log.info(summary.line(), extra={"summary": summary.as_dict()})
    return summary


def _outcome(summary: BuildSummary, *, ok: bool, error: str | None = None) -> dict[str, Any]:
    return {
        "kind": "index",
        "ok": ok,
        "error": error,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "summary": summary.as_dict(),
        "line": summary.line(),
    }


__all__ = ["BuildSummary", "UpsertStats", "build_index"]
