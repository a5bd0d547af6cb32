"""The docs agents read are tested like code: citations, commands, settings, anchors, the README table."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import click
import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from indexer.sources.cards import bundled_cards
from service.cli import main
from service.config import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DOCS = sorted((REPO_ROOT / "reference").glob("*.md"))
SKILL_MD = REPO_ROOT / "skill" / "SKILL.md"
README = REPO_ROOT / "README.md"
CITING_DOCS = [SKILL_MD, *REFERENCE_DOCS]
ALL_DOCS = [*CITING_DOCS, README]
SHELL_LANGS = {"bash", "sh", "shell", "console"}

# owner/repo#N, not preceded by a path or URL character (so "x.md#anchor" never matches).
ISSUE_REF = re.compile(r"(?<![\w./-])([A-Za-z0-9][\w.-]*/[\w.-]+)#(\d+)\b")
ISSUE_URL = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/(\d+)")
SETTING_NAME = re.compile(r"\bGPTOSS_DOCTOR_[A-Z0-9_]+\b")
HEADING_CHARS = re.compile(r"^[A-Za-z0-9 ,_-]+$")  # every slugifier agrees on these


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


@cache
def _tokens(path: Path) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(path.read_text(encoding="utf-8"))


def citations(text: str) -> set[str]:
    """Every issue cited in ``text`` as owner/repo#N or as a full GitHub issue/PR URL."""
    found = {f"{repo}#{number}" for repo, number in ISSUE_REF.findall(text)}
    found |= {f"{repo}#{number}" for repo, number in ISSUE_URL.findall(text)}
    return found


def shell_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, content) of every bash/sh/shell/console fenced block."""
    blocks = []
    for token in _tokens(path):
        if token.type == "fence" and token.info.strip().split(" ")[0].lower() in SHELL_LANGS:
            content = token.content
            if token.info.strip().lower().startswith("console"):
                # Console transcripts: only the prompted lines are commands.
                content = "\n".join(line[2:] for line in content.splitlines() if line.startswith("$ "))
            blocks.append(((token.map[0] + 1) if token.map else 0, content))
    return blocks


def fenced_blocks(path: Path, lang: str) -> list[tuple[int, str]]:
    """(line number, content) of the fenced blocks tagged ``lang``."""
    return [
        ((t.map[0] + 1) if t.map else 0, t.content)
        for t in _tokens(path)
        if t.type == "fence" and t.info.strip().split(" ")[0].lower() == lang
    ]


def _logical_lines(script: str) -> Iterator[str]:
    """Lines of a shell script with backslash continuations joined."""
    pending = ""
    for line in script.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _is_doctor(word: str) -> bool:
    """True for the console script, bare or through a bin/ folder (not a data path ending in it)."""
    return word == "gptoss-doctor" or word.endswith("bin/gptoss-doctor")


def doctor_invocations(path: Path) -> list[tuple[str, list[str]]]:
    """Every ``gptoss-doctor ...`` command in shell blocks and inline code: (source, argv)."""
    found: list[tuple[str, list[str]]] = []
    for lineno, block in shell_blocks(path):
        for line in _logical_lines(block):
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(lexer)
            segment: list[str] = []
            for word in [*words, ";"]:
                if word and set(word) <= set("|&;()<>"):
                    if segment and _is_doctor(segment[0]):
                        found.append((f"{_rel(path)}:{lineno}: {line.strip()}", segment[1:]))
                    segment = []
                else:
                    segment.append(word)
    for token in _tokens(path):
        for child in token.children or []:
            if child.type == "code_inline" and _is_doctor(child.content.split(" ")[0]):
                found.append((f"{_rel(path)}: `{child.content}`", shlex.split(child.content)[1:]))
    return found


def check_cli(argv: list[str]) -> None:
    """Parse ``gptoss-doctor ARGV`` with the real click commands; raise click.UsageError when wrong.

    Groups are walked by subcommand name; the leaf parses strictly (unknown options, bad values,
    extra arguments fail). A required argument left out is accepted, because prose may show a
    command without its placeholder (e.g. `gptoss-doctor lookup`).
    """
    ctx = click.Context(main, info_name="gptoss-doctor")
    command: click.Command = main
    args = list(argv)
    while isinstance(command, click.Group):
        if not args or args[0] in {"-h", "--help"}:
            return
        name = args.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.UsageError(f"no such command {name!r} under {ctx.command_path}")
        ctx = click.Context(sub, info_name=name, parent=ctx)
        command = sub
    if any(a in {"-h", "--help"} for a in args):
        return
    try:
        command.make_context(ctx.info_name, args, parent=ctx.parent)
    except click.MissingParameter:
        pass


def github_slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def headings(path: Path) -> list[tuple[int, str]]:
    """(level, text) of every heading."""
    tokens = _tokens(path)
    return [(int(tok.tag[1]), tokens[i + 1].content) for i, tok in enumerate(tokens) if tok.type == "heading_open"]


# --- citations -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CITING_DOCS, ids=_rel)
def test_every_cited_issue_exists_in_the_bundled_kb(path: Path) -> None:
    known = {card.id for card in bundled_cards()}
    missing = sorted(citations(path.read_text(encoding="utf-8")) - known)
    assert not missing, f"{_rel(path)} cites issues that are not in the bundled KB: {missing}"


def test_docs_cite_at_least_25_distinct_issues() -> None:
    cited: set[str] = set()
    for path in CITING_DOCS:
        cited |= citations(path.read_text(encoding="utf-8"))
    assert len(cited) >= 25, f"only {len(cited)} distinct issues cited"


def test_known_issues_cites_at_least_60_issues() -> None:
    text = (REPO_ROOT / "reference" / "known-issues.md").read_text(encoding="utf-8")
    assert len(citations(text)) >= 60


def test_citation_pattern_finds_refs_and_urls_but_not_anchors() -> None:
    text = (
        "see vllm-project/vllm#22519 and https://github.com/openai/harmony/issues/95, "
        "https://github.com/vllm-project/vllm/pull/47062, not model-updates.md#keeping-1 or x/y.md#anchor"
    )
    assert citations(text) == {"vllm-project/vllm#22519", "openai/harmony#95", "vllm-project/vllm#47062"}


def test_every_known_issues_entry_names_its_issues() -> None:
    path = REPO_ROOT / "reference" / "known-issues.md"
    sections = re.split(r"^### ", path.read_text(encoding="utf-8"), flags=re.M)[1:]
    assert len(sections) >= 30
    for section in sections:
        title = section.splitlines()[0]
        issues_line = re.search(r"^(?:\*\*Issues:\*\*|\| Sources \|)(.+(?:\n(?!\n).+)*)", section, flags=re.M)
        assert issues_line, f"section {title!r} has no **Issues:** line or Sources row"
        assert citations(issues_line.group(1)), f"section {title!r} cites no issue"


# --- structure and anchors ----------------------------------------------------------------------


FAMILIES = [
    "Harmony token ids",
    "Where a HarmonyError comes from",
    "Harmony token errors",
    "Header, role and recipient parse errors",
    "Harmony vocab download offline",
    "Tool calls missing or in content",
    "Reasoning fields",
    "Responses API and built-in tools",
    "Streaming token loss",
    "MXFP4 and attention backends",
    "Client-side integrations",
]


def test_known_issues_covers_every_error_family() -> None:
    h2 = [text for level, text in headings(REPO_ROOT / "reference" / "known-issues.md") if level == 2]
    assert [f for f in FAMILIES if f not in h2] == []


@pytest.mark.parametrize("path", REFERENCE_DOCS, ids=_rel)
def test_reference_headings_make_stable_unique_anchors(path: Path) -> None:
    slugs: dict[str, str] = {}
    for level, text in headings(path):
        if level == 1:
            continue
        assert HEADING_CHARS.match(text), f"{_rel(path)}: heading {text!r} has characters that make unstable anchors"
        slug = github_slug(text)
        assert slug not in slugs, f"{_rel(path)}: {text!r} and {slugs[slug]!r} share the anchor #{slug}"
        slugs[slug] = text


@pytest.mark.parametrize("path", [*REFERENCE_DOCS, README], ids=_rel)
def test_links_between_docs_resolve(path: Path) -> None:
    for target, anchor in re.findall(r"\]\((?!https?://)([^)#\s]*)(?:#([^)\s]+))?\)", path.read_text("utf-8")):
        linked = (path.parent / target) if target else path
        assert linked.is_file(), f"{_rel(path)} links to missing {target}"
        if anchor:
            slugs = {github_slug(text) for _, text in headings(linked)}
            assert anchor in slugs, f"{_rel(path)} links to #{anchor}, which is not a heading of {linked.name}"


def test_slug_matches_github_rules() -> None:
    assert github_slug("Tool call JSON in content and tool_calls empty") == (
        "tool-call-json-in-content-and-tool_calls-empty"
    )
    assert github_slug("Header, role and recipient parse errors") == "header-role-and-recipient-parse-errors"


# --- commands -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL_DOCS, ids=_rel)
def test_shell_blocks_parse(path: Path) -> None:
    blocks = shell_blocks(path)
    for lineno, block in blocks:
        result = subprocess.run(["bash", "-n"], input=block, text=True, capture_output=True, check=False)
        assert result.returncode == 0, f"{_rel(path)}:{lineno}: bash -n failed: {result.stderr}"
        for line in _logical_lines(block):
            shlex.split(line, comments=True)  # raises on unbalanced quotes


def test_bash_n_catches_a_broken_block() -> None:
    result = subprocess.run(["bash", "-n"], input='if true; then echo "x"\n', text=True, capture_output=True)
    assert result.returncode != 0


@pytest.mark.parametrize("path", ALL_DOCS, ids=_rel)
def test_every_gptoss_doctor_command_exists(path: Path) -> None:
    for source, argv in doctor_invocations(path):
        try:
            check_cli(argv)
        except click.UsageError as exc:
            pytest.fail(f"{source}: {exc.format_message()}")


def test_docs_show_gptoss_doctor_commands() -> None:
    commands = [argv[:2] for path in ALL_DOCS for _, argv in doctor_invocations(path)]
    assert ["skill", "package"] in commands
    assert any(argv[:1] == ["lookup"] for argv in commands)


@pytest.mark.parametrize(
    "argv",
    [
        ["nosuch"],
        ["skill", "nosuch"],
        ["skill", "package", "--out", "d", "--bogus"],
        ["skill", "package", "--out", "d", "x"],
    ],
)
def test_check_cli_rejects_wrong_commands(argv: list[str]) -> None:
    with pytest.raises(click.UsageError):
        check_cli(argv)


def test_check_cli_accepts_real_commands() -> None:
    check_cli(["skill", "package", "--out", "dist"])
    check_cli(["skill", "--help"])


@pytest.mark.parametrize("path", ALL_DOCS, ids=_rel)
def test_python_and_json_blocks_are_valid(path: Path) -> None:
    for lineno, block in fenced_blocks(path, "python"):
        try:
            ast.parse(block)
        except SyntaxError as exc:
            pytest.fail(f"{_rel(path)}:{lineno}: python block does not parse: {exc}")
    for lineno, block in fenced_blocks(path, "json"):
        try:
            json.loads(block)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{_rel(path)}:{lineno}: json block does not parse: {exc}")


# --- settings -----------------------------------------------------------------------------------


def _client_env_vars() -> set[str]:
    """The variables skill/scripts/lookup.py reads (declared in CLIENT_ENV_VARS)."""
    source = (REPO_ROOT / "skill" / "scripts" / "lookup.py").read_text(encoding="utf-8")
    module = ast.parse(source)
    values = {
        node.targets[0].id: node.value.value
        for node in module.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }
    declared = next(
        node.value
        for node in module.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CLIENT_ENV_VARS"
    )
    assert isinstance(declared, ast.Tuple)
    return {values[elt.id] for elt in declared.elts if isinstance(elt, ast.Name)}


def test_client_env_vars_are_the_documented_ones() -> None:
    assert _client_env_vars() == {"GPTOSS_DOCTOR_URL", "GPTOSS_DOCTOR_READ_TOKEN"}


@pytest.mark.parametrize("path", ALL_DOCS, ids=_rel)
def test_every_named_setting_exists(path: Path) -> None:
    known = {f"GPTOSS_DOCTOR_{name.upper()}" for name in Settings.model_fields} | _client_env_vars()
    unknown = sorted(set(SETTING_NAME.findall(path.read_text(encoding="utf-8"))) - known)
    assert not unknown, f"{_rel(path)} names settings that do not exist: {unknown}"


def _readme_config_rows() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"^\|\s*`(\w+)`\s*\|(.*)$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_readme_configuration_table_lists_every_setting() -> None:
    rows = _readme_config_rows()
    fields = set(Settings.model_fields)
    assert sorted(fields - set(rows)) == [], "settings missing from the README table"
    assert sorted(set(rows) - fields) == [], "README table lists settings that do not exist"
    for name, rest in rows.items():
        assert f"`GPTOSS_DOCTOR_{name.upper()}`" in rest, f"README row for {name} does not name its env var"


def test_readme_has_exactly_the_two_quickstart_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = [b.strip() for _, b in shell_blocks(README) if b.strip() in quick]
    assert blocks[:2] == ["bash .ci/setup && .venv/bin/gptoss-doctor index", "bash .ci/run"]
    run = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "bash .ci/setup" in run and "pytest" in run


def test_skill_links_resolve_to_headings_of_the_packaged_references() -> None:
    """SKILL.md links `references/x.md#anchor` (the package layout); each must be a heading of reference/x.md."""
    text = SKILL_MD.read_text(encoding="utf-8")
    links = re.findall(r"\]\((references/[^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert len([anchor for _, anchor in links if anchor]) >= 15, "the quick map should link real anchors"
    for target, anchor in links:
        linked = REPO_ROOT / target.replace("references/", "reference/", 1)
        assert linked.is_file(), f"SKILL.md links to missing {target}"
        if anchor:
            assert anchor in {github_slug(t) for _, t in headings(linked)}, f"SKILL.md links to missing #{anchor}"


def test_known_issues_has_a_table_of_contents_linking_every_section() -> None:
    path = REPO_ROOT / "reference" / "known-issues.md"
    text = path.read_text(encoding="utf-8")
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = {github_slug(t) for level, t in headings(path) if level in (2, 3) and t != "Contents"}
    assert sections - linked == set()


# --- the claims audit (issue 11) ------------------------------------------------------------------

CLAIMS_AUDIT = REPO_ROOT / "indexer" / "data" / "claims-audit.jsonl"
AUDIT_KEYS = {"where", "claim", "verdict", "against", "on", "note"}
VERDICTS = {"held", "corrected", "stale-fixed", "sourced", "removed"}
AUDIT_WHERE = re.compile(r"^(?P<path>[^#\s]+)#(?P<anchor>\S+) \((?P<label>.+)\)$")
ACTION_ROW = re.compile(r"^actions row (\d+)$")


def _audit_lines() -> list[dict[str, object]]:
    lines = CLAIMS_AUDIT.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_no_doc_calls_a_pr_with_a_checked_release_unverified() -> None:
    """Once a card carries the first release (read in release notes), the docs stop saying it is not verified."""
    released = sorted(card.id for card in bundled_cards() if card.released_in)
    assert released
    for path in [*REFERENCE_DOCS, SKILL_MD]:
        text = " ".join(path.read_text(encoding="utf-8").split())
        for pr in released:
            stale = re.search(re.escape(pr) + r"\)? \(merged[;,] first release not verified", text)
            assert not stale, f"{path.name} still calls {pr} unverified; its card says {pr} is in a release"


def test_claims_audit_lines_are_complete_records() -> None:
    records = _audit_lines()
    assert len(records) >= 136, "the audit covers at least every action row of the reference docs"
    for record in records:
        assert set(record) == AUDIT_KEYS, record
        assert record["verdict"] in VERDICTS, record
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(record["on"])), record
        against = record["against"]
        assert isinstance(against, list) and against and all(isinstance(a, str) and a.strip() for a in against), record
        if record["verdict"] != "held":
            assert str(record["note"]).strip(), f"a {record['verdict']} claim says what changed: {record['where']}"


def test_claims_audit_points_at_existing_sections_and_rows() -> None:
    from indexer.problems import load_problems, problem_by_anchor

    problems = load_problems(REPO_ROOT)
    for record in _audit_lines():
        where = AUDIT_WHERE.match(str(record["where"]))
        assert where, f"where is 'path#anchor (label)': {record['where']!r}"
        path = REPO_ROOT / where["path"]
        assert path.is_file(), f"missing file in {record['where']}"
        assert where["anchor"] in {github_slug(t) for _, t in headings(path)}, f"missing anchor in {record['where']}"
        row = ACTION_ROW.match(where["label"])
        if row:
            problem = problem_by_anchor(problems, f"{where['path']}#{where['anchor']}")
            assert problem is not None and int(row[1]) <= len(problem.actions), f"no such row: {record['where']}"
