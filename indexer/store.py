"""The Chroma store: documents with their embeddings and content hashes, in generations.

Layout inside Chroma (embedded ``PersistentClient`` or a ``chroma run`` server, same code):

* ``<collection>__g<N>``: a data collection (cosine space). Each record holds the Document's full JSON
  in ``documents``, its vector, and scalar metadata (kind, repo, number, state, hashes).
* ``<collection>__meta``: the generations, the sources' cursors, the last run and the writer lease
  (indexer/meta.py).

Keeping meta in Chroma makes replicas on one server agree. A full rebuild writes a fresh data collection
and swaps ``active`` only when it completes, so a failed rebuild leaves the last good index serving.

This module reads and writes the collections. Opening (locks, an empty or unreadable database, the probe
before a rebuild, the read-only copy on a full disk) is indexer/store_open.py; the writer's heal on open
(the vector self-check and the repair) is indexer/store_health.py.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from indexer.chroma_client import FIX, make_client, short_error
from indexer.diskspace import OPEN_FAILED, disk_full, is_disk_full
from indexer.documents import DocKind, Document
from indexer.embedding import Embedder
from indexer.errors import StoreError, StoreLocked
from indexer.lease import WriterLease
from indexer.lock import DataDirLock
from indexer.meta import (
    Cursor,
    IndexMeta,
    StoreStatus,
    cursors_field,
    merged_cursor,
    new_generation,
    now_iso,
    parse_time,
    read_cursors,
    state_with,
)

if TYPE_CHECKING:
    from indexer.config import IndexSettings

log = logging.getLogger(__name__)

CHUNK = 256
EMBED_CHUNK = 64
Progress = Callable[[int], None]
F = TypeVar("F", bound=Callable[..., Any])


def _on_client(method: F) -> F:
    """Run a read under the store's client lock, so :meth:`Store.renew_client` never closes a client mid-read;
    a closed store refuses it."""

    @functools.wraps(method)
    def guarded(self: Store, *args: Any, **kwargs: Any) -> Any:
        with self._client_lock:
            if self._closed:
                raise StoreError(f"the index at {self.location} was closed")
            return method(self, *args, **kwargs)

    return guarded  # type: ignore[return-value]


def _close_client(client: Any) -> None:
    """Close a Chroma client: chromadb stops the System it shares with the process's other clients of that
    store once the last of them is closed, which frees the native state it keeps (best effort)."""
    close = getattr(client, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception as exc:
        log.warning("could not close the Chroma client: %s", short_error(exc))


@dataclass
class UpsertStats:
    """What an upsert did: documents new, updated (any field), unchanged, and how many were embedded."""

    new: int = 0
    updated: int = 0
    unchanged: int = 0
    embedded: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.new or self.updated)

    def __add__(self, other: UpsertStats) -> UpsertStats:
        return UpsertStats(*(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=True)))


def _embed_key(embedder: Embedder, doc: Document) -> str:
    # The model family, not the backend: ONNX int8 and torch vectors agree to cosine >= 0.99, so a
    # backend switch does not re-embed the corpus; a different model or dimension does.
    family = embedder.name.split("/", 1)[0]
    return f"{family}:{embedder.dimension}:{doc.embedding_hash()}"


def _metadata(doc: Document, content_hash: str, embed_key: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"kind": doc.kind.value, "content_hash": content_hash, "embed_key": embed_key}
    if doc.repo:
        meta["repo"] = doc.repo
    if doc.number is not None:
        meta["number"] = doc.number
    if doc.state:
        meta["state"] = doc.state
    return meta


class Store:
    """Documents + vectors + index metadata in Chroma. Open with :meth:`open`."""

    def __init__(
        self,
        client: Any,
        settings: IndexSettings,
        embedder: Embedder,
        *,
        read_only: bool,
        lock: DataDirLock | None,
        lock_timeout: float = 0.0,
    ) -> None:
        self._client: Any = client  # None after renew_client failed to open a new one (reopened on the next read)
        self._client_lock = threading.RLock()
        self._closed = False
        self.settings = settings
        self.embedder = embedder
        self.read_only = read_only
        self._lock = lock
        self._lock_timeout = lock_timeout
        self._lease: WriterLease | None = None  # a writer's hold on a Chroma server's index
        self._base = settings.collection
        self._meta_name = f"{self._base}__meta"
        self._meta: IndexMeta | None = None
        self._collections: dict[str, Any] = {}
        self._active: str | None = None
        self._generation = ""
        self._target: str | None = None  # where writes go: the active collection, or a rebuild's
        self.location = settings.chroma_url or str(settings.chroma_dir)
        self.full_disk: str | None = None  # set when this reader serves a copy because the disk is full
        self._copy: Path | None = None
        self.moved_aside: Path | None = None  # set when a full rebuild moved an unreadable store here

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(
        cls,
        settings: IndexSettings,
        embedder: Embedder,
        *,
        read_only: bool = False,
        lock_timeout: float = 0.0,
        reset_if_corrupt: bool = False,
    ) -> Store:
        """Open (and, when writable, initialise and heal) the store: see :func:`indexer.store_open.open_store`."""
        from indexer.store_open import open_store

        return open_store(
            cls, settings, embedder, read_only=read_only, lock_timeout=lock_timeout, reset_if_corrupt=reset_if_corrupt
        )

    @_on_client
    def vector_problem(self, sample: int | None = None) -> str | None:
        """Why dense search over the served collection is damaged; None when sound (indexer/store_health.py)."""
        from indexer.store_health import SELF_CHECK, vector_problem

        return vector_problem(self, SELF_CHECK if sample is None else sample)

    def _load(self) -> None:
        if self._client is None:  # renew_client closed the last one and could not open another
            if self._closed:
                raise StoreError(f"the index at {self.location} was closed")
            self._client = make_client(self.settings)
        try:
            names = {c if isinstance(c, str) else c.name for c in self._client.list_collections()}
            if self._meta_name not in names:
                if any(n.startswith(f"{self._base}__g") for n in names):
                    raise StoreError(f"the index at {self.location} has data but no metadata; {FIX}")
                if self.read_only:
                    return  # an empty store: nothing indexed yet
                self._meta = IndexMeta(
                    self._client.get_or_create_collection(self._meta_name, embedding_function=None)
                )
            else:
                self._meta = IndexMeta(self._client.get_collection(self._meta_name, embedding_function=None))
            if not self.read_only and self.settings.chroma_url and self._lease is None:
                # Other hosts may write this server's index too: one writer at a time (indexer/lease.py).
                self._lease = WriterLease(self._meta.collection, self.location).acquire(timeout=self._lock_timeout)
            active = self._meta.active()
            if active is None:
                if self.read_only:
                    return
                name = self._create_data_collection()
                self._meta.publish(name, self._state(name), active=True)
                active = {"collection": name, "generation": self._state(name)["generation"]}
            self._active = str(active["collection"])
            self._generation = str(active["generation"])
            self._collection(self._active).count()  # fails when the data collection is missing/corrupt
        except (StoreError, StoreLocked):
            raise
        except Exception as exc:
            if not self.settings.chroma_url and is_disk_full(exc, self.settings.data_dir):
                raise disk_full(self.settings.data_dir, OPEN_FAILED) from exc
            raise StoreError(f"the index at {self.location} cannot be read ({short_error(exc)}); {FIX}") from exc
        self._target = self._active

    def close(self) -> None:
        """Close the Chroma client, then release the writer lease or the data dir lock.

        Closing the client matters in a long-lived process: chromadb keeps one System per store path, with
        native state for every collection it opened (also after the collection is deleted), until the
        last client of that path in the process is closed.
        """
        with self._client_lock:
            self._closed = True
            client, self._client = self._client, None
            self._collections.clear()
        if client is not None:
            _close_client(client)
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    def renew_client(self, timeout: float) -> bool:
        """Replace this reader's Chroma client with a fresh one on the same store, keeping the data dir lock.

        chromadb shares one System among a process's clients of a store path and keeps, inside it, native
        state for every collection it opened, also after that collection was deleted (measured with
        chromadb 1.5.9: 4-5 MB per generation). A reader that outlives many generations (``serve``) calls
        this after it loaded a new one: when no other client of the path is open in the process (an index
        run's store is closed when the run ends), closing this one stops the System, and the new client
        starts one that holds only the served collection. Reads wait for the renewal (they hold the client
        lock); False when a read did not finish within ``timeout`` (nothing changed), or on a Chroma
        server (no native state here). When the new client cannot be opened, the StoreError is raised and
        the next read tries again.
        """
        if self.settings.chroma_url or not self.read_only:
            return False
        if not self._client_lock.acquire(timeout=timeout):
            return False
        try:
            if self._closed:
                return False
            old, self._client = self._client, None
            self._collections.clear()
            self._meta = None
            if old is not None:
                _close_client(old)
            self._load()
            return True
        finally:
            self._client_lock.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- meta helpers
    def _writable_meta(self) -> IndexMeta:
        self._require_writable()
        if self._meta is None:
            raise StoreError(f"the index at {self.location} is not initialised; {FIX}")
        return self._meta

    def _state(self, name: str) -> dict[str, Any]:
        return self._meta.state(name) if self._meta is not None else {}

    def _update_state(self, name: str, **changes: Any) -> dict[str, Any]:
        return self._writable_meta().update_state(name, **changes)

    def _keep_cursors(self, old: str, new: str) -> None:
        """Copy the sources' cursors of collection ``old`` to ``new`` (a rebuild that carries data over)."""
        cursors = read_cursors(self._state(old))
        self._update_state(new, **cursors_field(cursors))

    def _create_data_collection(self) -> str:
        names = {c if isinstance(c, str) else c.name for c in self._client.list_collections()}
        seq = 1
        while f"{self._base}__g{seq}" in names:
            seq += 1
        name = f"{self._base}__g{seq}"
        self._client.create_collection(name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
        self._writable_meta().new_state(name, self.embedder.name, self.embedder.dimension)
        return name

    def _collection(self, name: str) -> Any:
        if name not in self._collections:
            self._collections[name] = self._client.get_collection(name, embedding_function=None)
        return self._collections[name]

    def _require_writable(self) -> None:
        if self.read_only:
            raise StoreError("this store was opened read-only; only the indexer writes it")

    def _bump(self, name: str, **extra: Any) -> str:
        """New generation for a data collection (and the active pointer when it serves)."""
        self._check_lease()
        generation = new_generation()
        meta = self._writable_meta()
        state = state_with(self._state(name), **extra) | {"generation": generation, "dirty": False}
        meta.publish(name, state, active=name == self._active)
        if name == self._active:
            self._generation = generation
        return generation

    def _refresh(self) -> None:
        if self._meta is None:
            if self.read_only:
                # A read-only store opened before the first build: look again, cheaply.
                self._load()
            return
        active = self._meta.active()
        if active:
            if active["collection"] != self._active and self._target == self._active:
                self._target = str(active["collection"])
            self._active = str(active["collection"])
            self._generation = str(active["generation"])

    def _read(self, op: Callable[[Any], Any], default: Any) -> Any:
        """Run a read on the active collection, following a swap made by another process once."""
        if self._active is None or self._client is None:
            self._refresh()
            if self._active is None:
                return default
        try:
            return op(self._collection(self._active))
        except Exception as exc:
            if type(exc).__name__ != "NotFoundError":
                raise StoreError(f"reading the index at {self.location} failed: {short_error(exc)}") from exc
        self._collections.clear()
        self._refresh()
        try:
            return op(self._collection(str(self._active)))
        except Exception as exc:
            raise StoreError(f"reading the index at {self.location} failed: {short_error(exc)}; {FIX}") from exc

    # ----------------------------------------------------------------- reads
    @_on_client
    def generation(self) -> str:
        """The current generation stamp: changes whenever the served document set changes."""
        try:
            self._refresh()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"reading the index at {self.location} failed: {short_error(exc)}") from exc
        return f"{self._active}:{self._generation}" if self._active else ""

    @_on_client
    def documents(self) -> list[Document]:
        """Every served document, sorted by id."""

        def fetch(col: Any) -> list[Document]:
            docs: list[Document] = []
            offset = 0
            while True:
                got = col.get(include=["documents"], limit=1000, offset=offset)
                docs += [Document.model_validate_json(d) for d in got["documents"] or []]
                if len(got["ids"]) < 1000:
                    break
                offset += 1000
            return sorted(docs, key=lambda d: d.id)

        result: list[Document] = self._read(fetch, [])
        return result

    @_on_client
    def vectors(self) -> tuple[list[str], np.ndarray]:
        """Every served document's id and vector (one float32 row each): readers search them in memory."""
        empty = np.zeros((0, self.embedder.dimension), dtype=np.float32)

        def fetch(col: Any) -> tuple[list[str], np.ndarray]:
            ids: list[str] = []
            rows: list[np.ndarray] = []
            offset = 0
            while True:
                got = col.get(include=["embeddings"], limit=1000, offset=offset)
                ids += got["ids"]
                if len(got["ids"]):
                    rows.append(np.asarray(got["embeddings"], dtype=np.float32))
                if len(got["ids"]) < 1000:
                    break
                offset += 1000
            return ids, (np.concatenate(rows) if rows else empty)

        result: tuple[list[str], np.ndarray] = self._read(fetch, ([], empty))
        return result

    @_on_client
    def get_many(self, ids: Sequence[str]) -> dict[str, Document]:
        """The served documents among ``ids``, by id."""
        if not ids:
            return {}

        def fetch(col: Any) -> dict[str, Document]:
            out: dict[str, Document] = {}
            for start in range(0, len(ids), CHUNK):
                got = col.get(ids=list(ids[start : start + CHUNK]), include=["documents"])
                for doc_id, text in zip(got["ids"], got["documents"] or [], strict=False):
                    out[doc_id] = Document.model_validate_json(text)
            return out

        result: dict[str, Document] = self._read(fetch, {})
        return result

    def get(self, doc_id: str) -> Document | None:
        """One served document or None."""
        return self.get_many([doc_id]).get(doc_id)

    @_on_client
    def query(self, vector: np.ndarray, k: int, *, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """The k nearest documents as (id, cosine similarity), best first."""
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)

        def run(col: Any) -> list[tuple[str, float]]:
            if k <= 0:
                return []
            # Chroma clamps n_results to what matches (nothing on an empty collection), so no count() round
            # trip per lookup: it cost as much as the query itself (bench/results/profile.txt).
            got = col.query(query_embeddings=[vec], n_results=k, where=where, include=["distances"])
            ids = got["ids"][0]
            distances = (got["distances"] or [[]])[0]
            return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=False)]

        result: list[tuple[str, float]] = self._read(run, [])
        return result

    @_on_client
    def count(self) -> int:
        """How many documents are served."""
        result: int = self._read(lambda col: col.count(), 0)
        return result

    def cursor(self, source: str) -> Cursor:
        """Where ``source`` stands in the collection being written (or served); empty before its first run."""
        name = self._target or self._active
        if name is None:
            return {}
        found = read_cursors(self._state(name)).get(source)
        return dict(found.cursor) if found else {}

    @_on_client
    def status(self) -> StoreStatus:
        """Counts, times, generation, cursors and last run, for /v1/index/status, the CLI and the engine."""
        self._refresh()
        state = self._state(self._active) if self._active else {}
        issues: int = self._read(
            lambda col: len(col.get(where={"kind": {"$ne": DocKind.REFERENCE_SECTION.value}}, include=[])["ids"]), 0
        )
        return StoreStatus(
            documents=self.count(),
            issues=issues,
            built_at=parse_time(state.get("built_at") or None),
            generation=self.generation(),
            embedder=state.get("embedder"),
            cursors=read_cursors(state),
            store="server" if self.settings.chroma_url else "embedded",
            location=self.location,
            last_run=self.last_run(),
            dirty=bool(state.get("dirty")),
            full_disk=self.full_disk,
        )

    @_on_client
    def last_run(self) -> dict[str, Any] | None:
        """The last recorded index/sync outcome."""
        return self._meta.last_run() if self._meta is not None else None

    # ----------------------------------------------------------------- writes
    def upsert(self, docs: Sequence[Document], *, progress: Progress | None = None) -> UpsertStats:
        """Insert or update documents; only new or changed text is embedded; bumps the generation."""
        stats = self._apply(docs, progress=progress)
        if stats.changed:
            self._bump(self._writable_target())
        return stats

    def commit(
        self, docs: Sequence[Document], *, source: str, cursor: Cursor, progress: Progress | None = None
    ) -> UpsertStats:
        """Upsert docs, THEN store ``source``'s cursor (its keys replace the stored ones) and bump the
        generation in one meta write.

        A crash before the end leaves the old cursor, and fetching again from it is idempotent.
        """
        stats = self._apply(docs, progress=progress)
        name = self._writable_target()
        state = self._state(name)
        extra = merged_cursor(state, source, cursor)
        if stats.changed or state.get("dirty"):
            self._bump(name, **extra)
        else:
            self._update_state(name, **extra)
        return stats

    def delete(self, ids: Sequence[str]) -> None:
        """Remove documents (missing ids are ignored); bumps the generation when any existed."""
        name = self._writable_target()
        col = self._collection(name)
        present = col.get(ids=list(ids), include=[])["ids"] if ids else []
        if not present:
            return
        self._mark_dirty(name)
        for start in range(0, len(present), CHUNK):
            col.delete(ids=present[start : start + CHUNK])
        self._bump(name)

    def record_run(self, outcome: dict[str, Any]) -> None:
        """Store the last index/sync run's outcome (shown by /v1/index/status)."""
        self._writable_meta().record_run(outcome)

    def mark_built(self) -> None:
        """Stamp the collection being written as built now."""
        name = self._writable_target()
        self._update_state(name, built_at=now_iso())

    def _check_lease(self) -> None:
        """On a Chroma server: refuse to publish when this writer lost its lease (indexer/lease.py)."""
        if self._lease is not None:
            self._lease.check()

    def _writable_target(self) -> str:
        self._require_writable()
        if self._target is None:
            raise StoreError(f"the index at {self.location} is not initialised; {FIX}")
        return self._target

    def _mark_dirty(self, name: str) -> None:
        if not self._state(name).get("dirty"):
            self._update_state(name, dirty=True)

    def _apply(self, docs: Sequence[Document], *, progress: Progress | None) -> UpsertStats:
        """Write documents into the target collection without touching the generation."""
        name = self._writable_target()
        dimension = self._state(name).get("dimension")
        if dimension is not None and int(dimension) != self.embedder.dimension:
            raise StoreError(
                f"the index at {self.location} holds {dimension}-d vectors but {self.embedder.name} makes "
                f"{self.embedder.dimension}-d ones; {FIX}"
            )
        col = self._collection(name)
        # Similar lengths side by side keep the embedder's padding small (a third faster on the KB).
        unique = sorted({doc.id: doc for doc in docs}.values(), key=lambda d: len(d.text))
        stats = UpsertStats()
        dirty = False
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start : start + CHUNK]
            got = col.get(ids=[d.id for d in chunk], include=["metadatas"])
            existing = {i: m or {} for i, m in zip(got["ids"], got["metadatas"] or [], strict=False)}
            to_embed: list[tuple[Document, str, str]] = []
            meta_only: list[tuple[Document, str, str]] = []
            for doc in chunk:
                content_hash, embed_key = doc.content_hash(), _embed_key(self.embedder, doc)
                old = existing.get(doc.id)
                if old is None:
                    stats.new += 1
                    to_embed.append((doc, content_hash, embed_key))
                elif old.get("content_hash") == content_hash and old.get("embed_key") == embed_key:
                    stats.unchanged += 1
                else:
                    stats.updated += 1
                    target = meta_only if old.get("embed_key") == embed_key else to_embed
                    target.append((doc, content_hash, embed_key))
            if (to_embed or meta_only) and not dirty:
                self._mark_dirty(name)
                dirty = True
            if meta_only:
                # Chroma would try to re-embed a changed `documents` field without vectors, so the
                # stored vectors are passed back unchanged.
                vectors = col.get(ids=[d.id for d, _, _ in meta_only], include=["embeddings"])
                by_id = dict(zip(vectors["ids"], vectors["embeddings"], strict=False))
                self._write(col, meta_only, np.asarray([by_id[d.id] for d, _, _ in meta_only]))
            for part in range(0, len(to_embed), EMBED_CHUNK):
                batch = to_embed[part : part + EMBED_CHUNK]
                vectors = self.embedder.encode([d.text for d, _, _ in batch])
                stats.embedded += len(batch)
                self._write(col, batch, vectors)
                if progress:
                    progress(len(batch))
            if progress:
                progress(len(chunk) - len(to_embed))
        return stats

    @staticmethod
    def _write(col: Any, rows: list[tuple[Document, str, str]], vectors: np.ndarray) -> None:
        col.upsert(
            ids=[d.id for d, _, _ in rows],
            embeddings=np.asarray(vectors, dtype=np.float32),
            documents=[d.model_dump_json() for d, _, _ in rows],
            metadatas=[_metadata(d, h, k) for d, h, k in rows],
        )

    # ----------------------------------------------------------------- full rebuild
    @contextmanager
    def rebuild(self, *, carry: Callable[[Document], bool] | None = None) -> Iterator[None]:
        """Write into a fresh collection; swap it in only if the block completes.

        ``carry`` selects documents of the serving collection to copy over with their vectors (and its
        sources' cursors), e.g. GitHub threads when the rebuild does not sync GitHub.
        """
        self._require_writable()
        self._drop_leftovers()
        old = self._active
        name = self._create_data_collection()
        self._target = name
        try:
            if old is not None and carry is not None:
                self._carry_over(old, name, carry)
            yield
            self._check_lease()  # a writer that lost its lease publishes nothing
        except BaseException:
            self._target = old
            self._drop(name)
            raise
        state = state_with(self._state(name), built_at=now_iso(), dirty=False)
        self._writable_meta().publish(name, state, active=True)
        self._active = name
        self._generation = str(state["generation"])
        if old is not None and old != name:
            self._drop(old)
        log.info("rebuilt index into %s", name)

    def _carry_over(self, old: str, new: str, carry: Callable[[Document], bool]) -> None:
        source, target = self._collection(old), self._collection(new)
        offset = 0
        while True:
            got = source.get(include=["documents", "embeddings", "metadatas"], limit=CHUNK, offset=offset)
            keep = [i for i, text in enumerate(got["documents"] or []) if carry(Document.model_validate_json(text))]
            if keep:
                target.upsert(
                    ids=[got["ids"][i] for i in keep],
                    embeddings=np.asarray([got["embeddings"][i] for i in keep], dtype=np.float32),
                    documents=[got["documents"][i] for i in keep],
                    metadatas=[got["metadatas"][i] for i in keep],
                )
            if len(got["ids"]) < CHUNK:
                break
            offset += CHUNK
        self._keep_cursors(old, new)

    def _drop(self, name: str) -> None:
        self._collections.pop(name, None)
        try:
            self._client.delete_collection(name)
        except Exception as exc:  # best effort: a leftover is dropped by the next rebuild
            log.warning("could not drop collection %s: %s", name, short_error(exc))
        try:
            if self._meta is not None:
                self._meta.drop_state(name)
        except Exception as exc:
            log.warning("could not drop state of %s: %s", name, short_error(exc))

    def _drop_leftovers(self) -> None:
        """Drop data collections of rebuilds that died before their swap."""
        for col in self._client.list_collections():
            name = col if isinstance(col, str) else col.name
            if name.startswith(f"{self._base}__g") and name != self._active:
                log.info("dropping leftover collection %s", name)
                self._drop(name)
