"""The indexer's exception family."""

from __future__ import annotations


class IndexerError(Exception):
    """Base of every error the indexer raises on purpose."""


class SnapshotError(IndexerError):
    """The bundled or given KB snapshot is malformed (the message names the line)."""


class StoreError(IndexerError):
    """The Chroma store is unreachable, corrupt or inconsistent."""


class DiskFull(StoreError):
    """A write found no space on the disk holding the data dir (the message names it and the free space)."""


class StoreLocked(IndexerError):
    """Another process holds the embedded store's write lock."""


class SyncError(IndexerError):
    """A GitHub sync failed; the watermark was not advanced past uncommitted data."""


class RateLimited(SyncError):
    """GitHub's rate limit stopped the sync; the next run resumes from the watermark."""


class EmbeddingError(IndexerError):
    """The embedding model could not be loaded or exported."""
