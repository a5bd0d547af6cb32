"""``POST /lookup``: a JSON request or a ``text/plain`` body in, a diagnosis out.

The body is read here, not by FastAPI, for two reasons: the size limit must hold before the body is in
memory (Content-Length first, then a running count over the stream, which catches chunked uploads),
and one endpoint accepts two media types.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Annotated, Any

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, Query, Request, Response

from service.api.errors import PROBLEM_JSON, validate_body
from service.config import Settings
from service.deps import EngineDep, SettingsDep, require_read_token
from service.engine import Lane, LookupEngine
from service.errors import BadInput, InputTooLarge, InvalidInput
from service.models import EXAMPLE_ERROR, LookupRequest, LookupResponse

router = APIRouter(tags=["lookup"])

_PROBLEM = {"content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}
_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": LookupRequest.model_json_schema(),
            "examples": {
                "log line": {"summary": "A vLLM log line", "value": {"error": EXAMPLE_ERROR, "top_k": 5}},
                "client error": {
                    "summary": "A client exception carrying the server message",
                    "value": {
                        "error": "litellm.InternalServerError: OpenAIException - Error code: 500 - "
                        "{'code': 500, 'message': 'Expected 2 output messages (reasoning and final), "
                        "but got 3.', 'object': 'error'}",
                        "repos": ["vllm-project/vllm"],
                    },
                },
            },
        },
        "text/plain": {
            "schema": {"type": "string", "minLength": 1},
            "example": EXAMPLE_ERROR,
        },
    },
}


async def read_limited_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) anything over ``limit`` bytes before it is all in memory."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadInput("Content-Length must be a whole number of bytes.") from None
        if size > limit:
            raise _refuse(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _refuse(limit)
    return bytes(body)


def _refuse(limit: int) -> InputTooLarge:
    """The 413, with the limit as a member (``max_body_bytes``) so a client can resend a tail that fits."""
    detail = (
        f"The body is over {limit:,} bytes. Send only the error and the last few hundred log lines "
        "(e.g. `... 2>&1 | tail -200`)."
    )
    return InputTooLarge(detail, headers={"Connection": "close"}, extensions={"max_body_bytes": limit})


def parse_lookup_request(
    body: bytes, content_type: str | None, *, top_k: int | None = None, repos: list[str] | None = None
) -> LookupRequest:
    """A validated LookupRequest from a JSON or text/plain body (400 malformed, 422 invalid fields)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if not media:
        # No Content-Type: curl --data-binary @log.txt; accept JSON objects, otherwise plain text.
        media = "application/json" if body.lstrip()[:1] == b"{" else "text/plain"
    if media == "application/json" or media.endswith("+json"):
        try:
            data = json.loads(body)
        except UnicodeDecodeError:
            raise BadInput("The body is not UTF-8 encoded.") from None
        except (json.JSONDecodeError, RecursionError) as exc:
            message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise BadInput(f"The body is not valid JSON ({message}).") from None
        except ValueError:
            # json.loads refuses an integer of over 4,300 digits (int() conversion limit) this way.
            raise BadInput("The body holds a number too long to read (over 4,300 digits).") from None
        if not isinstance(data, dict):
            raise InvalidInput('The JSON body must be an object like {"error": "..."}.')
    elif media.startswith("text/"):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput("The body is not UTF-8 encoded.") from None
        data = {"error": text, "top_k": 5 if top_k is None else top_k, "repos": repos}
    else:
        raise BadInput(
            f"Unsupported Content-Type {media[:80]!r}: send application/json "
            '{"error": "..."} or the error itself as text/plain.'
        )
    return validate_body(LookupRequest, data)


@router.post(
    "/lookup",
    response_model=LookupResponse,
    summary="Diagnose an error string or a log",
    description="Paste one error line, a client exception, a traceback or a whole log (up to 1 MB) as JSON "
    '`{"error": ...}` or as a `text/plain` body (then `top_k` and `repos` may come as query parameters). '
    "The answer names the origin, decodes the Harmony tokens the message mentions, ranks the known issues, "
    "and lists fixes and advice, each with its sources.",
    openapi_extra={"requestBody": _REQUEST_BODY},
    responses={
        400: {"description": "Malformed body (not JSON, not UTF-8, unsupported type)", **_PROBLEM},
        401: {"description": "A read token is configured and was not sent", **_PROBLEM},
        413: {"description": "Body over the size limit", **_PROBLEM},
        422: {
            "description": "Fields fail validation (blank error, top_k out of 1..50, bad repo)",
            **_PROBLEM,
        },
        503: {"description": "Still starting; retry after the Retry-After seconds", **_PROBLEM},
    },
    dependencies=[Depends(require_read_token)],
)
async def lookup(
    request: Request,
    engine: EngineDep,
    settings: SettingsDep,
    top_k: Annotated[int | None, Query(ge=1, le=50, description="text/plain bodies: issues to return")] = None,
    repos: Annotated[list[str] | None, Query(description="text/plain bodies: only these owner/name repos")] = None,
) -> Response:
    """Read and validate the body here, then run the (blocking) engine in the thread pool.

    The answer is serialised to JSON in that thread too and returned as a ready Response, so FastAPI
    neither validates the freshly built model again nor encodes it on the event loop (issue 17);
    ``response_model`` still documents the shape.
    """
    body = await read_limited_body(request, settings.max_body_bytes)
    req = parse_lookup_request(body, request.headers.get("content-type"), top_k=top_k, repos=repos)
    limiter = _lane_limiter(request, settings, engine.lane(req.error))
    content = await anyio.to_thread.run_sync(partial(_answer_json, engine, req), limiter=limiter)
    return Response(content, media_type="application/json")


def _answer_json(engine: LookupEngine, req: LookupRequest) -> bytes:
    """The engine's answer as the JSON bytes FastAPI would have sent for ``response_model``."""
    return engine.lookup(req.error, req.top_k, req.repos).model_dump_json().encode()


def _lane_limiter(request: Request, settings: Settings, lane: Lane) -> anyio.CapacityLimiter:
    """The thread limiter of ``lane``: a lookup waits for its lane here, without holding a thread.

    The default thread pool (40 threads) is shared with /health and every sync handler: lookups queued
    in it would starve them, and long ones would starve short ones. Created on first use, in the loop.
    """
    limiters: dict[Lane, anyio.CapacityLimiter] | None = getattr(request.app.state, "lane_limiters", None)
    if limiters is None:
        limiters = {
            "short": anyio.CapacityLimiter(settings.lookup_concurrency),
            "long": anyio.CapacityLimiter(settings.long_lookup_concurrency),
        }
        request.app.state.lane_limiters = limiters
    return limiters[lane]
