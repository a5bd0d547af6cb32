"""Run the ``gptoss-doctor`` console script in a child process with the hashing embedder.

``python tests/reliability/cli_child.py lookup TEXT`` behaves exactly like ``gptoss-doctor lookup TEXT``
except that the bundled model is replaced by the deterministic fake, so a test can watch the real
process (exit code, stderr, tracebacks) without paying for the model.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import indexer.build  # noqa: E402
import indexer.embedding  # noqa: E402
from service.cli import main  # noqa: E402
from tests.fakes import HashingEmbedder  # noqa: E402


def _fake(settings: object, **_: object) -> HashingEmbedder:
    return HashingEmbedder()


indexer.embedding.load_embedder = _fake
indexer.build.load_embedder = _fake

if __name__ == "__main__":
    main()
