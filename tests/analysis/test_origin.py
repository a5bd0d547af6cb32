"""Origin and error-family rules, on realistic inputs and real KB cards as hits."""

from __future__ import annotations

import pytest

from indexer.documents import Document
from service.analysis.input import parse_input
from service.analysis.origin import categorize, classify_origin


def _hits(cards: dict[str, Document], *ids: str) -> list[Document]:
    return [cards[i] for i in ids]


@pytest.mark.parametrize(
    ("text", "client"),
    [
        (
            "openai.InternalServerError: Error code: 500 - {'error': {'message': 'unexpected tokens "
            'remaining in message header: Some("to=functions.lookup_order")\', '
            "'type': 'InternalServerError', 'code': 500}}",
            "openai",
        ),
        (
            'litellm.InternalServerError: OpenAIException - {"error":{"message":"Unexpected token 200002 '
            "while "
            'expecting start token 200006","type":"InternalServerError","param":null,"code":500}}',
            "litellm",
        ),
        (
            "langchain_core.exceptions: openai.BadRequestError: Error code: 400 - "
            "{'object': 'error', 'message': "
            "'Expected 2 output messages (reasoning and final), but got 4.', 'code': 400}",
            "langchain",
        ),
    ],
)
def test_client_wrapped_harmony_errors_are_the_servers(text: str, client: str) -> None:
    origin = classify_origin(parse_input(text), [])
    assert origin.side == "server"
    assert "only reports what the server returned" in origin.explanation
    assert client.lower() in origin.explanation.lower()


def test_harmony_error_in_a_vllm_log_is_the_servers() -> None:
    log = (
        "(APIServer pid=12) ERROR 11-03 10:02:11 [serving_chat.py:1145] openai_harmony.HarmonyError: "
        "channel marker present but no channel value found in header"
    )
    origin = classify_origin(parse_input(log), [])
    assert (origin.side, origin.component) == ("server", "harmony-header")


@pytest.mark.parametrize(
    "text",
    [
        "openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download or load "
        "vocab file; error sending request for url "
        "(https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken)",
        "Our on-prem cluster is air-gapped; vLLM with gpt-oss-20b loads, then crashes when Harmony tries to "
        "download its tiktoken vocab.",
    ],
)
def test_vocab_download_failures_are_the_environments(text: str) -> None:
    parsed = parse_input(text)
    origin = classify_origin(parsed, [])
    assert (origin.side, origin.component) == ("environment", "vocab-download")
    assert categorize(parsed, []) == "vocab-download"


@pytest.mark.parametrize(
    ("text", "component"),
    [
        (
            "Value error, The quantization method mxfp4 is not supported for the current GPU. Minimum "
            "capability: 80. Current capability: 75.",
            "quantization-kernels",
        ),
        (
            "ptxas fatal   : Feature '.tile::gather4' not supported on .target 'sm_120a'",
            "quantization-kernels",
        ),
        ("(Worker_TP1 pid=77) ERROR RuntimeError: CUDA driver error: invalid device ordinal", "multi-gpu"),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled",
            "multi-gpu",
        ),
        (
            "(EngineCore_DP0 pid=9) ERROR [core.py:710] ModuleNotFoundError: No module named 'triton_kernels'",
            "install-build",
        ),
        ("vllm: error: unrecognized arguments: --tool-server demo", "install-build"),
        ("AssertionError: Sinks are only supported in FlashAttention 3", "attention-backend"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "resources"),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "quantization-kernels"),
        ("torch.AcceleratorError: HIP error: invalid device function", "quantization-kernels"),
    ],
)
def test_gpu_kernel_and_install_failures_are_the_environments(text: str, component: str) -> None:
    origin = classify_origin(parse_input(text), [])
    assert (origin.side, origin.component) == ("environment", component)


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "ggml-cuda/fattn-wmma-f16.cu:437: CUDA error",
    ],
)
def test_a_cuda_error_that_names_no_device_limit_is_not_the_environments(text: str) -> None:
    """An illegal memory access is a kernel's bug and a bare "CUDA error" says nothing of the cause: no rule puts
    them on the GPU or driver (the known issues decide)."""
    assert classify_origin(parse_input(text), []).side != "environment"


def test_an_assertion_in_vllms_own_quantisation_code_is_a_server_bug() -> None:
    log = "(EngineCore_0 pid=51) ERROR 08-11 20:40:10 [core.py:683] AssertionError: MXFP4 are not supported"
    assert classify_origin(parse_input(log), []).side == "server"


def test_plain_text_token_where_start_is_expected_points_to_the_model_files() -> None:
    log = (
        "(APIServer pid=1) ERROR [serving.py:944] openai_harmony.HarmonyError: "
        "Unexpected token 78191 while expecting start token 200006"
    )
    origin = classify_origin(parse_input(log), [])
    assert origin.side == "model-files"
    assert categorize(parse_input(log), []) == "harmony-token"


def test_special_token_where_start_is_expected_is_the_servers() -> None:
    log = "openai_harmony.HarmonyError: Unexpected token 200007 while expecting start token 200006"
    origin = classify_origin(parse_input(log), [])
    assert (origin.side, origin.component) == ("server", "harmony-token")


def test_weights_that_do_not_match_the_loader_are_model_files() -> None:
    log = (
        '  File "/opt/vllm/vllm/model_executor/models/gpt_oss.py", line 862, in _load_weights_other\n'
        "    param = params_dict[name]\n"
        "KeyError: 'layers.3.mlp.experts.w2_weight'"
    )
    assert classify_origin(parse_input(log), []).side == "model-files"


def test_the_root_cause_wins_over_later_consequences() -> None:
    log = (
        "KeyError: 'invalid tool call parser: openai (chose from { hermes, mistral })'\n"
        "httpx.ConnectError: All connection attempts failed\n"
        "openai.APIConnectionError: Connection error."
    )
    assert classify_origin(parse_input(log), []).side == "environment"


def test_a_symptom_takes_its_side_from_the_best_hits(cards: dict[str, Document]) -> None:
    text = "my crewai agent crashes whenever the local gpt-oss model decides to call one of its tools"
    origin = classify_origin(parse_input(text), _hits(cards, "crewAIInc/crewAI#4036"))
    assert origin.side == "client"
    assert "crewAIInc/crewAI#4036" in origin.explanation


def test_the_deciding_issue_is_named_with_its_place_when_it_is_not_the_first(cards: dict[str, Document]) -> None:
    text = "my crewai agent crashes whenever the local gpt-oss model decides to call one of its tools"
    # A first hit that records no side leaves the vote to the second; "closest" would name the wrong one.
    sideless = cards["vllm-project/vllm#28635"].model_copy(update={"error_source": None, "component": None})
    origin = classify_origin(parse_input(text), [sideless, cards["crewAIInc/crewAI#4036"]])
    assert origin.side == "client"
    assert "known issue #2, crewAIInc/crewAI#4036," in origin.explanation
    assert "closest" not in origin.explanation


def test_hit_whose_own_error_is_a_gpu_limit_counts_as_environment(cards: dict[str, Document]) -> None:
    # The card is labelled as raised by vLLM, but what it describes is the GPU's capability.
    text = "gpt-oss-120b will not start on our T4 cards"
    origin = classify_origin(parse_input(text), _hits(cards, "vllm-project/vllm#22288"))
    assert origin.side == "environment"


def test_a_behaviour_described_on_vllm_defaults_to_the_server_without_a_client(
    cards: dict[str, Document],
) -> None:
    text = "on vllm the 20b sometimes returns an empty message with finish_reason stop"
    assert classify_origin(parse_input(text), []).side == "server"


def test_an_error_no_rule_or_issue_reads_is_not_called_a_behaviour_without_one() -> None:
    """With an error line the rules do not know, the answer says so; "without an error string" is for a
    described behaviour."""
    relayed = parse_input("gpt-oss-120b: AI_RetryError: Failed after 4 attempts. Last error: acme frobnication")
    assert relayed.signatures
    origin = classify_origin(relayed, [])
    assert origin.side == "server"
    assert "without an error string" not in origin.explanation and "input's error" in origin.explanation
    described = classify_origin(parse_input("on vllm gpt-oss-20b answers with an empty message"), [])
    assert "without an error string" in described.explanation


def test_nothing_to_go_on_is_unknown() -> None:
    origin = classify_origin(parse_input("it does not work"), [])
    assert (origin.side, origin.component) == ("unknown", "other")


def test_category_follows_the_top_hit_when_the_input_is_not_explicit(cards: dict[str, Document]) -> None:
    parsed = parse_input("the model keeps answering in the wrong field")
    assert categorize(parsed, _hits(cards, "vllm-project/vllm#28635")) == "streaming"
    assert categorize(parsed, []) == "other"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ('HarmonyError: unexpected tokens remaining in message header: Some("json")', "harmony-header"),
        ("HarmonyError: Unexpected token 200002 while expecting start token 200006", "harmony-token"),
        ("ValueError: Unknown recipient: <|constrain|>functions.get_weather", "tool-calling"),
        (
            "`store=True` (default) is not supported. Please set `store=False` in Responses API",
            "responses-api",
        ),
    ],
)
def test_categorize_explicit_inputs(text: str, category: str) -> None:
    assert categorize(parse_input(text), []) == category


def test_a_named_client_application_is_the_first_suspect_without_hits() -> None:
    text = "codex cli keeps sending requests to the local ollama port instead of the url in my config file"
    origin = classify_origin(parse_input(text), [])
    assert origin.side == "client"


def test_an_unnamed_stack_serving_gpt_oss_points_to_the_server() -> None:
    text = "streaming chat completions from gpt-oss-120b with tensor parallel 4 drop words now and then"
    assert classify_origin(parse_input(text), []).side == "server"


HARDWARE_CONTEXT = """\
GPU: NVIDIA GB10 (sm_121), driver 580.95, CUDA 13.0
vllm serve openai/gpt-oss-120b --chat-template /models/gpt-oss/chat_template.jinja --tool-call-parser openai
(APIServer pid=3) ERROR 11-02 10:00:00 [serving_chat.py:1001] openai_harmony.HarmonyError: unexpected tokens \
remaining in message header: Some("to=functions.search")
"""


def test_origin_reads_the_failing_line_not_the_hardware_or_command_line() -> None:
    origin = classify_origin(parse_input(HARDWARE_CONTEXT), [])
    assert (origin.side, origin.component) == ("server", "harmony-header")


def test_context_alone_is_still_read_when_nothing_failed_or_was_said() -> None:
    origin = classify_origin(parse_input("GPU: NVIDIA GB10 (sm_121)"), [])
    assert origin.side == "environment"


@pytest.mark.parametrize(
    "text",
    [
        "Warning: ollama_chat/gpt-oss:20b does not support 'reasoning_effort', ignoring.",
        "openai.BadRequestError: Error code: 400 - {'detail': [{'type': 'missing', 'loc': ['body', 'messages'], "
        "'msg': 'Field required'}]}",
        "openai.BadRequestError: Error code: 400 - {'message': \"tool_choice 'any' is not supported\"}",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatRequest\nreasoning\n"
        "  Extra inputs are not permitted [type=extra_forbidden]",
        # A provider refusing the reasoning a client sent back in the history of a multi-turn chat.
        "openai.BadRequestError: Error code: 400 - {'error': {'message': \"'reasoning_content' is not supported "
        "with this model\", 'type': 'invalid_request_error'}}",
        # Providers naming a request field they do not take (the KB's Groq and Bedrock signatures), behind
        # a client call whose own arguments mention streaming switched off.
        "Error code: 400 - {'error': {'message': \"messages.3.assistant.thinking: property "
        "'messages.3.assistant.thinking' is unsupported\", 'type': 'invalid_request_error'}}",
        "agent = Agent(model=BedrockModel(model_id='openai.gpt-oss-120b-1:0', streaming=False))\n"
        "botocore.errorfactory.ValidationException: An error occurred (ValidationException) when calling the "
        "Converse operation: This model doesn't support the reasoningContent.reasoningText.signature field. "
        "Remove reasoningContent.reasoningText.signature and try again.",
    ],
)
def test_request_shape_errors_and_client_warnings_are_the_clients(text: str) -> None:
    origin = classify_origin(parse_input(text), [])
    assert (origin.side, origin.component) == ("client", "request-shape")


def test_a_named_client_app_misbehaving_is_the_first_suspect_over_a_field_it_mentions() -> None:
    parsed = parse_input("LibreChat shows no thinking from my gpt-oss endpoint: it reads reasoning_content only")
    assert classify_origin(parsed, []).side == "server"  # no client named that the input parser knows
    named = parsed.model_copy(update={"client": "librechat"})  # as the engine names it from the index
    origin = classify_origin(named, [])
    assert (origin.side, origin.component) == ("client", "client-integration")


@pytest.mark.parametrize(
    "text",
    [
        "My chat UI shows no thinking against vLLM 0.11: the server now sends `reasoning` instead of "
        "`reasoning_content`",
        "reasoning_content was renamed in newer vLLM builds, so the app gets no reasoning from gpt-oss",
        "our integration still reads the deprecated reasoning_content field",
        # The removal's consequence, as the card of vllm-project/vllm#33402 states it: a reader of the old field.
        "the gateway still sends and reads `reasoning_content`, so recent vLLM versions lose the reasoning",
        "the plugin reads only reasoning_content and shows no thinking for gpt-oss",
    ],
)
def test_reading_the_renamed_reasoning_field_is_the_clients(text: str) -> None:
    """vLLM deprecated and then removed ``reasoning_content`` (vllm-project/vllm#33402): the reader adapts."""
    origin = classify_origin(parse_input(text), [])
    assert (origin.side, origin.component) == ("client", "reasoning-output")


def test_reasoning_content_missing_from_a_response_is_still_the_servers() -> None:
    parsed = parse_input("vLLM returns reasoning_content: null for gpt-oss with --reasoning-parser")
    origin = classify_origin(parsed, [])
    assert (origin.side, origin.component) == ("server", "reasoning-output")


def test_a_failing_line_from_the_server_stays_the_servers_whatever_client_is_named() -> None:
    parsed = parse_input(
        "crewai run failed:\nopenai_harmony.HarmonyError: unexpected tokens remaining in message header: x"
    )
    assert parsed.client == "crewai"
    assert classify_origin(parsed, []).side == "server"


def test_a_hits_own_strings_are_scanned_once_and_by_their_text(cards: dict[str, Document]) -> None:
    """Origin and category read the rule a hit's own error strings match: scanned once per text (issue 17)."""
    from service.analysis import origin

    parsed = parse_input("the model keeps answering in the wrong field")
    hits = list(cards.values())[:40]
    first = [origin._own_rule(doc) for doc in hits]
    assert first == [origin._scan([*d.error_signatures, d.title], max_tier=0) for d in hits]
    classify_origin(parsed, hits)
    categorize(parsed, hits)
    before = origin._own_rule_cached.cache_info()
    for _ in range(3):
        classify_origin(parsed, hits)
        categorize(parsed, hits)
    after = origin._own_rule_cached.cache_info()
    assert after.misses == before.misses and after.hits > before.hits
    # Keyed by the text, not the id: a thread whose strings changed (a re-sync) is scanned again.
    plain = next(d for d in cards.values() if origin._own_rule(d) is None)
    ruled = next(d for d in cards.values() if origin._own_rule(d) is not None)
    changed = plain.model_copy(update={"error_signatures": ruled.error_signatures, "title": ruled.title})
    assert changed.id == plain.id
    assert origin._own_rule(changed) == origin._own_rule(ruled) is not None


def test_an_offline_vocab_failure_stated_in_the_failing_line_is_the_environment() -> None:
    line = "RuntimeError: the frontend cannot load the harmony vocab files in this air-gapped cluster"
    parsed = parse_input(line)
    assert parsed.signatures and not parsed.prose  # the statement is the failing line itself
    assert (classify_origin(parsed, []).side, classify_origin(parsed, []).component) == (
        "environment",
        "vocab-download",
    )
    assert classify_origin(parse_input(line.replace(" in this air-gapped cluster", "")), []).side != "environment"


def test_a_quoted_server_message_stays_the_servers_when_an_app_is_named() -> None:
    # The app-first rule is for an application showing a field wrongly; an error the server writes,
    # quoted in the user's sentence, is still what the server did.
    quoted = parse_input(
        "In open-webui every gpt-oss chat ends with Expected 2 output messages (reasoning and final), but got 3"
    )
    assert quoted.client == "open-webui" and not quoted.signatures
    assert classify_origin(quoted, []).side == "server"
    field = parse_input("In open-webui no gpt-oss thinking is shown: it only reads reasoning_content")
    assert classify_origin(field, []).side == "client"


def test_an_application_named_with_its_version_is_the_first_suspect() -> None:
    assert classify_origin(parse_input("Quillbox 2.4.1 with gpt-oss-20b: answers stop halfway"), []).side == "client"
    # A version after a platform, an engine or a model names no application.
    for named in ("CUDA 12.8", "Ollama 0.12.3", "Dynamo 1.4.0", "Qwen 2.5"):
        side = classify_origin(parse_input(f"{named} with gpt-oss-20b: answers stop halfway"), []).side
        assert side == "server", named


def test_threads_of_an_engine_the_input_does_not_name_vote_half(cards: dict[str, Document]) -> None:
    hits = _hits(cards, "ollama/ollama#11800", "ollama/ollama#11704")
    # Two Ollama threads found by words outvote a named application only when Ollama is named too.
    assert classify_origin(parse_input("Quillbox 2.4.1: gpt-oss tool calls never run"), hits).side == "client"
    on_ollama = parse_input("Quillbox 2.4.1 on ollama: gpt-oss tool calls never run")
    assert classify_origin(on_ollama, hits).side == "server"


def test_in_a_log_the_failure_names_the_suspects_not_the_start_up_lines(cards: dict[str, Document]) -> None:
    log = "\n".join(
        [
            "(APIServer pid=7) INFO 11-23 10:00:01 [api_server.py:1839] vLLM API server version 0.10.2",
            "(APIServer pid=7) INFO 11-23 10:00:02 [utils.py:233] non-default args: {'model': 'openai/gpt-oss-20b'}",
            "(EngineCore_DP0 pid=9) INFO 11-23 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.10.2)",
            "(EngineCore_DP0 pid=9) INFO 11-23 10:00:40 [gpu_worker.py:298] Available KV cache memory: 20.1 GiB",
            "Quillbox 2.4.1 shows every tool call result twice",
            '(APIServer pid=7) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        ]
    )
    hits = _hits(cards, "vllm-project/vllm#22337", "vllm-project/vllm#23120")
    assert classify_origin(parse_input(log), hits).side == "client"
    named = log.replace("shows every", "on vllm shows every")
    assert classify_origin(parse_input(named), hits).side == "server"


def test_in_a_log_without_a_failing_line_the_users_own_line_is_read_not_the_records() -> None:
    """A remark the user put among the records (a command and what happened) names the suspects; the
    records around it (a Responses API access line) are context, not a rule's evidence."""
    records = [
        f"2026-11-03 23:49:{n:02d}  [INFO] [openai_gpt-oss-20b] Running chat completion on /v1/responses"
        for n in range(6)
    ]
    remark = "codex --oss against LM Studio: predict stream code 500 after the model writes its header"
    parsed = parse_input("\n".join([*records[:3], remark, *records[3:]]))
    assert parsed.log_dump and not parsed.signatures and not parsed.prose
    assert parsed.plain == [remark]
    assert parsed.failure_engines == ["lm-studio"]  # named by the remark, not only by the records
    origin = classify_origin(parsed, [])
    assert origin.component != "responses-api" and "/v1/responses" not in origin.explanation


@pytest.mark.parametrize(
    "text",
    [
        "[AMD] update MI300X GPT-OSS vLLM image to latest 0.16.0: which recipe flags have to change?",
        "feat: upgrade the gpt-oss benchmark to vllm v0.14.0 upstream",
        "Update Request: python313Packages.vllm 0.9.1 \u2192 0.10.1+gptoss",
    ],
)
def test_moving_a_deployment_to_another_release_is_the_environments(text: str) -> None:
    origin = classify_origin(parse_input(text), [])
    assert (origin.side, origin.component) == ("environment", "install-build")


@pytest.mark.parametrize(
    "text",
    [
        "Update to vLLM 0.10.2 broke tool calling for gpt-oss",
        "after the upgrade to 0.11.0 the gpt-oss reasoning_content is empty",
        "I upgraded vLLM to 0.10.2 and now tool calls fail",
    ],
)
def test_a_failure_after_an_upgrade_is_not_a_deployment_move(text: str) -> None:
    assert classify_origin(parse_input(text), []).side != "environment"


@pytest.mark.parametrize(
    "flag", ["streaming=False", '"streaming": false', "streaming = 0", "without streaming", "disable streaming"]
)
def test_a_stream_flag_switched_off_is_not_the_streaming_path(flag: str) -> None:
    # On the failing line itself, as a report quotes how the client was built.
    parsed = parse_input(
        f'openai.InternalServerError: Error code: 500 - {{"error": "upstream"}} (client built with {flag})'
    )
    origin = classify_origin(parsed, [])
    assert (origin.side, origin.component) == ("server", "other")  # the generic server rule, not streaming
    streamed = classify_origin(parse_input("openai.InternalServerError: Error code: 500 while streaming"), [])
    assert streamed.component == "streaming"


@pytest.mark.parametrize(
    "text",
    [
        "openai.BadRequestError: Error code: 400 - {'message': 'frobnicate=False is not accepted here.', "
        "'type': 'invalid_request_error', 'param': 'frobnicate'}",
        "Failed to connect to the API: 400 Bad Request {\"error\":\"Expected 'mode' to be one of: 'a', 'b'\"}",
        "google.genai.errors.ClientError: 400 INVALID_ARGUMENT. {'error': {'code': 400, 'message': "
        "'Request contains an invalid argument.'}}",
        "httpx.HTTPStatusError: Client error '422 Unprocessable Entity' for url "
        "'http://localhost:8000/v1/chat/completions'",
    ],
    ids=["openai-sdk", "bad-request", "invalid-argument", "http-422"],
)
def test_a_request_the_server_refused_with_an_unknown_message_is_the_clients(text: str) -> None:
    origin = classify_origin(parse_input(text), [])
    assert (origin.side, origin.component) == ("client", "request-shape")
    assert "4xx" in origin.explanation


@pytest.mark.parametrize(
    "text",
    [
        "openai.InternalServerError: Error code: 500 - {'error': {'message': 'frobnicate failed'}}",
        # A Harmony error some vLLM releases return as 400 is the server's: the specific rule wins.
        "openai.BadRequestError: Error code: 400 - {'message': 'Unexpected token 200002 while expecting "
        "start token 200006', 'code': 400}",
    ],
    ids=["500", "harmony-400"],
)
def test_a_server_error_or_a_known_server_message_in_a_400_stays_the_servers(text: str) -> None:
    assert classify_origin(parse_input(text), []).side == "server"


def test_a_paste_whose_lines_only_wrap_the_error_asks_for_the_lines_above() -> None:
    log = "\n".join(
        [f"(EngineCore pid=5) INFO 11-27 10:00:0{i} [core.py:77] Loading weights took 1.{i} seconds" for i in range(6)]
        + [
            "(APIServer pid=1) ERROR 11-27 10:00:09 [api_server.py:99] RuntimeError: Engine core initialization "
            "failed. See root cause above. Failed core proc(s): {}"
        ]
    )
    parsed = parse_input(log)
    assert not parsed.failure_found
    origin = classify_origin(parsed, [])
    assert origin.side == "unknown"
    assert "Engine core initialization failed" in origin.explanation and "lines before" in origin.explanation


@pytest.mark.parametrize(
    "text",
    [
        "BadRequestError: Error code: 400 - {'object': 'error', 'message': \"object of type 'AcmeIterator' has no "
        "len()\", 'type': 'BadRequestError', 'code': 400}",
        '500 Engine protocol predict request returned 400: {"error":{"code":400,"message":"acme samplers",'
        '"type":"invalid_request_error"}}',
    ],
    ids=["interpreter-error-relayed-as-400", "outer-500-around-an-inner-400"],
)
def test_a_server_fault_relayed_with_a_4xx_code_is_not_the_clients(text: str) -> None:
    assert classify_origin(parse_input(text), []).side != "client"


def test_a_traceback_that_ends_in_a_client_frameworks_own_code_is_the_clients() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/app/main.py", line 10, in <module>\n'
        "    resp = run(messages)\n"
        '  File "/usr/lib/python3.11/site-packages/litellm/llms/acme_chat.py", line 480, in get_response\n'
        '    kind = tool["type"]\n'
        "KeyError: 'type'\n"
    )
    origin = classify_origin(parse_input(trace), [])
    assert (origin.side, origin.component) == ("client", "client-integration") and "litellm" in origin.explanation
    relayed = trace.replace("KeyError: 'type'", "openai.InternalServerError: Error code: 500 - {'error': 'x'}")
    assert classify_origin(parse_input(relayed), []).side == "server", "a server error it relays stays the server's"
    sdk = trace.replace("litellm/llms/acme_chat.py", "openai/_base_client.py")
    assert classify_origin(parse_input(sdk), []).component != "client-integration", "an SDK only relays"


def test_an_announced_error_the_paste_left_out_asks_for_it() -> None:
    parsed = parse_input("[Bug]: acme model support\n\nThe error we are seeing is:\n\napiVersion: v1\nkind: Acme\n")
    assert parsed.announced == "The error we are seeing is:" and not parsed.failure_found
    origin = classify_origin(parsed, [])
    assert origin.side == "unknown" and "paste the error" in origin.explanation
    shown = parse_input("I am getting the following error:\nValueError: acme broke\n")
    assert shown.announced is None and shown.failure_found, "an error line after it: nothing is missing"


def test_a_sentence_pointing_at_this_error_is_no_error_line() -> None:
    """"I have this error when ..." quotes none of the error: it is a lead-in, never the error picked, and with
    no error line anywhere (a notice does not count) the answer asks for the error."""
    log = (
        "Crashes when serving gpt-oss-20b on the acme box\n"
        "(APIServer pid=13) WARNING 11-11 10:01:50 [argparse.py:9] With `vllm serve`, you should provide the model "
        "as a positional argument\n"
        "Later I have this error when running the container\n"
        "vllm serve --model=openai/gpt-oss-20b --tensor-parallel-size 1\n"
    )
    parsed = parse_input(log)
    assert not any("this error" in s for s in parsed.signatures)
    assert parsed.announced == "Later I have this error when running the container" and not parsed.failure_found
    followed = parse_input("I got this error with tool calls\nValueError: acme broke\n")
    assert followed.signatures == ["ValueError: acme broke"] and followed.announced is None


def test_a_memory_shortfall_the_server_reports_is_the_environments() -> None:
    parsed = parse_input('Error Output: "model requires more system memory (58.0 GiB) than is available (30.5 GiB)"')
    origin = classify_origin(parsed, [])
    assert (origin.side, origin.component) == ("environment", "resources")
