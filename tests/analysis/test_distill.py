"""Log distillation: failure lines and the user's words kept, start-up chatter, metrics and access logs dropped."""

from __future__ import annotations

import pytest

from service.analysis.distill import MAX_LINES, distill
from service.analysis.input import parse_input
from service.analysis.origin import classify_origin

BOILERPLATE = """\
INFO 03-02 10:00:01 [__init__.py:241] Automatically detected platform cuda.
(APIServer pid=7) INFO 03-02 10:00:02 [api_server.py:1805] vLLM API server version 0.11.0
(APIServer pid=7) INFO 03-02 10:00:03 [utils.py:326] non-default args: {'model': 'openai/gpt-oss-20b'}
(APIServer pid=7) INFO 03-02 10:01:10 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, \
Avg generation throughput: 95.1 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.1%
(APIServer pid=7) INFO:     10.0.0.5:40122 - "POST /v1/chat/completions HTTP/1.1" 200 OK
(APIServer pid=7) INFO:     10.0.0.5:40124 - "GET /v1/models HTTP/1.1" 200 OK
CUDA_VISIBLE_DEVICES=0,1
NCCL_DEBUG=INFO
"""
FAILURE = 'openai_harmony.HarmonyError: unexpected tokens remaining in message header: Some("to=functions.x")'


def test_boilerplate_lines_are_dropped_and_counted() -> None:
    out = distill(BOILERPLATE)
    assert out.dropped == 8
    assert out.prose == [] and out.kept == []
    assert out.is_log_dump


def test_the_users_sentence_is_kept_as_prose() -> None:
    text = BOILERPLATE + "After a few turns every tool call comes back as plain text in the answer.\n"
    out = distill(text)
    assert out.prose == ["After a few turns every tool call comes back as plain text in the answer."]


def test_code_records_and_command_lines_are_not_prose() -> None:
    out = distill(
        'File "/x/y.py", line 3, in main\n{"model": "gpt-oss-20b", "stream": true}\nok\n'
        "vllm serve openai/gpt-oss-120b --chat-template /models/gpt-oss/chat_template.jinja --tool-call-parser openai\n"
    )
    assert out.prose == []


def test_a_description_quoting_harmony_markers_is_prose() -> None:
    line = "with mlx_lm.server the raw markers <|channel|>analysis<|message|> land verbatim in message.content"
    assert distill(BOILERPLATE + line + "\n").prose == [line]


def test_a_buried_error_gives_the_same_query_as_the_bare_one() -> None:
    bare = parse_input(FAILURE)
    buried = parse_input(BOILERPLATE + f"(APIServer pid=7) ERROR 03-02 10:01:11 [serving_chat.py:1001] {FAILURE}\n")
    assert buried.signatures[0] == bare.signatures[0]
    assert buried.query_text == bare.query_text
    assert buried.failure_found and buried.engine == "vllm"


def test_a_log_without_a_failure_line_says_so() -> None:
    parsed = parse_input(BOILERPLATE)
    assert not parsed.failure_found
    assert "throughput" not in parsed.query_text and "POST /v1" not in parsed.query_text


def test_a_short_message_is_not_a_log_without_failure() -> None:
    assert parse_input("tool calls vanish").failure_found


def test_lines_past_the_cap_are_not_classified() -> None:
    text = "INFO 03-02 10:00:01 [x.py:1] ready\n" * (MAX_LINES + 50)
    assert distill(text).dropped == MAX_LINES


def test_a_sentence_quoting_fields_and_markers_is_prose() -> None:
    quoting = 'my app reads "reasoning_content" but the server now sends the thinking as "reasoning": nothing shows'
    pasted = "An agent with gpt-oss: the raw output <|channel|>commentary to=run <|message|>{} is shown as text"
    out = distill(BOILERPLATE + quoting + "\n" + pasted + "\n")
    assert out.prose == [quoting, pasted]


def test_ollama_access_lines_and_llama_cpp_records_are_not_the_users_words() -> None:
    log = (
        '[GIN] 2026/11/08 - 08:46:51 | 200 | 9.304736s |       127.0.0.1 | POST     "/api/chat"\n'
        "main: server is listening on http://0.0.0.0:8080 - starting the main loop\n"
        "srv    load_model: loading model '/models/gpt-oss-20b-mxfp4.gguf' with the default settings\n"
        "slot update_slots: id  0 | task 8117 | new prompt, n_ctx_slot = 8192, n_keep = 0, n_prompt_tokens = 3702\n"
        "prompt eval time =    955.05 ms /  3129 tokens (  1.60 ms per token,   553.42 tokens per second)\n"
    )
    out = distill(log)
    assert out.prose == []
    assert out.dropped == 2 and out.log_lines == 4  # the timings line is dropped without a record prefix


SGLANG_LOG = """\
[2026-01-02 03:04:05] server_args=ServerArgs(model_path='openai/gpt-oss-20b', tp_size=2, port=30000)
[2026-01-02 03:04:06] Using default HuggingFace chat template with detected content format: string
[2026-01-02 03:04:09 TP0] Load weight end. type=GptOssForCausalLM, dtype=torch.bfloat16, avail mem=40.12 GB
[2026-01-02 03:04:30 TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.01, \
#running-req: 0, #queue-req: 0
[2026-01-02 03:04:31 TP0] Decode batch. #running-req: 1, #token: 640, token usage: 0.01, \
gen throughput (token/s): 84.39, #queue-req: 0
[2026-01-02 03:04:31] INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""


def test_sglang_batch_metrics_are_boilerplate() -> None:
    out = distill(SGLANG_LOG)
    assert out.dropped == 3  # the two batch records and the access line
    assert not any("batch" in line for line in out.kept)


def test_a_log_whose_only_error_line_is_weak_queries_that_line_not_the_start_up_records() -> None:
    weak = "[Bug] gpt-oss-20b on an RTX 5090: the worker hit an exception while packing FlashInfer MXFP4 MoE weights"
    parsed = parse_input(SGLANG_LOG + weak + "\n")
    assert parsed.evidence and all(e.weight < 1.0 for e in parsed.evidence)
    assert "packing FlashInfer MXFP4 MoE weights" in parsed.query_text
    assert "server_args" not in parsed.query_text


LLAMA_CPP_START = """\
ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes
build: 6500 (1a2b3c4d) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu
main: loading model
llama_model_loader: - kv   0:                 general.architecture str = gpt-oss
print_info: file type   = MXFP4 MoE
load_tensors: offloaded 25/25 layers to GPU
srv  update_slots: all slots are idle
prompt eval time =    411.10 ms /   902 tokens (    0.46 ms per token,  2194.11 tokens per second)
       eval time =   5120.32 ms /   388 tokens (   13.20 ms per token,    75.78 tokens per second)
"""


def test_in_a_log_the_users_own_line_leads_the_query_over_start_up_records() -> None:
    # A remark that is neither a sentence nor an error line (it starts with a command name) is still what
    # the user added among the records: it comes before them in the query.
    remark = "llama-server --jinja with gpt-oss-20b.gguf: the answer repeats the analysis text after every turn"
    parsed = parse_input(LLAMA_CPP_START + remark + "\n" + LLAMA_CPP_START)
    assert not parsed.prose and not parsed.evidence
    assert parsed.query_text.startswith(remark)


def test_an_issue_titles_tag_is_not_a_log_record() -> None:
    title = "[Bug] the 20b model repeats its analysis text after every turn with llama-server --jinja"
    assert distill(LLAMA_CPP_START + title).plain[-1] == title
    records = ["[api_server.py:1839] x", "[GIN] 2025/08/21 - 10:00:00 | 200 | 1ms", "[I] loading", "[TP0] ready"]
    assert distill("\n".join(records)).log_lines == len(records)


REPORT = """\
### Your current environment

<details>
<summary>The output of <code>python collect_env.py</code></summary>

```text
==============================
        System Info
==============================
OS                           : Ubuntu 22.04.5 LTS (x86_64)
Libc version                 : glibc-2.35
GPU models and configuration :
GPU 0: NVIDIA GeForce RTX 5090
Flags:                                fpu vme de pse tsc msr pae avx2
[pip3] litellm==1.77.0
[pip3] triton==3.4.0
vLLM Version                 : 0.10.2
```

</details>

### 🐛 Describe the bug

<!-- Paste the failing request and what came back. -->
Through LM Studio the 20b model streams its analysis text into the chat answer and never ends the turn.

### Before submitting a new issue...

- [x] I searched the issues first.
"""


def test_a_bug_reports_environment_section_is_context_not_the_account() -> None:
    from service.analysis.origin import classify_origin

    parsed = parse_input(REPORT)
    account = "Through LM Studio the 20b model streams its analysis text into the chat answer and never ends the turn."
    assert parsed.prose == [account] and parsed.query_text == account  # no heading, checklist or dump line
    assert parsed.versions["vllm"] == "0.10.2"  # the environment is still read for versions
    assert parsed.client is None  # a package list names what is installed, not the client
    assert parsed.failure_engines == ["lm-studio"] and parsed.engines[-1] == "vllm"
    assert "glibc" not in parsed.body and account in parsed.body
    # The hardware and libc lines are context: no environment rule fires on them.
    assert classify_origin(parsed, []).side != "environment"


def test_an_environment_dump_pasted_without_headings_is_boilerplate() -> None:
    dump = [
        "PyTorch version              : 2.8.0+cu128",
        "CUDA used to build PyTorch   : 12.8",
        "Vulnerability Spectre v2:             Mitigation; Enhanced / Automatic IBRS; RSB filling",
        "[pip3] numpy==2.2.6",
        "==============================",
    ]
    out = distill("\n".join(dump))
    assert out.dropped == len(dump) and not out.prose and not out.kept


def test_a_comment_in_a_pasted_script_is_not_a_report_section() -> None:
    script = "\n".join(
        [
            "# install the dependencies and the environment",
            "pip install vllm==0.10.2",
            "vllm serve openai/gpt-oss-20b --tool-call-parser openai --enable-auto-tool-choice",
            "```",
            "## Environment",
            "```",
            "The server starts, but every tool call comes back as plain text in the answer.",
        ]
    )
    out = distill(script)
    assert out.environment == [] and "pip install vllm==0.10.2" in out.kept
    assert out.prose == ["The server starts, but every tool call comes back as plain text in the answer."]


def test_a_log_relayed_by_a_collector_reads_as_the_engines_own_log() -> None:
    from service.analysis.distill import unwrap_log

    log = BOILERPLATE + FAILURE + "\n"
    relays = [
        lambda i, line: f"vllm-server-1  | {line}",  # docker compose
        lambda i, line: f"2025-09-03T10:00:{i:02d}.123456789Z {line}",  # kubectl logs --timestamps
        lambda i, line: f"Sep 03 10:00:{i:02d} gpu-node-3 vllm[4242]: {line}",  # journald
        lambda i, line: f"vllm-1  | 2025-09-03T10:00:{i:02d}Z {line}",  # compose with timestamps: two passes
        lambda i, line: line.replace("INFO", "\x1b[32mINFO\x1b[0m"),  # a terminal's colour codes
    ]
    bare = parse_input(log)
    for relay in relays:
        text = "\n".join(relay(i, line) for i, line in enumerate(log.splitlines()))
        assert unwrap_log(text) == log.rstrip("\n")
        parsed = parse_input(text)
        assert parsed.signatures == bare.signatures and parsed.query_text == bare.query_text
        assert parsed.engines == bare.engines and parsed.versions == bare.versions


def test_a_prefix_on_a_few_lines_is_the_users_text_not_a_collector() -> None:
    from service.analysis.distill import unwrap_log

    text = "router | backend: both answer, but the tool call arrives as plain text\nvllm serve openai/gpt-oss-20b\n"
    assert unwrap_log(text + "it happens on every request\n") == text + "it happens on every request\n"


def test_a_log_of_json_records_reads_as_the_lines_they_stand_for() -> None:
    import json

    from service.analysis.distill import unwrap_log

    # A JSON logging config: level and message fields, the traceback in its own field.
    records = [
        {"ts": "2025-09-03T10:00:01Z", "level": "info", "message": "Started server process [7]"},
        {"ts": "2025-09-03T10:00:02Z", "level": "info", "message": "Application startup complete."},
        {"ts": "2025-09-03T10:00:03Z", "levelname": "ERROR", "msg": "Error in chat completion stream",
         "exc_info": "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    g()\n" + FAILURE},
    ]  # fmt: skip
    text = "\n".join(json.dumps(r) for r in records)
    lines = unwrap_log(text).splitlines()
    assert lines[0] == "INFO Started server process [7]" and lines[-1] == FAILURE
    assert FAILURE in parse_input(text).signatures  # the traceback's last line is found as in a plain log
    # docker's json-file driver: the engine's own line in "log", with its newline.
    docker = "\n".join(
        json.dumps({"log": line + "\n", "stream": "stderr"}) for line in (BOILERPLATE + FAILURE).splitlines()
    )
    assert unwrap_log(docker) == (BOILERPLATE + FAILURE)
    # A user's JSON request body among plain lines is not a log of records.
    body = '{"model": "gpt-oss-20b", "messages": [{"role": "user", "content": "hi"}]}\nreturns 500\nagain 500\n'
    assert unwrap_log(body) == body


def test_stack_frames_source_lines_and_prompts_are_not_the_users_words() -> None:
    """A traceback's quoted source line, a native or Go frame and a command behind a shell prompt read as
    words, but none is what the user wrote (made-up frames in the shapes real pastes carry)."""
    out = distill(
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/acme/serving.py", line 120, in create_reply\n'
        "    return await self._handle_the_request_for_this_model(request, generator, model_name, tokenizer)\n"
        "example.com/acme/cli.(*Command).Execute(...)\n"
        "libacme-base.so(acme_print_backtrace+0x21f)[0x72edb99cd82f]\n"
        "3       0x7fac7ac778fd acme::common::throwRuntimeError(char const*, int, char const*) + 97\n"
        "mike@host:/project# python3 -m vllm.entrypoints.openai.api_server --model openai/gpt-oss-20b\n"
        "After a few turns every tool call comes back as plain text in the answer.\n"
    )
    assert out.prose == ["After a few turns every tool call comes back as plain text in the answer."]


def test_a_prose_line_after_a_frame_elsewhere_is_still_prose() -> None:
    text = 'File "/x/y.py", line 3, in main\n    run()\nThe server stops answering after the first tool call here.\n'
    assert distill(text).prose == ["The server stops answering after the first tool call here."]


def test_llama_cpps_newer_log_format_reads_as_records_with_levels() -> None:
    """llama.cpp's common log: "<minutes>.<seconds>.<ms>.<us> <level letter> <subsystem> ..." (made-up lines)."""
    log = "\n".join(
        [
            "0.26.895.588 I srv          main: model loaded",
            "0.26.895.595 I srv          main: server is listening on http://127.0.0.1:8080",
            "0.39.870.990 I srv  params_from_: Chat format: peg-native",
            "0.39.871.342 I slot launch_slot_: id  0 | task 0 | processing task, is_child = 0",
            "0.41.269.512 I slot print_timing: id  0 | task 0 | prompt eval time =     638.27 ms /    13 tokens",
            "0.41.269.600 E srv    send_error: task id = 0, error: acme failed to parse the tool call",
        ]
    )
    out = distill(log)
    assert (
        out.is_log_dump
        and out.prose == []
        and out.kept == ["0.41.269.600 E srv    send_error: task id = 0, error: acme failed to parse the tool call"]
    )
    parsed = parse_input(log)
    assert parsed.signatures[0].startswith("srv    send_error: task id = 0, error: acme failed")


def test_kubernetes_log_prefixes_are_unwrapped() -> None:
    record = "(APIServer pid=1) ERROR 10-27 22:25:30 [serving.py:99] ValueError: acme went wrong in the parser"
    info = "(APIServer pid=1) INFO 10-27 22:25:29 [loggers.py:123] Engine 000: Running: 1 reqs"
    for prefix in ("decode-6c8f9c4df6-vh88z vllm ", "[pod/decode-0/vllm] "):
        parsed = parse_input("\n".join([prefix + info] * 4 + [prefix + record]))
        assert parsed.signatures[0] == "ValueError: acme went wrong in the parser", prefix
        assert parsed.failure_engines == ["vllm"], prefix


def test_lm_studios_two_line_records_read_as_one_record_each() -> None:
    """LM Studio's log writes time and level on one line and the message on the next (made-up messages)."""
    log = "\n".join(
        [
            "2026-11-27 01:22:15  [INFO]",
            " [LM STUDIO SERVER] Running chat completion on conversation with 4 messages.",
            "2026-11-27 01:22:20  [INFO]",
            " [acme-model] Start thinking...",
            "2026-11-27 01:22:49  [INFO]",
            " [acme-model] Done thinking.",
            "2026-11-27 01:22:50  [INFO]",
            " [acme-model] Start to generate a tool call...",
            "2026-11-27 01:22:52  [INFO]",
            " [acme-model] Tool name generated:  get_weather",
            "2026-11-27 01:22:58 [ERROR]",
            " [acme-model] Failed to parse tool call: acme end of content.",
        ]
    )
    parsed = parse_input(log)
    assert parsed.log_dump and parsed.signatures[0].endswith("Failed to parse tool call: acme end of content.")
    assert parsed.prose == [] and "Start thinking" not in parsed.query_text
    lone = "2026-11-27 01:22:58 [ERROR]\n [acme-model] Failed to parse tool call: acme end of content."
    assert parse_input(lone).text == lone, "one such pair alone is left as written"


def test_a_pasted_traceback_relayed_by_the_logger_is_a_log_dump() -> None:
    """Records kept as failure lines and the traceback indented under them are the log, not text against it."""
    record = "(APIServer pid=5) ERROR 11-27 10:00:02 [serving.py:99]"
    lines = [f"{record} Error in chat completion stream generator."]
    lines += [f'{record}   File "/x/acme_{i}.py", line {i}, in run_{i}\n{record}     step_{i}()' for i in range(6)]
    lines += [f"{record} ValueError: acme went wrong in the parser", "I see this on every second request."]
    out = distill("\n".join(lines))
    assert out.log_lines >= 12 and out.is_log_dump


def test_a_sentence_about_a_program_is_not_its_command_line() -> None:
    assert distill("docker for llama server crashing with the 20b model on long prompts\n").prose == [
        "docker for llama server crashing with the 20b model on long prompts"
    ]
    assert distill("docker run --gpus all vllm/vllm-openai --model openai/gpt-oss-20b\n").prose == []
    assert distill("python3 serve.py with the tool server enabled and the model loaded here\n").prose == []


@pytest.mark.parametrize(
    "sentence",
    [
        "vllm serve never starts on the second machine after the upgrade",
        "docker run fails with an error on the new image since this morning",
        "ollama run keeps printing the channel markers in every answer",
    ],
)
def test_a_sentence_that_goes_on_from_a_subcommand_is_the_users(sentence: str) -> None:
    """A subcommand followed by English ("vllm serve never starts") is a report, not a command line."""
    assert distill(sentence + "\n").prose == [sentence]


@pytest.mark.parametrize(
    "command",
    [
        "pip install vllm openai harmony transformers accelerate",
        "docker compose up vllm gateway worker proxy",
        "ollama run gpt-oss:20b explain this code please",
    ],
)
def test_a_subcommand_with_its_arguments_stays_a_command(command: str) -> None:
    assert distill(command + "\n").prose == [], "five words or more, but the subcommand's arguments"


def test_numeric_levels_of_json_records_read_as_names() -> None:
    """pino and bunyan write the level as a number (30 info, 50 error)."""
    import json

    records = [(30, "server listening on 1234"), (30, "request received"), (50, "acme failed to parse the call")]
    text = "\n".join(json.dumps({"level": level, "time": 1, "msg": msg}) for level, msg in records)
    parsed = parse_input(text)
    assert parsed.signatures == ["acme failed to parse the call"]


def test_a_weak_failing_line_joins_the_users_sentence_in_the_query() -> None:
    """A log whose only failing line is a wrapper keeps it beside the user's sentence: it says what failed."""
    info = "(EngineCore_DP0 pid=5) INFO 11-27 10:00:0{} [core.py:77] Loading weights took 1.{} seconds"
    log = "\n".join(
        [info.format(i, i) for i in range(6)]
        + [
            "(EngineCore_DP0 pid=5) ERROR 11-27 10:00:09 [core.py:700] EngineCore failed to start.",
            "(EngineCore_DP0 pid=5) ERROR 11-27 10:00:09 [core.py:700] Traceback (most recent call last):",
            "Using cuda 13.0 on a single acme box with the big model.",
        ]
    )
    parsed = parse_input(log)
    assert parsed.query_text == "EngineCore failed to start.\nUsing cuda 13.0 on a single acme box with the big model."


def test_a_quoted_tracebacks_frames_are_not_the_users_sentences() -> None:
    text = (
        "> Traceback (most recent call last):\n"
        '> File "/srv/acme/entrypoints/serving_chat.py", line 785, in _build_chat_response\n'
        "> raise ValueError(\n"
        "> ValueError: acme output is broken\n"
    )
    assert parse_input(text).prose == []


def test_pydantics_field_lines_are_the_libraries_not_the_users_sentences() -> None:
    """The lines under "N validation errors for X" are pydantic's: a "Field required" there is about X (here a
    response object the server built), not the user saying their request missed a field."""
    text = (
        "The streaming response of the acme server breaks halfway through the answer every time.\n"
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for AcmeOutputText\n"
        "text\n"
        "  Field required [type=missing, input_value={'content': [], 'type': 'output_text'}, input_type=dict]\n"
        "    For further information visit https://errors.pydantic.dev/2.11/v/missing\n"
    )
    parsed = parse_input(text)
    assert parsed.prose == ["The streaming response of the acme server breaks halfway through the answer every time."]
    assert classify_origin(parsed, []).component != "request-shape"


def test_an_issue_titles_tag_does_not_make_it_code() -> None:
    title = "[Bug]: GPT oss show tool call argument in response content"
    assert distill(title + "\n").prose == [title]
    assert distill('["acme", "tool", "call", "argument", "response"]\n').prose == [], "a JSON list is not a title"


def test_lines_in_a_code_fence_are_code_not_the_users_words() -> None:
    text = '```python\nclient = OpenAI(\n    base_url="acme_server_url_for_the_model",\n)\n```\n'
    assert distill(text).prose == []


def test_a_terminal_transcript_in_a_fence_is_the_programs_output() -> None:
    text = (
        "```\nollama run gpt-oss:120b\n>>> Hi, introduce yourself\n"
        "The user says hi and wants a brief introduction from the assistant here.\n```\n"
        "The answers are garbage since the last acme upgrade of the server.\n"
    )
    assert distill(text).prose == ["The answers are garbage since the last acme upgrade of the server."]


def test_release_numbers_in_a_sentence_are_words() -> None:
    title = "gpt-oss 120b garbage output since Acme version 0.11.11/0.12.0"
    assert distill(title + "\n").prose == [title]
    progress = "Loading safetensors checkpoint shards: 100% Completed | 15/15 [00:23<00:00,  1.56s/it]"
    assert distill(progress + "\n").prose == []


def test_a_repl_prompt_is_not_a_quote_mark() -> None:
    assert distill('>>> model = AutoModelForCausalLM.from_pretrained("acme/model", device_map="cuda")\n').prose == []
