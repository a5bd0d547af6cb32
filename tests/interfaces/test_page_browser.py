"""The web page in a real headless browser (Debian's chromium driven by Playwright).

The browser is the system's ``/usr/bin/chromium`` (``GPTOSS_DOCTOR_CHROMIUM`` overrides it); the
tests never download one. Screenshots land in ``test-artifacts/`` (``GPTOSS_DOCTOR_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

ARTIFACTS_DIR = Path(
    os.environ.get("GPTOSS_DOCTOR_TEST_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts"
)
"""Where screenshots go (CI keeps this folder); GPTOSS_DOCTOR_TEST_ARTIFACTS overrides it."""

CHROMIUM = os.environ.get("GPTOSS_DOCTOR_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REAL_ERROR = (
    "(APIServer pid=1) ERROR 08-07 10:12:44 [serving_chat.py:1001] Error in chat completion stream generator.\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py", line 560, '
    "in chat_completion_stream_generator\n"
    "openai_harmony.HarmonyError: Unexpected token 12606 while expecting start token 200006"
)
HOSTILE_TITLE = '<img src=x onerror="window.__pwned=1"> [Bug]: <script>window.__pwned=2</script>'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (or set GPTOSS_DOCTOR_CHROMIUM)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.console_errors = errors
    try:
        yield page
    finally:
        context.close()


def _screenshot(page: Any, name: str) -> Path:
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS_DIR / name
    page.screenshot(path=str(path), full_page=True)
    return path


def _submit(page: Any, text: str) -> None:
    page.fill("#error-input", text)
    page.focus("#error-input")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#results:not([hidden])", timeout=30_000)


def test_real_error_shows_the_known_issue_origin_and_tokens(page: Any, real_app: Any) -> None:
    expected = httpx.post(f"{real_app.url}/lookup", json={"error": REAL_ERROR, "top_k": 5}, timeout=60).json()
    assert expected["issues"] and not expected["no_confident_match"], expected
    page.goto(real_app.url + "/")
    assert page.title() == "gptoss-doctor"
    _submit(page, REAL_ERROR)
    # The evidence is folded under the verdict; a reader opens it.
    page.evaluate("document.querySelectorAll('details.evidence').forEach((d) => { d.open = true; })")

    rendered = page.locator("ol.issues > li")
    assert rendered.count() == len(expected["issues"])
    first = rendered.nth(0)
    assert first.locator(".issue-title").inner_text() == expected["issues"][0]["title"]
    assert first.locator("a").get_attribute("href") == expected["issues"][0]["url"]
    ids = page.locator("ol.issues code").all_inner_texts()
    # The threads that carry this exact error in the bundled KB.
    assert {"vllm-project/vllm#22519", "openai/harmony#60"} & set(ids)

    results = page.locator("#results").inner_text()
    assert expected["analysis"]["origin"]["side"].upper() in results.upper()
    assert expected["analysis"]["origin"]["explanation"] in results
    token_rows = page.locator("table tbody tr").all_inner_texts()
    assert any("12606" in row and '"comment"' in row for row in token_rows), token_rows
    assert any("200006" in row and "<|start|>" in row and "special" in row for row in token_rows), token_rows
    assert "known issue" in page.locator("#status").inner_text()
    assert page.locator("#results").get_attribute("aria-live") == "polite"
    assert not page.console_errors
    shot = _screenshot(page, "page-lookup.png")
    assert shot.stat().st_size > 10_000


VERDICT_ERROR = (
    "(APIServer pid=1) ERROR 06-23 09:42:17 [serving.py:932] openai_harmony.HarmonyError: "
    "Unexpected token 200002 while expecting start token 200006"
)


def test_the_verdict_is_above_the_fold_with_linked_sources_and_the_evidence_folded(page: Any, real_app: Any) -> None:
    expected = httpx.post(f"{real_app.url}/lookup", json={"error": VERDICT_ERROR}, timeout=60).json()
    diagnosis = expected["diagnosis"]
    assert diagnosis and diagnosis["actions"], expected
    page.goto(real_app.url + "/")
    _submit(page, "\n".join(["INFO 06-23 09:40:00 [api_server.py:1] starting"] * 40 + [VERDICT_ERROR]))

    verdict = page.locator("#verdict")
    box = verdict.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 900, box
    assert diagnosis["title"] in verdict.inner_text()
    assert diagnosis["verdict"]["text"] in page.locator("#verdict-status").inner_text()
    actions = page.locator("#actions > li")
    assert actions.count() == len(diagnosis["actions"])
    assert diagnosis["actions"][0]["text"].replace("`", "") in actions.nth(0).inner_text().replace("`", "")
    # Evidence: folded, in <details>, below the verdict.
    folded = page.locator("details.evidence")
    assert folded.count() >= 3 and page.locator("details.evidence[open]").count() == 0
    assert not page.locator("ol.issues > li").first.is_visible()
    # Sources are links; a reference section opens on the service, at its heading.
    href = verdict.locator("a[href*='/references/known-issues.md#']").first.get_attribute("href")
    assert href and href.startswith(real_app.url + "/references/known-issues.md#")
    page.goto(href)
    anchor = href.split("#", 1)[1]
    assert page.locator(f"[id='{anchor}']").count() == 1
    assert page.locator(f"[id='{anchor}']").is_visible()
    assert not page.console_errors
    _screenshot(page, "page-verdict.png")


def test_page_is_readable_on_a_narrow_screen(browser: Any, real_app: Any) -> None:
    context = browser.new_context(viewport={"width": 360, "height": 740}, is_mobile=True)
    page = context.new_page()
    try:
        page.goto(real_app.url + "/")
        _submit(page, REAL_ERROR)
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"the page scrolls sideways by {overflow}px at 360px wide"
        _screenshot(page, "page-lookup-narrow.png")
    finally:
        context.close()


def test_keyboard_reaches_every_control_with_a_visible_focus(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    seen: list[str] = []
    for _ in range(8):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
    for control in ("error-input", "top-k", "submit"):
        assert control in seen, seen
    # Keyboard focus (not programmatic focus) is what :focus-visible styles.
    page.focus("#top-k")
    page.keyboard.press("Tab")
    page.keyboard.press("Shift+Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"


def _fake_lookup(page: Any, body: dict[str, Any], status: int = 200) -> None:
    content_type = "application/json" if status == 200 else "application/problem+json"
    page.route(
        "**/lookup",
        lambda route: route.fulfill(status=status, content_type=content_type, body=json.dumps(body)),
    )


def _answer(**overrides: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "query": {"signatures": ['<b id="sig">bold</b>'], "normalized": ""},
        "analysis": {
            "origin": {"side": "server", "component": "<i>vllm</i>", "explanation": "<u>explained</u>"},
            "category": "harmony-token",
            "tokens": [{"id": 1, "text": "<svg onload=window.__pwned=3>", "special": False}],
            "versions": {},
            "flags": [],
            "reproduction": None,
        },
        "issues": [
            {
                "id": "vllm-project/vllm#1",
                "repo": "vllm-project/vllm",
                "number": 1,
                "kind": "issue",
                "title": HOSTILE_TITLE,
                "url": "javascript:window.__pwned=4",
                "state": "open",
                "score": 0.9,
                "confidence": "high",
                "why": ['<a href="javascript:alert(1)">why</a>'],
                "fixed_by": [],
            }
        ],
        "no_confident_match": False,
        "fixes": [{"summary": "<img src=y onerror=window.__pwned=5>", "steps": [], "sources": ["javascript:x"]}],
        "advice": [],
        "index": {"documents": 1, "issues": 1, "built_at": None, "github_synced_at": None},
        "degraded": False,
    }
    answer.update(overrides)
    return answer


HOSTILE_DIAGNOSIS = {
    "problem": "javascript:window.__pwned=6",
    "title": HOSTILE_TITLE,
    "kind": "error",
    "summary": "<img src=z onerror=window.__pwned=7>",
    "confidence": "high",
    "why": "<b>why</b>",
    "verdict": {"status": "no-fix", "text": "<script>window.__pwned=8</script>"},
    "actions": [{"kind": "avoid", "target": "x", "text": "<i>act</i>", "sources": ["javascript:y", "../../etc"]}],
    "sources": [],
}


def test_hostile_issue_title_and_fields_render_as_text(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    _fake_lookup(page, _answer(diagnosis=HOSTILE_DIAGNOSIS))
    _submit(page, "anything")
    page.evaluate("document.querySelectorAll('details.evidence').forEach((d) => { d.open = true; })")
    results = page.locator("#results")
    assert "<script>window.__pwned=8</script>" in page.locator("#verdict-status").inner_text()
    assert results.locator("img, script, svg, b, i, u").count() == 0
    assert page.locator(".issue-title").inner_text() == HOSTILE_TITLE
    # A javascript: URL is never a link: the title falls back to the GitHub link built from the id.
    assert results.locator('a[href^="javascript"]').count() == 0
    assert page.locator(".issue-title a").get_attribute("href") == "https://github.com/vllm-project/vllm/issues/1"
    assert "<svg onload=window.__pwned=3>" in results.inner_text()
    assert page.evaluate("window.__pwned") is None
    _screenshot(page, "page-hostile-data.png")


def test_no_confident_match_is_said_plainly(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    weak = _answer()["issues"][0] | {"title": "weak candidate", "confidence": "low", "score": 0.1}
    _fake_lookup(page, _answer(issues=[weak], no_confident_match=True, fixes=[]))
    _submit(page, "the weather is nice today")
    assert "No confident match" in page.locator("#no-match").inner_text()
    assert "no confident match" in page.locator("#status").inner_text()
    assert page.locator(".issue-title").inner_text() == "weak candidate"


def test_a_log_with_no_failing_line_says_so_and_what_to_paste(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    answer = _answer(issues=[], no_confident_match=True, fixes=[])
    answer["analysis"] |= {
        "failure_found": False,
        "origin": {"side": "unknown", "component": "other", "explanation": "Paste the lines <b>above</b>."},
    }
    _fake_lookup(page, answer)
    _submit(page, "a log")
    assert page.locator("#no-match").inner_text() == (
        "No confident match. No failing line to match. Paste the lines <b>above</b>."
    )


def test_an_input_about_another_model_is_said_first(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    note = "The input is about Qwen, with no gpt-oss or Harmony sign."
    _fake_lookup(page, _answer(diagnosis=None, no_confident_match=True, fixes=[], scope_note=note))
    _submit(page, "vllm serve Qwen/QwQ-32B")
    scope = page.locator("#outside-scope")
    assert scope.inner_text() == f"Outside what this tool covers. {note}"
    assert scope.evaluate("e => e.compareDocumentPosition(document.getElementById('verdict'))") & 4


def test_problem_details_and_blank_input_are_reported(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    page.fill("#error-input", "   ")
    page.click("#submit")
    assert "Paste an error" in page.locator("#status").inner_text()
    assert page.evaluate("document.activeElement.id") == "error-input"

    response = page.request.post(f"{live_app.url}/lookup", data={"error": "x", "top_k": 500})
    problem = response.json()
    assert response.status == 422
    _fake_lookup(page, problem, status=422)
    _submit(page, "x")
    alert = page.locator("#results [role=alert]")
    assert problem["title"] in alert.inner_text()
    assert problem["detail"] in alert.inner_text()


def test_check_tab_shows_findings_with_linked_sources(page: Any, live_app: Any) -> None:
    page.goto(live_app.url + "/")
    assert page.locator("#panel-check").is_hidden()
    # Keyboard: the selected tab is in the Tab order and the arrow keys move between tabs.
    page.focus("#tab-lookup")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.id") == "tab-check"
    assert page.locator("#tab-check").get_attribute("aria-selected") == "true"
    assert page.locator("#panel-lookup").is_hidden() and page.locator("#panel-check").is_visible()

    body = json.dumps({"model": "openai/gpt-oss-20b", "messages": [], "ignore_eos": True})
    expected = httpx.post(f"{live_app.url}/v1/check", json={"input": body}, timeout=30).json()
    assert expected["errors"] >= 1
    page.fill("#check-input", body)
    page.click("#check-submit")
    page.wait_for_selector("#check-results:not([hidden])", timeout=30_000)
    findings = page.locator("ul.findings > li")
    assert findings.count() == len(expected["findings"])
    first = findings.nth(0)
    assert expected["findings"][0]["message"] in first.inner_text()
    assert "error" in first.locator(".badge").inner_text()
    assert first.locator(".found").inner_text() == "You have: ignore_eos true"
    # The reference section resolves on this service; issue ids link to GitHub.
    hrefs = first.locator("a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))")
    assert any("/references/" in h for h in hrefs) and any(h.startswith("https://github.com/") for h in hrefs)
    summary = page.locator("#check-summary").inner_text()
    assert f"{expected['errors']} error" in summary

    assert not page.console_errors
    _screenshot(page, "page-check.png")

    page.fill("#check-input", "hello world")
    page.click("#check-submit")
    page.wait_for_selector("#check-results .problem", timeout=30_000)
    assert "could not tell" in page.locator("#check-results [role=alert]").inner_text()
    # The browser logs the 422 itself; the page's own script raised nothing.
    assert all("status of 422" in message for message in page.console_errors), page.console_errors
