"""Reading setups: command lines, vLLM's start-up args line, request bodies and model folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.check.facts import Api, CheckInputError, InputKind, read_model_folder, read_setup


def test_command_line_with_env_continuations_and_values() -> None:
    setup = read_setup(
        "HF_HUB_OFFLINE=1 VLLM_ATTENTION_BACKEND=TRITON_ATTN \\\n"
        "  vllm serve openai/gpt-oss-20b --tool-call-parser=openai --enable-auto-tool-choice \\\n"
        "  --max-model-len 32768 --stream-interval 4"
    )
    assert setup.kind is InputKind.COMMAND
    assert setup.model == "openai/gpt-oss-20b"
    assert setup.env == {"HF_HUB_OFFLINE": "1", "VLLM_ATTENTION_BACKEND": "TRITON_ATTN"}
    assert setup.flags == {
        "--tool-call-parser": "openai",
        "--enable-auto-tool-choice": "true",
        "--max-model-len": "32768",
        "--stream-interval": "4",
    }


def test_docker_run_env_and_export_lines() -> None:
    setup = read_setup(
        "export TIKTOKEN_ENCODINGS_BASE=/vocab\n"
        "docker run --gpus all -e HF_HUB_OFFLINE=1 vllm/vllm-openai:v0.11.0 serve openai/gpt-oss-120b "
        "--reasoning-parser openai_gptoss"
    )
    assert setup.env["TIKTOKEN_ENCODINGS_BASE"] == "/vocab"
    assert setup.env["HF_HUB_OFFLINE"] == "1"
    assert setup.flags["--reasoning-parser"] == "openai_gptoss"
    assert setup.model == "openai/gpt-oss-120b"


def test_args_line_keys_become_flags_and_version_is_read() -> None:
    setup = read_setup(
        "(APIServer pid=1) INFO 09-12 [api_server.py:1805] vLLM API server version 0.10.1.1\n"
        "(APIServer pid=1) INFO 09-12 [utils.py:326] non-default args: {'model_tag': 'openai/gpt-oss-120b', "
        "'enable_auto_tool_choice': True, 'tool_call_parser': 'openai', 'max_model_len': 32768}"
    )
    assert setup.kind is InputKind.ARGS_LINE
    assert setup.model == "openai/gpt-oss-120b"
    assert setup.flags == {
        "--enable-auto-tool-choice": "true",
        "--tool-call-parser": "openai",
        "--max-model-len": "32768",
    }
    assert str(setup.version("vllm")) == "0.10.1.1"


def test_the_start_up_version_line_of_newer_vllm_is_read_too() -> None:
    """From 0.15.0 vLLM logs "vLLM server version X, serving model Y" instead of "vLLM API server version X"."""
    setup = read_setup(
        "(APIServer pid=1) INFO 03-02 [utils.py:233] vLLM server version 0.18.1, serving model openai/gpt-oss-20b\n"
        "(APIServer pid=1) INFO 03-02 [utils.py:326] non-default args: {'model_tag': 'openai/gpt-oss-20b'}"
    )
    assert str(setup.version("vllm")) == "0.18.1"


# vLLM 0.15.0+'s default start-up banner: the version sits beside a logo drawn in block characters,
# every line under the record's prefix (made up here in that shape; see service.versions).
BANNER = (
    "(APIServer pid=1) INFO 03-02 10:00:01 [utils.py:299]        \u2588     \u2588     \u2588\u2584   \u2584\u2588\n"
    "(APIServer pid=1) INFO 03-02 10:00:01 [utils.py:299]  \u2584\u2584 \u2584\u2588 \u2588     \u2588     "
    "\u2588 \u2580\u2584\u2580 \u2588  version {version}\n"
    "(APIServer pid=1) INFO 03-02 10:00:01 [utils.py:299]   \u2588\u2584\u2588\u2580 \u2588     \u2588     "
    "\u2588     \u2588  model   openai/gpt-oss-20b\n"
    "(APIServer pid=1) INFO 03-02 10:00:01 [utils.py:326] non-default args: {{'model_tag': 'openai/gpt-oss-20b'}}"
)


@pytest.mark.parametrize(
    ("version", "read"),
    [("0.19.1", "0.19.1"), ("\x1b[1m0.33.0\x1b[0m", "0.33.0"), ("[1m0.15.1[0m", "0.15.1")],
    ids=["plain", "ansi-escapes", "escapes-without-esc"],
)
def test_the_banner_of_vllm_0_15_and_later_gives_the_version(version: str, read: str) -> None:
    """Unless VLLM_DISABLE_LOG_LOGO=1, vLLM 0.15.0+ prints no "server version" line, only the banner."""
    setup = read_setup(BANNER.format(version=version))
    assert setup.kind is InputKind.ARGS_LINE
    assert str(setup.version("vllm")) == read


def test_a_version_word_outside_the_banner_is_not_vllms() -> None:
    setup = read_setup(
        "(APIServer pid=1) INFO 03-02 [utils.py:326] non-default args: {'model_tag': 'openai/gpt-oss-20b'}\n"
        "INFO 03-02 [tokenizer.py:10] tokenizer config version 2.1"
    )
    assert setup.version("vllm") is None


def test_request_bodies_name_their_api() -> None:
    chat = read_setup(json.dumps({"model": "openai/gpt-oss-20b", "messages": [], "ignore_eos": True}))
    responses = read_setup(json.dumps({"model": "openai/gpt-oss-20b", "input": "hi"}))
    assert (chat.kind, chat.api) == (InputKind.REQUEST, Api.CHAT)
    assert (responses.kind, responses.api) == (InputKind.REQUEST, Api.RESPONSES)
    assert chat.request is not None and chat.request["ignore_eos"] is True


def test_generation_config_text_is_a_model_setup() -> None:
    setup = read_setup(json.dumps({"eos_token_id": [200002, 199999], "bos_token_id": 199998}))
    assert setup.kind is InputKind.MODEL
    assert setup.generation_config == {"eos_token_id": [200002, 199999], "bos_token_id": 199998}


def test_model_folder_reads_configs_and_template(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [200002, 199999, 200012]}))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt_oss"}))
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    setup = read_model_folder(tmp_path)
    assert setup.kind is InputKind.MODEL
    assert setup.generation_config == {"eos_token_id": [200002, 199999, 200012]}
    assert setup.model_config == {"model_type": "gpt_oss"}
    assert setup.chat_template == "{{ messages }}"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "nothing to check"),
        ("   \n", "nothing to check"),
        ('{"messages": [', "does not parse"),
        ('{"foo": 1}', "neither a request body"),
        ("hello world", "could not tell"),
        ("vllm serve model --chat-template 'unclosed", "unclosed quote"),
        ("non-default args: {'a': ", "does not parse"),
        ('{"messages": [], "max_tokens": ' + "9" * 5000 + "}", "digits"),
        ("x" * 300_000, "at most"),
    ],
)
def test_bad_input_is_a_clear_error(text: str, says: str) -> None:
    with pytest.raises(CheckInputError, match=says):
        read_setup(text)


def test_a_folder_without_configs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckInputError, match="model folder"):
        read_model_folder(tmp_path)


@pytest.mark.parametrize(
    "command",
    [
        "vllm serve openai/gpt-oss-120b --tool_call_parser openai --enable_auto_tool_choice",
        "python -m vllm.entrypoints.openai.api_server --model openai/gpt-oss-120b --tool_call_parser=openai "
        "--enable_auto_tool_choice",
    ],
    ids=["vllm-serve", "api-server-module"],
)
def test_vllm_reads_underscores_in_a_flags_name_as_dashes(command: str) -> None:
    """vLLM's FlexibleArgumentParser accepts --tool_call_parser for --tool-call-parser; check must too, or it
    warns that a flag the user set is missing."""
    setup = read_setup(command)
    assert setup.flags["--tool-call-parser"] == "openai"
    assert setup.flags["--enable-auto-tool-choice"] == "true"


def test_another_programs_underscore_flag_is_left_as_written() -> None:
    setup = read_setup("guidellm benchmark --target http://localhost:8000 --max_seconds 30")
    assert "--max_seconds" in setup.flags and "--max-seconds" not in setup.flags
