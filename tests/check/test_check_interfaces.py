"""One check, three doors: the CLI, POST /v1/check and the MCP tool check_config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

from service.app import create_app
from service.cli import main
from service.config import PROJECT_ROOT, Settings
from service.mcp_server import EngineBackend, build_mcp

BARE = "vllm serve openai/gpt-oss-120b"
IGNORE_EOS = json.dumps({"model": "openai/gpt-oss-20b", "messages": [], "ignore_eos": True})


def _client() -> TestClient:
    # No lifespan: /v1/check needs no index, so it answers before (and without) the engine loading.
    return TestClient(create_app(Settings()), raise_server_exceptions=False)


def test_api_checks_json_and_text_bodies() -> None:
    client = _client()
    as_json = client.post("/v1/check", json={"input": IGNORE_EOS})
    as_text = client.post("/v1/check", content=BARE, headers={"Content-Type": "text/plain"})
    assert as_json.status_code == 200, as_json.text
    body = as_json.json()
    assert body["kind"] == "request" and body["errors"] >= 1 and body["ok"] is False
    avoid = next(f for f in body["findings"] if f["change"]["action"] == "avoid")
    assert avoid["severity"] == "error" and avoid["sources"][0].startswith("reference/")
    assert as_text.status_code == 200 and as_text.json()["kind"] == "command"
    assert {f["change"]["target"] for f in as_text.json()["findings"]} >= {"--tool-call-parser"}


def test_api_checks_model_config_files() -> None:
    response = _client().post("/v1/check", json={"generation_config": {"eos_token_id": [200002, 199999]}})
    assert response.status_code == 200, response.text
    assert response.json()["kind"] == "model" and response.json()["errors"] >= 1


def test_api_bad_input_is_a_4xx_problem() -> None:
    client = _client()
    cases = {
        "empty": client.post("/v1/check", json={}),
        "blank": client.post("/v1/check", content="   ", headers={"Content-Type": "text/plain"}),
        "broken json": client.post("/v1/check", content="{", headers={"Content-Type": "application/json"}),
        "unreadable": client.post("/v1/check", json={"input": "hello world"}),
        "bad request json": client.post("/v1/check", json={"input": '{"messages": ['}),
        "extra field": client.post("/v1/check", json={"input": BARE, "nope": 1}),
        "huge number": client.post(
            "/v1/check", content='{"input": ' + "1" * 5000 + "}", headers={"Content-Type": "application/json"}
        ),
        "wrong type": client.post("/v1/check", content=b"x", headers={"Content-Type": "image/png"}),
    }
    for name, response in cases.items():
        assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/problem+json"), name
        assert response.json()["detail"], name


def test_openapi_documents_the_check_endpoint() -> None:
    schema = _client().get("/openapi.json").json()
    operation = schema["paths"]["/v1/check"]["post"]
    assert "CheckResponse" in json.dumps(operation["responses"]["200"])
    assert set(operation["requestBody"]["content"]) == {"application/json", "text/plain"}


def test_cli_check_exit_codes_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    bare = runner.invoke(main, ["check", "--", *BARE.split()])
    assert bare.exit_code == 0, bare.output  # warnings only
    assert "--tool-call-parser" in bare.output and "warn" in bare.output
    strict = runner.invoke(main, ["check", "--strict", BARE])
    assert strict.exit_code == 1
    request = tmp_path / "request.json"
    request.write_text(IGNORE_EOS)
    failing = runner.invoke(main, ["check", "--json", "-f", str(request)])
    assert failing.exit_code == 1
    assert json.loads(failing.output)["errors"] >= 1
    other = runner.invoke(main, ["check", "--", *BARE.split(), "--tool-call-parser", "hermes"])
    assert "you have: --tool-call-parser hermes" in other.output, other.output
    stdin = runner.invoke(main, ["check", "-"], input=BARE)
    assert stdin.exit_code == 0 and "Read as: command" in stdin.output
    garbage = runner.invoke(main, ["check", "hello world"])
    assert garbage.exit_code == 2 and "could not tell" in garbage.output
    missing = runner.invoke(main, ["check", "-f", str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    unknown = runner.invoke(main, ["check", "--bogus-option", BARE])
    assert unknown.exit_code == 2 and "No such option" in unknown.output


def test_cli_check_reads_a_model_folder(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [200002, 199999, 200012]}))
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Read as: model" in result.output


def test_mcp_check_config_tool() -> None:
    server = build_mcp(lambda: EngineBackend(lambda: None), docs_dir=PROJECT_ROOT)

    async def go() -> tuple[Any, Any]:
        async with Client(server) as client:
            ok = await client.call_tool("check_config", {"setup": IGNORE_EOS})
            bad = await client.call_tool("check_config", {"setup": "hello world"})
            return ok, bad

    ok, bad = anyio.run(go)
    assert not ok.is_error
    assert ok.structured_content["errors"] >= 1
    assert bad.is_error and "cannot check this" in bad.content[0].text
