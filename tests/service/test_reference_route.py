"""``GET /references/{name}``: the reference docs served so the sections answers cite resolve."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from indexer.sources.markdown import markdown_documents
from service.config import Settings
from service.skill_package import REFERENCE_DOCS


def test_every_cited_section_anchor_exists_on_the_served_page(client: TestClient, settings: Settings) -> None:
    sections = [d for d in markdown_documents(settings.docs_dir) if d.id.startswith("reference/")]
    assert sections
    for name in REFERENCE_DOCS:
        response = client.get(f"/references/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in response.headers["content-security-policy"]
        ids = set(re.findall(r'<h[1-6] id="([^"]+)"', response.text))
        for section in sections:
            path, _, anchor = section.id.partition("#")
            if path == f"reference/{name}" and anchor:
                assert anchor in ids, section.id


def test_markdown_source_and_the_singular_alias(client: TestClient, settings: Settings) -> None:
    raw = client.get("/references/known-issues.md", params={"format": "markdown"})
    assert raw.status_code == 200 and raw.headers["content-type"].startswith("text/markdown")
    assert raw.content == (settings.docs_dir / "reference" / "known-issues.md").read_bytes()
    assert client.get("/reference/known-issues.md").text == client.get("/references/known-issues.md").text


@pytest.mark.parametrize(
    "name",
    ["SKILL.md", "..%2F..%2Fpyproject.toml", "known-issues", "%2e%2e%2fknown-issues.md", "known-issues.md%00"],
)
def test_only_the_three_docs_are_served(client: TestClient, name: str) -> None:
    response = client.get(f"/references/{name}")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    assert client.get("/references/../pyproject.toml").status_code == 404


def test_raw_html_in_a_doc_is_not_rendered(tmp_path: object) -> None:
    from service.api.routes.reference import render

    page = render('# T\n\n<script>alert(1)</script>\n\n## A `b` c\n\n[x](tool-calling-setup.md#y)\n', "t.md")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert '<h2 id="a-b-c">' in page and 'href="tool-calling-setup.md#y"' in page
