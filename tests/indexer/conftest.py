"""Fixtures for the indexer tests (the Chroma server and real model fixtures live in tests/fakes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import Settings
from tests.fakes import HashingEmbedder, chroma_server, real_embedder  # noqa: F401  (fixtures)

SKILL = """---
name: tiny-skill
description: A tiny skill used by the indexer tests.
---

# Tiny skill

Start here.

## Diagnose

Run `gptoss-doctor lookup` with the error.
"""

REFERENCE = """# Known issues

Intro paragraph.

## Harmony token errors

### Unexpected token 200002

The server logs `openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006`.
See vllm-project/vllm#22519 and https://github.com/openai/harmony/issues/60.

```bash
vllm serve openai/gpt-oss-20b --tool-call-parser openai
```

## Tool calls

Use `--enable-auto-tool-choice` with `KeyError: 'tool_calls'` in mind.
"""


def write_docs(root: Path, reference: str = REFERENCE, skill: str = SKILL) -> Path:
    """A docs dir with skill/SKILL.md and reference/known-issues.md."""
    (root / "skill").mkdir(parents=True, exist_ok=True)
    (root / "reference").mkdir(parents=True, exist_ok=True)
    (root / "skill" / "SKILL.md").write_text(skill)
    (root / "reference" / "known-issues.md").write_text(reference)
    return root


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    return write_docs(tmp_path / "docs")


@pytest.fixture
def settings(docs_dir: Path) -> Settings:
    return Settings(docs_dir=docs_dir)


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(dimension=64)
