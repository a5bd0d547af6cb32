"""Hermetic defaults: every path the code writes points into the test's tmp_path; no network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_VOCAB_CACHE = Path(os.environ.get("GPTOSS_DOCTOR_TEST_CACHE", "/tmp/gptoss-doctor-test-cache"))


@pytest.fixture(autouse=True)
def _hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point GPTOSS_DOCTOR_DATA_DIR at tmp_path and drop any ambient configuration."""
    for name in list(os.environ):
        if name.startswith("GPTOSS_DOCTOR_") and name != "GPTOSS_DOCTOR_TEST_CACHE":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    data_dir = tmp_path / "data"
    monkeypatch.setenv("GPTOSS_DOCTOR_DATA_DIR", str(data_dir))
    return data_dir
