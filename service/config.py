"""Settings shared by the indexer, the service and the CLI (env prefix ``GPTOSS_DOCTOR_``)."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from platformdirs import user_data_dir
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout (or install prefix) that holds ``skill/`` and ``reference/``."""

DEFAULT_PORT = 20120
"""``serve``'s port: "20b / 120b", and no common LLM server's default (vLLM and Chroma 8000, llama.cpp and
TGI 8080, SGLang 30000, Ollama 11434, LM Studio 1234), so it starts on a host that already serves gpt-oss."""

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


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


CsvList = Annotated[list[str], NoDecode]


class Settings(BaseSettings):
    """Every knob of gptoss-doctor; each field reads ``GPTOSS_DOCTOR_<FIELD>`` from the environment."""

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
    reindex_interval: timedelta | None = Field(
        default=None,
        description="Re-sync period inside `serve` (e.g. 6h); unset or 0 turns it off.",
    )
    embedding_backend: Literal["auto", "onnx", "torch"] = Field(
        default="auto",
        description="auto: ONNX int8 when it exports and matches torch (cosine >= 0.99), else torch.",
    )
    model_path: Path | None = Field(
        default=None,
        description="Sentence-transformers model folder; default the bundled all-MiniLM-L6-v2.",
    )
    host: str = Field(default="127.0.0.1", description="Address `serve` binds.")
    port: int = Field(default=DEFAULT_PORT, ge=1, le=65535, description="Port `serve` binds.")
    admin_token: SecretStr | None = Field(
        default=None, description="Bearer token for admin endpoints (re-sync, rebuild); unset disables them."
    )
    read_token: SecretStr | None = Field(
        default=None, description="Bearer token required for lookups when set; unset leaves them open."
    )
    cors_origins: CsvList = Field(default=[], description="Allowed CORS origins, comma-separated; off when empty.")
    lookup_concurrency: int = Field(
        default_factory=lambda: max(2, min(8, os.cpu_count() or 2)),
        ge=1,
        le=64,
        description="Lookups computed at once (default: CPU cores, 2 to 8); more wait their turn, which "
        "keeps latency and memory steady under load.",
    )
    long_input_chars: int = Field(
        default=65_536,
        ge=1,
        description="Inputs longer than this many characters are computed in the long-input lane, so "
        "pasted logs never take the slots that short lookups need.",
    )
    long_lookup_concurrency: int = Field(
        default=1, ge=1, le=64, description="Long-input lookups computed at once; more wait their turn."
    )
    lookup_budget: float = Field(
        default=10.0,
        gt=0,
        description="Seconds of work per lookup; steps not started by then are skipped and the answer "
        "lists them in `partial`.",
    )
    max_body_bytes: int = Field(
        default=1_048_576, gt=0, description="Largest accepted /lookup body in bytes (413 above it)."
    )
    header_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a client has to send a request's headers; slower (or stalled) connections are "
        "closed.",
    )
    body_timeout: float = Field(
        default=30.0, gt=0, description="Seconds a client has to send a request body once its headers arrived."
    )
    max_connections: int = Field(
        default=512,
        ge=1,
        description="Open connections `serve` accepts at once; more are closed on arrival, so file "
        "descriptors never run out.",
    )
    mcp_allowed_hosts: CsvList = Field(
        default=[],
        description="Host header values /mcp accepts besides 127.0.0.1, localhost and [::1] (e.g. the name a "
        "reverse proxy forwards: doctor.example.com, or doctor.example.com:* for any port).",
    )
    store_probe_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a probe process may take to open the embedded store before `serve`, `doctor` or "
        "`index --full` opens it; a hung or crashed probe is reported (or, for --full, the index moved aside).",
    )
    log_level: str = Field(default="INFO", description="Python logging level.")

    @field_validator(
        "repos", "github_labels", "github_keywords", "github_whole_repos", "cors_origins", "mcp_allowed_hosts",
        mode="before",
    )
    @classmethod
    def _csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("repos", "github_whole_repos")
    @classmethod
    def _owner_name(cls, value: list[str]) -> list[str]:
        for repo in value:
            if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
                raise ValueError(f"repository {repo!r} is not owner/name")
        return value

    @field_validator("reindex_interval", mode="before")
    @classmethod
    def _duration(cls, value: object) -> timedelta | None:
        return parse_duration(value)  # type: ignore[arg-type]

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


def load_settings(**overrides: object) -> Settings:
    """Build Settings from the environment, turning validation errors into one clear message."""
    from pydantic import ValidationError

    from service.errors import ConfigError

    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(
            f"GPTOSS_DOCTOR_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from exc
