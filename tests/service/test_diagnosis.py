"""The verdict first: problem choice, version verdicts (affected, fixed, no release), actions and sources."""

from __future__ import annotations

import re
from typing import Any

import pytest

from indexer.documents import Document
from indexer.problems import Action, Problem, load_problems
from indexer.sources.cards import bundled_cards
from service.analysis.engines import ThreadEngines
from service.analysis.input import parse_input
from service.answer import Knowledge
from service.config import Settings
from service.diagnosis import Problems, actions, choose, diagnose, template, verdict, vllm_only
from service.models import ActionOut
from service.retrieval import Hit
from tests.service.support import FastComponents

ANCHOR = "reference/known-issues.md#unknown-thing"
LINE = "openai_harmony.HarmonyError: Unknown thing while parsing the header"


def _problem(**changes: Any) -> Problem:
    fields: dict[str, Any] = {
        "anchor": ANCHOR,
        "doc": "reference/known-issues.md",
        "title": "Unknown thing while parsing the header",
        "kind": "error",
        "errors": (LINE,),
        "side": "server",
        "change_side": ("server",),
        "cause": "The parser met a thing it does not know. More prose follows here.",
        "status": "fixed",
        "fixed_in": {"vllm": "0.14.0"},
        "fix_prs": ("o/r#2",),
        "actions": (
            Action(kind="upgrade", target="vllm", value="0.14.0", when=("always",), text="Up.", sources=("o/r#2",)),
            Action(kind="avoid", target="ignore_eos", when=("always",), text="Leave it out.", sources=("o/r#1",)),
            Action(kind="set", target="--enforce-eager", when=("streaming",), text="Set it.", sources=("o/r#1",)),
            Action(kind="workaround", target="retry", when=("benchmark",), text="Retry.", sources=("o/r#1",)),
        ),
        "sources": ("o/r#1", "o/r#2"),
    }
    fields.update(changes)
    return Problem(**fields)


def _pull(number: int, **changes: Any) -> Document:
    return Document(
        id=f"o/r#{number}", kind="pull", repo="o/r", number=number, title="fix", text="fix", state="merged", **changes
    )


KNOWLEDGE = Knowledge([_pull(2, fix_confirmed=True)])


def _verdict(problem: Problem, text: str, knowledge: Knowledge = KNOWLEDGE) -> Any:
    return verdict(problem, parse_input(text), knowledge)


def test_an_older_version_is_affected_and_upgrades_to_the_release_with_the_fix() -> None:
    status = _verdict(_problem(), f"vllm==0.11.0\n{LINE}")
    assert (status.status, status.fixed_in, status.your_version) == ("affected", "0.14.0", "0.11.0")
    assert status.text == "Fixed in vLLM 0.14.0, you run 0.11.0: upgrade."
    answer = diagnose(parse_input(f"vllm==0.11.0\n{LINE}"), Problems([_problem()]), KNOWLEDGE, hits=[], sections=[])
    assert answer is not None and answer.actions[0].kind == "upgrade"
    assert (answer.actions[0].value, answer.actions[0].target) == ("0.14.0", "vllm")
    assert "o/r#2" in answer.actions[0].sources


def test_a_release_no_report_has_confirmed_says_so_in_every_verdict() -> None:
    unconfirmed = Knowledge([_pull(2)])
    older = _verdict(_problem(), f"vllm==0.11.0\n{LINE}", unconfirmed)
    assert older.status == "affected" and older.text.startswith("Fixed in vLLM 0.14.0, you run 0.11.0: upgrade.")
    assert older.text.endswith("No report yet confirms the error gone in that release.")
    newer = _verdict(_problem(), f"vllm==0.14.1\n{LINE}", unconfirmed)
    assert newer.status == "has-fix" and "worth reporting" in newer.text
    unknown = _verdict(_problem(), LINE, unconfirmed)
    assert unknown.status == "fixed" and "No report yet confirms" in unknown.text
    assert "No report yet confirms" not in _verdict(_problem(), f"vllm==0.11.0\n{LINE}").text


def test_a_check_for_a_build_with_the_fix_pr_gives_way_to_the_upgrade_that_names_its_release() -> None:
    build = Action(kind="check", target="vllm", when=("always",), text="Use a build with o/r#2.", sources=("o/r#2",))
    other = Action(kind="check", target="vllm", when=("always",), text="Check o/r#1.", sources=("o/r#1",))
    problem = _problem()
    problem = problem.model_copy(update={"actions": (build, other, *problem.actions[1:])})
    answer = diagnose(parse_input(f"vllm==0.11.0\n{LINE}"), Problems([problem]), KNOWLEDGE, hits=[], sections=[])
    assert answer is not None and [a.kind for a in answer.actions][:2] == ["upgrade", "check"]
    assert answer.actions[1].text == "Check o/r#1."
    assert "Use a build with o/r#2." not in {a.text for a in answer.actions}
    unreleased = problem.model_copy(update={"status": "merged", "fixed_in": {}})
    kept = diagnose(parse_input(LINE), Problems([unreleased]), KNOWLEDGE, hits=[], sections=[])
    assert kept is not None and kept.actions[0].text == "Use a build with o/r#2."


def test_the_upgrade_text_names_the_verdicts_release_not_an_earlier_doc_step() -> None:
    """A section fixed in 0.14.0 by two PRs whose doc row upgrades to 0.13.0 (the first of them): the one
    upgrade offered says 0.14.0 in its label and its words, and names both PRs. Another package's upgrade
    row stays a step of its own."""
    always = ("always",)
    first = Action(kind="upgrade", target="vllm", value="0.13.0", when=always, text="Run 0.13.0.", sources=("o/r#4",))
    client = Action(kind="upgrade", target="litellm", value="1.75.6", when=always, text="LiteLLM.", sources=("o/r#1",))
    problem = _problem(fix_prs=("o/r#4", "o/r#2"))
    problem = problem.model_copy(update={"actions": (first, client, *problem.actions[1:])})
    both = Knowledge([_pull(2, fix_confirmed=True), _pull(4)])
    answer = diagnose(parse_input(f"vllm==0.11.0\n{LINE}"), Problems([problem]), both, hits=[], sections=[])
    assert answer is not None
    upgrades = [a for a in answer.actions if a.kind == "upgrade"]
    assert [(a.target, a.value) for a in upgrades] == [("vllm", "0.14.0"), ("litellm", "1.75.6")]
    assert upgrades[0].text == "Upgrade vLLM to 0.14.0 or newer, the first release with all of o/r#4, o/r#2."
    assert "Run 0.13.0." not in {a.text for a in answer.actions}
    same = problem.model_copy(update={"actions": (first.model_copy(update={"value": "0.14.0"}),)})
    kept = diagnose(parse_input(f"vllm==0.11.0\n{LINE}"), Problems([same]), both, hits=[], sections=[])
    assert kept is not None and kept.actions[0].text == "Run 0.13.0.", "a row naming that release keeps its words"


def test_another_engines_actions_go_only_to_that_engine() -> None:
    """An SGLang flag is offered only when the failure names SGLang; code that drives openai-harmony itself
    (non-vllm) is not offered for a vLLM failure."""
    on_sglang = Action(
        kind="set", target="--reasoning-parser", value="gpt-oss", when=("sglang",), text="S.", sources=("o/r#1",)
    )
    harmony = Action(kind="workaround", target="parser", when=("non-vllm",), text="H.", sources=("o/r#1",))
    plain = Action(kind="avoid", target="ignore_eos", when=("always",), text="A.", sources=("o/r#1",))
    problem = _problem(status="open", fixed_in={}, fix_prs=(), actions=(on_sglang, harmony, plain))

    def texts(text: str) -> list[str]:
        answer = diagnose(parse_input(f"{text}\n{LINE}"), Problems([problem]), KNOWLEDGE, hits=[], sections=[])
        assert answer is not None
        return [a.text for a in answer.actions]

    assert texts("python -m sglang.launch_server --model openai/gpt-oss-20b") == ["S.", "H.", "A."]
    assert texts("vllm serve openai/gpt-oss-20b") == ["A."]
    assert texts("gpt-oss-20b") == ["A.", "H."]  # no engine named: the harmony workaround may apply, after


def test_a_version_with_the_fix_is_told_to_look_elsewhere_and_gets_no_upgrade() -> None:
    text = f"vLLM API server version 0.14.1\n{LINE}"
    status = _verdict(_problem(), text)
    assert status.status == "has-fix" and "already has the fix" in status.text and "look elsewhere" in status.text
    answer = diagnose(parse_input(text), Problems([_problem()]), KNOWLEDGE, hits=[], sections=[])
    assert answer is not None and "upgrade" not in {a.kind for a in answer.actions}


def test_the_banner_of_a_newer_vllm_log_gives_the_release_the_verdict_reads() -> None:
    """vLLM 0.15.0+ names its version only beside the start-up logo; the verdict reads it there."""
    banner = "(APIServer pid=1) INFO 11-27 10:00:01 [utils.py:299]  \u2588 \u2580\u2584\u2580 \u2588  version {}\n"
    assert _verdict(_problem(), banner.format("0.14.1") + LINE).status == "has-fix"
    older = _verdict(_problem(), banner.format("0.12.0") + LINE)
    assert older.status != "has-fix" and "0.12.0" in older.text


def test_no_release_with_a_fix_names_the_open_pr_and_never_upgrades() -> None:
    proposed = Action(kind="upgrade", target="vllm", value="0.14.0", when=("always",), text="Up.", sources=("o/r#3",))
    problem = _problem(status="open", fixed_in={}, fix_prs=(), open_prs=("o/r#3",))
    problem = problem.model_copy(update={"actions": (proposed, *problem.actions[1:])})
    status = _verdict(problem, f"vllm 0.11.0\n{LINE}")
    assert status.status == "no-release" and status.fixed_in is None
    assert status.text == "No release has a fix (open PR o/r#3): use the workaround."
    answer = diagnose(parse_input(LINE), Problems([problem]), KNOWLEDGE, hits=[], sections=[])
    assert answer is not None and all(a.kind != "upgrade" for a in answer.actions)
    assert "o/r#3" not in {s for a in answer.actions for s in a.sources}, "an open PR is not a fix"


def test_a_release_the_sync_verified_wins_and_an_unreleased_merge_says_so() -> None:
    placed = Knowledge([_pull(2, released_in="v0.13.0", release_checked="v0.15.0", release_source="github")])
    status = _verdict(_problem(), f"vllm==0.13.0\n{LINE}", placed)
    assert (status.status, status.fixed_in, status.release_verified) == ("has-fix", "0.13.0", True)
    pending = Knowledge([_pull(2, release_checked="v0.12.0", release_source="github")])
    status = _verdict(_problem(status="merged", fixed_in={}), LINE, pending)
    assert status.status == "unreleased" and "v0.12.0" in status.text
    unchecked = _verdict(_problem(status="merged", fixed_in={}), LINE)
    assert status.status == "unreleased" and "not verified" in unchecked.text


def test_unknown_version_says_which_release_has_the_fix() -> None:
    status = _verdict(_problem(), LINE)
    assert status.status == "fixed" and status.your_version is None and "0.14.0" in status.text


def test_actions_that_fit_the_input_come_first_and_cite_the_section() -> None:
    problem = _problem(status="open", fixed_in={}, fix_prs=())
    problems = Problems([problem.model_copy(update={"actions": problem.actions[1:]})])
    plain = diagnose(parse_input(LINE), problems, KNOWLEDGE, hits=[], sections=[])
    streamed = diagnose(parse_input(f"stream=true\n{LINE}"), problems, KNOWLEDGE, hits=[], sections=[])
    assert plain is not None and streamed is not None
    assert [a.target for a in plain.actions] == ["ignore_eos", "--enforce-eager", "retry"]
    assert [a.target for a in streamed.actions][:2] == ["ignore_eos", "--enforce-eager"]
    assert plain.actions[1].when == "streaming"
    for action in plain.actions:
        assert "references/known-issues.md#unknown-thing" in action.sources
    assert plain.problem == "references/known-issues.md#unknown-thing"
    assert plain.summary == "The parser met a thing it does not know."


def test_the_same_error_with_another_detail_finds_its_problem() -> None:
    listed = "openai_harmony.HarmonyError: Unknown role: <|start|>assistant"
    problem = _problem(errors=(listed,), title="Unknown role")
    assert template("openai_harmony.harmonyerror: unknown role: <|start|>assistant") == "unknown role:"
    assert template("openai_harmony.harmonyerror: unexpected token 1") is None
    chosen = choose(parse_input("openai_harmony.HarmonyError: Unknown role: assistantary"), Problems([problem]), [], [])
    assert chosen is not None and chosen[0] is problem and chosen[1] == "high"


def _section(confidence: str) -> Hit:
    doc = Document(id=ANCHOR, kind="reference-section", title="x", text="x")
    return Hit(doc=doc, score=0.5, confidence=confidence, why=["x"])  # type: ignore[arg-type]


def _thread_hit(number: int, confidence: str = "medium", repo: str = "o/r") -> Hit:
    doc = Document(id=f"{repo}#{number}", kind="issue", repo=repo, number=number, title="t", text="t")
    return Hit(doc=doc, score=0.5, confidence=confidence, why=["x"])  # type: ignore[arg-type]


def test_a_question_goes_by_its_section_an_unlisted_error_line_needs_a_strong_one() -> None:
    problems = Problems([_problem(kind="setup", errors=())])
    question = parse_input("which flags do I need so tool calls work with the 120b model?")
    assert choose(question, problems, [], [_section("medium")]) is not None, "a setup question: by its words"
    told = parse_input("tool calls do not work with the 120b model")
    assert choose(told, problems, [], [_section("medium")]) is None, "a report needs the best issue to agree"
    assert choose(told, problems, [_thread_hit(1)], [_section("medium")]) is not None
    error = parse_input("ValueError: something else entirely went wrong in the parser")
    assert choose(error, problems, [_thread_hit(1)], [_section("medium")]) is None
    assert choose(error, problems, [], [_section("high")]) is not None


def test_a_section_found_by_words_at_medium_needs_the_best_issue_to_agree() -> None:
    """Words a section shares with the input are weaker than the threads: at medium, the section is the
    diagnosis only when it cites the best-matching issue (on the outside set's tune half, most medium
    verdicts that cited no labelled thread also disagreed with the first issue)."""
    problems = Problems([_problem(errors=())])
    said = parse_input("the tool calls come back empty with the 120b model")
    assert choose(said, problems, [_thread_hit(1)], [_section("medium")]) is not None  # o/r#1 is a source
    assert choose(said, problems, [_thread_hit(9), _thread_hit(1)], [_section("medium")]) is None
    assert choose(said, problems, [], [_section("medium")]) is None
    assert choose(said, problems, [_thread_hit(9)], [_section("high")]) is not None


def test_a_thread_the_user_names_chooses_the_problem_that_cites_it() -> None:
    problems = Problems([_problem(kind="setup", errors=())])
    asked = parse_input("is o/r#1 fixed yet? we run vllm 0.13.0")
    assert asked.threads == ["o/r#1"]
    problem, confidence, why = choose(asked, problems, [], []) or (None, None, "")
    assert problem is not None and confidence == "high" and "o/r#1" in why
    assert choose(parse_input("is o/r#9 fixed yet?"), problems, [], []) is None  # a thread no problem cites
    assert verdict(problem, asked, KNOWLEDGE).status == "affected"  # and the verdict reads the version


def test_a_pasted_response_chooses_the_section_named_for_what_it_shows() -> None:
    leaking = _problem(anchor="reference/known-issues.md#r", title="Reasoning appears in content")
    problems = Problems([_problem(), leaking])
    leak = parse_input('{"choices":[{"message":{"content":"<|channel|>analysis<|message|>Hi.<|end|>"}}]}')
    problem, confidence, why = choose(leak, problems, [], []) or (None, None, "")
    assert problem is not None and problem.anchor == "reference/known-issues.md#r"
    assert confidence == "medium" and "pasted response" in why  # the symptom, not yet its cause


def test_a_section_of_another_engines_threads_does_not_diagnose_by_words() -> None:
    """A problem built from one engine's threads is chosen by its words only for that engine (or none)."""
    problems = Problems([_problem(kind="setup", errors=(), sources=("vllm-project/vllm#1",), fix_prs=())])
    threads = ThreadEngines(engine={"vllm-project/vllm#1": "vllm"})
    section = [_section("medium")]
    agree = [_thread_hit(1, repo="vllm-project/vllm")]  # the best issue is a thread the section cites
    on_ollama = parse_input("ollama 0.12 with gpt-oss:20b: tool calls come back as text in the content")
    assert on_ollama.failure_engines == ["ollama"]
    assert choose(on_ollama, problems, agree, section, threads) is None
    on_vllm = parse_input("vllm 0.10.1 with gpt-oss-20b: tool calls come back as text in the content")
    assert choose(on_vllm, problems, agree, section, threads) is not None
    unnamed = parse_input("with gpt-oss-20b, tool calls come back as text in the content")
    assert choose(unnamed, problems, agree, section, threads) is not None
    # An engine-neutral problem (threads of no engine) fits any engine; its error string always does.
    neutral = Problems([_problem(kind="setup", errors=(), sources=("openai/harmony#1",), fix_prs=())])
    assert choose(on_ollama, neutral, [_thread_hit(1, repo="openai/harmony")], section, threads) is not None
    quoted = parse_input(f"ollama 0.12: {LINE}")
    assert choose(quoted, Problems([_problem(sources=("vllm-project/vllm#1",), fix_prs=())]), [], [], threads)


def test_a_problem_seen_only_on_another_gpu_platform_does_not_diagnose_by_words() -> None:
    """A start-up problem whose threads are all NVIDIA's is chosen by its words only for an NVIDIA or an
    unnamed GPU; its own error string still finds it anywhere."""
    problems = Problems([_problem(kind="setup", errors=(), sources=("vllm-project/vllm#1",), fix_prs=())])
    threads = ThreadEngines(engine={"vllm-project/vllm#1": "vllm"}, platform={"vllm-project/vllm#1": "nvidia"})
    section = [_section("medium")]
    agree = [_thread_hit(1, repo="vllm-project/vllm")]
    words = "vllm serve openai/gpt-oss-120b --tensor-parallel-size 4 never finishes starting"
    assert choose(parse_input(words), problems, agree, section, threads) is not None
    assert choose(parse_input(words + " on two H100"), problems, agree, section, threads) is not None
    on_amd = parse_input(words + " on four MI300X")
    assert on_amd.platform == "amd"
    assert choose(on_amd, problems, agree, section, threads) is None
    quoted = parse_input(f"{LINE} on four MI300X")
    assert choose(quoted, Problems([_problem(sources=("vllm-project/vllm#1",), fix_prs=())]), [], [], threads)


def test_a_report_from_another_engine_gets_no_vllm_only_advice() -> None:
    """vLLM's release, flags and variables are no advice for an SGLang or Ollama report; the rest stays."""
    problem = _problem(
        fix_prs=("vllm-project/vllm#2",),
        actions=(
            Action(kind="set", target="--tool-call-parser", value="openai", when=("always",), text="Set it.",
                   sources=("vllm-project/vllm#1",)),
            Action(kind="set", target="VLLM_ATTENTION_BACKEND", value="TRITON_ATTN", when=("always",),
                   text="Pick it.", sources=("o/r#1",)),
            Action(kind="workaround", target="retry", when=("always",), text="Retry.",
                   sources=("vllm-project/vllm#1",)),
            Action(kind="set", target="--max-tokens", when=("always",), text="Cap it.", sources=("o/r#1",)),
        ),
    )  # fmt: skip
    knowledge = Knowledge([_pull(2).model_copy(update={"id": "vllm-project/vllm#2", "repo": "vllm-project/vllm"})])
    on_sglang = parse_input(f"sglang 0.5.2: {LINE}")
    status = verdict(problem, on_sglang, knowledge)
    assert status.status == "no-fix" and "SGLang" in status.text and "vLLM 0.14.0" in status.text
    kept = [a.target for a in actions(problem, status, on_sglang)]
    assert kept == ["retry", "--max-tokens"]  # a flag backed by other threads is not only vLLM's
    # vllm-mlx is an MLX server whose name carries vLLM's: its threads do not make a flag vLLM's.
    mlx_flag = Action(kind="set", target="--tool-call-parser", value="harmony", when=("always",), text="Set it.",
                      sources=("waybarrios/vllm-mlx#581",))  # fmt: skip
    assert not vllm_only(mlx_flag) and vllm_only(problem.actions[0])
    # The user's own code calling openai-harmony, no server named: vLLM's release is not its fix either.
    own_code = parse_input(f">>> from openai_harmony import load_harmony_encoding\n>>> enc.parse()\n{LINE}")
    status = verdict(problem, own_code, knowledge)
    assert status.status == "no-fix" and "openai-harmony in your own code" in status.text
    assert "vllm" not in [a.target for a in actions(problem, status, own_code)]
    on_vllm = parse_input(f"vllm 0.11.0: {LINE}")
    status = verdict(problem, on_vllm, knowledge)
    assert status.status == "affected"
    shown = [a.target for a in actions(problem, status, on_vllm)]
    assert shown == ["vllm", "--tool-call-parser", "VLLM_ATTENTION_BACKEND"]


def _workarounds(*rows: tuple[str, str, str]) -> Problem:
    """A not-a-bug setup problem whose actions are workarounds (target, text, source), always offered."""
    return _problem(
        kind="setup",
        errors=(),
        fix_prs=(),
        fixed_in={},
        status="not-a-bug",
        actions=tuple(
            Action(kind="workaround", target=target, when=("always",), text=text, sources=(source,))
            for target, text, source in rows
        ),
    )


def _shown(problem: Problem, text: str) -> list[str]:
    """The targets of the actions the diagnosis gives ``text`` for ``problem``."""
    parsed = parse_input(text)
    return [a.target for a in actions(problem, verdict(problem, parsed, KNOWLEDGE), parsed)]


def test_a_symptom_under_another_engines_command_gets_no_vllm_workaround() -> None:
    """A behaviour report whose only engine is named by its launch command (no failing line names one) runs that
    engine: a workaround about vLLM's endpoints, backed only by vLLM threads, is not offered; one that does not
    name vLLM stays."""
    problem = _workarounds(
        ("endpoint", "Call vLLM's acme endpoint instead.", "vllm-project/vllm#1"),
        ("retry", "Retry the acme call.", "vllm-project/vllm#1"),
    )
    report = (
        "The answer is missing from the acme field while the reasoning is there.\n\n"
        "python3 -m dynamo.trtllm \\\n    --model-path /models/gpt-oss-120b \\\n    --tensor-parallel-size 2\n"
    )
    assert {"tensorrt-llm"} <= set(parse_input(report).engines) and "vllm" not in parse_input(report).engines
    assert _shown(problem, report) == ["retry"]
    assert _shown(problem, report.replace("python3 -m dynamo.trtllm", "vllm serve")) == ["endpoint", "retry"]


def test_with_only_vllm_steps_the_status_points_at_the_engines_threads_only_when_one_is_listed() -> None:
    vllm_step = _workarounds(("endpoint", "Call vLLM's acme endpoint instead.", "vllm-project/vllm#1"))
    problems = Problems([vllm_step.model_copy(update={"errors": (LINE,)})])
    report = parse_input(f"sglang 0.5.2: {LINE}")
    threads = ThreadEngines(repo_engine={"sgl-project/sglang": "sglang"})

    def status(*hits: Hit) -> str:
        found = diagnose(report, problems, KNOWLEDGE, hits=list(hits), sections=[], threads=threads)
        assert found is not None and not found.actions
        return found.verdict.text

    assert "see its own threads below" in status(_thread_hit(5, repo="sgl-project/sglang"))
    assert "none of the issues below is about it" in status(_thread_hit(5, repo="vllm-project/vllm"))


def test_a_step_to_call_an_endpoint_is_left_out_when_the_inputs_request_already_calls_it() -> None:
    problem = _workarounds(("endpoint", "Call /v1/chat/completions or /v1/responses: the acme path is raw.", "o/r#1"))
    symptom = "the acme answer comes back with the analysis text glued into content"

    def shown(text: str) -> list[str]:
        return _shown(problem, text)

    assert shown(f'curl -X POST "https://acme.example/oai/api/v1/chat/completions" -d {{}}\n{symptom}') == []
    assert shown(f'INFO:     127.0.0.1:51234 - "POST /v1/responses HTTP/1.1" 200 OK\n{symptom}') == []
    # A server's start-up route list names every path it serves: no request of the input's.
    routes = "(APIServer pid=7) INFO 11-23 10:01:02 [launcher.py:44] Route: /v1/chat/completions, Methods: POST"
    assert shown(f"{routes}\n{symptom}") == ["endpoint"]
    assert shown(f'curl "http://localhost:8000/v1/completions" -d {{}}\n{symptom}') == ["endpoint"]


# --- the real docs through the engine ----------------------------------------------------------------

ERROR_200002 = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"


@pytest.fixture
def engine(fast_components: FastComponents, settings: Settings) -> Any:
    return fast_components.engine(settings)


def test_the_200002_line_gets_its_problem_and_no_reporter_setting_as_advice(engine: Any) -> None:
    answer = engine.lookup(f"vllm 0.11.0 {ERROR_200002}\nsampling params {{'ignore_eos': True}}")
    assert answer.diagnosis is not None
    section = "references/known-issues.md#unexpected-token-200002-while-expecting-start-token-200006"
    assert answer.diagnosis.problem == section
    assert answer.diagnosis.confidence == "high" and 1 <= len(answer.diagnosis.actions) <= 3
    verdict = answer.diagnosis.verdict
    # vllm#59254 first ships in 0.32.0 (the release packages): 0.11.0 is told to upgrade, and that no report has yet
    # confirmed the error gone there (its card is not fix_confirmed).
    assert verdict.status == "affected" and verdict.fix_prs == ["vllm-project/vllm#59254"], verdict
    assert verdict.fixed_in == "0.32.0" and verdict.your_version == "0.11.0"
    assert "No report yet confirms" in verdict.text
    typed = [f for item in answer.advice for f in item.flags]
    assert not [f for f in typed if f.flag.strip("-").replace("-", "_") == "ignore_eos" and f.action == "set"]
    said = {t for fix in answer.fixes for t in [fix.summary, *fix.steps]}
    assert not [a for a in answer.advice if a.summary in said]


def test_every_upgrade_in_the_real_docs_names_a_release_with_a_merged_pr(settings: Settings) -> None:
    merged = {card.id for card in bundled_cards() if card.state == "merged"}
    problems = load_problems(settings.docs_dir)
    assert problems
    for problem in problems:
        for action in problem.actions:
            if action.kind == "upgrade":
                assert action.value and re.match(r"^\d+(\.\d+)+", action.value), problem.anchor
                assert merged & {*action.sources, *problem.fix_prs}, problem.anchor


def test_the_bundled_vllm_mlx_section_says_which_release_fixed_it(settings: Settings) -> None:
    """vllm-mlx#581's first release was read in the v0.4.0 release notes (card released_in); the section's
    Fixed in carries it, so a reporter on an older vllm-mlx is told to upgrade and a newer one is not."""
    from indexer.sources.cards import card_documents

    anchor = "reference/known-issues.md#tool-history-flattened-to-text-on-vllm-mlx"
    problem = next(p for p in load_problems(settings.docs_dir) if p.anchor == anchor)
    card = next(c for c in bundled_cards() if c.id == "waybarrios/vllm-mlx#581")
    assert problem.fixed_in == {"vllm-mlx": card.released_in.removeprefix("v")} == {"vllm-mlx": "0.4.0"}
    knowledge = Knowledge(card_documents())
    symptom = "earlier assistant tool calls appear in the rendered prompt as [Calling tool: lookup(q=x)] text"
    older = verdict(problem, parse_input(f"vllm-mlx 0.3.2\n{symptom}"), knowledge)
    assert (older.status, older.package, older.fixed_in) == ("affected", "vllm-mlx", "0.4.0")
    assert older.your_version == "0.3.2"
    assert older.text == "Fixed in vllm-mlx 0.4.0, you run 0.3.2: upgrade."
    assert older.fix_prs == ["waybarrios/vllm-mlx#581"] and not older.release_verified
    newer = verdict(problem, parse_input(f"vllm-mlx==0.4.1\n{symptom}"), knowledge)
    assert newer.status == "has-fix" and "first in 0.4.0" in newer.text
    vllm_only = verdict(problem, parse_input(f"vLLM 0.10.1\n{symptom}"), knowledge)
    assert vllm_only.status == "fixed" and vllm_only.your_version is None, "a vLLM version is not a vllm-mlx one"


def test_a_doc_upgrade_applies_only_below_its_release() -> None:
    problem = _problem(status="not-a-bug", fixed_in={}, fix_prs=())
    older = diagnose(parse_input(f"vllm==0.13.0\n{LINE}"), Problems([problem]), KNOWLEDGE, hits=[], sections=[])
    newer = diagnose(parse_input(f"vllm==0.15.0\n{LINE}"), Problems([problem]), KNOWLEDGE, hits=[], sections=[])
    assert older is not None and newer is not None
    assert [a.value for a in older.actions if a.kind == "upgrade"] == ["0.14.0"]
    assert not [a for a in newer.actions if a.kind == "upgrade"]


def test_an_action_shows_the_setting_it_changes() -> None:
    def out(**kw: Any) -> str:
        return ActionOut(text="t", sources=["o/r#1"], **kw).label()

    assert out(kind="set", target="--tool-call-parser", value="openai") == "set --tool-call-parser openai"
    assert out(kind="set", target="efficient_eos", value="false") == "set efficient_eos=false"
    assert out(kind="avoid", target="ignore_eos", value="true") == "avoid ignore_eos"
    assert out(kind="avoid", target="--tool-call-parser", value="hermes") == "avoid --tool-call-parser hermes"
    assert out(kind="upgrade", target="vllm", value="0.10.2") == "upgrade vllm 0.10.2"
    assert out(kind="check", target="generation_config.json", value="x") == "check"


def test_what_a_pasted_response_shows_names_sections_of_the_real_docs(settings: Settings) -> None:
    from service.analysis import input as parsing

    problems = Problems(load_problems(settings.docs_dir))
    samples = [
        '{"choices":[{"message":{"content":"<|channel|>analysis<|message|>Hi.<|end|>"}}]}',
        '{"choices":[{"message":{"content":"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"}}]}',
        '{"choices":[{"message":{"content":null},"finish_reason":"stop"}]}',
        '{"tool_calls":[{"function":{"name":"f<|channel|>commentary","arguments":"{}"}}]}',
    ]
    shown = [title for sample in samples for title in parsing._response_facts(sample)]
    assert len(shown) == 4
    assert all(problems.by_title(title) is not None for title in shown), shown


def test_a_flag_the_input_shows_set_is_not_advised_again() -> None:
    problem = _problem(
        status="open",
        fixed_in={},
        fix_prs=(),
        actions=(
            Action(
                kind="set", target="--tool-call-parser", value="openai", when=("always",), text="P.", sources=("o/r#1",)
            ),
            Action(kind="set", target="--enable-auto-tool-choice", when=("always",), text="A.", sources=("o/r#1",)),
            Action(kind="workaround", target="retry", when=("always",), text="Retry.", sources=("o/r#1",)),
        ),
    )
    problems = Problems([problem])
    bare = diagnose(parse_input(LINE), problems, KNOWLEDGE, hits=[], sections=[])
    assert bare is not None and [a.target for a in bare.actions] == [
        "--tool-call-parser",
        "--enable-auto-tool-choice",
        "retry",
    ]
    serve = f"vllm serve openai/gpt-oss-20b --tool-call-parser openai --enable-auto-tool-choice\n{LINE}"
    shown = diagnose(parse_input(serve), problems, KNOWLEDGE, hits=[], sections=[])
    assert shown is not None and [a.target for a in shown.actions] == ["retry"]
    other = f"vllm serve openai/gpt-oss-20b --tool-call-parser hermes\n{LINE}"
    changed = diagnose(parse_input(other), problems, KNOWLEDGE, hits=[], sections=[])
    assert changed is not None and [a.target for a in changed.actions][0] == "--tool-call-parser", "another value"
    works = f"vLLM: with stream=true the tool calls come back properly; non-streaming they do not.\n{LINE}"
    inferred = diagnose(parse_input(works), problems, KNOWLEDGE, hits=[], sections=[])
    assert inferred is not None and [a.target for a in inferred.actions] == ["retry"], "tool calls work in a mode"


def test_a_clients_section_diagnoses_only_an_input_that_names_that_client() -> None:
    """The reference docs' client sections (LangChain, LiteLLM, ...) have only that client's actions: words or
    a thread they cite do not make them the diagnosis of another application's report."""
    client_only = (Action(kind="set", target="use_responses_api", value="false", when=("langchain", "tools"),
                          text="Chat Completions.", sources=("o/r#1",)),)  # fmt: skip
    problems = Problems([_problem(errors=(), actions=client_only)])
    said = "the tool calls come back empty with the 120b model"
    assert choose(parse_input(said), problems, [_thread_hit(1)], [_section("medium")]) is None
    named = parse_input(f"langchain_openai ChatOpenAI: {said}")
    assert choose(named, problems, [_thread_hit(1)], [_section("medium")]) is not None
