"""parse_input: error lines, root cause first, versions, flags, model, client and token ids."""

from __future__ import annotations

import pytest

from service.analysis.input import parse_input

BURIED_LOG = """\
INFO 08-21 09:12:03 [__init__.py:241] Automatically detected platform cuda.
(APIServer pid=48213) INFO 08-21 09:12:04 [api_server.py:1805] vLLM API server version 0.10.1+gptoss
(APIServer pid=48213) INFO 08-21 09:12:05 [utils.py:326] non-default args: {'model_tag': 'openai/gpt-oss-120b', \
'host': '0.0.0.0', 'enable_auto_tool_choice': True, 'tool_call_parser': 'openai', 'enforce_eager': False}
(APIServer pid=48213) WARNING 08-21 09:12:13 [__init__.py:1171] mxfp4 quantization is not fully optimized yet.
(APIServer pid=48213) ERROR 08-21 09:15:20 [serving_chat.py:1001] Error in chat completion stream generator.
(APIServer pid=48213) ERROR 08-21 09:15:20 [serving_chat.py:1001] Traceback (most recent call last):
(APIServer pid=48213) ERROR 08-21 09:15:20 [serving_chat.py:1001]   File "/vllm/serving_chat.py", line 642, in gen
(APIServer pid=48213) ERROR 08-21 09:15:20 [serving_chat.py:1001]     harmony_parser.process(token_id)
(APIServer pid=48213) ERROR 08-21 09:15:20 [serving_chat.py:1001] openai_harmony.HarmonyError: Unexpected token \
200002 while expecting start token 200006
(APIServer pid=48213) INFO:     10.1.2.3:5000 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error
"""


def test_buried_log_puts_the_exception_first_and_skips_wrappers_and_source_lines() -> None:
    parsed = parse_input(BURIED_LOG)
    assert parsed.signatures[0] == (
        "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    )
    assert "harmony_parser.process(token_id)" not in parsed.signatures
    assert all("Traceback" not in s for s in parsed.signatures)
    assert parsed.query_text.startswith("openai_harmony.HarmonyError")
    assert parsed.is_log


def test_versions_flags_model_and_tokens_come_from_the_log() -> None:
    parsed = parse_input(BURIED_LOG)
    assert parsed.versions["vllm"] == "0.10.1+gptoss"
    assert "--enable-auto-tool-choice" in parsed.flags
    assert "--tool-call-parser openai" in parsed.flags
    assert not any(f.startswith("--enforce-eager") for f in parsed.flags)  # False is a default
    assert parsed.model == "openai/gpt-oss-120b"
    assert parsed.token_ids == [200002, 200006]


def test_the_version_of_a_newer_vllm_log_comes_from_its_banner() -> None:
    """vLLM 0.15.0+ writes its version only beside the start-up logo: a log pasted whole still tells it."""
    banner = (
        "(APIServer pid=7) INFO 11-27 10:00:01 [utils.py:299]  \u2584\u2584 \u2584\u2588 \u2588     \u2588     "
        "\u2588 \u2580\u2584\u2580 \u2588  version 0.19.1\n"
        "(APIServer pid=7) INFO 11-27 10:00:01 [utils.py:299]   \u2588\u2584\u2588\u2580 \u2588     \u2588     "
        "\u2588     \u2588  model   openai/gpt-oss-120b\n"
    )
    parsed = parse_input(banner + BURIED_LOG.replace("vLLM API server version 0.10.1+gptoss", "Started"))
    assert parsed.versions["vllm"] == "0.19.1"
    assert parsed.query_text.startswith("openai_harmony.HarmonyError"), "the banner is no failure line"


@pytest.mark.parametrize(
    ("text", "model"),
    [
        ("ollama run gpt-oss:20b then the runner stops", "gpt-oss:20b"),
        ("[openai_gpt-oss-20b] Failed to generate", "gpt-oss-20b"),
        ("--model /mnt/models/gpt-oss-120b --port 8001", "gpt-oss-120b"),
        ("vllm serve openai/gpt-oss-120b: tools never arrive", "openai/gpt-oss-120b"),
        ("pulled gpt-oss-20b:latest", "gpt-oss-20b:latest"),
    ],
    ids=["ollama-tag", "after-underscore", "path-folder-is-no-owner", "owner", "tag-after-name"],
)
def test_the_model_is_read_in_the_spellings_engines_use(text: str, model: str) -> None:
    assert parse_input(text).model == model


def test_the_engine_cores_own_records_give_the_vllm_version() -> None:
    log = (
        "(EngineCore_DP0 pid=9) INFO 11-27 10:00:02 [core.py:77] Initializing a V1 LLM engine (v0.22.0) with "
        "config: model='openai/gpt-oss-120b', tokenizer='openai/gpt-oss-120b'\n"
        + BURIED_LOG.replace("vLLM API server version 0.10.1+gptoss", "Started")
    )
    assert parse_input(log).versions["vllm"] == "0.22.0"


def test_client_wrapped_error_yields_the_servers_own_message() -> None:
    text = (
        "openai.InternalServerError: Error code: 500 - {'error': {'message': 'unexpected tokens remaining "
        "in message header: Some(\"to=functions.web-browsing\")', 'type': 'InternalServerError', 'code': 500}}"
    )
    parsed = parse_input(text)
    assert 'unexpected tokens remaining in message header: Some("to=functions.web-browsing")' in parsed.signatures
    assert parsed.client == "openai-python"


def test_command_line_flags_and_request_params_are_collected() -> None:
    text = (
        "vllm serve openai/gpt-oss-20b --tool-call-parser openai --enable-auto-tool-choice --port 8000\n"
        'curl -d \'{"model": "x", "tool_choice": "required", "stream": true}\'\n'
        "export TIKTOKEN_ENCODINGS_BASE=/models/vocab\n"
    )
    parsed = parse_input(text)
    assert {"--tool-call-parser openai", "--enable-auto-tool-choice", "--port 8000"} <= set(parsed.flags)
    assert "tool_choice=required" in parsed.flags
    assert "TIKTOKEN_ENCODINGS_BASE=/models/vocab" in parsed.flags
    assert parsed.model == "openai/gpt-oss-20b"


def test_framework_clients_win_over_the_sdk_they_wrap() -> None:
    text = "langchain_core.exceptions.OutputParserException\nopenai.BadRequestError: Error code: 400"
    assert parse_input(text).client == "langchain"


def test_plain_description_is_used_whole_as_the_query() -> None:
    text = "gpt-oss on vLLM puts the tool call JSON into message.content and tool_calls is empty."
    parsed = parse_input(text)
    assert not parsed.is_log
    assert parsed.query_text == text
    assert parsed.signatures == []


def test_pathological_input_is_bounded() -> None:
    parsed = parse_input(("Error: " + "a" * 5000 + "\n") * 200 + "x" * 200_000)
    assert len(parsed.query_text) <= 2000
    assert len(parsed.signatures) <= 40


def test_four_part_versions_and_arg_names_are_not_mistaken_for_request_params() -> None:
    text = (
        "(APIServer pid=1) INFO 08-11 [api_server.py:1805] vLLM API server version 0.10.1.1\n"
        "(APIServer pid=1) INFO [utils.py:326] non-default args: {'enable_auto_tool_choice': True}"
    )
    parsed = parse_input(text)
    assert parsed.versions["vllm"] == "0.10.1.1"
    assert "--enable-auto-tool-choice" in parsed.flags
    assert not any(flag.startswith("tool_choice=") for flag in parsed.flags)


def test_a_vllm_mlx_version_is_its_own_and_not_vllms() -> None:
    parsed = parse_input("vllm-mlx 0.3.2 on an M3 Max serving gpt-oss-20b with --tool-call-parser harmony")
    assert parsed.versions.get("vllm-mlx") == "0.3.2"
    assert "vllm" not in parsed.versions
    assert parse_input("pip install vllm_mlx==0.4.1").versions.get("vllm-mlx") == "0.4.1"
    assert "vllm-mlx" not in parse_input("vllm 0.11.0 with mlx-lm 0.28.1").versions


def test_the_engines_a_failure_names_leave_out_those_only_its_log_names() -> None:
    # A vLLM log names vLLM on every record; the failure named by its failing lines or the user's sentence
    # is what a confident match may rely on. A short paste is all failure: every engine it names counts.
    log = "\n".join(
        [
            "(APIServer pid=7) INFO 11-23 10:00:01 [api_server.py:1839] vLLM API server version 0.10.2",
            "(APIServer pid=7) INFO 11-23 10:00:02 [utils.py:233] non-default args: {'model': 'openai/gpt-oss-20b'}",
            "(EngineCore_DP0 pid=9) INFO 11-23 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.10.2)",
            "(EngineCore_DP0 pid=9) INFO 11-23 10:00:40 [gpu_worker.py:298] Available KV cache memory: 20.1 GiB",
            "the reasoning text shows up in the answer of every second request",
            '(APIServer pid=7) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        ]
    )
    parsed = parse_input(log)
    assert parsed.log_dump and parsed.engines == ["vllm"] and parsed.failure_engines == []
    assert parsed.named_by_failure(["exo"], lambda text: ["exo"] if "exo" in text else []) == []
    named = parse_input(log.replace("every second request", "every second request on vllm"))
    assert named.failure_engines == ["vllm"]
    pasted = parse_input("vllm serve: the reasoning text shows up in the answer of every second request")
    assert not pasted.log_dump and pasted.failure_engines == ["vllm"]
    assert pasted.named_by_failure(["exo"], lambda text: []) == ["exo"]


def test_a_model_name_ends_before_the_sentences_punctuation() -> None:
    assert parse_input("vLLM serving gpt-oss-120b: tool calls vanish").model == "gpt-oss-120b"
    assert parse_input("I run openai/gpt-oss-20b.").model == "openai/gpt-oss-20b"
    assert parse_input("ollama run gpt-oss-20b:latest crashes").model == "gpt-oss-20b:latest"


def test_the_threads_a_user_names_are_read_from_their_lines_not_from_log_records() -> None:
    text = "\n".join(
        [
            "same as https://github.com/vllm-project/vllm/issues/22403 and vllm-project/vllm#23318?",
            "see [the PR](https://github.com/openai/harmony/pull/42) too",
            "(APIServer pid=7) WARNING 03-02 10:00:00 [x.py:1] see https://github.com/vllm-project/vllm/issues/1",
        ]
    )
    assert parse_input(text).threads == ["vllm-project/vllm#22403", "vllm-project/vllm#23318", "openai/harmony#42"]
    assert parse_input("an email a@b.c/x#1 or a path ./a/b#2 names no thread").threads == []


def test_a_bare_thread_number_is_read_but_a_list_item_is_not() -> None:
    assert parse_input("is #22403 fixed in vllm 0.10.1?").numbers == [22403]
    assert parse_input("ollama issue 12187 and PR #12403 again").numbers == [12187, 12403]
    assert parse_input("see vllm-project/vllm#22403").numbers == []  # a named thread, not a bare number
    assert parse_input("step #1, then #2, then #33").numbers == []
    assert parse_input("RuntimeError: CUDA error #2000 while loading the weights").numbers == []  # the error's


def test_a_pasted_response_says_what_its_fields_show() -> None:
    leak = '{"choices":[{"message":{"role":"assistant","content":"<|channel|>analysis<|message|>Hi.<|end|>"}}]}'
    assert parse_input(leak).response_shows == ["Reasoning appears in content"]
    assert parse_input(leak).query_text.startswith("Reasoning appears in content\n")
    call = (
        "{'choices': [{'message': {'content': '<|channel|>commentary to=functions.get_weather <|constrain|>json"
        "<|message|>{}', 'tool_calls': []}}]}"
    )
    assert parse_input(call).response_shows == ["Tool call JSON in content and tool_calls empty"]
    # JSON arguments on the commentary channel are a tool call's, not reasoning.
    bare_call = '{"message": {"content": "<|channel|>commentary<|message|>{\\"path\\": \\"/\\"}<|end|>"}}'
    assert parse_input(bare_call).response_shows == ["Tool call JSON in content and tool_calls empty"]
    empty = '{"choices":[{"message":{"content":null},"finish_reason":"stop"}]}'
    assert parse_input(empty).response_shows == ["Content is null with finish reason stop"]
    named = '{"tool_calls":[{"function":{"name":"get_weather<|channel|>commentary","arguments":"{}"}}]}'
    assert parse_input(named).response_shows == ["Harmony tokens leak into tool names"]
    # An error line or the user's sentence says more than the fields: then they are not read.
    assert parse_input("ValueError: bad request\n" + leak).response_shows == []
    assert parse_input('{"choices":[{"message":{"content":"Hello!"}}]}').response_shows == []


def test_vllms_crash_dump_is_context_and_the_cuda_hints_give_way_to_the_cuda_error() -> None:
    """At an engine crash vLLM logs its config at ERROR level (words like reasoning_parser); PyTorch adds its
    standing CUDA advice. Neither is the failure: the CUDA error leads the query."""
    log = (
        "(EngineCore_DP0 pid=9) ERROR 11-27 10:00:02 [dump_input.py:72] Dumping input data for V1 LLM engine "
        "(v0.19.1) with config: model='openai/gpt-oss-120b', reasoning_parser='openai_gptoss', seed=0\n"
        "(EngineCore_DP0 pid=9) ERROR 11-27 10:00:02 [dump_input.py:79] Dumping scheduler output for model "
        "execution: SchedulerOutput(scheduled_new_reqs=[])\n"
        "(EngineCore_DP0 pid=9) ERROR 11-27 10:00:02 [core.py:710] RuntimeError: CUDA error: an illegal memory "
        "access was encountered\n"
        "(EngineCore_DP0 pid=9) ERROR 11-27 10:00:02 [core.py:710] CUDA kernel errors might be asynchronously "
        "reported at some other API call, so the stacktrace below might be incorrect.\n"
        "(EngineCore_DP0 pid=9) ERROR 11-27 10:00:02 [core.py:710] For debugging consider passing "
        "CUDA_LAUNCH_BLOCKING=1\n"
    )
    parsed = parse_input(log)
    assert parsed.query_text.startswith("RuntimeError: CUDA error: an illegal memory access")
    assert not any("Dumping" in s for s in parsed.signatures)
    assert parsed.versions["vllm"] == "0.19.1"


def test_a_traceback_code_line_under_an_error_prefix_is_no_error_line() -> None:
    """A paste that starts mid-traceback: the indented code line under vLLM's ERROR prefix is source code,
    not the failure; the exception below it leads."""
    log = (
        "(APIServer pid=5) ERROR 11-27 10:00:02 [async_llm.py:551]     outputs = await engine_core.get_outputs()\n"
        "(APIServer pid=5) ERROR 11-27 10:00:02 [async_llm.py:551] ValueError: acme went wrong in the parser\n"
    )
    parsed = parse_input(log)
    assert parsed.signatures == ["ValueError: acme went wrong in the parser"]


def test_native_crash_lines_are_error_lines() -> None:
    text = (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  Unexpected content at end of input\n"
        "GGML_ASSERT(id >= 0 && id < n_expert) when running the 20b model\n"
        "SIGSEGV: segmentation violation\n"
    )
    # The C++ exception's own message (what() of the terminate report) leads: the line above only names its type.
    assert parse_input(text).signatures == [
        "Unexpected content at end of input",
        "terminate called after throwing an instance of 'std::runtime_error'",
        "GGML_ASSERT(id >= 0 && id < n_expert) when running the 20b model",
        "SIGSEGV: segmentation violation",
    ]


def test_a_title_quoting_part_of_an_error_line_gives_way_to_it() -> None:
    """A report's first line that repeats four words in a row of a later error line is its title: the line
    itself is the error. A later line that quotes the whole title gives way to the title instead."""
    report = (
        "acme-20b at 1.2.3 has invalid qzx type 39\n\n"
        "I load it with the acme loader.\n"
        "acme_loader: tensor 'blk.0.w' has invalid qzx type 39 (NONE)\n"
    )
    assert parse_input(report).signatures[0] == "acme_loader: tensor 'blk.0.w' has invalid qzx type 39 (NONE)"
    error = "acme: error: unrecognized arguments: --qzx demo"
    assert parse_input(f"{error}\n\nI get:\n`{error}`\n").signatures == [error]


def test_a_forms_heading_over_the_error_is_no_error_line() -> None:
    form = "Error: acme-20b - Unknown error\n\nError Details\n\nProvider: acme\n\nError Output\nConnection error.\n"
    assert not {"Error Details", "Error Output"} & set(parse_input(form).signatures)
    assert "Connection error." in parse_input(form).signatures


def test_ollamas_start_up_record_gives_its_version() -> None:
    log = 'time=2025-08-07T11:18:18 level=INFO source=routes.go:1350 msg="Listening on [::]:11434 (version 0.11.3)"'
    assert parse_input(log).versions == {"ollama": "0.11.3"}


def test_a_failing_records_own_tag_names_its_engine() -> None:
    """vLLM's process tag on the failing record names the engine that failed; start-up lines alone do not."""
    log = "\n".join(
        [f"(APIServer pid=5) INFO 11-27 10:00:0{i} [loggers.py:123] Engine 000: Running: 1 reqs" for i in range(6)]
        + ["(APIServer pid=5) ERROR 11-27 10:00:09 [serving.py:99] ValueError: acme went wrong in the parser"]
    )
    parsed = parse_input(log)
    assert parsed.log_dump and parsed.failure_engines == ["vllm"]
    buried = parse_input(log.rsplit("\n", 1)[0] + "\nollama: Error: acme went wrong in the runner")
    assert buried.failure_engines == ["ollama"], "a line the user put there names its own engine"


def test_env_vars_a_library_advises_are_not_the_users_settings() -> None:
    text = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
        "Please set a HF_TOKEN to enable higher rate limits and faster downloads.\n"
        "export VLLM_USE_V1=0\n"
    )
    assert parse_input(text).flags == ["VLLM_USE_V1=0"]


def test_ollamas_env_map_gives_the_values_that_are_set() -> None:
    line = (
        'time=2026-11-27T10:00:00Z level=INFO source=routes.go:1 msg="server config" env="map[CUDA_VISIBLE_DEVICES: '
        "OLLAMA_CONTEXT_LENGTH:65536 OLLAMA_FLASH_ATTENTION:true OLLAMA_INTEL_GPU:false OLLAMA_KEEP_ALIVE:30m0s "
        "OLLAMA_LOAD_TIMEOUT:5m0s OLLAMA_MODELS:/Volumes/Acme Disk/models OLLAMA_ORIGINS:[http://localhost "
        'https://localhost] OLLAMA_SCHED_SPREAD:true http_proxy: no_proxy:]"'
    )
    assert parse_input(line).flags == [
        "OLLAMA_CONTEXT_LENGTH=65536",
        "OLLAMA_FLASH_ATTENTION=true",
        "OLLAMA_KEEP_ALIVE=30m0s",
        "OLLAMA_MODELS=/Volumes/Acme Disk/models",
        "OLLAMA_SCHED_SPREAD=true",
    ], "unset and default values and the origins list are left out; a value with spaces is whole"


def test_an_env_var_a_sentence_quotes_keeps_no_quote_marks() -> None:
    text = "With `OLLAMA_FLASH_ATTENTION=1` and `OLLAMA_KV_CACHE_TYPE=q8_0`, the acme server stops."
    assert parse_input(text).flags == ["OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q8_0"]


@pytest.mark.parametrize(
    "text",
    [
        # a command split over lines with trailing backslashes
        "vllm serve openai/gpt-oss-120b \\\n  --tool-call-parser openai \\\n  --enable-auto-tool-choice\n",
        # the options alone after a label
        "Serving Arguments: --tool-call-parser openai --enable-auto-tool-choice\n",
        # vLLM's args dict on the line after its header, in a fence
        "non-default args:\n```\n{'tool_call_parser': 'openai', 'enable_auto_tool_choice': True}\n```\n",
        # a PowerShell command split with trailing backticks
        "vllm serve openai/gpt-oss-120b `\n  --tool-call-parser openai `\n  --enable-auto-tool-choice\n",
    ],
)
def test_flags_are_read_however_the_command_is_pasted(text: str) -> None:
    flags = parse_input(text).flags
    assert "--tool-call-parser openai" in flags and "--enable-auto-tool-choice" in flags


def test_a_pasted_config_files_options_are_read_when_the_command_passes_one() -> None:
    """vLLM's ``--config`` file holds its options as top-level YAML keys."""
    config = "acme.yaml:\nkv-cache-dtype: fp8\nasync-scheduling: true\nstream_interval: 20\nmodel: acme\n"
    flags = parse_input("vllm serve openai/gpt-oss-20b --config /srv/acme.yaml --port 9000\n" + config).flags
    assert {"--kv-cache-dtype fp8", "--async-scheduling", "--stream-interval 20"} <= set(flags)
    assert "--model acme" not in flags, "a one-word key is not read"
    assert "--kv-cache-dtype fp8" not in parse_input("vllm serve openai/gpt-oss-20b --port 9000\n" + config).flags


@pytest.mark.parametrize("continued", [" \\\n  ", " `\n  ", " "])
def test_a_container_runs_own_options_are_not_the_servers(continued: str) -> None:
    """``docker run --gpus all --name x IMAGE --model ...``: what comes before the image is the container
    runtime's; the server's options follow the image."""
    parts = [
        "docker run -d --security-opt apparmor=unconfined --name acme --restart unless-stopped",
        "--gpus all --ulimit memlock=-1 -p 9000:8000 -v /srv/cache:/root/.cache -e HF_HUB_OFFLINE=1",
        "registry.example.com:5000/acme/vllm-openai:v0.10.1 --model openai/gpt-oss-20b --max-model-len 8192",
    ]
    flags = parse_input(continued.join(parts) + "\n").flags
    assert [f for f in flags if f.startswith("--")] == ["--model openai/gpt-oss-20b", "--max-model-len 8192"]
    assert "HF_HUB_OFFLINE=1" in flags  # the container's environment is the server's


def test_a_container_run_without_a_recognisable_image_keeps_its_options() -> None:
    flags = parse_input("docker run --gpus all vllm-openai --model openai/gpt-oss-20b --max-model-len 8192\n").flags
    assert "--model openai/gpt-oss-20b" in flags and "--gpus all" in flags  # nothing is dropped on a guess


def test_a_sentence_that_names_a_flag_is_not_an_options_line() -> None:
    assert parse_input("I tried adding --tool-call-parser openai but nothing changed at all.").flags == []


@pytest.mark.parametrize(
    ("text", "model"),
    [("I serve GPT OSS 120B on two cards", "gpt-oss-120b"), ("gpt-oss 20B answers with markers", "gpt-oss-20b")],
)
def test_the_model_written_with_spaces_is_read(text: str, model: str) -> None:
    assert parse_input(text).model == model


@pytest.mark.parametrize(
    ("text", "versions"),
    [
        ("Run the acme client against vllm (0.19.0) provider.", {"vllm": "0.19.0"}),
        ("pip installed openai_harmony-0.0.4-cp38-abi3-manylinux_2_28_aarch64.whl", {"openai-harmony": "0.0.4"}),
        ("the openai_harmony-rs crate", {}),
    ],
)
def test_a_version_in_parentheses_or_a_wheels_name_is_read(text: str, versions: dict[str, str]) -> None:
    assert parse_input(text).versions == versions


def test_a_version_in_backticks_is_read() -> None:
    assert parse_input("With vLLM `v0.26.0` the acme call fails.").versions == {"vllm": "0.26.0"}


def test_a_llama_cpp_forks_build_number_is_not_upstreams_tag() -> None:
    log = "ik_llama.cpp server\nversion: 4177 (9c1c74ac)\n"
    assert "llama.cpp" not in parse_input(log).versions
    assert parse_input("llama-server\nversion: 6992 (aa3b7a90b)\n").versions == {"llama.cpp": "b6992"}


def test_a_lead_in_to_the_error_is_the_users_sentence_not_an_error_line() -> None:
    text = "When I run the acme model I am getting the following error:\nValueError: acme header is broken\n"
    parsed = parse_input(text)
    assert parsed.signatures == ["ValueError: acme header is broken"]
    assert "getting the following error" in parsed.query_text, "it stays as the user's words"


def test_a_jinja_errors_quoted_template_source_is_not_an_error_line() -> None:
    text = (
        "While executing CallExpression at line 9, column 4 in source:\n"
        '...{{- raise_exception("Cannot pass acme content and thinking ...\n'
        "                   ^\n"
        "Error: Jinja Exception: Acme content and thinking in one message\n"
    )
    assert parse_input(text).signatures == ["Error: Jinja Exception: Acme content and thinking in one message"]


def test_python_chaining_lines_are_not_the_query_of_a_log() -> None:
    record = "(APIServer pid=1)"
    log = "\n".join(
        [
            "The acme stream gets worse after a while.",
            f"{record} During handling of the above exception, another exception occurred:",
            *(f'{record}   File "/x/acme_{i}.py", line {i}, in run\n{record}     run_{i}()' for i in range(4)),
        ]
    )
    assert "During handling" not in parse_input(log).query_text


def test_a_link_in_the_users_error_sentence_is_a_named_thread() -> None:
    text = (
        'I get the error "unexpected tokens remaining in message header".\n'
        "The issue https://github.com/acme/harmony/issues/27 seems related to this error.\n"
    )
    assert parse_input(text).threads == ["acme/harmony#27"]


def test_an_exception_a_sentence_quotes_in_backticks_is_a_signature() -> None:
    parsed = parse_input("Starting the server I get `AssertionError: acme sinks are not here` on my 4090")
    assert parsed.signatures == ["AssertionError: acme sinks are not here"]
    assert parsed.prose, "the sentence around it is still the user's account"
    assert parse_input("I set `--tool-call-parser openai` and `tool_choice=auto` as documented").signatures == []


@pytest.mark.parametrize(
    "title",
    [
        "Acme Serving on XPU - RuntimeError: acme device lost (code 20)",
        "[Bug]: RuntimeError: acme device lost (code 20)",
        "acme model - RuntimeError: acme device lost (code 20)",
    ],
)
def test_an_exception_after_a_title_is_the_error_line(title: str) -> None:
    """A title glued onto the exception: the exception, from its name on, is the failing line."""
    assert (
        parse_input(title + "\nIt happens on the first request.").signatures[0]
        == "RuntimeError: acme device lost (code 20)"
    )


def test_a_sentence_naming_an_error_class_without_a_message_stays_a_sentence() -> None:
    text = "After the upgrade - RuntimeError shows up again, and the acme server failed."
    assert parse_input(text).signatures[0] == text


def test_a_title_that_quotes_a_log_line_gives_way_to_that_line() -> None:
    """A title around the log's error line: the line is the failure, at the title's place (first)."""
    text = (
        "[Bug]: acme not running on RTX5090 [ERROR] Assertion failed: acme sinks only on SM90\n"
        "Unable to run the acme model today, it worked last month on the same box.\n"
        "[ERROR] Assertion failed: acme sinks only on SM90\n"
    )
    assert parse_input(text).signatures[0] == "Assertion failed: acme sinks only on SM90"
    assert not any(s.startswith("[Bug]") for s in parse_input(text).signatures)


@pytest.mark.parametrize(
    "sentence",
    ["The acme answer is dropped, with no error and no log.", "The acme server exits without any error at all."],
)
def test_a_sentence_that_denies_an_error_is_not_an_error_line(sentence: str) -> None:
    parsed = parse_input(sentence)
    assert parsed.signatures == [] and parsed.prose == [sentence]
    assert parse_input("The acme server exits with an error at start.").signatures, "an error it states is one"


@pytest.mark.parametrize(
    ("text", "line", "alone"),
    [
        pytest.param(  # a traceback cut to its frames: no source line under the last one
            "[Bug] acme model fails with tools enabled: template error\n"
            "Traceback (most recent call last):\n"
            '  File "/srv/acme/serving_chat.py", line 94, in _convert_to_internal_request\n'
            "jinja2.exceptions.UndefinedError: 'dict object' has no attribute 'acme'\n",
            "jinja2.exceptions.UndefinedError: 'dict object' has no attribute 'acme'",
            False,
            id="exception-right-under-a-frame",
        ),
        pytest.param(
            "Acme gpt-oss:20b unsupported\nAcmeVersionError [AI_AcmeVersionError]: Unsupported model version v1\n",
            "AcmeVersionError [AI_AcmeVersionError]: Unsupported model version v1",
            False,
            id="javascript-error-name-tag",
        ),
        pytest.param(  # a template's, a JavaScript's or Python's "... not defined", with no other error word
            'Sending a message shows:\n500: template: :3: function "acmeDate" not defined\n',
            '500: template: :3: function "acmeDate" not defined',
            True,
            id="not-defined",
        ),
    ],
)
def test_the_failing_line_leads(text: str, line: str, alone: bool) -> None:
    signatures = parse_input(text).signatures
    assert signatures[0] == line
    if alone:
        assert signatures == [line]


def test_a_short_label_line_is_not_an_error_line() -> None:
    text = "Error Log:\nacme.AcmeError: the acme header is broken\nLast error:\n"
    assert parse_input(text).signatures == ["acme.AcmeError: the acme header is broken"]


def test_an_info_record_relaying_a_json_error_body_gives_its_message() -> None:
    line = (
        "2026-01-02T10:00:00+00:00 INFO  [agent::thread] Retrying for completion error Other(Failed to connect to Acme "
        "API: 500 "
        '{"error":"template: :108:130: executing at <index $prop.Type 0>: error calling index: acme out of range"})'
    )
    assert parse_input(line).signatures[0].startswith("template: :108:130: executing at")


def test_an_exceptions_bare_name_gives_way_to_the_same_exception_with_its_message() -> None:
    """Some tracebacks print the class name alone above the message: the line with the message is the error."""
    text = (
        "When I run the acme script:\nValueError\nacme conversation is broken\nValueError: acme conversation is broken"
    )
    assert parse_input(text).signatures[0] == "ValueError: acme conversation is broken"
    assert "ValueError" not in parse_input(text).signatures
    assert parse_input("ValueError\nthe acme run stops here").signatures[0] == "ValueError", "kept when alone"


def test_a_vllm_command_lines_flags_are_read_as_vllm_reads_them() -> None:
    parsed = parse_input(
        "vllm serve openai/gpt-oss-120b --max_model_len 8192 --compilation_config.pass_config.fuse_x true\n"
        "python -m sglang.launch_server --model-path openai/gpt-oss-20b --tool_call_parser gpt-oss\n"
        "llama-server -m gpt-oss-20b.gguf --jinja --reasoning-format none"
    )
    assert parsed.flags == [
        "--max-model-len 8192",
        "--compilation-config.pass_config.fuse_x true",  # after the dot, as written
        "--model-path openai/gpt-oss-20b",
        "--tool_call_parser gpt-oss",  # SGLang's argparse takes no underscores: left as written
        "--jinja",
        "--reasoning-format none",
        "--model gpt-oss-20b.gguf",  # llama-server's -m
    ]


@pytest.mark.parametrize(
    ("text", "versions"),
    [
        ("build: 6992 (aa3b7a90b) with cc (GCC) 12.2.0 for x86_64-linux-gnu", {"llama.cpp": "b6992"}),
        ("llama-server b7256 on Windows crashes", {"llama.cpp": "b7256"}),
        ("[TensorRT-LLM] TensorRT LLM version: 1.2.0rc4", {"tensorrt-llm": "1.2.0rc4"}),
        ("LM Studio 0.3.23 with the 20b model", {"lm-studio": "0.3.23"}),
    ],
    ids=["llama-server-build", "llama-tag", "tensorrt-llm", "lm-studio"],
)
def test_other_engines_versions_are_read(text: str, versions: dict[str, str]) -> None:
    assert parse_input(text).versions == versions


def test_a_sentence_starting_with_i_keeps_its_first_word() -> None:
    assert parse_input("I get a parse error every time the tool call starts").signatures == [
        "I get a parse error every time the tool call starts"
    ]


def test_the_error_the_software_wrote_leads_the_users_sentence_about_it() -> None:
    text = (
        "After a few successful tool calls the model starts failing with a parsing error.\n"
        "srv    send_error: task id = 3, error: acme failed to parse the tool call\n"
    )
    assert parse_input(text).signatures == [
        "srv    send_error: task id = 3, error: acme failed to parse the tool call",
        "After a few successful tool calls the model starts failing with a parsing error.",
    ]


@pytest.mark.parametrize(
    ("text", "client"),
    [
        ("ChatOllama(model='gpt-oss:20b').invoke(msgs) returns an empty message", "langchain"),
        ("Claude Code 2.1.185 against vLLM /v1/messages fails", "claude-code"),
        ("claude-code-router in front of vLLM drops the reasoning", None),
        ("createOpenAICompatible from @ai-sdk/openai-compatible shows no reasoning", "ai-sdk"),
    ],
    ids=["langchain-class", "claude-code", "router-is-not-claude-code", "ai-sdk"],
)
def test_more_clients_are_named(text: str, client: str | None) -> None:
    assert parse_input(text).client == client


def test_report_labels_and_quote_marks_are_not_part_of_the_error() -> None:
    text = "**Error Details**\n> openai.APIError: acme failed in the stream\n\u2502 ValueError: acme value\n"
    assert parse_input(text).signatures == ["openai.APIError: acme failed in the stream", "ValueError: acme value"]


def test_lm_studios_chat_window_lines_wrap_the_error() -> None:
    text = (
        "Failed to send message\n"
        'Error rendering prompt with jinja template: "Cannot pass acme content here".\n'
        "This is usually an issue with the model's prompt template. If you cannot find a fixed one, ask.\n"
    )
    error = 'Error rendering prompt with jinja template: "Cannot pass acme content here".'
    assert parse_input(text).signatures == [error]


def test_llama_servers_short_options_are_read_as_its_long_names() -> None:
    flags = parse_input("llama-server -m /models/acme.gguf -c 0 -fa on -ngl 99 --jinja -xyz 1").flags
    assert flags == ["--jinja", "--model /models/acme.gguf", "--ctx-size 0", "--flash-attn on", "--gpu-layers 99"]
    assert parse_input("python serve.py -c 0 -fa on").flags == [], "another program's short options are its own"


def test_a_sentences_colon_after_a_flags_value_is_not_the_value() -> None:
    flags = parse_input("llama-server -m acme.gguf -fa on: then it crashes").flags
    assert flags == ["--model acme.gguf", "--flash-attn on"]
    said = "The only runner that works with sglang is --moe-runner-backend triton_kernel. Others fail."
    assert parse_input(said).flags == ["--moe-runner-backend triton_kernel"]
    assert parse_input("vllm serve . --download-dir ..").flags == ["--download-dir .."]


def test_an_options_name_is_not_a_token_id() -> None:
    assert parse_input("vllm serve acme --max-num-batched-tokens 2048").token_ids == []
    assert parse_input("HarmonyError: Unexpected token 200002 while expecting start token 200006").token_ids == [
        200002,
        200006,
    ]


def test_a_boolean_taken_for_the_model_tag_is_not_the_model() -> None:
    args = "non-default args: {'model_tag': 'true', 'model': 'openai/gpt-oss-20b', 'async_scheduling': True}"
    assert parse_input(args).model == "openai/gpt-oss-20b"


@pytest.mark.parametrize(
    ("text", "versions"),
    [
        ("lmdeploy version:0.11.1", {"lmdeploy": "0.11.1"}),
        ("broken since Ollama version 0.11.11", {"ollama": "0.11.11"}),
        ("image acme/llm-scaler-vllm:0.11.1-b7", {}),  # another image whose name ends in vllm
        ("docker run vllm/vllm-openai:v0.10.1", {"vllm": "0.10.1"}),
    ],
)
def test_versions_as_pasted(text: str, versions: dict[str, str]) -> None:
    assert parse_input(text).versions == versions


def test_a_lead_in_that_says_what_the_error_is_is_not_one() -> None:
    assert parse_input("The error we are seeing is:\nValueError: acme broke\n").signatures == ["ValueError: acme broke"]


def test_a_chinese_sentence_is_the_users_and_names_its_engine() -> None:
    text = "使用自定义模型定义了gpt-oss-120b，后端使用sglang推理，推理过程被直接打印出来了。\n"
    parsed = parse_input(text)
    assert parsed.prose == [text.strip()] and parsed.engines == ["sglang"]


def test_a_responses_object_cut_off_by_its_budget_is_a_fact_beside_the_users_words() -> None:
    text = (
        "The acme agent gets an empty answer from the server every time.\n"
        "Response(id='resp_1', incomplete_details=IncompleteDetails(reason='max_output_tokens'), output=[], "
        "status='incomplete')\n"
    )
    parsed = parse_input(text)
    assert parsed.response_shows == ["Responses API output status and truncation"]
    assert parsed.query_text.startswith("The acme agent"), "the user's words lead, the fact follows"
    assert parsed.query_text.endswith("Responses API output status and truncation")


@pytest.mark.parametrize(
    "env",
    [
        "ENABLE_AUTO_TOOL_CHOICE=true\nTOOL_CALL_PARSER=openai\n",
        "environment:\n  - ENABLE_AUTO_TOOL_CHOICE=true\n  - TOOL_CALL_PARSER=openai\n  - REASONING_PARSER=false\n",
        'env:\n  TOOL_CALL_PARSER: "openai"\n  ENABLE_AUTO_TOOL_CHOICE: "true"\n',
    ],
)
def test_a_deployments_option_variables_are_its_flags(env: str) -> None:
    """RunPod's worker-vllm passes TOOL_CALL_PARSER=openai to vLLM as --tool-call-parser openai."""
    assert sorted(parse_input(env).flags) == ["--enable-auto-tool-choice", "--tool-call-parser openai"]


def test_where_the_model_works_is_not_the_failing_engine() -> None:
    parsed = parse_input("Ollama fails with the acme error on every call.\nThe same model works fine with llama.cpp.")
    assert parsed.engines == ["ollama"] and parsed.failure_engines == ["ollama"]
    both = parse_input("It works fine with vLLM but Ollama fails with the acme error.")
    assert set(both.engines) == {"vllm", "ollama"}, "a line that names a failure too is kept whole"


def test_raw_harmony_output_a_client_showed_is_a_response_fact() -> None:
    call = "The acme app shows this instead of calling the tool:\n<|channel|>commentary to=acme_tool <|constrain|>json"
    shows = parse_input(call + '<|message|>{"q": 1}').response_shows
    assert shows == ["Tool call JSON in content and tool_calls empty"]
    thinking = "<|channel|>analysis<|message|>The user asks. We answer.<|end|><|start|>assistant<|channel|>final"
    assert parse_input(thinking).response_shows == ["Reasoning appears in content"]
    prompt = "<|start|>system<|message|>You are a helpful acme assistant.<|end|>"
    assert parse_input(prompt).response_shows == [], "a rendered prompt is not the model's output"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        # Continue's notification above the error output it shows
        ('Error: acme-model:20b - 500\n**Error Output**\n```\n"model requires more system memory (58.0 GiB) than is '
         'available (30.5 GiB)"\n```\n',
         '"model requires more system memory (58.0 GiB) than is available (30.5 GiB)"'),
        # LM Studio's chat window above its own message
        ("Failed to regenerate message.\n\nReached context length of 4096 tokens with model (arch: acme) that does "
         "not currently support mid-generation context overflow.\n",
         "Reached context length of 4096 tokens with model (arch: acme) that does not currently support "
         "mid-generation context overflow."),
        # Ollama's record of a failed runner request, after the runner's own fault
        ('Memory access fault by GPU node-1 (Agent handle: 0x7f00) on address 0x7f01. Reason: Page not present.\n'
         'time=2026-11-27T10:00:00Z level=ERROR source=server.go:807 msg="post predict" '
         'error="Post \\"http://127.0.0.1:33127/completion\\": EOF"\n',
         "Memory access fault by GPU node-1 (Agent handle: 0x7f00) on address 0x7f01. Reason: Page not present."),
    ],
)  # fmt: skip
def test_the_error_leads_not_the_window_or_record_that_wraps_it(text: str, error: str) -> None:
    assert parse_input(text).signatures[0] == error


def test_a_lead_in_that_says_it_results_in_an_error_is_not_one() -> None:
    text = "Prompting the acme model results in error:\nValueError: acme broke in the header\n"
    assert parse_input(text).signatures == ["ValueError: acme broke in the header"]


def test_a_json_error_value_with_quotes_the_paste_did_not_escape_is_whole() -> None:
    text = 'Internal Server Error {"error":"template: :1:2: executing "" at <index $acme 0>: index out of range"} URL'
    assert parse_input(text).signatures[0] == 'template: :1:2: executing "" at <index $acme 0>: index out of range'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpt-oss-20b使用出错", "gpt-oss-20b"),  # the name ends where the Chinese text starts
        ("使用Ollama运行gpt-oss-20B时无法使用Agent模式", "gpt-oss-20B"),
    ],
)
def test_the_model_beside_chinese_text(text: str, expected: str) -> None:
    assert parse_input(text).model == expected


def test_more_fields_as_pasted() -> None:
    assert parse_input("### OS\n\nLinux\n\n### Ollama version\n\n0.12.3\n").versions == {"ollama": "0.12.3"}
    assert parse_input('{"model": "gpt-oss:20b", "think": "high"}').flags == ["think=high"]
    assert parse_input("I think: the acme model is broken").flags == [], "a sentence's think"
    assert parse_input("llama-server -m acme.gguf -ub 2048`").flags == ["--model acme.gguf", "--ubatch-size 2048"]
    assert parse_input("the actual `llama-server -c` flag is ignored by the acme server").flags == [], "a mention"
