"""Inter-process locking of the embedded store's data dir: many readers or one writer.

Chroma's embedded store is single-process: a process that has a collection open keeps its vector
index in memory and does not see another process's writes to it (its dense search goes stale), and
two writers would interleave. So:

* a process that reads the store (``serve``, ``lookup``) holds a *shared* lock while it is open;
* a writer (``index``) needs the *exclusive* lock and is refused with StoreLocked, naming the holder,
  while another process reads or writes;
* inside one process the lock is shared by every Store on that data dir: ``serve``'s scheduler
  upgrades the process's shared lock to exclusive for a run and downgrades it afterwards.

POSIX ``flock`` does the work; where it is missing (Windows) writers fall back to ``filelock`` and
readers take no lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from indexer.errors import StoreLocked

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".lock"
HOLDERS = ".lock-holders"
_POLL = 0.05


@dataclass
class _ProcessLock:
    """This process's hold on one data dir."""

    fd: int | None = None
    readers: int = 0
    writers: int = 0
    fallback: object | None = None  # filelock.FileLock where flock is missing


_LOCKS: dict[Path, _ProcessLock] = {}
_GUARD = threading.RLock()


def holder_info(mode: str) -> dict[str, object]:
    """Who holds a lock or lease: pid, host, mode, command line and since when (shown in refusals)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "mode": mode,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200],
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DataDirLock:
    """A shared (reader) or exclusive (writer) hold on a data dir. Re-entrant inside a process."""

    def __init__(self, data_dir: Path, *, exclusive: bool) -> None:
        self.data_dir = data_dir
        self.exclusive = exclusive
        self.path = (data_dir / LOCK_NAME).resolve()
        self.holders = self.path.parent / HOLDERS
        self._held = False

    # ------------------------------------------------------------------ acquire / release
    def acquire(self, timeout: float = 0.0) -> DataDirLock:
        """Take the lock, waiting up to ``timeout`` seconds; StoreLocked names who holds it."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            with _GUARD:
                if self._try():
                    self._held = True
                    return self
            if time.monotonic() >= deadline:
                raise StoreLocked(self.refusal())
            time.sleep(_POLL)

    def release(self) -> None:
        """Give back this hold; the file lock goes (or downgrades) with the process's last holder."""
        if not self._held:
            return
        self._held = False
        with _GUARD:
            state = _LOCKS[self.path]
            if self.exclusive:
                state.writers -= 1
            else:
                state.readers -= 1
            if state.writers == 0 and state.fallback is not None:
                state.fallback.release()  # type: ignore[attr-defined]
                state.fallback = None
            if state.fd is None:
                if state.readers == 0 and state.writers == 0:
                    del _LOCKS[self.path]
                return
            if state.writers == 0 and state.readers > 0:
                fcntl.flock(state.fd, fcntl.LOCK_SH)  # downgrade: never blocks, we held it exclusively
                self._record("read")
            elif state.writers == 0:
                self._forget()
                fcntl.flock(state.fd, fcntl.LOCK_UN)
                os.close(state.fd)
                del _LOCKS[self.path]

    def _try(self) -> bool:
        state = _LOCKS.setdefault(self.path, _ProcessLock())
        if self.exclusive and state.writers:
            state.writers += 1
            return True
        if not self.exclusive and (state.readers or state.writers):
            state.readers += 1
            return True
        if fcntl is None:  # pragma: no cover - Windows: writers only
            return self._try_fallback(state)
        if state.fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            state.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        mode = fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(state.fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if state.readers:
                # Linux drops the shared lock when an upgrade fails: take it back (other holders are
                # readers too, so this does not block).
                with contextlib.suppress(BlockingIOError):
                    fcntl.flock(state.fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            else:
                os.close(state.fd)
                state.fd = None
                del _LOCKS[self.path]
            return False
        if self.exclusive:
            state.writers += 1
        else:
            state.readers += 1
        self._record("write" if self.exclusive else "read")
        return True

    def _try_fallback(self, state: _ProcessLock) -> bool:  # pragma: no cover - Windows
        if not self.exclusive:
            state.readers += 1
            return True
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.path), thread_local=False)
        try:
            lock.acquire(timeout=0, blocking=False)
        except Timeout:
            return False
        state.fallback = lock
        state.writers += 1
        self._record("write")
        return True

    # ------------------------------------------------------------------ who holds it
    def _record(self, mode: str) -> None:
        try:
            self.holders.mkdir(parents=True, exist_ok=True)
            (self.holders / f"{os.getpid()}.json").write_text(json.dumps(holder_info(mode)))
        except OSError:
            pass  # naming the holder is a courtesy; the lock itself is the flock

    def _forget(self) -> None:
        with contextlib.suppress(OSError):
            (self.holders / f"{os.getpid()}.json").unlink()

    def current_holders(self) -> list[dict[str, object]]:
        """Other live processes recorded as holding the lock (stale records are skipped)."""
        found: list[dict[str, object]] = []
        for record in sorted(self.holders.glob("*.json")) if self.holders.is_dir() else []:
            try:
                info = json.loads(record.read_text())
                pid = int(info["pid"])
            except (OSError, ValueError, KeyError):
                continue
            if pid != os.getpid() and _alive(pid):
                found.append(info)
        return found

    def refusal(self) -> str:
        """Why the lock could not be taken and what to do about it."""
        holders = self.current_holders()
        who = (
            "; ".join(f"pid {h['pid']} (`{h['command']}`, {h['mode']}ing since {h['since']})" for h in holders)
            or "another process"
        )
        if self.exclusive:
            return (
                f"the index in {self.data_dir} is held by {who}. The embedded store has one writer and no "
                "readers beside it: wait for that process to finish, or when it is `gptoss-doctor serve`, "
                "let it re-index (GPTOSS_DOCTOR_REINDEX_INTERVAL or its admin re-sync) or stop it first. "
                "To index beside running services, use a Chroma server (GPTOSS_DOCTOR_CHROMA_URL)."
            )
        return (
            f"the index in {self.data_dir} is being written by {who}; retry when that run finishes "
            "(or use a Chroma server, GPTOSS_DOCTOR_CHROMA_URL, to read while indexing)."
        )

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
