"""/docs and /redoc render in a real browser with every request to another host blocked (issue 13).

FastAPI's stock pages load Swagger UI and ReDoc from a CDN; here every request that does not go to the
service itself is aborted and recorded, so a page that needed the network stays blank and fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.interfaces.test_page_browser import browser  # noqa: F401  (the module's chromium fixture)

pytestmark = pytest.mark.slow


def _offline_page(browser: Any, origin: str) -> tuple[Any, Any, list[str]]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    blocked: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(origin) or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            blocked.append(url)
            route.abort("internetdisconnected")

    context.route("**/*", guard)
    return context, context.new_page(), blocked


@pytest.mark.parametrize(
    ("path", "ready_selector"),
    [("/docs", ".swagger-ui .opblock-summary-path"), ("/redoc", "[role=search], .api-content h1")],
)
def test_api_docs_render_with_the_network_blocked(
    browser: Any,  # noqa: F811
    live_app: Any,
    path: str,
    ready_selector: str,
) -> None:
    context, page, blocked = _offline_page(browser, live_app.url)
    try:
        page.goto(live_app.url + path)
        page.wait_for_selector(ready_selector, timeout=30_000)
        text = page.inner_text("body")
        assert "gptoss-doctor" in text
        assert "/lookup" in text
        assert blocked == []
    finally:
        context.close()
