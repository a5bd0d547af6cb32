"""The indexer's facade: what the service calls to read the index, build it or sync it.

The service (engine, scheduler, CLI, doctor) goes through these functions and types only; the build
order, the sources and the store's layout stay the indexer's business.

* :func:`open_reader`: the index, read-only (the engine answers from it, ``doctor`` inspects it);
* :func:`ensure_index`: build docs + bundled KB when the index is empty (first start);
* :func:`run_index`: one index run of a :class:`RunKind` (or explicit ``github``/``full``);
* :func:`probe_store`: open the embedded store in a bounded child process first (indexer/probe.py).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from indexer.build import BuildSummary, build_index
from indexer.meta import SourceCursor, StoreStatus
from indexer.probe import RunningProbe, probe_store

if TYPE_CHECKING:
    from indexer.config import IndexSettings
    from indexer.embedding import Embedder
    from indexer.store import Store

__all__ = [
    "BuildSummary",
    "RunKind",
    "RunningProbe",
    "SourceCursor",
    "StoreStatus",
    "ensure_index",
    "open_reader",
    "probe_store",
    "run_index",
]


class RunKind(StrEnum):
    """What an index run does.

    ``local``: docs + KB, incremental (``gptoss-doctor index``); ``sync``: plus GitHub; ``rebuild``: all
    of it from scratch; ``rebuild-local``: docs + KB from scratch, no network (synced threads are carried
    over); ``first-build``: docs + KB on an empty data dir; ``repair``: docs + KB, no network, because
    the index was left damaged (opening it for writing repairs it).
    """

    LOCAL = "local"
    SYNC = "sync"
    REBUILD = "rebuild"
    REBUILD_LOCAL = "rebuild-local"
    FIRST_BUILD = "first-build"
    REPAIR = "repair"

    @property
    def github(self) -> bool:
        return self in (RunKind.SYNC, RunKind.REBUILD)

    @property
    def full(self) -> bool:
        return self in (RunKind.REBUILD, RunKind.REBUILD_LOCAL)

    @classmethod
    def of(cls, *, github: bool, full: bool) -> RunKind:
        """The kind of run ``gptoss-doctor index [--github] [--full]`` asks for."""
        if full:
            return cls.REBUILD if github else cls.REBUILD_LOCAL
        return cls.SYNC if github else cls.LOCAL


def open_reader(settings: IndexSettings, embedder: Embedder) -> Store:
    """The index opened read-only (a shared lock on an embedded store); empty before the first build."""
    from indexer.store import Store

    return Store.open(settings, embedder, read_only=True)


def run_index(
    settings: IndexSettings,
    kind: RunKind,
    *,
    embedder: Embedder | None = None,
    progress: bool | None = False,
    lock_timeout: float = 0.0,
    github_client: Any = None,
) -> BuildSummary:
    """One index run of ``kind`` (it decides GitHub and full rebuild)."""
    return build_index(
        settings,
        embedder=embedder,
        github=kind.github,
        full=kind.full,
        progress=progress,
        lock_timeout=lock_timeout,
        github_client=github_client,
    )


def ensure_index(
    settings: IndexSettings,
    embedder: Embedder,
    *,
    on_build: Callable[[str], None] | None = None,
) -> BuildSummary | None:
    """Build docs + bundled KB (offline) when the index holds no document; None when it already does.

    ``on_build`` is told (one line) when the build starts and what it did.
    """
    with open_reader(settings, embedder) as store:
        if store.status().documents:
            return None
    if on_build is not None:
        on_build("No index yet: building it from the docs and the bundled KB (offline)...")
    summary = run_index(settings, RunKind.FIRST_BUILD, embedder=embedder)
    if on_build is not None:
        on_build(summary.line())
    return summary
