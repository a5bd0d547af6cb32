"""The problem blocks of the reference docs: the parser on small fixtures, and the rules over the real docs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import indexer.problems as problems_module
from indexer.problems import (
    ACTION_KINDS,
    CACHE_FILE,
    WHENS,
    Problem,
    ProblemFormatError,
    load_problems,
    parse_problems,
    problem_by_anchor,
)
from indexer.sources.cards import bundled_cards
from indexer.sources.markdown import github_slug

REPO_ROOT = Path(__file__).resolve().parents[2]

DOC = """# Known issues

## Family

### Unexpected token 1 while expecting start token 2

**Errors**
- `HarmonyError: Unexpected token 1 while expecting start token 2`
- `Unexpected token 1`
- HTTP 500 with an empty body

Prose for people.

| Field | Value |
|---|---|
| Kind | error |
| Status | fixed |
| Fixed in | vllm 0.10.2 |
| Fix PRs | o/r#2 |
| Open PRs | o/r#3 |
| Side | server |
| Change | client, server |
| Cause | The model ran past a stop token. |
| Sources | o/r#1, o/r#2 |

| Action | Target | Value | When | What | Sources |
|---|---|---|---|---|---|
| avoid | `ignore_eos` | true | always | Leave it out. | o/r#1 |
| upgrade | vllm | 0.10.2 | tools, streaming | Upgrade. | o/r#2 |
| set | `--tool-call-parser` | openai | tools | Set the parser. | o/r#1 |

### Prose only

No block here.

### Symptom section

**Symptoms:** the answer is empty.

| Field | Value |
|---|---|
| Kind | setup |
| Status | not-a-bug |
| Side | client |
| Change | client |
| Cause | The client reads the wrong field. |
| Sources | o/r#4 |
"""

GOOD_FACTS = """| Field | Value |
|---|---|
| Kind | error |
| Status | open |
| Side | server |
| Change | server |
| Cause | Something. |
| Sources | o/r#1 |
"""


def _doc(facts: str = GOOD_FACTS, actions: str = "") -> str:
    return f"# T\n\n### Broken heading\n\n{facts}\n{actions}"


def test_parser_reads_facts_actions_errors_and_anchor() -> None:
    problems = parse_problems(DOC, "reference/x.md")
    assert [p.title for p in problems] == ["Unexpected token 1 while expecting start token 2", "Symptom section"]
    first = problems[0]
    assert first.anchor == "reference/x.md#unexpected-token-1-while-expecting-start-token-2"
    assert first.errors == ("HarmonyError: Unexpected token 1 while expecting start token 2", "Unexpected token 1")
    assert first.symptoms == ("HTTP 500 with an empty body",)
    assert first.status == "fixed" and first.fixed_in == {"vllm": "0.10.2"}
    assert first.fix_prs == ("o/r#2",) and first.open_prs == ("o/r#3",)
    assert first.side == "server" and first.change_side == ("client", "server")
    assert [(a.kind, a.target, a.value) for a in first.actions] == [
        ("avoid", "ignore_eos", "true"),
        ("upgrade", "vllm", "0.10.2"),
        ("set", "--tool-call-parser", "openai"),
    ]
    assert first.actions[1].when == ("tools", "streaming")
    second = problems[1]
    assert second.kind == "setup" and second.actions == () and second.symptoms == ("the answer is empty.",)


def test_problems_are_frozen() -> None:
    problem = parse_problems(DOC, "reference/x.md")[0]
    with pytest.raises(ValueError):
        problem.status = "open"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("facts", "actions", "message"),
    [
        (GOOD_FACTS.replace("| Status | open |\n", ""), "", "missing field(s) Status"),
        (GOOD_FACTS.replace("open", "maybe"), "", "Status 'maybe'"),
        (GOOD_FACTS.replace("| Side | server |", "| Side | gpu |"), "", "Side 'gpu'"),
        (GOOD_FACTS + "| Colour | red |\n", "", "unknown field 'Colour'"),
        (GOOD_FACTS.replace("o/r#1", "issue 1"), "", "not an issue id"),
        (GOOD_FACTS + "| Fixed in | vllm 0.10.2 |\n", "", "Fixed in needs Status fixed"),
        (GOOD_FACTS.replace("open", "fixed"), "", "Status fixed needs Fixed in"),
        (GOOD_FACTS.replace("open", "merged"), "", "Status merged needs at least one Fix PR"),
        (GOOD_FACTS + "| Fix PRs | o/r#5 |\n| Open PRs | o/r#5 |\n", "", "listed as fix and as open PR"),
        (GOOD_FACTS + "| Fixed in | vllm soon |\n", "", "is not 'package release'"),
        ("", "| Action | Target | Value | When | What | Sources |\n|---|---|---|---|---|---|\n", "without"),
    ],
)
def test_malformed_facts_name_file_and_heading(facts: str, actions: str, message: str) -> None:
    with pytest.raises(ProblemFormatError) as caught:
        parse_problems(_doc(facts, actions), "reference/bad.md")
    assert "reference/bad.md > 'Broken heading'" in str(caught.value)
    assert message in str(caught.value)


ACTIONS = "| Action | Target | Value | When | What | Sources |\n|---|---|---|---|---|---|\n"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("| tweak | x | none | always | Do it. | o/r#1 |", "action 'tweak'"),
        ("| set | x | 1 | sometimes | Do it. | o/r#1 |", "when 'sometimes'"),
        ("| set | x | 1 | always | Do it. | none |", "cites no source"),
        ("| upgrade | vllm | none | always | Upgrade. | o/r#1 |", "names no release"),
        ("| upgrade | vllm | latest | always | Upgrade. | o/r#1 |", "names no release"),
        ("| set | x | 1 | | Do it. | o/r#1 |", "when ''"),
    ],
)
def test_malformed_actions_are_rejected(row: str, message: str) -> None:
    with pytest.raises(ProblemFormatError, match=re.escape(message)):
        parse_problems(_doc(actions=ACTIONS + row + "\n"), "reference/bad.md")


def test_load_problems_reparses_only_changed_files(tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    doc = tmp_path / "reference" / "a.md"
    doc.write_text(DOC, encoding="utf-8")
    first = load_problems(tmp_path)
    assert load_problems(tmp_path) is first
    doc.write_text(DOC.replace("The model ran past a stop token.", "Changed."), encoding="utf-8")
    stat = doc.stat()
    os.utime(doc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = load_problems(tmp_path)
    assert second is not first and second[0].cause == "Changed."
    assert problem_by_anchor(second, second[0].anchor) == second[0]
    assert problem_by_anchor(second, "reference/a.md#nope") is None


def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a new process has: no parsed problems in memory."""
    monkeypatch.setattr(problems_module, "_CACHE", {})


def test_load_problems_keeps_them_for_the_next_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "data" / "cache"
    (docs / "reference").mkdir(parents=True)
    doc = docs / "reference" / "a.md"
    doc.write_text(DOC, encoding="utf-8")
    parsed = load_problems(docs, cache)
    assert (cache / CACHE_FILE).is_file()

    # The next process reads the cache and parses nothing.
    _fresh_process(monkeypatch)
    calls: list[str] = []
    real_parse = problems_module.parse_problems
    monkeypatch.setattr(problems_module, "parse_problems", lambda *a: calls.append(a[1]) or real_parse(*a))
    assert load_problems(docs, cache) == parsed and calls == []

    # A changed doc is parsed again, and the cache follows it.
    doc.write_text(DOC.replace("The model ran past a stop token.", "Changed."), encoding="utf-8")
    stat = doc.stat()
    os.utime(doc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    _fresh_process(monkeypatch)
    assert load_problems(docs, cache)[0].cause == "Changed." and calls == ["reference/a.md"]
    _fresh_process(monkeypatch)
    assert load_problems(docs, cache)[0].cause == "Changed." and calls == ["reference/a.md"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # cut short
        lambda text: text.replace('"kind": "error"', '"kind": "bogus"'),  # not a Problem any more
        lambda text: text.replace('"key": ["', '"key": ["another parser ', 1),  # written by another version
        lambda text: "[]",
    ],
)
def test_a_damaged_or_foreign_cache_is_parsed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage) -> None:
    docs, cache = tmp_path / "docs", tmp_path / "cache"
    (docs / "reference").mkdir(parents=True)
    (docs / "reference" / "a.md").write_text(DOC, encoding="utf-8")
    parsed = load_problems(docs, cache)
    file = cache / CACHE_FILE
    file.write_text(damage(file.read_text(encoding="utf-8")), encoding="utf-8")
    _fresh_process(monkeypatch)
    assert load_problems(docs, cache) == parsed
    _fresh_process(monkeypatch)  # and the parse wrote a good cache again
    monkeypatch.setattr(problems_module, "parse_problems", lambda *a: pytest.fail("the cache was not rewritten"))
    assert load_problems(docs, cache) == parsed


def test_a_cache_that_cannot_be_written_costs_only_the_parse(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "reference").mkdir(parents=True)
    (docs / "reference" / "a.md").write_text(DOC, encoding="utf-8")
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder would go", encoding="utf-8")
    assert load_problems(docs, blocker)[0].title.startswith("Unexpected token 1")
    assert blocker.read_text(encoding="utf-8").startswith("a file")


def test_load_problems_reports_a_malformed_doc(tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "bad.md").write_text(_doc(GOOD_FACTS.replace("open", "maybe")), encoding="utf-8")
    with pytest.raises(ProblemFormatError, match=r"reference/bad\.md > 'Broken heading'"):
        load_problems(tmp_path)


# --- the real docs ------------------------------------------------------------------------------


def real_problems() -> tuple[Problem, ...]:
    return load_problems(REPO_ROOT)


def test_real_docs_parse_into_problems() -> None:
    problems = real_problems()
    assert len(problems) >= 5
    assert len({p.anchor for p in problems}) == len(problems)


def test_every_action_has_a_known_kind_condition_and_source() -> None:
    for problem in real_problems():
        for action in problem.actions:
            assert action.kind in ACTION_KINDS
            assert action.sources and all(w in WHENS for w in action.when), (problem.anchor, action)


def test_every_source_is_a_bundled_card() -> None:
    known = {card.id for card in bundled_cards()}
    for problem in real_problems():
        cited = set(problem.sources) | set(problem.fix_prs) | set(problem.open_prs)
        cited |= {s for action in problem.actions for s in action.sources}
        assert not cited - known, f"{problem.anchor} cites ids not in the KB: {sorted(cited - known)}"


def test_fix_prs_are_merged_and_open_prs_are_not() -> None:
    cards = {card.id: card for card in bundled_cards()}
    for problem in real_problems():
        for pr in problem.fix_prs:
            assert cards[pr].kind == "pull" and cards[pr].state == "merged", f"{problem.anchor}: {pr} is no merged PR"
        for pr in problem.open_prs:
            assert cards[pr].kind == "pull" and cards[pr].state == "open", f"{problem.anchor}: {pr} is not an open PR"


def test_every_upgrade_names_a_release_backed_by_a_merged_pr() -> None:
    cards = {card.id: card for card in bundled_cards()}
    upgrades = [(p, a) for p in real_problems() for a in p.actions if a.kind == "upgrade"]
    assert upgrades
    for problem, action in upgrades:
        assert action.value and re.match(r"^\d+(\.\d+)+", action.value), (problem.anchor, action)
        merged = [s for s in action.sources if cards[s].kind == "pull" and cards[s].state == "merged"]
        assert merged, f"{problem.anchor}: upgrade of {action.target} cites no merged PR"
        assert set(merged) <= set(problem.fix_prs) | {s for p in real_problems() for s in p.fix_prs}


def test_fixed_in_only_with_merged_fix_prs() -> None:
    for problem in real_problems():
        if problem.fixed_in:
            assert problem.status == "fixed" and problem.fix_prs, problem.anchor


def test_a_section_whose_fix_prs_all_have_a_checked_release_is_fixed_in_the_newest() -> None:
    """A card's released_in (a curator read it in release notes or the release packages) and the section's Fixed in
    say the same. A section whose fix PRs are all released is fixed, unless it says it is still open: there the merged
    PRs fix part of the problem and the rest has only open PRs (the section lists them)."""
    from packaging.version import Version

    from service.versions import parse_version

    cards = {card.id: card for card in bundled_cards()}
    placed = 0
    for problem in real_problems():
        releases = [cards[pr].released_in for pr in problem.fix_prs if cards[pr].released_in]
        if not releases:
            continue
        placed += 1
        newest = max(releases, key=lambda tag: parse_version(tag) or Version("0"))
        if len(releases) == len(problem.fix_prs):
            assert problem.status in {"fixed", "open"}, f"{problem.anchor}: every fix PR released, yet {problem.status}"
            if problem.status == "open":
                assert problem.open_prs, f"{problem.anchor}: still open with every fix PR released, but no open PR"
        if problem.fixed_in:
            assert newest.removeprefix("v") in problem.fixed_in.values(), (problem.anchor, newest, problem.fixed_in)
    assert placed, "at least one section's fix has a release read from its release notes"


def test_anchors_are_the_github_slugs_of_the_headings() -> None:
    for problem in real_problems():
        text = (REPO_ROOT / problem.doc).read_text(encoding="utf-8")
        assert re.search(rf"^#+ {re.escape(problem.title)}$", text, flags=re.M), problem.anchor
        assert problem.anchor == f"{problem.doc}#{github_slug(problem.title)}"


def test_error_problems_list_their_exact_errors() -> None:
    problem = problem_by_anchor(
        real_problems(), "reference/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006"
    )
    assert problem is not None and problem.kind == "error"
    assert "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006" in problem.errors
    assert any(a.kind == "avoid" and a.target == "ignore_eos" for a in problem.actions)
    # vllm#59254 (merged on main 2026-09-29) skips the stray token; the release packages show it first in 0.32.0.
    assert problem.status == "fixed" and problem.fixed_in == {"vllm": "0.32.0"}
    assert "vllm-project/vllm#59254" in problem.fix_prs
    checks = [a for a in problem.actions if a.kind == "check" and a.target == "vllm"]
    assert any("vllm-project/vllm#59254" in a.sources for a in checks)


def test_every_known_issues_section_is_a_problem() -> None:
    text = (REPO_ROOT / "reference" / "known-issues.md").read_text(encoding="utf-8")
    titles = re.findall(r"^### (.+)$", text, flags=re.M)
    parsed = {p.title for p in real_problems() if p.doc == "reference/known-issues.md"}
    assert titles and [t for t in titles if t not in parsed] == []
    assert all(p.kind == "error" for p in real_problems() if p.doc == "reference/known-issues.md")


def test_every_error_problem_has_an_action_or_says_why_not() -> None:
    for problem in real_problems():
        if problem.kind == "error" and not problem.actions:
            assert problem.status in {"unknown", "open"}, problem.anchor


def test_seed_assistantary_error_has_its_own_section() -> None:
    matching = [p for p in real_problems() if "openai_harmony.HarmonyError: Unknown role: assistantary" in p.errors]
    assert len(matching) == 1
    assert "vllm-project/vllm#29044" in matching[0].sources and matching[0].actions


@pytest.mark.parametrize("doc", ["reference/tool-calling-setup.md", "reference/model-updates.md"])
def test_every_setup_topic_is_a_setup_problem(doc: str) -> None:
    """Each leaf section an operator acts on (a heading with no sub-headings) carries a setup block."""
    text = (REPO_ROOT / doc).read_text(encoding="utf-8")
    found = re.findall(r"^(#{2,3}) (.+)$", text, flags=re.M)
    leaves = [t for i, (level, t) in enumerate(found) if i + 1 == len(found) or len(found[i + 1][0]) <= len(level)]
    parsed = {p.title: p for p in real_problems() if p.doc == doc}
    assert leaves and [t for t in leaves if t not in parsed] == []
    assert all(p.kind == "setup" and p.actions for p in parsed.values())


def test_tool_calling_flags_come_from_the_setup_section() -> None:
    flags = problem_by_anchor(real_problems(), "reference/tool-calling-setup.md#server-flags-for-gpt-oss")
    assert flags is not None
    sets = {(a.target, a.value) for a in flags.actions if a.kind == "set" and "tools" in a.when}
    assert {("--tool-call-parser", "openai"), ("--enable-auto-tool-choice", None)} <= sets
    assert any(a.kind == "upgrade" and a.target == "vllm" and a.value == "0.10.2" for a in flags.actions)


def test_every_when_value_is_documented() -> None:
    """The docstring under ``When`` explains each condition (``name:`` or a ``name, name:`` group)."""
    source = (REPO_ROOT / "indexer" / "problems.py").read_text(encoding="utf-8")
    explained = source.split('"""When an action applies.', 1)[1].split('"""', 1)[0]
    assert [w for w in WHENS if f"{w}:" not in explained and f"{w}," not in explained] == []


def test_a_cards_fixes_point_from_a_pr_to_what_it_fixes() -> None:
    """``fixes`` names the threads a card's PR fixes; an issue fixes nothing. A fixing PR of an issue belongs in the
    issue's references (or in the PR card's own fixes), else the index would make the issue the fix of its PR."""
    cards = {card.id: card for card in bundled_cards()}
    wrong = [card.id for card in cards.values() if card.kind == "issue" and card.fixes]
    assert not wrong, f"issue cards with fixes (move the PRs to references): {wrong}"
    for card in cards.values():
        for target in card.fixes:
            assert target != card.id, card.id
            if target in cards and cards[target].kind == "pull":
                # A PR may fix another PR's regression, never the PR that fixes it in turn.
                assert card.id not in cards[target].fixes, f"{card.id} and {target} each claim to fix the other"
