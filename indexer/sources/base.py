"""The source seam: what the indexer needs of a source of documents, and the registry of sources.

A source has a name and yields its documents since a cursor, in batches; each batch carries the cursor
that holds once it is stored, so the last batch's cursor is the source's new one. The store keeps one
cursor per source (indexer/meta.py) and writes it in the same meta write that publishes the batch's
documents: a run that dies resumes from the last committed batch.

``indexer/build.py`` runs every registered source in order: the complete ones first (each run yields
everything they hold, so a stored document only they produced, and no longer yielded, is removed),
then the incremental ones (``network`` sources only when the run asks for them, e.g. ``--github``).

Adding a source (say another project's issue tracker) is one module defining a :class:`Source` and one
registration: a line in :data:`BUILTIN`, or :func:`register` at run time (tests/indexer/test_sources.py
plugs one in that way).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from indexer.documents import Document
from indexer.meta import Cursor

if TYPE_CHECKING:
    from indexer.config import IndexSettings


@dataclass
class Batch:
    """Documents to store together, then the source's cursor (None: the source keeps no cursor)."""

    documents: list[Document]
    cursor: Cursor | None = None


class SourceReader(Protocol):
    """What a source may read of the index while it runs (the collection being written)."""

    def get(self, doc_id: str) -> Document | None: ...
    def get_many(self, ids: Sequence[str]) -> dict[str, Document]: ...
    def documents(self) -> list[Document]: ...


@dataclass
class SourceRun:
    """One source's run: the settings, read access to the index, and what the source reports back."""

    settings: IndexSettings
    store: SourceReader
    full: bool = False
    """A full rebuild: fetch from scratch (the cursor is still passed, for what must never move back)."""
    github_client: Any = None
    skipped: int = 0
    """Documents the source knows are unchanged without yielding them (counted as unchanged)."""
    requests: int = 0
    stopped: str | None = None
    """Why the source stopped early but cleanly (a rate limit): what it committed stays."""
    notes: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Source(Protocol):
    """A source of documents for the index."""

    name: str
    """Recorded in ``Document.sources`` and keys the source's cursor in the store."""
    complete: bool
    """Every run yields all the source holds (docs, the bundled KB); else it is incremental."""
    network: bool
    """Needs the network (runs only when asked, e.g. ``index --github``)."""

    def fetch(self, run: SourceRun, cursor: Cursor) -> Iterator[Batch]:
        """The source's documents since ``cursor`` (empty: from the start), in batches to commit in order."""
        ...


BUILTIN: tuple[tuple[str, bool], ...] = (
    ("indexer.sources.markdown:SOURCE", False),
    ("indexer.sources.cards:SOURCE", False),
    ("indexer.sources.github:SOURCE", True),
)
"""The built-in sources in run order: ``module:attribute`` and whether it needs the network (such a module
is not even imported offline, so PyGithub stays unloaded)."""

_extra: list[Source] = []


def register(source: Source) -> Source:
    """Add a source after the built-in ones (replacing a registered one of the same name)."""
    if not isinstance(source, Source):
        raise TypeError(f"{source!r} is not a Source (name, complete, network, fetch)")
    unregister(source.name)
    _extra.append(source)
    return source


def unregister(name: str) -> None:
    """Remove a source added with :func:`register` (the built-in ones stay)."""
    _extra[:] = [s for s in _extra if s.name != name]


def registered(*, network: bool) -> list[Source]:
    """The sources an index run uses, in order; network sources only when ``network``."""
    sources: list[Source] = []
    for spec, needs_network in BUILTIN:
        if needs_network and not network:
            continue
        module, _, attribute = spec.partition(":")
        sources.append(getattr(importlib.import_module(module), attribute))
    sources += _extra
    return [s for s in sources if network or not s.network]
