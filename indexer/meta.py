"""The index's metadata, apart from its data collections: generations, per-source cursors, runs, leases.

It lives in Chroma next to the data, in ``<collection>__meta`` (small records with a 1-d dummy vector):

* ``active`` -> which data collection serves and its generation;
* ``state:<data collection>`` -> generation, the sources' cursors, built time, embedder, dirty marker;
* ``last_run`` -> the last run's outcome;
* on a Chroma server, ``lease:writer`` -> which process is writing (indexer/lease.py).

A source's cursor (indexer/sources/base.py) is stored in its collection's state record, written in the
same meta write that publishes the documents it covers. Stores written before cursors were generic kept
the GitHub sync's position as ``watermarks`` and ``github_synced_at``: :func:`read_cursors` reads those
as the ``github`` source's cursor, and the next write stores the new form.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from indexer.documents import SourceName

ACTIVE = "active"
LAST_RUN = "last_run"
CURSORS = "cursors"
LEGACY_KEYS = ("watermarks", "github_synced_at")
"""The GitHub-only fields stores kept before per-source cursors (migrated on read, deleted on write)."""

Cursor = dict[str, str]
"""A source's position, JSON-safe (GitHub: repository -> ISO time of the newest thread covered)."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def parse_time(value: Any) -> datetime | None:
    """An ISO timestamp (or a datetime) as a datetime; None when missing or unreadable."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


@dataclass(frozen=True)
class SourceCursor:
    """Where one source stands in one data collection: its cursor and when it last committed."""

    cursor: Cursor = field(default_factory=dict)
    synced_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"cursor": dict(self.cursor), "synced_at": self.synced_at}


def read_cursors(state: Mapping[str, Any]) -> dict[str, SourceCursor]:
    """The sources' cursors of a state record; a record from before generic cursors migrates here."""
    raw = state.get(CURSORS)
    if raw:
        return {
            name: SourceCursor(dict(value.get("cursor") or {}), value.get("synced_at") or None)
            for name, value in json.loads(raw).items()
        }
    marks = json.loads(state.get("watermarks") or "{}")
    synced = state.get("github_synced_at") or None
    if marks or synced:
        return {SourceName.GITHUB.value: SourceCursor(dict(marks), synced)}
    return {}


def cursors_field(cursors: Mapping[str, SourceCursor]) -> dict[str, Any]:
    """State fields holding ``cursors`` (the legacy GitHub fields are left out: see :func:`state_with`)."""
    return {CURSORS: json.dumps({k: v.as_json() for k, v in sorted(cursors.items())}, sort_keys=True)}


def state_with(state: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """``state`` updated by ``changes``, in the current form (legacy GitHub fields folded into cursors)."""
    cursors = read_cursors(state)
    out = {k: v for k, v in state.items() if k not in LEGACY_KEYS}
    out |= {k: None for k in LEGACY_KEYS if k in state}  # Chroma merges metadata: None deletes a key
    out |= cursors_field(cursors)
    return out | changes


@dataclass(frozen=True)
class StoreStatus:
    """What the index holds and how its last run went: /v1/index/status, ``doctor`` and the engine read it."""

    documents: int = 0
    issues: int = 0
    built_at: datetime | None = None
    generation: str = ""
    embedder: str | None = None
    cursors: Mapping[str, SourceCursor] = field(default_factory=dict)
    store: Literal["server", "embedded"] = "embedded"
    location: str = ""
    last_run: dict[str, Any] | None = None
    dirty: bool = False
    """Set while a writer is between writing documents and publishing them: still set when no writer runs
    means one stopped mid-write (killed), and the vectors may be incomplete."""
    full_disk: str | None = None
    """Set when this reader serves a read-only copy because the disk is full (what to do about it)."""

    def synced_at(self, source: str) -> datetime | None:
        """When ``source`` last committed into the served collection."""
        found = self.cursors.get(source)
        return parse_time(found.synced_at) if found else None

    @property
    def github_synced_at(self) -> datetime | None:
        return self.synced_at(SourceName.GITHUB)

    @property
    def watermarks(self) -> Cursor:
        """The GitHub sync's position per repository."""
        found = self.cursors.get(SourceName.GITHUB)
        return dict(found.cursor) if found else {}


class IndexMeta:
    """The meta collection: records by id, one state record per data collection, the active pointer."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def get(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        got = self.collection.get(ids=list(ids), include=["metadatas"])
        return {i: dict(m or {}) for i, m in zip(got["ids"], got["metadatas"] or [], strict=False)}

    def write(self, records: Mapping[str, Mapping[str, Any]]) -> None:
        ids = list(records)
        self.collection.upsert(ids=ids, embeddings=[[1.0]] * len(ids), metadatas=[dict(records[i]) for i in ids])

    def active(self) -> dict[str, Any] | None:
        """``{"collection": ..., "generation": ...}`` of the serving data collection, None before the first."""
        return self.get([ACTIVE]).get(ACTIVE)

    def state(self, name: str) -> dict[str, Any]:
        return self.get([f"state:{name}"]).get(f"state:{name}", {})

    def update_state(self, name: str, **changes: Any) -> dict[str, Any]:
        state = state_with(self.state(name), **changes)
        self.write({f"state:{name}": state})
        return state

    def publish(self, name: str, state: Mapping[str, Any], *, active: bool) -> None:
        """Write a collection's state, and point ``active`` at it (with its generation) when it serves."""
        records: dict[str, Mapping[str, Any]] = {f"state:{name}": state}
        if active:
            records[ACTIVE] = {"collection": name, "generation": state["generation"]}
        self.write(records)

    def new_state(self, name: str, embedder: str, dimension: int) -> dict[str, Any]:
        """The state record of a fresh data collection: a new generation, no cursors, clean."""
        state = {
            "generation": new_generation(),
            "created_at": now_iso(),
            CURSORS: "{}",
            "dirty": False,
            "embedder": embedder,
            "dimension": dimension,
        }
        self.write({f"state:{name}": state})
        return state

    def drop_state(self, name: str) -> None:
        self.collection.delete(ids=[f"state:{name}"])

    def cursors(self, name: str) -> dict[str, SourceCursor]:
        return read_cursors(self.state(name))

    def last_run(self) -> dict[str, Any] | None:
        record = self.get([LAST_RUN]).get(LAST_RUN)
        return json.loads(record["json"]) if record and record.get("json") else None

    def record_run(self, outcome: Mapping[str, Any]) -> None:
        self.write({LAST_RUN: {"json": json.dumps(outcome, default=str), "at": now_iso()}})


def new_generation() -> str:
    return uuid.uuid4().hex[:16]


def merged_cursor(state: Mapping[str, Any], source: str, cursor: Mapping[str, str]) -> dict[str, Any]:
    """State fields after ``source`` committed up to ``cursor`` (its keys replace the stored ones) now."""
    cursors = read_cursors(state)
    old = cursors.get(source, SourceCursor())
    cursors[source] = SourceCursor({**old.cursor, **cursor}, now_iso())
    return cursors_field(cursors)
