"""The web page as served: self-contained, strict security headers, assets from a fixed list."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api.errors import install_error_handlers
from service.api.routes import ui

STATIC = Path(ui.__file__).resolve().parent.parent / "static"


def _client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(ui.router)
    return TestClient(app)


def test_root_serves_the_page_with_a_strict_content_security_policy() -> None:
    response = _client().get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert '<label for="error-input">' in response.text
    assert 'href="/docs"' in response.text


def test_page_loads_nothing_from_another_origin() -> None:
    for name in ("index.html", "app.js", "check.js", "app.css"):
        text = (STATIC / name).read_text(encoding="utf-8")
        # Any src/href/url()/@import pointing off-site would break offline use.
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), name
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", text), name
        assert "@import" not in text, name


def test_script_builds_the_dom_without_html_parsing() -> None:
    for name in ("app.js", "check.js"):
        script = (STATIC / name).read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in script, f"{name} uses {sink}: render data with textContent instead"


def test_assets_are_served_with_their_types() -> None:
    client = _client()
    js = client.get("/ui/app.js")
    css = client.get("/ui/app.css")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert js.content == (STATIC / "app.js").read_bytes()
    check = client.get("/ui/check.js")
    assert check.status_code == 200 and check.content == (STATIC / "check.js").read_bytes()


def test_unknown_asset_is_a_problem_json_404_and_paths_do_not_escape() -> None:
    client = _client()
    for path in ("/ui/index.py", "/ui/..%2F..%2Fconfig.py", "/ui/%2e%2e%2fapp.js"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("application/problem+json")
