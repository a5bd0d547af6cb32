"""The embedded store's inter-process write lock (one writer per data dir; clear refusal otherwise)."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from indexer.errors import StoreLocked

LOCK_NAME = ".write.lock"


class WriteLock:
    """An exclusive lock on a data dir, re-entrant inside one process (any thread).

    Re-entrant because ``serve`` holds the store for its lifetime and its scheduler runs
    ``build_index`` in the same process; two processes never write the same embedded store.
    """

    _held: dict[Path, tuple[FileLock, int]] = {}
    _guard = threading.Lock()

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = (data_dir / LOCK_NAME).resolve()
        self.owner_path = self.path.with_name(LOCK_NAME + ".owner")
        self._acquired = False

    def acquire(self, timeout: float = 0.0) -> WriteLock:
        """Take the lock or raise StoreLocked naming the holder; ``timeout`` seconds to wait."""
        with self._guard:
            held = self._held.get(self.path)
            if held is not None:
                self._held[self.path] = (held[0], held[1] + 1)
                self._acquired = True
                return self
            self.data_dir.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.path), thread_local=False, is_singleton=False)
            try:
                lock.acquire(timeout=timeout, blocking=timeout > 0)
            except Timeout as exc:
                raise StoreLocked(self._refusal()) from exc
            self._held[self.path] = (lock, 1)
            self._acquired = True
            owner = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200],
                "since": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            self.owner_path.write_text(json.dumps(owner))
            return self

    def release(self) -> None:
        """Release one level; the file lock goes when the last holder in this process releases."""
        if not self._acquired:
            return
        self._acquired = False
        with self._guard:
            lock, count = self._held[self.path]
            if count > 1:
                self._held[self.path] = (lock, count - 1)
                return
            del self._held[self.path]
            self.owner_path.unlink(missing_ok=True)
            lock.release()

    def _refusal(self) -> str:
        holder = "another process"
        try:
            owner = json.loads(self.owner_path.read_text())
            holder = f"pid {owner['pid']} on {owner['host']} (`{owner['command']}`, since {owner['since']})"
        except (OSError, ValueError, KeyError):
            pass
        return (
            f"the index in {self.data_dir} is held by {holder}. Only one process may write the embedded "
            "store: wait for that run to finish, or when it is `gptoss-doctor serve`, let it re-index "
            "(GPTOSS_DOCTOR_REINDEX_INTERVAL or its admin re-sync) or stop it first. To index beside "
            "running services, use a Chroma server (GPTOSS_DOCTOR_CHROMA_URL)."
        )

    def __enter__(self) -> WriteLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
