"""Chroma clients: the embedded store or a ``chroma run`` server, with bounded timeouts and clear errors."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from indexer.diskspace import OPEN_FAILED, disk_full, is_disk_full
from indexer.errors import StoreError

if TYPE_CHECKING:
    from indexer.config import IndexSettings

log = logging.getLogger(__name__)

FIX = "rebuild it with `gptoss-doctor index --full`"
"""What every error about an unreadable index tells the user to do."""
STALL_ENV = "GPTOSS_DOCTOR_TEST_STORE_STALL"
"""Fault injection for tests only: opening the embedded store hangs this many seconds with the GIL held."""


def stall_for_tests() -> None:
    """Hang as chromadb's native code did on a retried open (issue 16, finding 2), when STALL_ENV asks to.

    The sleep is libc's, called through ``ctypes.PyDLL``, which keeps the GIL for the call: every other
    thread of the process stops too, as it did in ``Collection.count()``. So a test that injects it shows
    whether the hang reaches a process that must stay responsive (the server), not only the probe.
    """
    seconds = os.environ.get(STALL_ENV)
    if seconds:
        import ctypes

        ctypes.PyDLL(None).sleep(int(float(seconds)))


def load_library() -> None:
    """Import chromadb and the bindings its embedded client loads on the first open (about 0.8 s in a
    cold process), so a caller can do it beside other start-up work; the open imports whatever is left."""
    import chromadb  # noqa: F401

    with contextlib.suppress(ImportError):  # a module of chromadb 1.x, not part of its public API
        import chromadb.api.rust  # noqa: F401


def make_client(settings: IndexSettings) -> Any:
    """A Chroma client: HttpClient for a server URL, else the embedded PersistentClient."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if settings.chroma_url:
        return _http_client(settings.chroma_url, chroma_settings)
    stall_for_tests()
    try:
        settings.chroma_dir.mkdir(parents=True, exist_ok=True)
        return _persistent_client(chromadb, str(settings.chroma_dir), chroma_settings)
    except Exception as exc:
        if is_disk_full(exc, settings.data_dir):
            raise disk_full(settings.data_dir, OPEN_FAILED) from exc
        raise StoreError(f"the index at {settings.chroma_dir} cannot be opened ({short_error(exc)}); {FIX}") from exc


def _persistent_client(chromadb: Any, path: str, chroma_settings: Any) -> Any:
    """``chromadb.PersistentClient(path)``, never leaving a System that failed to start in chromadb's cache.

    chromadb caches one System per path *before* starting it, and keeps it when starting fails (a full
    disk, a damaged sqlite). Every later client for that path in this process then reuses the broken
    System: an AttributeError ('RustBindingsAPI' object has no attribute 'bindings') or a hang in native
    code, even after the disk was cleared or the file restored (issue 16, finding 2). So a System this
    call created and that failed is dropped from the cache, and the next open starts a fresh one.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    systems: dict[str, Any] = getattr(SharedSystemClient, "_identifier_to_system", {})
    cached_before = path in systems
    try:
        return chromadb.PersistentClient(path=path, settings=chroma_settings)
    except BaseException:
        if not cached_before:  # a System another client of this path uses is never touched
            failed = systems.pop(path, None)
            getattr(SharedSystemClient, "_identifier_to_refcount", {}).pop(path, None)
            if failed is not None:
                try:
                    failed.stop()
                except Exception:  # it never started: nothing to stop
                    pass
        raise


HTTP_TIMEOUT = (3.0, 10.0)
"""(connect, read/write) seconds for each request to a Chroma server."""


def _http_client(chroma_url: str, chroma_settings: Any) -> Any:
    """An HttpClient for ``chroma_url`` whose creation, like every later request, is bounded in time.

    Creating the client already asks the server for its tenant and database, before
    :func:`_bound_http` can give the session timeouts: against a server that accepts connections but
    never answers (a paused process), that request would wait forever and hang the service's start-up.
    So the creation runs in a daemon thread that is abandoned after the connect + read timeout.
    """
    from urllib.parse import urlparse

    import chromadb

    url = urlparse(chroma_url)
    outcome: dict[str, Any] = {}

    def connect() -> None:
        try:
            outcome["client"] = chromadb.HttpClient(
                host=url.hostname or "localhost",
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        except Exception as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=connect, name="chroma-connect", daemon=True)
    worker.start()
    deadline = sum(HTTP_TIMEOUT)
    worker.join(deadline)
    if worker.is_alive():
        raise StoreError(
            f"the Chroma server at {chroma_url} did not answer within {deadline:g}s (paused, overloaded or unreachable)"
        )
    if "error" in outcome:
        raise StoreError(
            f"cannot reach the Chroma server at {chroma_url}: {short_error(outcome['error'])}"
        ) from outcome["error"]
    client = outcome["client"]
    _bound_http(client)
    return client


def _bound_http(client: Any) -> None:
    """Give the Chroma HTTP client timeouts: chromadb's default (httpx ``timeout=None``) waits forever,
    so a hung or unreachable server would hang the service's lookups and health checks with it."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):
        connect, read = HTTP_TIMEOUT
        session.timeout = httpx.Timeout(read, connect=connect)


THREADS_LOST = "synced GitHub threads it held are not carried over (`gptoss-doctor index --github` fetches them again)"
"""What a rebuild that moved an unreadable store aside tells the user: its synced threads are gone from the index."""


def move_aside(settings: IndexSettings, reason: str) -> Path:
    """Move a corrupt embedded store out of the way (kept for inspection) so a rebuild can start.

    Returns where it went. The rebuild starts from the docs and the bundled KB only, so the warning says
    the synced threads are lost (the caller also puts it in the run's summary).
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    target = settings.chroma_dir.with_name(f"chroma.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    log.warning("%s: moved it to %s and rebuilding; %s", reason, target, THREADS_LOST)
    SharedSystemClient.clear_system_cache()
    shutil.move(str(settings.chroma_dir), str(target))
    return target


def short_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text[:200]}"
