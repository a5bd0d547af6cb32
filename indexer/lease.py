"""One writer at a time on a Chroma server: a lease record in the index's meta collection.

The embedded store is guarded by a file lock (indexer/lock.py). A Chroma server is shared over the
network: the indexer may run as a cron job on one host while service replicas re-sync on a schedule or
take an admin rebuild on others. Two writers at once would undo each other (a full rebuild drops
collections it takes for leftovers of a dead run, and each swap points the index at its own).

Chroma has no compare-and-set, so the lease is claimed optimistically: read the record; if nobody
holds it (or the holder's lease expired), write ours, wait ``settle`` seconds and read it back. Of two
writers claiming at once, the later write wins and the earlier writer sees it on reading back and
backs off. A heartbeat thread renews the lease every ``ttl / 3`` seconds; a writer that dies leaves a
lease that expires after ``ttl`` seconds. Before the steps that publish its work, a writer checks that
the lease is still its own (a writer paused for longer than ``ttl`` may have lost it). Expiry is wall
clock time: hosts sharing a server need synchronised clocks, as for any lease.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from indexer.errors import StoreLocked
from indexer.lock import holder_info

log = logging.getLogger(__name__)

KEY = "lease:writer"
LEASE_TTL = 60.0
"""Seconds a lease lives without renewal: how long a dead writer blocks the next one."""
LEASE_SETTLE = 0.5
"""Seconds between writing a claim and reading it back."""
_POLL = 1.0


class WriterLease:
    """The writer lease on one index's meta collection. Use :meth:`acquire`, then :meth:`release`."""

    def __init__(self, meta: Any, location: str, *, ttl: float = LEASE_TTL, settle: float = LEASE_SETTLE) -> None:
        self._meta = meta
        self.location = location
        self.ttl = ttl
        self.settle = settle
        self.owner = uuid.uuid4().hex
        self.lost = False
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    # ------------------------------------------------------------------ record
    def _read(self) -> dict[str, Any] | None:
        got = self._meta.get(ids=[KEY], include=["metadatas"])
        metadatas = got.get("metadatas") or []
        return dict(metadatas[0]) if got.get("ids") and metadatas and metadatas[0] else None

    def _write(self, since: str) -> None:
        record = holder_info("write") | {"owner": self.owner, "since": since, "expires": time.time() + self.ttl}
        self._meta.upsert(ids=[KEY], embeddings=[[1.0]], metadatas=[record])

    def _refusal(self, holder: dict[str, Any]) -> str:
        left = max(0.0, float(holder.get("expires", 0.0)) - time.time())
        return (
            f"another indexer is writing the index at {self.location}: pid {holder.get('pid')} on "
            f"{holder.get('host')} ({holder.get('command') or 'unknown command'}) since {holder.get('since')}; "
            f"try again when it has finished (its lease lapses {left:.0f}s after it stops renewing it)"
        )

    # ------------------------------------------------------------------ acquire / release
    def acquire(self, timeout: float = 0.0) -> WriterLease:
        """Claim the lease, waiting up to ``timeout`` seconds; StoreLocked names the holder."""
        deadline = time.monotonic() + max(0.0, timeout)
        since = datetime.now(UTC).isoformat(timespec="seconds")
        while True:
            holder = self._read()
            if holder is None or holder.get("owner") == self.owner or float(holder.get("expires", 0.0)) < time.time():
                if holder is not None and holder.get("owner") != self.owner:
                    log.warning(
                        "taking over the expired writer lease of pid %s on %s", holder.get("pid"), holder.get("host")
                    )
                self._write(since)
                time.sleep(self.settle)
                holder = self._read()
                if holder is not None and holder.get("owner") == self.owner:
                    self._start_heartbeat()
                    return self
            if time.monotonic() >= deadline:
                raise StoreLocked(self._refusal(holder or {}))
            time.sleep(min(_POLL, max(0.0, deadline - time.monotonic())))

    def check(self) -> None:
        """Raise StoreLocked unless the lease is still ours (call before publishing work)."""
        holder = self._read()
        if self.lost or holder is None or holder.get("owner") != self.owner:
            self.lost = True
            raise StoreLocked(
                f"this indexer lost its writer lease on {self.location} (paused or cut off for over "
                f"{self.ttl:g}s); another writer took over, so nothing of this run was published"
            )

    def release(self) -> None:
        """Stop renewing and give the lease back if it is still ours."""
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)
            self._heartbeat = None
        try:
            holder = self._read()
            if holder is not None and holder.get("owner") == self.owner:
                self._meta.delete(ids=[KEY])
        except Exception as exc:  # the server went away: the lease lapses by itself
            log.warning("could not release the writer lease on %s: %s", self.location, exc)

    # ------------------------------------------------------------------ heartbeat
    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._renew, name="writer-lease", daemon=True)
        self._heartbeat.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                holder = self._read()
                if holder is None or holder.get("owner") != self.owner:
                    self.lost = True
                    log.error("the writer lease on %s was taken over; this run will not publish", self.location)
                    return
                self._write(str(holder.get("since", "")))
            except Exception as exc:  # a blip: the next beat retries well before the lease lapses
                log.warning("could not renew the writer lease on %s: %s", self.location, exc)
