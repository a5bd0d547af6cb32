"""An index run in a child process that stops in the middle of writing and waits to be killed.

``python tests/reliability/index_kill_child.py`` runs ``build_index`` (docs + bundled KB, settings from
the GPTOSS_DOCTOR_* environment) with the hashing embedder; on its third embedding batch (some documents
are stored by then, and the store is marked dirty) it prints ``writing`` and sleeps, so the test can
SIGKILL it at a point where a real run is busy writing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402

from indexer.build import build_index  # noqa: E402
from service.config import Settings  # noqa: E402
from tests.fakes import HashingEmbedder  # noqa: E402

STALL_AT = 2
"""Embedding batches that complete before the run stalls."""


class StallingEmbedder(HashingEmbedder):
    """The hashing embedder, stalling (as if killed while busy) on batch STALL_AT + 1."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls == STALL_AT:
            print("writing", flush=True)
            time.sleep(600)
        return super().encode(texts)


if __name__ == "__main__":
    build_index(Settings(), embedder=StallingEmbedder(), github=False, progress=False)
