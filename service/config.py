"""Settings of the service and the CLI (env prefix ``GPTOSS_DOCTOR_``), on top of the indexer's own."""

from __future__ import annotations

import os
from datetime import timedelta

from pydantic import Field, SecretStr, field_validator

from indexer.config import PROJECT_ROOT, CsvList, IndexSettings, parse_duration, split_csv

__all__ = ["DEFAULT_PORT", "PROJECT_ROOT", "Settings", "load_settings", "parse_duration"]

DEFAULT_PORT = 20120
"""``serve``'s port: "20b / 120b", and no common LLM server's default (vLLM and Chroma 8000, llama.cpp and
TGI 8080, SGLang 30000, Ollama 11434, LM Studio 1234), so it starts on a host that already serves gpt-oss."""


class Settings(IndexSettings):
    """Every knob of gptoss-doctor: the index's (``IndexSettings``) plus the service's; each field reads
    ``GPTOSS_DOCTOR_<FIELD>`` from the environment."""

    reindex_interval: timedelta | None = Field(
        default=None,
        description="Re-sync period inside `serve` (e.g. 6h); unset or 0 turns it off.",
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
    log_level: str = Field(default="INFO", description="Python logging level.")

    @field_validator("cors_origins", "mcp_allowed_hosts", mode="before")
    @classmethod
    def _service_csv(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("reindex_interval", mode="before")
    @classmethod
    def _duration(cls, value: object) -> timedelta | None:
        return parse_duration(value)  # type: ignore[arg-type]


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
