"""Annotated dependencies: the runtime, the engine, settings and the bearer-token checks.

Tests replace any of these through ``app.dependency_overrides``. They are ``async def`` because none
of them blocks: FastAPI runs a plain ``def`` dependency in the thread pool, and four such hops per
lookup cost more than the checks themselves (issue 17).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request

from service.config import Settings
from service.engine import LookupEngine, require_ready
from service.errors import Disabled, Unauthorized
from service.runtime import Runtime
from service.scheduler import Scheduler


async def get_runtime(request: Request) -> Runtime:
    """The app's runtime (engine, scheduler, start-up state), created by ``create_app``."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_settings(runtime: RuntimeDep) -> Settings:
    """The settings the app was created with."""
    return runtime.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_engine(runtime: RuntimeDep) -> LookupEngine:
    """The lookup engine; 503 + Retry-After while the index is loading or being built."""
    return require_ready(runtime.engine, runtime.not_ready_detail())


EngineDep = Annotated[LookupEngine, Depends(get_engine)]


async def get_scheduler(runtime: RuntimeDep) -> Scheduler:
    """The index run scheduler; 503 until the service is ready."""
    require_ready(runtime.engine, runtime.not_ready_detail())
    assert runtime.scheduler is not None
    return runtime.scheduler


SchedulerDep = Annotated[Scheduler, Depends(get_scheduler)]


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if any."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison, so response timing says nothing about the token."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def require_read_token(request: Request, settings: SettingsDep) -> None:
    """Lookups stay open unless ``GPTOSS_DOCTOR_READ_TOKEN`` is set."""
    if settings.read_token is None:
        return
    if not token_matches(bearer_token(request), settings.read_token.get_secret_value()):
        raise Unauthorized("This service requires a bearer token (Authorization: Bearer <token>).", headers=_CHALLENGE)


async def require_admin_token(request: Request, settings: SettingsDep) -> None:
    """Admin endpoints need ``GPTOSS_DOCTOR_ADMIN_TOKEN``; they are disabled (403) when it is unset."""
    if settings.admin_token is None:
        raise Disabled("Admin endpoints are disabled: set GPTOSS_DOCTOR_ADMIN_TOKEN to enable them.")
    if not token_matches(bearer_token(request), settings.admin_token.get_secret_value()):
        raise Unauthorized(
            "A valid admin bearer token is required (Authorization: Bearer <token>).", headers=_CHALLENGE
        )
