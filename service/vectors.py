"""The dense leg in memory: one index generation's vectors, searched with one matrix-vector product.

The engine loads a generation's vectors once, when it picks that generation up, so a lookup never
calls the store: exact cosine search over a few thousand 384-d rows takes tens of microseconds (numpy
releases the GIL for it), where a Chroma query cost about a millisecond of mostly GIL-held Python on
every lookup (issue 17). It also means a store outage only delays the next generation, never a lookup:
the engine keeps answering from the vectors it holds and reports the store's health (issue 14).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class VectorSource(Protocol):
    """What a store offers to load a generation's vectors (``indexer.store.Store`` implements it)."""

    def vectors(self) -> tuple[list[str], np.ndarray]: ...


class VectorIndex:
    """Exact cosine search over the rows of one generation (rows and queries are L2-normalised here)."""

    def __init__(self, ids: Sequence[str], matrix: np.ndarray) -> None:
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or len(ids) != matrix.shape[0]:
            raise ValueError(f"{len(ids)} ids for vectors of shape {matrix.shape}")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self._ids = list(ids)
        self._matrix = np.ascontiguousarray(matrix / np.clip(norms, 1e-12, None))

    @classmethod
    def from_store(cls, store: VectorSource) -> VectorIndex:
        """Every vector the store serves (one read per generation)."""
        ids, matrix = store.vectors()
        return cls(ids, matrix)

    def __len__(self) -> int:
        return len(self._ids)

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest rows as (id, cosine similarity), best first (as ``Store.query`` answers)."""
        k = min(k, len(self._ids))
        if k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        sims = self._matrix @ query
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        ids = self._ids
        return [(ids[i], sim) for i, sim in zip(top.tolist(), sims[top].tolist(), strict=True)]
