"""``/docs`` (Swagger UI) and ``/redoc`` with their assets served here: both work with no network.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so on an offline host they stay blank. The
assets come from the ``fastapi-offline`` package (PyPI), which ships the Swagger UI and ReDoc
distribution files; only its static folder is used, FastAPI builds the pages.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response

from service.errors import NotFound

ASSET_PREFIX = "/docs/assets"
_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
_TITLE = "gptoss-doctor API"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' blob:; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
"""Nothing from another origin: ReDoc's sidebar would otherwise fetch its logo from a CDN. The pages'
own bootstrap is an inline script, hence 'unsafe-inline' (no user data reaches these pages)."""

router = APIRouter(tags=["docs"], include_in_schema=False)


@lru_cache(maxsize=len(_ASSETS))
def _asset(name: str) -> bytes:
    """One packaged asset's bytes, read once per process."""
    return (resources.files("fastapi_offline") / "static" / name).read_bytes()


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    """The OpenAPI page (try requests in the browser)."""
    return _local(
        get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=_TITLE,
            swagger_js_url=f"{ASSET_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSET_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{ASSET_PREFIX}/favicon.png",
        )
    )


@router.get("/redoc")
def redoc() -> HTMLResponse:
    """The same API description as one reading page."""
    return _local(
        get_redoc_html(
            openapi_url="/openapi.json",
            title=_TITLE,
            redoc_js_url=f"{ASSET_PREFIX}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSET_PREFIX}/favicon.png",
            with_google_fonts=False,
        )
    )


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return page


@router.get(ASSET_PREFIX + "/{name}")
def asset(name: str) -> Response:
    """A docs asset from a fixed list (no path from the request reaches the disk)."""
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no docs asset named {name[:80]!r}")
    return Response(_asset(name), media_type=media_type, headers={"Cache-Control": "public, max-age=86400"})
