"""The store's health on open: a writer heals the serving collection when a run died mid-write or its
vectors fail the self-check, by re-embedding every document into a fresh collection (the rebuild's
swap). ``serve`` and ``doctor`` run the same self-check (``Store.vector_problem``).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

import numpy as np

from indexer.chroma_client import short_error
from indexer.documents import Document
from indexer.errors import StoreError

if TYPE_CHECKING:
    from indexer.store import Store

log = logging.getLogger("indexer.store")

SELF_CHECK = 8
"""Stored vectors a writer looks up again when it opens the store: each must find its own document."""
SELF_MATCH = 0.99
"""The similarity a stored vector must have to its own record (it is the same vector: 1.0 but for rounding)."""
TEXT_MATCH = 0.95
"""The cosine a stored vector must have to its text embedded again (ONNX int8 and torch agree to >= 0.99)."""


def heal(store: Store) -> None:
    """Repair the serving collection when a writer died mid-write or its vectors fail the self-check.

    A killed run leaves the dirty marker (set before the first write, cleared when the generation is
    published); its documents are all stored, but its vectors cannot be trusted (issue 16: dense search
    degraded while every document was there). The repair re-embeds every document into a fresh
    collection and swaps it in, so "a killed run loses nothing" holds for the vectors too.
    """
    if store._active is None:
        return
    if store._state(store._active).get("dirty"):
        repair(store, "a run stopped mid-write (killed?)")
        return
    problem = vector_problem(store)
    if problem is not None:
        repair(store, problem)


def vector_problem(store: Store, sample: int = SELF_CHECK) -> str | None:
    """Why dense search over the served collection is damaged, from sampled documents; None when sound.

    Each sampled document's stored vector must come back as its own nearest neighbour (or an
    identical twin's) and must match its text embedded again: a vector index that lost entries, or
    vectors that no longer belong to their documents, fail this while every document is still
    readable. Costs ``sample`` queries and one small embedding batch.
    """
    if store._active is None:
        return None
    try:
        col = store._collection(store._active)
        ids = col.get(include=[])["ids"]
        if not ids:
            return None
        picked = random.sample(ids, min(sample, len(ids)))
        got = col.get(ids=picked, include=["embeddings", "documents"])
        stored = np.asarray(got["embeddings"], dtype=np.float32).reshape(len(got["ids"]), -1)
        lost = sorted(set(picked) - set(got["ids"]))
        for doc_id, vector in zip(got["ids"], stored, strict=True):
            hits = store.query(vector, 1)
            if not hits or hits[0][1] < SELF_MATCH:
                lost.append(doc_id)
        stale = []
        if _embedded_by_this_model(store) and got["ids"]:
            texts = [Document.model_validate_json(text).text for text in got["documents"] or []]
            fresh = store.embedder.encode(texts)
            for doc_id, old, new in zip(got["ids"], stored, fresh, strict=True):
                cosine = float(old @ new) / max(float(np.linalg.norm(old) * np.linalg.norm(new)), 1e-12)
                if cosine < TEXT_MATCH:
                    stale.append(doc_id)
    except StoreError as exc:
        return f"the vector self-check failed ({exc})"
    except Exception as exc:
        return f"the vector self-check failed ({short_error(exc)})"
    problems = []
    if lost:
        problems.append(f"{len(lost)} of {len(picked)} sampled documents are not found by their own vector")
    if stale:
        problems.append(f"{len(stale)} of {len(picked)} sampled vectors do not match their document's text")
    return f"{'; '.join(problems)} (e.g. {(lost or stale)[0]})" if problems else None


def _embedded_by_this_model(store: Store) -> bool:
    """True when the served vectors come from this embedder's model family and dimension."""
    state = store._state(str(store._active))
    family = str(state.get("embedder") or "").split("/", 1)[0]
    same_dimension = int(state.get("dimension") or 0) == store.embedder.dimension
    return family == store.embedder.name.split("/", 1)[0] and same_dimension


def repair(store: Store, reason: str) -> None:
    """Re-embed every served document into a fresh collection and swap it in (the rebuild's swap).

    Documents, cursors and times are kept: only the vectors are made again. A repair that dies in
    turn leaves the damaged collection serving, still marked, and the next writer repairs it.
    """
    old = str(store._active)
    state = store._state(old)
    docs = store.documents()
    log.warning("the index at %s needs repair: %s; re-embedding its %d documents", store.location, reason, len(docs))
    with store.rebuild():
        target = store._writable_target()
        store._keep_cursors(old, target)
        store._apply(docs, progress=None)
    if state.get("built_at"):  # the documents date from the killed run's build, not from now
        store._update_state(str(store._active), built_at=state["built_at"])
    log.warning("repaired the index at %s (%d documents re-embedded)", store.location, len(docs))
