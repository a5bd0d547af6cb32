"""``GET /references/{name}``: the reference docs, so the sections answers cite resolve on the service.

Answers cite ``references/<doc>.md#<anchor>``: the same path in the packaged skill folder and, on the
service, a URL relative to its root. The page renders the markdown (markdown-it-py, raw HTML off) with
GitHub's heading anchors, so ``#anchor`` lands on the section; ``?format=markdown`` returns the source.
Only the three reference docs are served: the name is looked up in a fixed list, never joined to a path.
"""

from __future__ import annotations

import html
from functools import lru_cache
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from markdown_it import MarkdownIt

from indexer.sources.markdown import github_slug, inline_text
from service.api.errors import PROBLEM_JSON
from service.api.routes.ui import SECURITY_HEADERS
from service.deps import SettingsDep
from service.errors import NotFound
from service.skill_package import REFERENCE_DOCS

PUBLIC_DIR = "references"
"""The folder answers cite and the service serves: the packaged skill's name for ``reference/``."""

router = APIRouter(tags=["reference"])
_PROBLEM = {"content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


def render(source: str, title: str) -> str:
    """A reference doc as a standalone HTML page with GitHub-style heading ids."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(source)
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            token.attrSet("id", github_slug(inline_text(tokens[i + 1]), seen))
    body = md.renderer.render(tokens, md.options, {})
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)} - gptoss-doctor</title>\n"
        '<link rel="icon" href="data:,">\n<link rel="stylesheet" href="/ui/app.css">\n</head>\n'
        f'<body>\n<main class="doc">\n<p class="meta"><a href="/">gptoss-doctor</a> / {html.escape(PUBLIC_DIR)}/'
        f"{html.escape(title)}</p>\n{body}</main>\n</body>\n</html>\n"
    )


@lru_cache(maxsize=8)
def _rendered(path: Path, mtime: float, name: str) -> str:
    return render(path.read_text(encoding="utf-8"), name)


@router.get(
    f"/{PUBLIC_DIR}/{{name}}",
    response_class=Response,
    responses={
        200: {"content": {"text/html": {}, "text/markdown": {}}, "description": "The doc, rendered or as source"},
        404: {"description": "No reference doc of that name", **_PROBLEM},
        422: {"description": "format is neither html nor markdown", **_PROBLEM},
    },
)
@router.get("/reference/{name}", include_in_schema=False)
def reference_doc(
    name: str,
    settings: SettingsDep,
    format: Literal["html", "markdown"] = Query(  # noqa: A002 - the query parameter's public name
        default="html", description="html: rendered, with heading anchors; markdown: the source"
    ),
) -> Response:
    """One reference doc (``known-issues.md``, ``model-updates.md`` or ``tool-calling-setup.md``)."""
    if name not in REFERENCE_DOCS:
        raise NotFound(f"no reference doc named {name[:80]!r}; the docs are {', '.join(REFERENCE_DOCS)}")
    path = settings.docs_dir / "reference" / name
    try:
        mtime = path.stat().st_mtime
        if format == "markdown":
            return Response(
                path.read_bytes(), media_type="text/markdown; charset=utf-8", headers=SECURITY_HEADERS
            )
        page = _rendered(path, mtime, name)
    except OSError as exc:
        raise NotFound(f"reference doc {name} is not readable on this service ({exc.strerror})") from exc
    return Response(page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)
