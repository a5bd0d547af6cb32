"""Engine and client detection in inputs, and each thread's engine derived from the data."""

from __future__ import annotations

from indexer.documents import Document
from indexer.sources.cards import card_documents
from service.analysis.engines import ThreadEngines, detect_client, detect_engines, fix_engine, repo_engines
from service.analysis.input import parse_input


def test_engines_named_in_inputs() -> None:
    assert detect_engines("time=2025-08-10 level=ERROR source=server.go:812 msg=x ollama version is 0.11.4") == [
        "ollama"
    ]
    assert detect_engines("llama-server: error while handling request") == ["llama.cpp"]
    assert detect_engines("[TensorRT-LLM][ERROR] Assertion failed") == ["tensorrt-llm"]
    assert detect_engines("(APIServer pid=1) ERROR 08-21 09:15:20 [serving_chat.py:1001] boom") == ["vllm"]
    assert detect_engines("mlx_lm.server crashed on the second request") == ["mlx"]


def test_an_ollama_model_tag_or_port_names_ollama() -> None:
    # Ollama names models by tag and serves on 11434; other engines use the repository name.
    assert detect_engines("codex --oss -m gpt-oss:20b: stream disconnected before completion") == ["ollama"]
    assert detect_engines("POST http://localhost:11434/v1/chat/completions failed") == ["ollama"]
    assert detect_engines("vllm serve openai/gpt-oss-20b --port 11434") == ["vllm"]  # a port flag is not a URL
    assert detect_engines("lms load openai/gpt-oss-20b") == ["lm-studio"]
    assert detect_engines("served at http://host:114345/v1") == []


def test_vllms_own_options_name_vllm() -> None:
    """Options only vLLM takes (its docs' flags, its gpt-oss reasoning parser) name it without the word."""
    assert detect_engines('LLM.generate() with structured_outputs_config {"reasoning_parser": "openai_gptoss"}') == [
        "vllm"
    ]
    assert detect_engines("serve --enable-auto-tool-choice --tool-call-parser openai") == ["vllm"]
    assert detect_engines("gpu_memory_utilization=0.9, max_num_batched_tokens=8192") == ["vllm"]
    assert detect_engines("python -m sglang.launch_server --mem-fraction-static 0.8") == ["sglang"]
    assert detect_engines("the memory use is high when batched tokens grow") == []


def test_a_repository_name_names_its_engine_last_named_first() -> None:
    assert repo_engines("waybarrios/vllm-mlx") == ("mlx", "vllm")
    assert repo_engines("runpod-workers/worker-vllm") == ("vllm",)
    assert repo_engines("openai/harmony") == ()


def test_torch_dynamo_is_not_the_dynamo_server() -> None:
    assert detect_engines("torch._dynamo.exc.Unsupported: graph break") == []
    assert detect_engines("NVIDIA Dynamo frontend returns 500") == ["dynamo"]


def test_the_engine_in_the_failing_line_comes_first() -> None:
    text = "we moved from ollama to vllm last week\nvllm serve openai/gpt-oss-20b\nsglang too"
    assert detect_engines(text, failing=["sglang.srt crashed"])[0] == "sglang"


def test_clients_named_in_inputs() -> None:
    assert detect_client("litellm.BadRequestError: OpenAIException - bad") == "litellm"
    assert detect_client("langchain_openai.chat_models.base: error") == "langchain"
    assert parse_input("codex exec failed: stream disconnected before completion").client == "codex"


def test_vercels_ai_sdk_by_its_name_and_package_scope() -> None:
    # Its errors' AI_ tag is no client of its own: tools built on it relay a server's message under it.
    assert detect_client("Error: AI_RetryError: Failed after 4 attempts. Last error: acme") is None
    assert detect_client("import { createOpenAI } from '@ai-sdk/openai'") == "ai-sdk"
    assert detect_client("AI SDK 5 rejects the acme provider") == "ai-sdk"
    # "OpenAI SDK" and the words in prose are not its name.
    assert detect_client("with the OpenAI SDK the acme call fails") is None
    assert detect_client("an ai sdk of some kind") is None


def test_agent_applications_named_as_their_users_and_logs_write_them() -> None:
    assert parse_input("Using CodexCLI against a local endpoint, every call fails").client == "codex"
    assert parse_input("OpenHands CLI v0.51.1 prints the raw markup of the model").client == "openhands"
    react_log = "2026-11-27 10:00:00,000 - aiq.agent.react_agent.agent - INFO - [AGENT] Retrying ReAct Agent"
    assert parse_input(react_log).client == "nemo-agent-toolkit"


def test_llama_cpps_loader_records_in_an_ollama_log_are_ollamas() -> None:
    """Ollama runs llama.cpp and relays its loader's records: they name Ollama's failure, unless the input
    names llama.cpp itself."""
    log = (
        "Trying an acme GGUF in ollama:\n"
        "llama_model_load: error loading model: error loading model architecture: unknown model architecture\n"
    )
    assert parse_input(log).engines == ["ollama"]
    assert detect_engines("llama_model_load: error loading model: acme") == ["llama.cpp"]
    named = log + "The same GGUF loads in llama-server b6123.\n"
    assert set(parse_input(named).engines) == {"ollama", "llama.cpp"}


def test_vllms_source_tag_names_it_without_its_process_tag() -> None:
    """vLLM's log format puts the OpenAI server module and line in brackets; SGLang names the same module
    only in a traceback's frame."""
    assert detect_engines("[serving_chat.py:1001] openai_harmony.HarmonyError: boom") == ["vllm"]
    assert detect_engines('  File "/x/sglang/srt/entrypoints/openai/serving_chat.py", line 3, in f') == ["sglang"]


def test_thread_engines_come_from_the_data() -> None:
    engines = ThreadEngines.from_documents(card_documents())
    assert engines.canonical["vllm"] == "vllm-project/vllm"
    assert engines.canonical["ollama"] == "ollama/ollama"
    assert engines.default_engine == "vllm"
    assert "tenstorrent/vllm" in engines.platforms and "vllm-project/vllm" not in engines.platforms


def _doc(repo: str, number: int, title: str) -> Document:
    return Document(id=f"{repo}#{number}", kind="issue", repo=repo, number=number, title=title, text=title)


def test_a_synced_repository_gets_an_engine_and_a_canonical_without_a_list() -> None:
    docs = [_doc("acme/sglang", n, "[Bug] crash") for n in range(1, 4)] + [_doc("someone/sglang-fork", 9, "crash")]
    docs.append(_doc("acme/agent", 5, "[Bug] SGLang returns empty tool calls"))
    engines = ThreadEngines.from_documents(docs)
    assert engines.canonical["sglang"] == "acme/sglang"
    assert engines.platforms == frozenset({"someone/sglang-fork"})
    assert engines.engine["acme/agent#5"] == "sglang"


def test_client_applications_come_from_the_repositories_of_client_side_threads() -> None:
    engines = ThreadEngines.from_documents(card_documents())
    assert {"librechat", "codex", "crewai"} <= engines.client_names
    assert not engines.client_names & {"vllm", "ollama", "sglang"}
    assert engines.named_client("LibreChat shows no reasoning from my vLLM endpoint") == "librechat"
    assert engines.named_client("nothing named here") is None


def test_other_servers_come_from_the_data_when_their_name_is_distinctive() -> None:
    engines = ThreadEngines.from_documents(card_documents())
    assert {"exo", "gpustack"} <= engines.server_names
    # Words the data uses for other things, or a repository with a single thread, are not engines.
    assert not engines.server_names & {"transformers", "flashinfer", "continue", "inference"}
    assert engines.canonical["exo"] == "exo-explore/exo"
    assert engines.named_server("running gpt-oss-120b across two Macs with exo") == "exo"
    assert engines.named_server("nothing named here") is None


def test_a_synced_server_repository_becomes_an_engine() -> None:
    docs = [
        _doc("acme/zapserve", n, "zapserve crashes on gpt-oss").model_copy(update={"error_source": "other-server"})
        for n in (1, 2)
    ]
    docs.append(_doc("vllm-project/vllm", 7, "[Bug] crash"))
    engines = ThreadEngines.from_documents(docs)
    assert engines.server_names == frozenset({"zapserve"})
    assert engines.engine["acme/zapserve#1"] == "zapserve"


def test_an_sglang_log_names_sglang_by_its_own_records() -> None:
    # SGLang's start-up and batch records never say "sglang"; its server_args line and batch metrics do.
    log = "\n".join(
        [
            "[2026-01-02 03:04:05] server_args=ServerArgs(model_path='openai/gpt-oss-20b', tp_size=2)",
            "[2026-01-02 03:04:09 TP0] Load weight end. type=GptOssForCausalLM, dtype=torch.bfloat16",
            "[2026-01-02 03:05:00 TP0] Decode batch. #running-req: 3, #token: 900, token usage: 0.01, "
            "gen throughput (token/s): 84.39, #queue-req: 0",
        ]
    )
    assert detect_engines(log) == ["sglang"]
    assert detect_engines("[2026-01-02 03:04:09 TP0] Load weight end. type=GptOssForCausalLM") == []


def test_a_client_named_as_users_write_it() -> None:
    """A repository name of several parts counts written joined, hyphenated or in title-case words; the
    same words in prose ("any llm", "a fast agent") name nothing."""
    engines = ThreadEngines.from_documents(card_documents())
    assert {"roo-code", "anything-llm", "fast-agent"} <= engines.client_names
    for text in ("Roo Code 3.25.8 with gpt-oss-120b", "RooCode and gpt-oss", "roo_code crashed"):
        assert engines.named_client(text) == "roo-code", text
    assert engines.named_client("AnythingLLM shows the thinking") == "anything-llm"
    for prose in ("gpt-oss works with any llm client", "a fast agent loop on gpt-oss", "the room code"):
        assert engines.named_client(prose) is None, prose
    assert detect_client("Open WebUI 0.6.22 with gpt-oss") == "open-webui"
    assert detect_client("a Pydantic AI agent on Ollama") == "pydantic-ai"


def test_sglangs_own_response_field_names_it() -> None:
    """``matched_stop`` is in SGLang's OpenAI-compatible choices and in no vLLM release read."""
    chunk = 'data: {"choices":[{"index":0,"delta":{"content":null},"finish_reason":null,"matched_stop":null}]}'
    assert detect_engines(chunk) == ["sglang"]


def test_xinference_and_llama_cpps_loader_records_name_their_engines() -> None:
    assert detect_engines("2026-01-02 xinference.api.restful_api 812 ERROR [request x] acme failed") == ["xinference"]
    assert detect_engines("llama_model_load: error loading model: acme tensor type 39") == ["llama.cpp"]


def test_a_fix_is_for_its_threads_engine_else_vllms_when_vllms_server_raised_it() -> None:
    def doc(number: int, source: str | None) -> Document:
        return Document(id=f"o/r#{number}", kind="issue", repo="o/r", number=number, title="t", text="t",
                        error_source=source)  # fmt: skip

    assert fix_engine(doc(1, "vllm-server"), {"o/r#1": "ollama"}) == "ollama", "the thread's own engine"
    assert fix_engine(doc(2, "vllm-server"), {}) == "vllm"
    assert fix_engine(doc(3, "client"), {}) is None
    assert fix_engine(doc(4, None), {}) is None
