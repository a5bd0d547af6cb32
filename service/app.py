"""The FastAPI app factory. Importing this module is cheap; everything heavy opens in the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi

from service.api.drain import DrainRefusedBody
from service.api.errors import install_error_handlers
from service.api.identity import IdentifyMiddleware
from service.api.routes import check, docs, lookup, reference, status, ui
from service.config import Settings, load_settings
from service.models import Problem
from service.runtime import Loader, Runtime, default_loader
from service.scheduler import Runner, default_runner

log = logging.getLogger(__name__)

DESCRIPTION = """Diagnose failures of gpt-oss models served with vLLM (Harmony format errors).

`POST /lookup` takes an error line, a client exception or a whole log and returns where it comes
from, the decoded Harmony tokens, the known GitHub issues that match, fixes and advice, each with
its sources. Errors are RFC 9457 `application/problem+json`.
"""


def create_app(
    settings: Settings | None = None,
    *,
    loader: Loader = default_loader,
    runner: Runner = default_runner,
    retry_delays: tuple[float, ...] | None = None,
) -> FastAPI:
    """Build the app. The lifespan starts loading in a background thread so the port answers at once.

    ``loader`` opens the engine (default: bundled model, store, Harmony; first start builds the index)
    and ``runner`` performs index runs for the scheduler and the admin endpoints; tests pass their own.
    """
    settings = settings or load_settings()
    runtime = Runtime(
        settings, loader=loader, runner=runner, **({"retry_delays": retry_delays} if retry_delays else {})
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime.start_background()
        try:
            yield
        finally:
            runtime.shutdown()

    app = FastAPI(
        title="gptoss-doctor",
        version=_version(),
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by routes.docs from packaged assets: FastAPI's pages need a CDN
        redoc_url=None,
    )
    app.state.runtime = runtime
    install_error_handlers(app)
    app.include_router(lookup.router)
    app.include_router(check.router)
    app.include_router(status.router)
    app.include_router(ui.router)
    app.include_router(reference.router)
    app.include_router(docs.router)
    from service.api.mcp_mount import mount_mcp  # the MCP SDK loads only when an app is built

    mount_mcp(app, settings, lambda: runtime.engine, not_ready_detail=runtime.not_ready_detail)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_middleware(DrainRefusedBody)  # a 413 reaches clients that send the whole body first (urllib)
    app.add_middleware(IdentifyMiddleware, version=app.version)  # outermost: errors and CORS replies carry it

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = Problem.model_json_schema()
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gptoss-doctor")
    except PackageNotFoundError:
        return "0.0.0"
