"""POST /lookup over the fast engine: both media types, the contract's shape, the input limits."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi.testclient import TestClient

from service.models import LookupResponse

ERROR = (
    "(APIServer pid=1) ERROR 06-23 09:42:17 [serving.py:932] openai_harmony.HarmonyError: "
    "Unexpected token 200002 while expecting start token 200006"
)
LIMIT = 64 * 1024  # the `settings` fixture's max_body_bytes


def test_json_lookup_returns_the_contract(client: TestClient) -> None:
    response = client.post("/lookup", json={"error": ERROR, "top_k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    answer = LookupResponse.model_validate(body)
    assert set(body) >= {
        "query",
        "analysis",
        "issues",
        "fixes",
        "advice",
        "index",
        "no_confident_match",
        "degraded",
    }
    assert len(answer.issues) <= 3
    assert answer.query.signatures and "200002" in answer.query.normalized
    assert {t.id for t in answer.analysis.tokens} >= {200002, 200006}
    assert next(t for t in answer.analysis.tokens if t.id == 200006).special
    assert answer.index.documents > 600
    for issue in answer.issues:
        assert issue.id == f"{issue.repo}#{issue.number}"
    for fix in answer.fixes:
        assert fix.sources


def test_text_plain_body_is_the_error(client: TestClient) -> None:
    as_text = client.post("/lookup?top_k=2", content=ERROR.encode(), headers={"content-type": "text/plain"})
    as_json = client.post("/lookup", json={"error": ERROR, "top_k": 2})
    assert as_text.status_code == 200, as_text.text
    assert [i["id"] for i in as_text.json()["issues"]] == [i["id"] for i in as_json.json()["issues"]]
    assert len(as_text.json()["issues"]) <= 2


def test_body_without_content_type_is_sniffed(client: TestClient) -> None:
    response = client.post("/lookup", content=ERROR.encode(), headers={"content-type": ""})
    assert response.status_code == 200, response.text
    answer = LookupResponse.model_validate(response.json())
    # Read as the error text itself, not as a JSON document: the parsed query is the line, tokens decoded.
    assert "200002" in answer.query.normalized and answer.query.signatures
    assert {t.id for t in answer.analysis.tokens} >= {200002, 200006}


def test_repos_filter_restricts_issues(client: TestClient) -> None:
    response = client.post("/lookup", json={"error": ERROR, "top_k": 10, "repos": ["openai/harmony"]})
    assert response.status_code == 200
    assert {i["repo"] for i in response.json()["issues"]} <= {"openai/harmony"}


def test_malformed_bodies_are_400(client: TestClient) -> None:
    for content, media in [
        (b'{"error": ', "application/json"),
        (b"\xc3\x28", "text/plain"),
        (b"\xc3\x28", "application/json"),
        (b"[" * 50_000, "application/json"),  # RecursionError inside json
        (b"<xml/>", "application/xml"),
    ]:
        response = client.post("/lookup", content=content, headers={"content-type": media})
        assert response.status_code == 400, (content[:20], media, response.text)


def test_invalid_fields_are_422(client: TestClient) -> None:
    for payload in [
        {},
        {"error": ""},
        {"error": " \n\t "},
        {"error": 42},
        {"error": "x", "top_k": 0},
        {"error": "x", "top_k": 51},
        {"error": "x", "top_k": "five"},
        {"error": "x", "repos": "vllm-project/vllm"},
        {"error": "x", "repos": ["../etc"]},
        {"error": "x", "surprise": True},
        ["error"],
        "error",
        None,
    ]:
        response = client.post("/lookup", json=payload)
        assert response.status_code == 422, (payload, response.text)
    blank = client.post("/lookup", content=b"   ", headers={"content-type": "text/plain"})
    assert blank.status_code == 422
    assert client.post("/lookup?top_k=0", content=b"x", headers={"content-type": "text/plain"}).status_code == 422


def test_declared_length_over_the_limit_is_413(client: TestClient) -> None:
    body = b"x" * (LIMIT + 1)
    for media in ("text/plain", "application/json"):
        response = client.post("/lookup", content=body, headers={"content-type": media})
        assert response.status_code == 413, response.text
    at_limit = client.post(
        "/lookup", content=b"HarmonyError " + b"x" * (LIMIT - 13), headers={"content-type": "text/plain"}
    )
    assert at_limit.status_code == 200


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(LIMIT // 4096 + 2):
            yield b"y" * 4096

    for media in ("text/plain", "application/json"):
        response = client.post("/lookup", content=chunks(), headers={"content-type": media})
        assert "content-length" not in {k.lower() for k in response.request.headers}
        assert response.status_code == 413, response.text


def test_json_escaping_cannot_smuggle_an_oversized_error(client: TestClient) -> None:
    # A JSON body under the byte limit holds at most that many characters: the limit is on bytes.
    response = client.post("/lookup", json={"error": "é" * (LIMIT // 2 + 10)})
    assert response.status_code == 413


def test_blank_lines_and_control_characters_do_not_break_it(client: TestClient) -> None:
    text = "\x00\x1b[31mERROR\x1b[0m " + "\u202e" * 50 + "\n" * 500 + ERROR
    response = client.post("/lookup", json={"error": text})
    assert response.status_code == 200, response.text
    answer = LookupResponse.model_validate(response.json())
    # The noise is dropped, the error behind it is still found and decoded.
    assert "200002" in answer.query.normalized
    assert "\x00" not in answer.query.normalized and "\u202e" not in answer.query.normalized
    assert {t.id for t in answer.analysis.tokens} >= {200002, 200006}


def test_openapi_documents_the_lookup_contract(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    operation = schema["paths"]["/lookup"]["post"]
    content = operation["requestBody"]["content"]
    assert set(content) == {"application/json", "text/plain"}
    assert content["application/json"]["examples"]
    assert content["application/json"]["schema"]["properties"]["top_k"]["maximum"] == 50
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("LookupResponse")
    for status in ("400", "413", "422", "503"):
        assert "application/problem+json" in operation["responses"][status]["content"]
    components = schema["components"]["schemas"]
    assert "Problem" in components and "LookupResponse" in components
    assert components["LookupResponse"]["properties"]["no_confident_match"]["description"]
    assert "untrusted" in components["LookupResponse"]["properties"]["untrusted_text"]["description"]
    assert client.get("/docs").status_code == 200


def test_the_readme_example_answer_is_the_response_schema() -> None:
    import json
    import re
    from pathlib import Path

    from service.models import DiagnosisOut, LookupResponse

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```json\n(.*?)```", readme, re.S) if '"diagnosis"' in b]
    assert len(blocks) == 1
    example = json.loads(blocks[0])
    example["index"]["built_at"] = None
    answer = LookupResponse.model_validate(example)
    assert set(example) == set(LookupResponse.model_fields) - {"degraded", "partial"}
    assert set(example["diagnosis"]) == set(DiagnosisOut.model_fields)
    assert answer.advice[0].flags[0].action == "avoid"
    schema = LookupResponse.model_json_schema()
    assert "diagnosis" in schema["properties"] and "DiagnosisOut" in schema["$defs"]


AUTO_TOOL = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'


def test_an_input_about_another_model_gets_no_gpt_oss_diagnosis_and_says_why(client: TestClient) -> None:
    """vLLM's own error with a Qwen model: the section that lists it would tell a Qwen user to set the gpt-oss
    parser. The answer names the model, says what the tool covers, and gives no diagnosis; the same error
    with gpt-oss is diagnosed by that section."""
    body = client.post("/lookup", json={"error": f"vllm serve Qwen/QwQ-32B\n{AUTO_TOOL}"}).json()
    other = LookupResponse.model_validate(body)
    assert other.analysis.outside_scope and other.analysis.other_model == "Qwen"
    assert other.diagnosis is None and other.fixes == []
    assert other.scope_note is not None and "Qwen" in other.scope_note and "gpt-oss" in other.scope_note
    assert all(issue.confidence != "high" for issue in other.issues)
    body = client.post("/lookup", json={"error": f"vllm serve openai/gpt-oss-20b\n{AUTO_TOOL}"}).json()
    mine = LookupResponse.model_validate(body)
    assert mine.diagnosis is not None and mine.diagnosis.title.startswith("Auto tool choice requires")
    assert mine.scope_note is None and not mine.analysis.outside_scope and mine.analysis.other_model is None
