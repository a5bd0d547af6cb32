"""``POST /v1/check``: a setup in (command, args line, request body or model config files), findings out.

It needs no index, so it answers while the service is still starting.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Request

from service.api.errors import PROBLEM_JSON, validate_body
from service.api.routes.lookup import read_limited_body
from service.check import CheckInputError, check_request
from service.check.facts import MAX_CHECK_CHARS
from service.check.models import EXAMPLE_COMMAND, CheckRequest, CheckResponse
from service.deps import SettingsDep, require_read_token
from service.errors import BadInput, InvalidInput

router = APIRouter(tags=["check"])

_PROBLEM = {"content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}
_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": CheckRequest.model_json_schema(),
            "examples": {
                "command": {"summary": "A vllm serve command line", "value": {"input": EXAMPLE_COMMAND}},
                "request": {
                    "summary": "A Chat Completions request body, as a string",
                    "value": {"input": json.dumps({"model": "openai/gpt-oss-20b", "messages": [], "ignore_eos": True})},
                },
                "model files": {
                    "summary": "A model folder's generation_config.json",
                    "value": {"generation_config": {"eos_token_id": [200002, 199999]}},
                },
            },
        },
        "text/plain": {"schema": {"type": "string", "minLength": 1}, "example": EXAMPLE_COMMAND},
    },
}
MAX_CHECK_BODY = MAX_CHECK_CHARS * 4 + 65_536
"""Bytes: the input text (UTF-8, up to 4 bytes a character) plus JSON framing and config files."""


def parse_check_request(body: bytes, content_type: str | None) -> CheckRequest:
    """A validated CheckRequest from a JSON or text/plain body (400 malformed, 422 invalid fields)."""
    media = (content_type or "").split(";", 1)[0].strip().lower() or "text/plain"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("The body is not UTF-8 encoded.") from None
    if media == "application/json" or media.endswith("+json"):
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)[:200]
            raise BadInput(f"The body is not valid JSON ({message}).") from None
        if not isinstance(data, dict):
            raise InvalidInput('The JSON body must be an object like {"input": "vllm serve ..."}.')
    elif media.startswith("text/"):
        data = {"input": text}
    else:
        raise BadInput(f"Unsupported Content-Type {media[:80]!r}: send application/json or text/plain.")
    return validate_body(CheckRequest, data)


@router.post(
    "/v1/check",
    response_model=CheckResponse,
    summary="Check a vLLM command, a request body or model files before they fail",
    description="Send a `vllm serve` command line, the 'non-default args: {...}' line vLLM logs at start-up, or "
    "a Chat Completions / Responses request body (as `input`, or as a `text/plain` body), or a model's "
    "`generation_config` / `config`. The kind is detected. Each finding is a rule of the reference docs' known "
    "problems: its severity, the change to make, the versions it applies to and its sources.",
    openapi_extra={"requestBody": _REQUEST_BODY},
    responses={
        400: {"description": "Malformed body (not JSON, not UTF-8, unsupported type)", **_PROBLEM},
        401: {"description": "A read token is configured and was not sent", **_PROBLEM},
        413: {"description": "Body over the size limit", **_PROBLEM},
        422: {"description": "Not a setup check can read (the detail says why)", **_PROBLEM},
    },
    dependencies=[Depends(require_read_token)],
)
async def check(request: Request, settings: SettingsDep) -> CheckResponse:
    """Read and validate the body, then check it against the known problems."""
    body = await read_limited_body(request, min(settings.max_body_bytes, MAX_CHECK_BODY))
    req = parse_check_request(body, request.headers.get("content-type"))
    try:
        return await anyio.to_thread.run_sync(check_request, req, settings.docs_dir)
    except CheckInputError as exc:
        raise InvalidInput(str(exc)) from None
