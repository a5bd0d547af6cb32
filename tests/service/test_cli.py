"""``gptoss-doctor lookup`` (against a real running service) and ``serve`` option wiring."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from click.testing import CliRunner

from service.cli import main
from service.cli.lookup import plain, seen_items, seen_line, source_text
from service.config import Settings
from service.models import LookupResponse
from tests.service.support import FastComponents, LiveServer, wait_until

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"


def test_lookup_json_against_a_running_service(live_app: LiveServer) -> None:
    result = CliRunner().invoke(main, ["lookup", "--url", live_app.url, "--json", "-k", "3", ERROR])
    assert result.exit_code == 0, result.output
    answer = LookupResponse.model_validate(json.loads(result.stdout))
    assert 0 < len(answer.issues) <= 3


def test_lookup_reads_stdin_and_the_url_from_the_environment(live_app: LiveServer) -> None:
    log = "INFO starting\n" * 50 + f"(APIServer pid=1) ERROR 06-23 09:42:17 [serving.py:932] {ERROR}\n"
    result = CliRunner().invoke(main, ["lookup", "--full", "-"], input=log, env={"GPTOSS_DOCTOR_URL": live_app.url})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Origin: server" in out
    assert "Tokens" in out and "200006" in out and "<|start|>" in out
    assert "Known issues" in out and "https://github.com/" in out
    assert "\x1b[" not in out, "no colour when stdout is not a terminal"


def test_lookup_leads_with_the_verdict_in_25_lines_at_80_columns(live_app: LiveServer) -> None:
    log = f"(APIServer pid=1) ERROR 06-23 09:42:17 [serving.py:932] {ERROR}\n"
    env = {"GPTOSS_DOCTOR_URL": live_app.url, "COLUMNS": "80"}
    result = CliRunner().invoke(main, ["lookup", "-"], input=log, env=env)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # Prose wraps at 80 columns; a path or URL is one line that the terminal wraps (never broken).
    shown = sum(max(1, -(-len(line) // 80)) for line in lines)
    assert shown <= 25, result.stdout
    assert all(len(line) <= 80 or "/" in line.split()[-1] for line in lines), result.stdout
    assert any(line.startswith("Section: ") and "references/" in line for line in lines), result.stdout
    full = CliRunner().invoke(main, ["lookup", "--full", "-"], input=log, env={"GPTOSS_DOCTOR_URL": live_app.url})
    assert len(full.stdout.splitlines()) > len(lines)
    for out in (result.stdout, full.stdout):
        assert "](" not in out, "no markdown link syntax in a terminal"
    assert "Top issues:" in result.stdout and "Fixes" not in result.stdout


def test_terminal_sources_are_plain_urls_or_paths() -> None:
    assert plain("see [the docs](references/known-issues.md#x) and [x](x)") == (
        "see the docs (references/known-issues.md#x) and x"
    )
    assert source_text("references/known-issues.md#x", "http://127.0.0.1:8000/") == (
        "http://127.0.0.1:8000/references/known-issues.md#x"
    )
    assert source_text("vllm-project/vllm#1", "http://h") == "vllm-project/vllm#1"


def test_lookup_readable_output_says_when_nothing_matches(live_app: LiveServer) -> None:
    result = CliRunner().invoke(main, ["lookup", "--url", live_app.url, "my printer is on fire, lp0"])
    assert result.exit_code == 0, result.output
    assert "No confident match" in result.stdout


def test_lookup_asks_for_the_lines_above_when_a_log_only_wraps_the_error(live_app: LiveServer) -> None:
    log = "\n".join(
        [f"(EngineCore pid=5) INFO 11-27 10:00:0{i} [core.py:77] Loading weights took 1.{i} seconds" for i in range(6)]
        + [
            "(APIServer pid=1) ERROR 11-27 10:00:09 [api_server.py:9] RuntimeError: Engine core initialization failed. "
            "See root cause above. Failed core proc(s): {}"
        ]
    )
    result = CliRunner().invoke(main, ["lookup", "--url", live_app.url, "-"], input=log, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("No confident match: no failing line to match. The pasted lines only wrap"), first
    assert "first traceback or ERROR line above" in result.stdout


def test_lookup_says_first_when_the_input_is_about_another_model(live_app: LiveServer) -> None:
    error = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    result = CliRunner().invoke(main, ["lookup", "--url", live_app.url, f"vllm serve Qwen/QwQ-32B\n{error}"])
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("Outside what this tool covers: The input is about Qwen"), result.stdout
    assert "confidence)" not in result.stdout.split("Top issues:")[0], "no diagnosis heading for another model"


def test_lookup_reports_service_errors_readably(live_app: LiveServer) -> None:
    result = CliRunner().invoke(main, ["lookup", "--url", live_app.url, "-k", "3", "   "])
    assert result.exit_code != 0 and "empty" in result.output
    refused = CliRunner().invoke(main, ["lookup", "--url", "http://127.0.0.1:9", ERROR])
    assert refused.exit_code == 1
    assert "cannot reach http://127.0.0.1:9/lookup" in refused.output
    assert "Traceback" not in refused.output


def test_lookup_sends_the_read_token(settings: Settings, fast_components: FastComponents) -> None:
    from pydantic import SecretStr

    from service.app import create_app

    secured = settings.model_copy(update={"read_token": SecretStr("t" * 30)})
    app = create_app(secured, loader=lambda s, note: fast_components.engine(s))
    with LiveServer(app) as server:
        wait_until(lambda: app.state.runtime.state == "ready")
        denied = CliRunner().invoke(main, ["lookup", "--url", server.url, ERROR])
        assert denied.exit_code == 1 and "401" in denied.output
        allowed = CliRunner().invoke(
            main, ["lookup", "--url", server.url, ERROR], env={"GPTOSS_DOCTOR_READ_TOKEN": "t" * 30}
        )
        assert allowed.exit_code == 0, allowed.output


def test_serve_options_mirror_the_settings_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict[str, Any] = {}

    def fake_run(server: Any, sockets: Any = None) -> None:  # serve runs uvicorn.Server(config).run()
        config = server.config
        seen.update(app=config.app, host=config.host, port=config.port, settings=config.app.state.runtime.settings)

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    with socket.socket() as probe:  # a port free right now (serve checks it before starting)
        probe.bind(("0.0.0.0", 0))
        port = probe.getsockname()[1]
    result = CliRunner().invoke(
        main,
        ["serve", "--port", str(port)],
        env={"GPTOSS_DOCTOR_HOST": "0.0.0.0", "GPTOSS_DOCTOR_REINDEX_INTERVAL": "6h"},
    )
    assert result.exit_code == 0, result.output
    assert (seen["host"], seen["port"]) == ("0.0.0.0", port)
    assert seen["settings"].reindex_interval.total_seconds() == 6 * 3600
    bad = CliRunner().invoke(main, ["serve"], env={"GPTOSS_DOCTOR_REINDEX_INTERVAL": "soon"})
    assert bad.exit_code == 1 and "invalid duration" in bad.output


def test_serve_caps_malloc_arenas_where_glibc_is_there() -> None:
    import ctypes.util

    from service.cli.serve import limit_malloc_arenas

    assert limit_malloc_arenas() is (ctypes.util.find_library("c") is not None)


def test_the_seen_line_keeps_whole_items_and_counts_the_rest() -> None:
    items = ["vllm 0.13.0", "--model openai/gpt-oss-20b", "TIKTOKEN_ENCODINGS_BASE=/root/.cache/tiktoken_encodings"]
    assert seen_line(items) == ", ".join(items)
    line = seen_line(items, limit=50)
    assert line == "vllm 0.13.0, --model openai/gpt-oss-20b, and 1 more (--json lists them)"
    assert seen_line(["x" * 90], limit=50) == "x" * 90, "one item is shown whole however long"


def test_the_seen_line_leads_with_the_engine_client_and_model_read() -> None:
    answer = LookupResponse.model_validate(
        {
            "query": {"signatures": [], "normalized": ""},
            "analysis": {
                "origin": {"side": "server", "component": "other", "explanation": "x"},
                "category": "other",
                "engine": "lm-studio",
                "client": "langchain",
                "model": "openai/gpt-oss-20b",
                "versions": {"vllm": "0.10.1"},
                "flags": ["--tool-call-parser openai"],
            },
            "issues": [],
            "no_confident_match": True,
            "fixes": [],
            "advice": [],
            "index": {"documents": 0, "issues": 0},
        }
    )
    assert seen_items(answer) == [
        "LM Studio", "client langchain", "model openai/gpt-oss-20b", "vllm 0.10.1", "--tool-call-parser openai",
    ]  # fmt: skip
    bare = answer.model_copy(update={"analysis": answer.analysis.model_copy(update={"engine": None, "client": None})})
    assert seen_items(bare)[0] == "model openai/gpt-oss-20b"
