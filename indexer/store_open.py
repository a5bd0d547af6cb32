"""Opening the store: the locks, an empty or unreadable database, the probe before a full rebuild, and
the read-only copy a reader serves from on a full disk. A writer then heals what it opened
(indexer/store_health.py). The collection's reads and writes are in indexer/store.py.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from indexer.chroma_client import FIX, make_client, move_aside
from indexer.diskspace import OPEN_FAILED, disk_full, is_disk_full
from indexer.errors import DiskFull, StoreError
from indexer.lock import DataDirLock

if TYPE_CHECKING:
    from indexer.config import IndexSettings
    from indexer.embedding import Embedder
    from indexer.store import Store

log = logging.getLogger("indexer.store")


def empty_database(settings: IndexSettings) -> str | None:
    """The embedded store's sqlite file when it exists with zero bytes (a damaged store), else None."""
    path = settings.chroma_dir / "chroma.sqlite3"
    try:
        return str(path) if path.stat().st_size == 0 else None
    except OSError:
        return None


def probe_before_rebuild(settings: IndexSettings) -> Path | None:
    """Before a full rebuild opens the embedded store: move it aside when a probe process cannot open it.

    This process never opens a store chromadb hangs or fails on (reopening after such a failure is not
    safe in one process: indexer/probe.py). The writer holds the exclusive lock, so the probe takes none.
    """
    from indexer.probe import probe_store

    probe = probe_store(settings, timeout=settings.store_probe_timeout, lock=False)
    if not probe.failed:
        return None
    if is_disk_full(RuntimeError(probe.detail), settings.data_dir):
        raise disk_full(settings.data_dir, OPEN_FAILED)  # no corruption: keep the index where it serves
    return move_aside(settings, probe.detail)


def open_store(
    cls: type[Store],
    settings: IndexSettings,
    embedder: Embedder,
    *,
    read_only: bool = False,
    lock_timeout: float = 0.0,
    reset_if_corrupt: bool = False,
) -> Store:
    """Open (and, when writable, initialise and heal) the store (``Store.open``).

    An embedded store is locked for the Store's lifetime: shared when read-only, exclusive when
    writable (StoreLocked names the other process). A corrupt store raises StoreError naming the fix, unless
    ``reset_if_corrupt`` (a full rebuild), which moves the broken folder aside and starts empty.
    """
    from indexer.store_health import heal

    lock = None
    if not settings.chroma_url:
        # Readers share the data dir, a writer has it alone (see indexer/lock.py for why).
        lock = DataDirLock(settings.data_dir, exclusive=not read_only).acquire(timeout=lock_timeout)
        empty = empty_database(settings)
        if empty is not None and not reset_if_corrupt:
            lock.release()
            # chromadb would take a zero-byte file for a new database: every synced thread would be
            # gone and the first start would build the KB over it without a word.
            raise StoreError(
                f"the index database {empty} is empty (0 bytes: the disk was full, or a crash hit while it "
                f"was written); {FIX} (synced GitHub threads in it are lost: add --github to fetch them again)"
            )

    def load() -> Store:
        store = cls(
            make_client(settings), settings, embedder, read_only=read_only, lock=lock, lock_timeout=lock_timeout
        )
        try:
            store._load()
        except BaseException:
            if store._lease is not None:
                store._lease.release()
            raise
        return store

    try:
        moved: Path | None = None
        empty = empty_database(settings) if reset_if_corrupt and not settings.chroma_url else None
        if empty:
            moved = move_aside(settings, f"the index database {empty} is empty (0 bytes)")
        elif reset_if_corrupt and not settings.chroma_url:
            moved = probe_before_rebuild(settings)
        try:
            store = load()
        except DiskFull:
            if not read_only or lock is None:
                raise
            return open_copy(cls, settings, embedder, lock)
        except StoreError as exc:
            if not reset_if_corrupt or settings.chroma_url or isinstance(exc, DiskFull):
                raise  # a full disk is no corruption: moving the index aside would stop it serving
            moved = move_aside(settings, str(exc).removesuffix(f"; {FIX}"))  # this run is that fix
            store = load()
        store.moved_aside = moved
        if not read_only and not reset_if_corrupt:  # a full rebuild replaces the vectors anyway
            try:
                heal(store)
            except BaseException:
                store.close()
                raise
        return store
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def open_copy(cls: type[Store], settings: IndexSettings, embedder: Embedder, lock: DataDirLock) -> Store:
    """A reader on a full disk: the last committed index, served from a read-only copy elsewhere.

    chromadb cannot open a store on a full disk even to read it; the copy is made under the shared
    lock, which is then released (the copy is this reader's alone), and removed on close.
    """
    from indexer.diskspace import read_only_copy

    try:
        copy = read_only_copy(settings.chroma_dir)
    finally:
        lock.release()
    try:
        store = cls.open(settings.model_copy(update={"data_dir": copy}), embedder, read_only=True)
    except BaseException:
        shutil.rmtree(copy, ignore_errors=True)
        raise
    store.full_disk = (
        f"{disk_full(settings.data_dir, 'serving the last committed index from a read-only copy in ' + str(copy))}"
    )
    store._copy = copy
    log.warning("%s", store.full_disk)
    return store
