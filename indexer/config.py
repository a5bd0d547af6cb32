"""The indexer's settings: where the index lives, what it embeds with, which GitHub threads it syncs.

The service's ``Settings`` (``service/config.py``) extends this class with its own knobs, so one environment
(``GPTOSS_DOCTOR_*``) configures both; the indexer itself never imports the service.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from platformdirs import user_data_dir
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout (or install prefix) that holds ``skill/`` and ``reference/``."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: str | int | float | timedelta | None) -> timedelta | None:
    """Parse ``90``, ``30s``, ``15m``, ``6h`` or ``1d``; empty, ``0`` or ``off`` mean disabled."""
    if value is None or isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        return timedelta(seconds=value) if value > 0 else None
    text = value.strip().lower()
    if text in {"", "0", "off", "none", "false"}:
        return None
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"invalid duration {value!r}: use e.g. 30s, 15m, 6h or 1d")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return timedelta(seconds=seconds) if seconds > 0 else None


def split_csv(value: object) -> object:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; lists pass through (for ``mode="before"`` validators)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


CsvList = Annotated[list[str], NoDecode]


class IndexSettings(BaseSettings):
    """The index's knobs; each field reads ``GPTOSS_DOCTOR_<FIELD>`` from the environment."""

    model_config = SettingsConfigDict(
        env_prefix="GPTOSS_DOCTOR_", extra="ignore", validate_default=True, populate_by_name=True
    )

    data_dir: Path = Field(
        default_factory=lambda: Path(user_data_dir("gptoss-doctor")),
        description="Where the embedded Chroma store, the lexical index, watermarks, the Harmony vocab "
        "and the ONNX model cache live.",
    )
    chroma_url: str | None = Field(
        default=None,
        description="http://host:port of a Chroma server (`chroma run`); unset uses the embedded store "
        "under data_dir.",
    )
    collection: str = Field(default="gptoss_doctor", description="Chroma collection name.")
    docs_dir: Path = Field(
        default=PROJECT_ROOT,
        description="Folder holding skill/ and reference/ (the markdown that is indexed and packaged).",
    )
    repos: CsvList = Field(
        default=["vllm-project/vllm", "openai/harmony"],
        description="GitHub repositories to sync, comma-separated owner/name.",
    )
    github_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("GPTOSS_DOCTOR_GITHUB_TOKEN", "GITHUB_TOKEN", "github_token"),
        description="Optional GitHub token (GPTOSS_DOCTOR_GITHUB_TOKEN or GITHUB_TOKEN); never logged.",
    )
    github_api_url: str = Field(
        default="https://api.github.com",
        description="GitHub REST API base URL (GitHub Enterprise: https://host/api/v3).",
    )
    github_labels: CsvList = Field(
        default=["gpt-oss"], description="Labels that select threads in repos that are not taken whole."
    )
    github_keywords: CsvList = Field(
        default=["harmony", "gpt-oss", "HarmonyError"],
        description="Search keywords that select threads in repos that are not taken whole.",
    )
    github_whole_repos: CsvList = Field(
        default=["openai/harmony"], description="Repositories whose every issue and PR is synced."
    )
    github_timeout: float = Field(default=20.0, gt=0, description="Seconds per GitHub request.")
    github_retries: int = Field(default=3, ge=0, description="Retries for GitHub 5xx and timeouts.")
    github_max_wait: float = Field(
        default=60.0,
        ge=0,
        description="Longest wait (seconds) for a GitHub rate-limit reset before stopping cleanly.",
    )
    store_probe_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a probe process may take to open the embedded store before `serve`, `doctor` or "
        "`index --full` opens it; a hung or crashed probe is reported (or, for --full, the index moved aside).",
    )
    embedding_backend: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="auto: ONNX int8 when it exports and matches torch (cosine >= 0.99), else torch.",
    )
    model_path: Path | None = Field(
        default=None,
        description="Sentence-transformers model folder; default the bundled all-MiniLM-L6-v2.",
    )

    @field_validator("repos", "github_labels", "github_keywords", "github_whole_repos", mode="before")
    @classmethod
    def _csv(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("repos", "github_whole_repos")
    @classmethod
    def _owner_name(cls, value: list[str]) -> list[str]:
        for repo in value:
            if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
                raise ValueError(f"repository {repo!r} is not owner/name")
        return value

    @field_validator("chroma_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"chroma_url {value!r} must look like http://host:port")
        return value

    @property
    def vocab_dir(self) -> Path:
        """Folder holding the verified ``o200k_base.tiktoken`` for openai-harmony."""
        return self.data_dir / "harmony-vocab"

    @property
    def chroma_dir(self) -> Path:
        """Folder of the embedded Chroma store."""
        return self.data_dir / "chroma"

    @property
    def model_cache_dir(self) -> Path:
        """Folder of the exported ONNX model."""
        return self.data_dir / "models"
