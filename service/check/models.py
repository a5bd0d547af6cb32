"""The request and response shapes of ``POST /v1/check`` (also the CLI's ``--json`` and the MCP tool)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.check.facts import MAX_CHECK_CHARS

EXAMPLE_COMMAND = "vllm serve openai/gpt-oss-120b --tool-call-parser openai --enable-auto-tool-choice"


class CheckRequest(BaseModel):
    """A setup to check: a command line, a start-up args line or a request body, and/or model files."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"input": EXAMPLE_COMMAND}]},
    )

    input: str | None = Field(
        default=None,
        max_length=MAX_CHECK_CHARS,
        description="A `vllm serve` command line, vLLM's 'non-default args: {...}' start-up line, or a JSON "
        "request body for Chat Completions or the Responses API. The kind is detected.",
        examples=[EXAMPLE_COMMAND],
    )
    generation_config: dict[str, Any] | None = Field(
        default=None, description="The model folder's generation_config.json, as a JSON object."
    )
    config: dict[str, Any] | None = Field(default=None, description="The model folder's config.json.")

    @model_validator(mode="after")
    def _something(self) -> CheckRequest:
        if not (self.input and self.input.strip()) and self.generation_config is None and self.config is None:
            raise ValueError("send `input` (a command, args line or request body) or the model's config files")
        return self


Severity = Literal["error", "warning", "info"]


class ChangeOut(BaseModel):
    """What to change, typed like the lookup's actions."""

    action: Literal["set", "unset", "avoid", "upgrade", "check"] = Field(examples=["set"])
    target: str = Field(description="A server flag, env var, request parameter, package or model file.")
    value: str | None = Field(default=None, examples=["openai"])


class FindingOut(BaseModel):
    """One thing a known problem says to change in this setup."""

    severity: Severity = Field(
        description="error: the setup shows the condition and breaks the rule; warning: the rule holds if the "
        "condition does (e.g. if requests carry tools); info: worth knowing."
    )
    title: str = Field(description="The known problem's title.")
    message: str = Field(description="What is wrong and what to do, in one line.")
    change: ChangeOut
    when: str = Field(description="The condition under which the rule applies (always, tools, offline, ...).")
    applies_to: str | None = Field(default=None, description="Version range it holds for, e.g. 'vllm < 0.10.2'.")
    found: list[str] = Field(
        default=[],
        description="What the setup has for the target now, e.g. ['hermes'] where the parser should be 'openai'; "
        "empty when the target is not set.",
    )
    problem: str = Field(description="The reference section: reference/<doc>.md#anchor.")
    sources: list[str] = Field(min_length=1, description="The reference section and the issues backing the rule.")


class CheckResponse(BaseModel):
    """The findings for one setup, errors first."""

    kind: Literal["command", "args-line", "request", "model"] = Field(description="What the input was read as.")
    read: list[str] = Field(default=[], description="What was read from the input, and what was not found.")
    model: str | None = None
    versions: dict[str, str] = Field(default={}, description="Versions the input states.")
    flags: dict[str, str] = Field(default={}, description="Server flags the input sets.")
    findings: list[FindingOut]
    errors: int = Field(ge=0)
    warnings: int = Field(ge=0)
    ok: bool = Field(description="True when there is no error and no warning.")
