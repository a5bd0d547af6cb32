"""A full disk, recognised however it surfaces, and said in one line naming the place and its free space.

A write that runs out of space rarely says so at the top: sqlite reports ``database or disk is full``,
the OS ``ENOSPC``, and chromadb's Rust core wraps either in an ``Error in compaction`` that names
neither. So the whole exception chain is read, and when nothing in it is specific, the free space of
the data dir decides (issue 16, finding 9: a full disk ended in a long traceback about compaction).
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from indexer.errors import DiskFull, IndexerError, StoreError

FULL_WORDS = ("database or disk is full", "no space left on device", "disk quota exceeded")
"""What sqlite and the OS say when a write finds no space (lowercase)."""
LOW_SPACE = 64 * 1024 * 1024
"""Free bytes below which an unexplained write failure is taken for a full disk."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__]


def free_bytes(path: Path) -> int | None:
    """Free space on the file system holding ``path`` (or its nearest existing parent); None when unknown."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def is_disk_full(exc: BaseException, path: Path | None = None) -> bool:
    """True when ``exc`` (or anything in its chain) is a write that found no space under ``path``."""
    for item in _chain(exc):
        if isinstance(item, DiskFull):
            return True
        if isinstance(item, OSError) and item.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(word in str(item).lower() for word in FULL_WORDS):
            return True
    free = free_bytes(path) if path is not None else None
    return free is not None and free < LOW_SPACE


def _size(count: int | None) -> str:
    if count is None:
        return "unknown"
    size = float(count)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


RUN_STOPPED = "the index run stopped and the last committed index keeps serving"
OPEN_FAILED = "the index could not be opened"


def disk_full(path: Path, what: str = RUN_STOPPED) -> DiskFull:
    """The one error a full disk under ``path`` gives: where, how much is free, ``what`` happened, the fix."""
    return DiskFull(
        f"the disk holding {path} is full ({_size(free_bytes(path))} free): {what}; free some space, then run "
        "`gptoss-doctor index` again"
    )


@contextmanager
def disk_full_errors(path: Path) -> Iterator[None]:
    """Turn any error a full disk under ``path`` caused into :func:`disk_full`'s (the chain is kept).

    Little free space explains only a failed write: an error the indexer raised on purpose for another
    reason (another process holds the store, GitHub, the KB snapshot, the model) stays what it is unless
    its own chain says the disk is full.
    """
    try:
        yield
    except DiskFull:
        raise
    except Exception as exc:
        on_purpose = isinstance(exc, IndexerError) and not isinstance(exc, StoreError)
        if is_disk_full(exc, None if on_purpose else path):
            raise disk_full(path) from exc
        raise


OPEN_ROOM = 4 * 1024 * 1024
"""Free bytes below which a reader serving a read-only copy does not yet try to open the real store again."""
COPY_MARGIN = 16 * 1024 * 1024
"""Room a read-only copy of the index needs beyond its own size (chromadb's journal files)."""


def read_only_copy(chroma_dir: Path) -> Path:
    """A copy of the embedded store in a temporary folder on a file system with room; DiskFull when none has.

    chromadb cannot open a store on a full disk even to read it (starting its bindings writes), so a
    reader serves the last committed index from a copy instead (issue 16, finding 9). The caller holds
    the data dir's shared lock (no writer is between its writes) and removes the copy when it closes.
    """
    import tempfile

    size = sum(item.stat().st_size for item in chroma_dir.rglob("*") if item.is_file())
    for place in dict.fromkeys([tempfile.gettempdir(), "/dev/shm"]):
        free = free_bytes(Path(place))
        if not Path(place).is_dir() or free is None or free < size + COPY_MARGIN:
            continue
        target = Path(tempfile.mkdtemp(prefix="gptoss-doctor-full-disk-", dir=place))
        try:
            shutil.copytree(chroma_dir, target / "chroma")
        except OSError:
            shutil.rmtree(target, ignore_errors=True)
            continue
        return target
    raise disk_full(chroma_dir.parent, f"{OPEN_FAILED} (and no temporary folder has room for a read-only copy)")
