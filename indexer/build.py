"""Orchestration: markdown docs + bundled KB cards (+ a GitHub sync) into the store, with a summary."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from indexer.chroma_client import THREADS_LOST
from indexer.diskspace import disk_full_errors
from indexer.documents import Document
from indexer.embedding import Embedder, load_embedder
from indexer.sources.cards import card_documents
from indexer.sources.markdown import markdown_documents
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


def _merge_cards(store: Store, cards: Sequence[Document]) -> list[Document]:
    """Cards to write: a card whose thread the GitHub sync already holds merges into the live doc."""
    existing = store.get_many([c.id for c in cards])
    live = {i: d for i, d in existing.items() if "github" in d.sources}
    if not live:
        return list(cards)
    try:
        from indexer.sources.github import merge_live
    except ImportError:  # no GitHub support installed: keep what the sync stored
        return [c for c in cards if c.id not in live]
    return [merge_live(c, live[c.id]) if c.id in live else c for c in cards]


def _vanished(store: Store, sections: Sequence[Document], cards: Sequence[Document]) -> list[str]:
    """Ids stored from the docs or the snapshot alone that those sources no longer produce."""
    current = {d.id for d in sections} | {d.id for d in cards}
    return [
        d.id
        for d in store.documents()
        if d.id not in current and set(d.sources) <= {"docs", "snapshot"} and d.kind in {"reference-section", "card"}
    ]


def _check_corpus(sections: Sequence[Document], cards: Sequence[Document]) -> list[str]:
    step = max(1, len(cards) // 48)
    return [d.text for d in sections[:16]] + [d.text for d in cards[::step][:48]]


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
    sections = markdown_documents(settings.docs_dir)
    cards = card_documents()
    summary.sections, summary.cards = len(sections), len(cards)
    own_store = store is None
    # A full disk surfaces as whatever write hit it first (often chromadb's compaction error): one
    # message names it instead (the embedded store's disk; a Chroma server's disk is the server's).
    disk: AbstractContextManager[None] = nullcontext() if settings.chroma_url else disk_full_errors(settings.data_dir)
    with reporter.running(), disk:
        if embedder is None:
            reporter.step("loading the embedding model")
            embedder = load_embedder(settings, corpus=_check_corpus(sections, cards))
        summary.embedder = embedder.name
        if store is None:
            store = Store.open(settings, embedder, lock_timeout=lock_timeout, reset_if_corrupt=full)
            summary.moved_aside = str(store.moved_aside) if store.moved_aside else None
        try:
            rebuild: AbstractContextManager[None] = (
                store.rebuild(carry=lambda d: "github" in d.sources) if full else nullcontext()
            )
            with rebuild:
                advance = reporter.step("doc sections", total=len(sections))
                section_stats = store.upsert(sections, progress=advance)
                summary.sections_changed = section_stats.new + section_stats.updated
                to_write = _merge_cards(store, cards)
                advance = reporter.step("KB cards", total=len(to_write))
                card_stats = store.upsert(to_write, progress=advance)
                gone = _vanished(store, sections, cards)
                if gone:
                    store.delete(gone)
                summary.removed = len(gone)
                summary.issues_new = card_stats.new
                summary.issues_updated = card_stats.updated
                summary.issues_unchanged = card_stats.unchanged + (len(cards) - len(to_write))
                summary.embedded = (section_stats + card_stats).embedded
                if github:
                    _sync(settings, store, summary, full=full, client=github_client, reporter=reporter)
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


def _sync(
    settings: IndexSettings, store: Store, summary: BuildSummary, *, full: bool, client: Any, reporter: _Reporter
) -> None:
    from indexer.sources.github import sync_github

    reporter.step("GitHub sync")
    result = sync_github(settings, store, full=full, client=client)
    summary.issues_new += result.new
    summary.issues_updated += result.updated
    summary.issues_unchanged += result.unchanged
    summary.github_requests = result.requests
    summary.github_stopped = result.stopped_reason


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
