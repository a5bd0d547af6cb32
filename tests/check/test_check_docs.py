"""The rules drawn from the real reference docs: the recommended setup is clean, known traps are caught."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from indexer.problems import WHENS, load_problems
from service.check import check_setup, read_setup
from service.check.conditions import CONDITIONS
from service.check.models import CheckResponse
from service.config import PROJECT_ROOT


def run(text: str) -> CheckResponse:
    return check_setup(read_setup(text), PROJECT_ROOT)


def changes(report: CheckResponse, severity: str | None = None) -> set[tuple[str, str]]:
    return {
        (f.change.action, f.change.target)
        for f in report.findings
        if severity is None or f.severity == severity
    }


def recommended_command() -> str:
    """The first `vllm serve` line of tool-calling-setup.md's server-flags section: the documented setup."""
    text = (PROJECT_ROOT / "reference" / "tool-calling-setup.md").read_text()
    section = text.split("## Server flags for gpt-oss", 1)[1]
    return next(line for line in section.splitlines() if line.startswith("vllm serve "))


def test_every_when_of_the_docs_has_a_condition() -> None:
    assert set(CONDITIONS) == set(WHENS)


def test_the_recommended_setup_gets_no_error_or_warning() -> None:
    command = recommended_command()
    assert "--tool-call-parser openai" in command
    report = run(command)
    assert report.ok, [f.model_dump() for f in report.findings]
    args_line = (
        "vLLM API server version 0.11.0\nnon-default args: {'model_tag': 'openai/gpt-oss-120b', "
        "'tool_call_parser': 'openai', 'enable_auto_tool_choice': True, 'reasoning_parser': 'openai_gptoss'}"
    )
    assert run(args_line).ok, [f.model_dump() for f in run(args_line).findings]


def test_a_bare_serve_command_is_told_about_the_tool_parser() -> None:
    report = run("vllm serve openai/gpt-oss-120b")
    assert {("set", "--tool-call-parser"), ("set", "--enable-auto-tool-choice")} <= changes(report, "warning")
    finding = next(f for f in report.findings if f.change.target == "--tool-call-parser")
    assert finding.change.value == "openai"
    assert finding.problem.startswith("reference/") and "#" in finding.problem
    ids = [s for s in finding.sources if not s.startswith("reference/")]
    assert ids and all(re.match(r"^[\w.-]+/[\w.-]+#\d+$", s) for s in ids)
    # Optional on vLLM: the gpt-oss model config sets the reasoning parser when the flag is empty.
    assert ("set", "--reasoning-parser") not in changes(report, "warning")


def test_a_risky_flag_value_chosen_on_purpose_is_flagged() -> None:
    report = run(recommended_command() + " --stream-interval 8")
    assert ("set", "--stream-interval") in changes(report, "warning")


def test_offline_host_without_the_vocab_is_an_error() -> None:
    offline = "HF_HUB_OFFLINE=1 " + recommended_command()
    assert ("set", "TIKTOKEN_ENCODINGS_BASE") in changes(run(offline), "error")
    assert run("TIKTOKEN_ENCODINGS_BASE=/srv/vocab " + offline).ok


def test_tool_choice_required_is_flagged_in_a_request() -> None:
    body = {
        "model": "openai/gpt-oss-20b",
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        "tool_choice": "required",
    }
    assert ("set", "tool_choice") in changes(run(json.dumps(body)))
    assert ("set", "tool_choice") not in changes(run(json.dumps({**body, "tool_choice": "auto"})))


def test_an_old_vllm_with_the_openai_parser_is_told_to_upgrade_to_a_named_release() -> None:
    report = run("vLLM API server version 0.10.1\nnon-default args: {'tool_call_parser': 'openai'}")
    upgrade = next(f for f in report.findings if f.change.action == "upgrade" and f.change.target == "vllm")
    assert upgrade.change.value and re.match(r"^\d+\.\d+", upgrade.change.value)
    assert upgrade.applies_to == f"vllm < {upgrade.change.value}"


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"model": "openai/gpt-oss-20b", "messages": [{"role": "user", "content": "hi"}], "ignore_eos": 1}),
        "vllm bench serve --model openai/gpt-oss-120b --ignore-eos",
    ],
)
def test_ignore_eos_is_an_error_in_requests_and_benchmarks(text: str) -> None:
    report = run(text)
    assert report.errors >= 1
    assert any(f.change.action == "avoid" and "ignore" in f.change.target for f in report.findings)


def test_a_benchmark_on_the_default_dataset_is_told_it_sends_ignore_eos_and_nothing_about_server_flags() -> None:
    report = run("vllm bench serve --model openai/gpt-oss-20b --random-output-len 1024")
    assert ("avoid", "ignore_eos") in changes(report, "error")
    assert not [f for f in report.findings if f.change.target.startswith("--") and f.change.action == "set"]
    assert run("vllm bench serve --model openai/gpt-oss-20b --dataset-name sharegpt").findings == []


def test_the_same_request_without_ignore_eos_is_clean() -> None:
    body = {"model": "openai/gpt-oss-20b", "messages": [{"role": "user", "content": "hi"}]}
    assert run(json.dumps(body)).errors == 0


def test_generation_config_without_the_call_stop_token_is_an_error() -> None:
    stale = run(json.dumps({"eos_token_id": [200002, 199999]}))
    current = run(json.dumps({"eos_token_id": [200002, 199999, 200012]}))
    assert ("check", "generation_config.json") in changes(stale, "error")
    assert current.errors == 0


def test_every_checked_action_names_a_condition_and_a_source() -> None:
    for problem in load_problems(PROJECT_ROOT):
        for action in problem.actions:
            assert action.when and all(w in CONDITIONS for w in action.when), (problem.anchor, action)
            assert action.sources, (problem.anchor, action)


def test_a_model_folder_on_disk(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [200002, 199999]}))
    from service.check import read_model_folder

    report = check_setup(read_model_folder(tmp_path), PROJECT_ROOT)
    assert ("check", "generation_config.json") in changes(report, "error")


def test_a_forced_attention_backend_is_flagged_as_a_gpu_dependent_risk() -> None:
    forced = "VLLM_ATTENTION_BACKEND=FLASH_ATTN " + recommended_command()
    report = run(forced)
    finding = next(f for f in report.findings if f.change.target == "VLLM_ATTENTION_BACKEND")
    assert (finding.severity, finding.change.action) == ("warning", "unset")
    assert "gpu" in finding.when


def test_namespace_tools_on_the_responses_api_are_an_error() -> None:
    body = {
        "model": "openai/gpt-oss-120b",
        "input": "list the files",
        "tools": [{"type": "function", "name": "ls"}, {"type": "namespace", "name": "shell", "tools": []}],
    }
    report = run(json.dumps(body))
    assert ("avoid", "tools.type") in changes(report, "error")
    plain = {**body, "tools": [{"type": "function", "name": "ls"}]}
    assert ("avoid", "tools.type") not in changes(run(json.dumps(plain)))
