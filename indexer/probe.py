"""Open the embedded store in a child process first, bounded in time, before this process opens it.

chromadb's native code is not safe to reopen in one process after a failure: a retried start-up hung
in ``Collection.count()`` holding the GIL (so ``/health`` stopped answering), and a damaged sqlite made
its bindings fail with an AttributeError (issue 16, finding 2). A child process that hangs or crashes
takes nothing with it: it is killed after ``timeout`` seconds and its verdict decides whether this
process opens the store, reports it (``serve`` keeps answering ``/health``), or moves it aside
(``index --full``).

``python -m indexer.probe CHROMA_DIR COLLECTION [--lock DATA_DIR]`` is the child: it opens the store,
counts every collection of the index and exits 0, or prints one line naming the problem and exits 1
(2 when another process holds the store's lock: no verdict).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from indexer.config import IndexSettings

LOCKED = 2

Verdict = Literal["ok", "locked", "unreadable", "timeout"]


@dataclass
class Probe:
    """What the child found: ``ok``, ``locked`` (no verdict), ``unreadable`` or ``timeout``, and why."""

    verdict: Verdict
    detail: str = ""
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.verdict in ("unreadable", "timeout")


def probe_store(settings: IndexSettings, *, timeout: float, lock: bool = True) -> Probe:
    """Open the embedded store in a child process killed after ``timeout`` s; ``ok`` when there is nothing to open.

    ``lock``: the child takes the data dir's shared lock (pass False when this process already holds it
    exclusively, as a writer does).
    """
    return RunningProbe(settings, timeout=timeout, lock=lock).result()


class RunningProbe:
    """A probe started now and collected later, so the caller can work meanwhile (``serve`` loads its model)."""

    def __init__(self, settings: IndexSettings, *, timeout: float, lock: bool = True) -> None:
        self.chroma_dir = settings.chroma_dir
        self.timeout = timeout
        self.started = time.monotonic()
        self._child: subprocess.Popen[bytes] | None = None
        database = settings.chroma_dir / "chroma.sqlite3"
        if settings.chroma_url or not database.is_file() or database.stat().st_size == 0:
            # Nothing to open yet, or an empty file chromadb would initialise: Store.open reports that one.
            return
        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "indexer.probe", str(settings.chroma_dir), settings.collection]
        if lock:
            command += ["--lock", str(settings.data_dir)]
        # Files, not pipes: a chatty native crash can never block the child while nobody reads.
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._child = subprocess.Popen(command, env=env, stdout=self._out, stderr=self._err, start_new_session=True)

    def result(self) -> Probe:
        """Wait for the verdict (the rest of ``timeout`` at most; a child still running then is killed)."""
        child = self._child
        if child is None:
            return Probe("ok")
        left = max(0.0, self.timeout - (time.monotonic() - self.started))
        try:
            child.wait(timeout=left)
        except subprocess.TimeoutExpired:
            _kill(child)
            return Probe(
                "timeout",
                f"opening the index at {self.chroma_dir} did not finish within {self.timeout:g}s in a probe "
                "process (chromadb hung on it; the probe was killed)",
                time.monotonic() - self.started,
            )
        seconds = time.monotonic() - self.started
        out, err = (_read(f) for f in (self._out, self._err))
        if child.returncode == 0:
            return Probe("ok", seconds=seconds)
        if child.returncode == LOCKED:
            return Probe("locked", out.strip(), seconds)
        lines = [line for line in (out + "\n" + err).splitlines() if line.strip()]
        if child.returncode < 0:
            detail = f"chromadb crashed opening it (signal {-child.returncode})"
        else:
            detail = lines[0] if out.strip() else (lines[-1] if lines else f"exit status {child.returncode}")
        return Probe("unreadable", f"the index at {self.chroma_dir} cannot be read ({detail[:300]})", seconds)


def _read(handle: IO[bytes]) -> str:
    handle.seek(0)
    text = handle.read().decode(errors="replace")
    handle.close()
    return text


def _kill(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)  # its own session: nothing it started survives
    except ProcessLookupError:
        pass
    child.wait()


def _check(chroma_dir: str, collection: str) -> None:
    """Open the store and read every collection of the index, as a start-up does."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    from indexer.chroma_client import stall_for_tests

    stall_for_tests()  # a test's injected hang happens where chromadb's did: opening the store
    client = chromadb.PersistentClient(
        path=chroma_dir, settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    )
    for item in client.list_collections():
        name = item if isinstance(item, str) else item.name
        if name.startswith(f"{collection}__"):
            col = client.get_collection(name, embedding_function=None)
            col.count()
            col.get(limit=1, include=["documents"])


def main(argv: list[str]) -> int:
    from indexer.chroma_client import short_error
    from indexer.errors import StoreLocked
    from indexer.lock import DataDirLock

    chroma_dir, collection = argv[0], argv[1]
    lock = None
    if len(argv) > 3 and argv[2] == "--lock":
        try:
            lock = DataDirLock(Path(argv[3]), exclusive=False).acquire()
        except StoreLocked as exc:
            print(str(exc), flush=True)
            return LOCKED
    try:
        _check(chroma_dir, collection)
    except BaseException as exc:
        print(short_error(exc), flush=True)
        return 1
    finally:
        if lock is not None:
            lock.release()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
