"""End to end with the real parts: the bundled model, Chroma, openai-harmony, the bundled KB and docs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from service.app import create_app
from service.cli import main
from service.config import Settings
from service.engine import LookupEngine
from tests.service.support import wait_until

pytestmark = pytest.mark.slow

# (query, ids of which one must be in the top 5): real error lines from gpt-oss deployments.
KNOWN = [
    (
        "(APIServer pid=1) ERROR 06-23 09:42:17 [serving.py:932] openai_harmony.HarmonyError: "
        "Unexpected token 200002 while expecting start token 200006",
        {
            "vllm-project/vllm#46464",
            "vllm-project/vllm#50690",
            "vllm-project/vllm#56216",
            "vllm-project/vllm#47350",
        },
    ),
    (
        "(APIServer pid=312) ERROR 09-02 17:45:51 [serving_chat.py:1145] openai_harmony.HarmonyError: "
        "unexpected tokens remaining in message header",
        {"vllm-project/vllm#23567", "openai/harmony#82", "vllm-project/vllm#28303", "openai/harmony#38"},
    ),
    (
        "(EngineCore_0 pid=4179) ERROR 08-15 19:02:36 [core.py:683] "
        "ModuleNotFoundError: No module named 'triton_kernels'",
        {"vllm-project/vllm#23008", "vllm-project/vllm#22290", "openai/gpt-oss#45"},
    ),
]


@pytest.fixture(scope="module")
def engine(built_index: Settings) -> Iterator[LookupEngine]:
    engine = LookupEngine.open(built_index, build_if_empty=False)
    yield engine
    engine.close()


@pytest.mark.parametrize(("query", "relevant"), KNOWN, ids=["200002", "header", "triton_kernels"])
def test_known_error_returns_its_issue_in_the_top_results(engine: LookupEngine, query: str, relevant: set[str]) -> None:
    answer = engine.lookup(query, top_k=5)
    ids = [issue.id for issue in answer.issues]
    assert relevant & set(ids), ids
    assert not answer.no_confident_match and not answer.degraded
    assert answer.fixes and all(fix.sources for fix in answer.fixes)
    assert answer.index.documents > 600 and answer.index.built_at is not None


def test_the_thread_titled_with_the_exact_error_ranks_first(engine: LookupEngine) -> None:
    line = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    for query in (KNOWN[0][0], line):
        answer = engine.lookup(query, top_k=10)
        assert answer.issues[0].id == "vllm-project/vllm#50690", [i.id for i in answer.issues]
        scores = [i.score for i in answer.issues]
        assert scores == sorted(scores, reverse=True)


def test_a_setup_question_is_answered_by_its_setup_problem(engine: LookupEngine) -> None:
    answer = engine.lookup("which flags do I need for tool calling with gpt-oss-120b on vLLM 0.11?")
    assert answer.diagnosis is not None, answer.issues
    assert answer.diagnosis.kind == "setup"
    assert answer.diagnosis.problem == "references/tool-calling-setup.md#server-flags-for-gpt-oss"
    labels = [a.label() for a in answer.diagnosis.actions]
    assert "set --tool-call-parser openai" in labels, labels
    assert not [a for a in answer.diagnosis.actions if a.kind == "upgrade"], "0.11 already has the parser"


def test_unknown_role_gets_its_problem(engine: LookupEngine) -> None:
    answer = engine.lookup("openai_harmony.HarmonyError: Unknown role: assistantary")
    assert answer.diagnosis is not None and answer.diagnosis.confidence == "high"
    assert "unknown-role" in answer.diagnosis.problem and answer.diagnosis.actions
    assert not answer.no_confident_match


def test_tokens_are_decoded_by_the_real_harmony_encoding(engine: LookupEngine) -> None:
    answer = engine.lookup(KNOWN[0][0])
    tokens = {t.id: t for t in answer.analysis.tokens}
    assert tokens[200002].text == "<|return|>" and tokens[200002].special
    assert tokens[200006].text == "<|start|>"
    assert answer.analysis.origin.side == "server"
    assert answer.analysis.reproduction is not None and answer.analysis.reproduction["error"]


def test_reference_section_fix_carries_its_anchor(engine: LookupEngine) -> None:
    answer = engine.lookup(KNOWN[2][0])
    sections = [s for fix in answer.fixes for s in fix.sources if s.startswith("references/")]
    assert any(s.startswith("references/known-issues.md#") for s in sections), answer.fixes


def test_unrelated_text_says_no_confident_match(engine: LookupEngine) -> None:
    answer = engine.lookup("the office printer jams on page two of every document")
    assert answer.no_confident_match
    assert all(issue.confidence != "high" for issue in answer.issues)
    assert answer.fixes == []


def test_http_service_answers_from_the_built_index(built_index: Settings) -> None:
    app = create_app(built_index)
    with TestClient(app) as client:
        wait_until(lambda: app.state.runtime.state != "starting", timeout=120)
        assert app.state.runtime.state == "ready", app.state.runtime.error
        response = client.post("/lookup", content=KNOWN[1][0].encode(), headers={"content-type": "text/plain"})
        assert response.status_code == 200, response.text
        assert KNOWN[1][1] & {i["id"] for i in response.json()["issues"]}
        status = client.get("/v1/index/status").json()
        assert status["documents"] > 600 and status["generation"]
        assert client.get("/health").json()["status"] == "ok"


def test_cli_lookup_runs_in_process_on_the_local_index(built_index: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_DATA_DIR", str(built_index.data_dir))
    result = CliRunner().invoke(main, ["lookup", KNOWN[2][0]])
    assert result.exit_code == 0, result.output
    assert KNOWN[2][1] & {word.rstrip(":") for word in result.stdout.split()}
    assert "building" not in result.stderr.lower()


def test_cli_lookup_warns_when_the_index_has_no_thread_from_a_repo(
    built_index: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_DATA_DIR", str(built_index.data_dir))
    result = CliRunner().invoke(main, ["lookup", "--local", "--repo", "nobody/nothing", KNOWN[1][0]])
    assert result.exit_code == 0, result.output
    assert "the index holds no thread from nobody/nothing" in result.stderr
    known = CliRunner().invoke(main, ["lookup", "--local", "--repo", "vllm-project/vllm", KNOWN[1][0]])
    assert known.exit_code == 0 and "warning" not in known.stderr
