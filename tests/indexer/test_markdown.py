"""Heading-aware markdown sections: small docs written here, and the project's real skill/reference docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.documents import Document
from indexer.signatures import normalize_signature
from indexer.sources.markdown import (
    github_slug,
    issue_refs,
    markdown_documents,
    markdown_files,
    parse_markdown,
)
from service.config import PROJECT_ROOT
from tests.indexer.conftest import REFERENCE, SKILL


def by_id(docs: list[Document]) -> dict[str, Document]:
    return {d.id: d for d in docs}


def test_sections_follow_headings_with_paths_and_github_anchors() -> None:
    docs = by_id(parse_markdown(REFERENCE, "reference/known-issues.md"))
    assert list(docs) == [
        "reference/known-issues.md#known-issues",
        "reference/known-issues.md#unexpected-token-200002",
        "reference/known-issues.md#tool-calls",
    ]
    token = docs["reference/known-issues.md#unexpected-token-200002"]
    assert token.kind == "reference-section"
    assert token.title == "Unexpected token 200002"
    assert token.heading_path == ["Known issues", "Harmony token errors", "Unexpected token 200002"]
    assert token.text.startswith("Known issues > Harmony token errors > Unexpected token 200002\n")
    # Code blocks are kept verbatim; the next heading's text is not part of the section.
    assert "```bash\nvllm serve openai/gpt-oss-20b --tool-call-parser openai\n```" in token.text
    assert "Tool calls" not in token.text
    assert token.sources == ["docs"]


def test_sections_cite_issues_and_carry_error_signatures() -> None:
    docs = by_id(parse_markdown(REFERENCE, "reference/known-issues.md"))
    token = docs["reference/known-issues.md#unexpected-token-200002"]
    assert token.references == ["vllm-project/vllm#22519", "openai/harmony#60"]
    error = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    assert token.error_signatures == [error]
    assert token.normalized_signatures == [normalize_signature(error)]
    tools = docs["reference/known-issues.md#tool-calls"]
    # A flag in inline code is not an error; an exception is.
    assert tools.error_signatures == ["KeyError: 'tool_calls'"]


def test_front_matter_is_not_a_heading_and_the_preamble_is_kept() -> None:
    docs = parse_markdown(SKILL, "skill/SKILL.md")
    # The front matter's description is the file's preamble section; its fields are not headings.
    assert [d.id for d in docs] == ["skill/SKILL.md", "skill/SKILL.md#tiny-skill", "skill/SKILL.md#diagnose"]
    assert docs[0].title == "tiny-skill" and "A tiny skill used by the indexer tests." in docs[0].text
    assert all("name: tiny-skill" not in d.text and "---" not in d.text for d in docs)
    source = "---\nname: x-skill\ndescription: Does x.\n---\nLoose text.\n\n# H\n\nBody.\n"
    with_preamble = parse_markdown(source, "s.md")
    assert [d.id for d in with_preamble] == ["s.md", "s.md#h"]
    assert with_preamble[0].title == "x-skill" and "Does x." in with_preamble[0].text


def test_duplicate_and_punctuated_headings_get_github_slugs() -> None:
    source = "# A `--flag` & (B)!\n\nx\n\n## Same\n\ny\n\n## Same\n\nz\n\n## Über: ümlaut_1.2\n\nw\n"
    ids = [d.id for d in parse_markdown(source, "f.md")]
    assert ids == ["f.md#a---flag--b", "f.md#same", "f.md#same-1", "f.md#über-ümlaut_12"]
    assert github_slug("Tool calls: `tool_choice=\"required\"`") == "tool-calls-tool_choicerequired"


def test_empty_sections_are_skipped() -> None:
    docs = parse_markdown("# Top\n\n## Empty\n\n## Full\n\ntext\n", "f.md")
    assert [d.id for d in docs] == ["f.md#full"]
    assert docs[0].heading_path == ["Top", "Full"]


def test_issue_refs_from_urls_and_ids() -> None:
    text = "see https://github.com/vllm-project/vllm/pull/22337 then openai/harmony#5 and vllm-project/vllm#22337"
    assert issue_refs(text) == ["vllm-project/vllm#22337", "openai/harmony#5"]


def test_docs_dir_files_are_the_skill_and_the_reference(docs_dir: Path) -> None:
    (docs_dir / "reference" / "sub").mkdir()
    (docs_dir / "reference" / "sub" / "more.md").write_text("# More\n\nBody.\n")
    (docs_dir / "README.md").write_text("# Not indexed\n\nBody.\n")
    rel = [p.relative_to(docs_dir).as_posix() for p in markdown_files(docs_dir)]
    assert rel == ["skill/SKILL.md", "reference/known-issues.md", "reference/sub/more.md"]
    assert "reference/sub/more.md#more" in by_id(markdown_documents(docs_dir))


def test_real_reference_docs_section_cleanly() -> None:
    files = markdown_files(PROJECT_ROOT)
    rel = [p.relative_to(PROJECT_ROOT).as_posix() for p in files]
    assert "skill/SKILL.md" in rel, "skill/SKILL.md is missing from the project"
    references = [r for r in rel if r.startswith("reference/")]
    assert references, "no reference/*.md docs in the project"
    docs = markdown_documents(PROJECT_ROOT)
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids)), "two sections share an id"
    for name in rel:
        assert any(i == name or i.startswith(name + "#") for i in ids), f"{name} produced no section"
    for d in docs:
        assert d.text.strip() and d.heading_path
        anchor = d.id.partition("#")[2]
        assert anchor == "" or anchor == github_slug(d.heading_path[-1]) or anchor.startswith(
            github_slug(d.heading_path[-1]) + "-"
        )
    # Every fenced block of the sources is kept whole in some section.
    for path in files:
        source = path.read_text()
        fences = source.count("```") // 2
        prefix = path.relative_to(PROJECT_ROOT).as_posix()
        kept = sum(d.text.count("```") // 2 for d in docs if d.id.split("#")[0] == prefix)
        assert kept == fences, f"{path.name}: {fences} code blocks in the file, {kept} in its sections"
    # The known-issues doc cites threads and names error strings.
    cited = [r for d in docs for r in d.references]
    assert cited and all("#" in r for r in cited)
    assert any(d.error_signatures for d in docs)


@pytest.mark.parametrize("heading", ["Harmony token errors", "Tool calls"])
def test_intermediate_headings_become_sections_only_with_body(heading: str) -> None:
    docs = by_id(parse_markdown(REFERENCE, "r.md"))
    slug = github_slug(heading)
    assert (f"r.md#{slug}" in docs) == (heading == "Tool calls")
