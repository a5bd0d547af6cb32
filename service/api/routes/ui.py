"""The web page: ``GET /`` and its two static assets, served from ``service/api/static/``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response

from service.errors import NotFound

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

# The page never needs anything from another origin; a strict policy means that even an escaping
# bug in app.js could not run injected script or load a remote image.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "check.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}

router = APIRouter(tags=["ui"], include_in_schema=False)


@lru_cache(maxsize=8)
def _read(name: str) -> bytes:
    """One static file's bytes, read once per process."""
    return (STATIC_DIR / name).read_bytes()


@router.get("/")
def page() -> Response:
    """The page: paste an error or a log, see the diagnosis."""
    return Response(_read("index.html"), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)


@router.get("/ui/{name}")
def asset(name: str) -> Response:
    """The page's script and stylesheet (a fixed list: no path from the request reaches the disk)."""
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFound(f"no page asset named {name!r}; the page uses /ui/app.js, /ui/check.js and /ui/app.css")
    return Response(_read(name), media_type=media_type, headers=SECURITY_HEADERS)
