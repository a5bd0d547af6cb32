"""The MCP server, driven by the SDK's own client: in process, over streamable HTTP at /mcp, over stdio."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import TextResourceContents
from pydantic import SecretStr

from indexer.sources.cards import card_documents
from service.config import PROJECT_ROOT, Settings
from service.engine import LookupEngine
from service.mcp_server import REFERENCE_DOCS, EngineBackend, brief, build_mcp
from service.models import LookupResponse

T = TypeVar("T")

HARMONY_ERROR = "openai_harmony.HarmonyError: Unexpected token 12606 while expecting start token 200006"
KNOWN_THREADS = {"vllm-project/vllm#22519", "openai/harmony#60"}  # carry that exact error in the KB
TOOLS = {"lookup_error", "decode_harmony_tokens", "get_issue", "list_known_issues", "check_config"}


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


def _server(engine: LookupEngine | None, docs_dir: Path = PROJECT_ROOT) -> Any:
    backend = EngineBackend(lambda: engine)
    return build_mcp(lambda: backend, docs_dir=docs_dir, core_repos=["vllm-project/vllm", "openai/harmony"])


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


# --- in process: the tools' behaviour ---------------------------------------------------------------


def test_tools_publish_descriptions_and_bounded_input_schemas(fast_engine: LookupEngine) -> None:
    async def go() -> dict[str, Any]:
        async with Client(_server(fast_engine)) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = run(go)
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60, tool.name
        assert tool.output_schema is not None, tool.name
    top_k = tools["lookup_error"].input_schema["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, 50, 5)
    assert tools["lookup_error"].input_schema["required"] == ["error"]
    ids = tools["decode_harmony_tokens"].input_schema["properties"]["ids"]
    assert ids["type"] == "array" and ids["items"] == {"minimum": 0, "type": "integer"}
    component = tools["list_known_issues"].input_schema["properties"]["component"]
    assert "harmony-parser" in json.dumps(component)


def test_lookup_error_returns_the_lookup_json(fast_engine: LookupEngine) -> None:
    async def go() -> Any:
        async with Client(_server(fast_engine)) as client:
            return await client.call_tool("lookup_error", {"error": HARMONY_ERROR, "top_k": 3})

    result = run(go)
    assert not result.is_error, _text(result)
    full = fast_engine.lookup(HARMONY_ERROR, 3)
    expected = brief(full).model_dump(mode="json")
    assert result.structured_content == expected
    if full.diagnosis is not None:
        assert expected["diagnosis"]["problem"] == full.diagnosis.problem
        assert [a["text"] for a in expected["diagnosis"]["actions"]] == [a.text for a in full.diagnosis.actions]
    assert [i["id"] for i in expected["issues"]] == [i.id for i in full.issues]
    assert len(result.structured_content["issues"]) <= 3
    assert KNOWN_THREADS & {issue["id"] for issue in result.structured_content["issues"]}
    # Clients that only read text content get the same JSON.
    assert json.loads(result.content[0].text) == expected


def test_lookup_error_is_compact_for_a_typical_answer(fast_engine: LookupEngine) -> None:
    async def go() -> Any:
        async with Client(_server(fast_engine)) as client:
            return await client.call_tool("lookup_error", {"error": HARMONY_ERROR})

    result = run(go)
    assert not result.is_error, _text(result)
    size = len(result.content[0].text.encode())
    full = len(fast_engine.lookup(HARMONY_ERROR, 5).model_dump_json().encode())
    assert size <= 4096 < full, (size, full)
    assert "why" not in result.structured_content["issues"][0]


def test_lookup_error_tells_the_agent_when_the_input_is_about_another_model(fast_engine: LookupEngine) -> None:
    error = 'vllm serve Qwen/QwQ-32B\n"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'

    async def go() -> Any:
        async with Client(_server(fast_engine)) as client:
            return await client.call_tool("lookup_error", {"error": error})

    result = run(go)
    assert not result.is_error, _text(result)
    answer = result.structured_content
    assert answer["diagnosis"] is None and "Qwen" in answer["scope_note"]
    assert all(issue["confidence"] != "high" for issue in answer["issues"])


def test_lookup_error_rejects_out_of_range_and_blank_input(fast_engine: LookupEngine) -> None:
    async def go() -> list[Any]:
        async with Client(_server(fast_engine)) as client:
            return [
                await client.call_tool("lookup_error", {"error": HARMONY_ERROR, "top_k": 51}),
                await client.call_tool("lookup_error", {"error": HARMONY_ERROR, "top_k": 0}),
                await client.call_tool("lookup_error", {"error": "   \n  "}),
                await client.call_tool("lookup_error", {}),
            ]

    too_many, zero, blank, missing = run(go)
    assert too_many.is_error and "top_k" in _text(too_many)
    assert zero.is_error and "top_k" in _text(zero)
    assert blank.is_error and "blank" in _text(blank)
    assert missing.is_error and "error" in _text(missing)


def test_decode_harmony_tokens_uses_the_real_encoding(fast_engine: LookupEngine) -> None:
    async def go() -> tuple[Any, Any]:
        async with Client(_server(fast_engine)) as client:
            ok = await client.call_tool("decode_harmony_tokens", {"ids": [200006, 12606, 815, 200002, 10**9]})
            bad = await client.call_tool("decode_harmony_tokens", {"ids": [5, -1]})
            return ok, bad

    ok, bad = run(go)
    assert not ok.is_error, _text(ok)
    tokens = ok.structured_content["tokens"]
    assert [(t["id"], t["text"], t["special"]) for t in tokens[:4]] == [
        (200006, "<|start|>", True),
        (12606, "comment", False),
        (815, "ary", False),
        (200002, "<|return|>", True),
    ]
    assert tokens[4] == {"id": 10**9, "text": None, "special": False}
    assert bad.is_error and "greater than or equal to 0" in _text(bad)


def test_get_issue_accepts_ids_and_urls_and_says_what_is_unknown(fast_engine: LookupEngine) -> None:
    async def go() -> list[Any]:
        async with Client(_server(fast_engine)) as client:
            return [
                await client.call_tool("get_issue", {"id": "vllm-project/vllm#22519"}),
                await client.call_tool("get_issue", {"id": "https://github.com/openai/harmony/issues/60"}),
                await client.call_tool("get_issue", {"id": "vllm-project/vllm#1"}),
                await client.call_tool("get_issue", {"id": "not an id"}),
            ]

    by_id, by_url, unknown, malformed = run(go)
    issue = by_id.structured_content["issue"]
    assert by_id.structured_content["source"] == "index"
    assert issue["id"] == "vllm-project/vllm#22519" and issue["state"] == "closed"
    assert issue["title"].endswith("Unexpected token 12606 while expecting start token 200006")
    assert issue["error_signatures"] and issue["fix"]
    assert by_url.structured_content["issue"]["id"] == "openai/harmony#60"
    assert unknown.is_error and "not in the knowledge base" in _text(unknown)
    assert malformed.is_error and "owner/repo#N" in _text(malformed)


def test_list_known_issues_filters_by_component(fast_engine: LookupEngine) -> None:
    async def go() -> tuple[Any, Any, Any]:
        async with Client(_server(fast_engine)) as client:
            everything = await client.call_tool("list_known_issues", {"limit": 1000})
            parser = await client.call_tool("list_known_issues", {"component": "harmony-parser", "limit": 1000})
            bogus = await client.call_tool("list_known_issues", {"component": "kitchen-sink"})
            return everything, parser, bogus

    everything, parser, bogus = run(go)
    cards = card_documents()
    assert everything.structured_content["total"] == len(cards)
    assert everything.structured_content["source"] == "index"
    rows = everything.structured_content["issues"]
    assert {row["id"] for row in rows} == {card.id for card in cards}  # the reference section is not an issue
    assert rows[0]["id"].startswith("vllm-project/vllm#")  # core repo first
    expected = {c.id for c in cards if c.component == "harmony-parser"}
    assert {row["id"] for row in parser.structured_content["issues"]} == expected
    assert all(set(row) == {"id", "title", "state", "kind", "component", "trust"} for row in rows)
    assert bogus.is_error


def test_reference_docs_are_resources(fast_engine: LookupEngine, tmp_path: Path) -> None:
    async def go(server: Any) -> tuple[list[Any], dict[str, str]]:
        async with Client(server) as client:
            listed = (await client.list_resources()).resources
            texts = {}
            for resource in listed:
                contents = (await client.read_resource(str(resource.uri))).contents
                assert isinstance(contents[0], TextResourceContents)
                texts[str(resource.uri)] = contents[0].text
            return listed, texts

    listed, texts = run(lambda: go(_server(fast_engine)))
    assert {str(r.uri) for r in listed} == {f"gptoss-doctor://reference/{name}" for name in REFERENCE_DOCS}
    assert all(r.mime_type == "text/markdown" and r.description for r in listed)
    for name in REFERENCE_DOCS:
        on_disk = (PROJECT_ROOT / "reference" / name).read_text(encoding="utf-8")
        assert texts[f"gptoss-doctor://reference/{name}"] == on_disk

    async def missing() -> str:
        async with Client(_server(fast_engine, docs_dir=tmp_path)) as client:
            try:
                await client.read_resource("gptoss-doctor://reference/known-issues.md")
            except Exception as exc:  # the SDK raises the server's error
                return str(exc)
            return "no error"

    message = run(missing)
    assert "GPTOSS_DOCTOR_DOCS_DIR" in message


def test_without_an_engine_lookups_say_not_ready_and_kb_tools_use_the_snapshot() -> None:
    async def go() -> tuple[Any, Any, Any]:
        async with Client(_server(None)) as client:
            return (
                await client.call_tool("lookup_error", {"error": HARMONY_ERROR}),
                await client.call_tool("get_issue", {"id": "vllm-project/vllm#22519"}),
                await client.call_tool("list_known_issues", {"limit": 5}),
            )

    lookup, issue, listing = run(go)
    assert lookup.is_error and "not ready" in _text(lookup).lower()
    assert issue.structured_content["source"] == "bundled-snapshot"
    assert issue.structured_content["issue"]["id"] == "vllm-project/vllm#22519"
    assert listing.structured_content["source"] == "bundled-snapshot"
    assert listing.structured_content["truncated"] is True and len(listing.structured_content["issues"]) == 5


# --- over streamable HTTP, mounted in the real app ---------------------------------------------------


@pytest.mark.slow
def test_mcp_over_http_in_the_running_app(live_app: Any) -> None:
    async def go() -> tuple[set[str], Any]:
        async with Client(f"{live_app.url}/mcp") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            return names, await client.call_tool("lookup_error", {"error": HARMONY_ERROR})

    names, result = run(go)
    assert names == TOOLS
    assert not result.is_error, _text(result)
    assert KNOWN_THREADS & {issue["id"] for issue in result.structured_content["issues"]}
    # The brief of the same answer as POST /lookup on the same app.
    http = httpx2.post(f"{live_app.url}/lookup", json={"error": HARMONY_ERROR}, timeout=30).json()
    assert result.structured_content == brief(LookupResponse.model_validate(http)).model_dump(mode="json")


@pytest.mark.slow
def test_mcp_over_http_requires_the_read_token_when_set(make_live_app: Any, _hermetic_env: Path) -> None:
    app = make_live_app(Settings(data_dir=_hermetic_env, read_token=SecretStr("s3cret")))
    denied = httpx2.post(f"{app.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert denied.status_code == 401
    assert denied.headers["content-type"].startswith("application/problem+json")
    assert "s3cret" not in denied.text

    async def go() -> set[str]:
        headers = {"Authorization": "Bearer s3cret"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            from mcp.client.streamable_http import streamable_http_client

            async with Client(streamable_http_client(f"{app.url}/mcp", http_client=http)) as client:
                return {tool.name for tool in (await client.list_tools()).tools}

    assert run(go) == TOOLS


@pytest.mark.slow
def test_mcp_over_http_while_the_engine_is_loading(make_live_app: Any, _hermetic_env: Path) -> None:
    app = make_live_app(Settings(data_dir=_hermetic_env), ready=False)

    async def go() -> tuple[Any, Any]:
        async with Client(f"{app.url}/mcp") as client:
            return (
                await client.call_tool("lookup_error", {"error": HARMONY_ERROR}),
                await client.call_tool("get_issue", {"id": "openai/harmony#60"}),
            )

    lookup, issue = run(go)
    assert lookup.is_error and "could not open its index" in _text(lookup)
    assert issue.structured_content["source"] == "bundled-snapshot"


# --- over stdio: `gptoss-doctor mcp` as a real subprocess ---------------------------------------------


def _console_script() -> tuple[str, list[str]]:
    script = Path(sys.executable).with_name("gptoss-doctor")
    if script.exists():
        return str(script), ["mcp"]
    found = shutil.which("gptoss-doctor")
    if found:
        return found, ["mcp"]
    return sys.executable, ["-c", "from service.cli import main; main()", "mcp"]


@pytest.mark.slow
def test_mcp_over_stdio_with_the_real_index(built_index: Settings) -> None:
    command, args = _console_script()
    env = {
        "GPTOSS_DOCTOR_DATA_DIR": str(built_index.data_dir),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PATH": os.environ.get("PATH", ""),
    }

    async def go() -> dict[str, Any]:
        params = StdioServerParameters(command=command, args=args, env=env, cwd=str(PROJECT_ROOT))
        async with Client(params, read_timeout_seconds=180) as client:
            out: dict[str, Any] = {"tools": {t.name for t in (await client.list_tools()).tools}}
            out["lookup"] = await client.call_tool("lookup_error", {"error": HARMONY_ERROR, "top_k": 5})
            out["decode"] = await client.call_tool("decode_harmony_tokens", {"ids": [200002]})
            out["issue"] = await client.call_tool("get_issue", {"id": "vllm-project/vllm#22519"})
            out["doc"] = await client.read_resource("gptoss-doctor://reference/tool-calling-setup.md")
            return out

    out = run(go)
    assert out["tools"] == TOOLS
    lookup = out["lookup"]
    assert not lookup.is_error, _text(lookup)
    issues = lookup.structured_content["issues"]
    assert KNOWN_THREADS & {issue["id"] for issue in issues[:3]}
    assert lookup.structured_content["origin"]["explanation"]
    assert lookup.structured_content["no_confident_match"] is False
    assert out["decode"].structured_content["tokens"] == [{"id": 200002, "text": "<|return|>", "special": True}]
    assert out["issue"].structured_content["source"] == "index"
    doc = out["doc"].contents[0]
    assert isinstance(doc, TextResourceContents)
    assert doc.text == (PROJECT_ROOT / "reference" / "tool-calling-setup.md").read_text()


@pytest.mark.slow
def test_mcp_over_http_enforces_the_body_limit(make_live_app: Any, _hermetic_env: Path) -> None:
    app = make_live_app(Settings(data_dir=_hermetic_env, max_body_bytes=2048))
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 4096}}
    declared = httpx2.post(f"{app.url}/mcp", json=big, timeout=10)
    assert declared.status_code == 413
    assert declared.headers["content-type"].startswith("application/problem+json")
    assert declared.json()["status"] == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted while reading
        for _ in range(8):
            yield b"x" * 1024

    streamed = httpx2.post(f"{app.url}/mcp", content=chunks(), timeout=10)
    assert streamed.status_code == 413

    async def go() -> set[str]:  # requests under the limit still work
        async with Client(f"{app.url}/mcp") as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert run(go) == TOOLS


# --- issue 13: a paged list, one kind vocabulary, lenient ids, readable validation ------------------


def test_list_known_issues_comes_in_pages_with_a_summary(fast_engine: LookupEngine) -> None:
    async def go() -> list[Any]:
        pages = []
        async with Client(_server(fast_engine)) as client:
            offset: int | None = 0
            while offset is not None:
                page = await client.call_tool("list_known_issues", {"offset": offset})
                assert not page.is_error, _text(page)
                pages.append(page)
                offset = page.structured_content["next_offset"]
        return pages

    pages = run(go)
    first = pages[0].structured_content
    cards = card_documents()
    assert len(first["issues"]) == 50 and first["truncated"] and first["next_offset"] == 50
    assert len(_text(pages[0]).encode()) < 20_000  # the whole list used to be 44 KB and more
    assert sum(first["components"].values()) == first["total"] == len(cards)
    ids = [row["id"] for page in pages for row in page.structured_content["issues"]]
    assert len(ids) == len(set(ids)) == len(cards)  # pages neither overlap nor skip
    assert pages[-1].structured_content["next_offset"] is None


def test_kinds_are_issue_or_pull_as_lookup_says(fast_engine: LookupEngine) -> None:
    pull = next(card for card in card_documents() if "/pull/" in (card.url or ""))

    async def go() -> tuple[Any, Any]:
        async with Client(_server(fast_engine)) as client:
            listed = await client.call_tool("list_known_issues", {"limit": 1000})
            detail = await client.call_tool("get_issue", {"id": pull.id})
            return listed, detail

    listed, detail = run(go)
    kinds = {row["id"]: row["kind"] for row in listed.structured_content["issues"]}
    assert set(kinds.values()) == {"issue", "pull"}
    assert kinds[pull.id] == "pull"
    assert detail.structured_content["issue"]["kind"] == "pull"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("vllm#22519", "vllm-project/vllm#22519"),
        ("harmony #60", "openai/harmony#60"),
        ("vllm-project/vllm#22519", "vllm-project/vllm#22519"),
        ("https://github.com/vllm-project/vllm/issues/22519#issuecomment-3160000000", "vllm-project/vllm#22519"),
        ("github.com/openai/harmony/issues/60", "openai/harmony#60"),
    ],
)
def test_get_issue_takes_the_ids_people_paste(fast_engine: LookupEngine, given: str, expected: str) -> None:
    async def go() -> Any:
        async with Client(_server(fast_engine)) as client:
            return await client.call_tool("get_issue", {"id": given})

    result = run(go)
    assert not result.is_error, _text(result)
    assert result.structured_content["issue"]["id"] == expected


def test_get_issue_names_an_unknown_short_repo(fast_engine: LookupEngine) -> None:
    async def go() -> Any:
        async with Client(_server(fast_engine)) as client:
            return await client.call_tool("get_issue", {"id": "nowhere#5"})

    result = run(go)
    assert result.is_error and "no known repository is named 'nowhere'" in _text(result)


def test_validation_errors_read_as_one_line(fast_engine: LookupEngine) -> None:
    async def go() -> list[Any]:
        async with Client(_server(fast_engine)) as client:
            return [
                await client.call_tool("lookup_error", {"error": HARMONY_ERROR, "top_k": 51}),
                await client.call_tool("lookup_error", {}),
                await client.call_tool("list_known_issues", {"offset": -1}),
            ]

    too_many, missing, negative = run(go)
    for result in (too_many, missing, negative):
        text = _text(result)
        assert result.is_error
        assert "validation error for" not in text and "errors.pydantic.dev" not in text and "input_value" not in text
    assert "invalid arguments for lookup_error: top_k: Input should be less than or equal to 50" in _text(too_many)
    assert "error: required" in _text(missing)
    assert "offset:" in _text(negative)
