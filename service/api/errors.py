"""RFC 9457 problem details: one body builder, one handler per exception family.

Every error the API returns, whatever raised it, goes through :func:`problem_response`, so clients
see one shape: ``{"type", "title", "status", "detail", "instance"}`` plus optional extension members
(``errors`` for field validation problems).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from service.errors import DoctorError, InvalidInput

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"


def problem_body(
    status: int,
    detail: str,
    *,
    title: str | None = None,
    type_: str = "about:blank",
    instance: str | None = None,
    **extensions: Any,
) -> dict[str, Any]:
    """The one problem+json body: RFC 9457 members first, then extension members."""
    if title is None:
        try:
            title = HTTPStatus(status).phrase
        except ValueError:
            title = "Error"
    body: dict[str, Any] = {"type": type_, "title": title, "status": status, "detail": detail}
    if instance is not None:
        body["instance"] = instance
    body.update(extensions)
    return body


def problem_response(
    request: Request | None,
    status: int,
    detail: str,
    *,
    title: str | None = None,
    type_: str = "about:blank",
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """A problem+json response built with :func:`problem_body`."""
    instance = request.url.path if request is not None else None
    body = problem_body(status, detail, title=title, type_=type_, instance=instance, **extensions)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def _field_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors reduced to what a client needs: where, what; never the whole input echoed."""
    out = []
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        out.append({"loc": loc, "msg": str(err.get("msg", "invalid")), "type": str(err.get("type", ""))})
    return out[:20]


def describe_errors(errors: list[dict[str, Any]]) -> str:
    """One readable line naming each failing field."""
    parts = []
    for err in errors[:5]:
        where = ".".join(p for p in err["loc"] if p != "body") or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


async def _doctor_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DoctorError)
    if exc.status >= 500 and exc.status != 503:  # 503 while starting is expected, not news
        log.warning("%s: %s", type(exc).__name__, exc.detail)
    return problem_response(
        request,
        exc.status,
        exc.detail,
        title=exc.title,
        type_=exc.type_,
        headers=exc.headers,
        **exc.extensions,
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _field_errors(exc.errors())
    if any(err["type"] == "json_invalid" for err in errors):
        return problem_response(request, 400, "The body is not valid JSON.", title="Bad request")
    return problem_response(request, 422, describe_errors(errors), title="Invalid request", errors=errors)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = str(exc.detail)
    if exc.status_code == 404:
        detail = f"Nothing at {request.url.path[:200]}; the API is described at /docs."
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path[:200]}; see /docs."
    return problem_response(request, exc.status_code, detail, headers=dict(exc.headers or {}))


async def _client_gone(request: Request, exc: Exception) -> Response:
    # The client closed the connection before its request was read: nobody gets an answer, and it is
    # not a server error (a flood of them must not flood the log with tracebacks).
    log.debug("client disconnected during %s %s", request.method, request.url.path[:200])
    return Response(status_code=499)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # A bug, not the client's fault: log the traceback, return the shape without internals.
    log.exception("unhandled error on %s", request.url.path)
    return problem_response(request, 500, "An internal error occurred; see the server log.")


def install_error_handlers(app: FastAPI) -> None:
    """Route every error the app can raise through the problem+json builder."""
    app.add_exception_handler(DoctorError, _doctor_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _unexpected)


ModelT = TypeVar("ModelT", bound=BaseModel)


def validate_body(model: type[ModelT], data: dict[str, Any]) -> ModelT:
    """``data`` as ``model``; a 422 InvalidInput naming each failing field (never echoing the input)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [
            {"loc": ["body", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_input=False)
        ][:20]
        raise InvalidInput(describe_errors(errors), extensions={"errors": errors}) from None

