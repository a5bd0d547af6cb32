"""Needle prechecks (service/analysis/needles.py) skip a pattern only where it cannot match.

Each whole-text pattern declares literals one of which every match contains. If a branch is added to a
pattern without its needle, inputs that match only that branch would silently lose the match: these
tests run every declared pattern on one example per branch and on the KB's own texts, in upper case
and with the non-ASCII letters re.IGNORECASE folds to ASCII, and require the precheck to let them
through.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from service.analysis import advice, engines, input
from service.analysis.needles import Needled, folded

REPO = Path(__file__).resolve().parents[2]

# One input per branch of each pattern (a branch without an example fails the coverage test below).
EXAMPLES = [
    "ollama run gpt-oss", "sglang serve", "built llama.cpp today", "LM Studio 0.3", "LMStudio", "tensorrt",
    "mlx runs", "vmlx runs",
    "vllm crashed", "--enable-auto-tool-choice", "--tool-call-parser openai", "serving_chat.py",
    "serving_responses.py", "harmony_utils.py", "(APIServer pid=1) INFO", "(EngineCore_0 pid=2)",
    "tool calls", "tool choice", "tool_choice", "function call", "function-calling", "tools array",
    "call a function", "tool_call_parser",
    "reasoning_content", "reasoning field", "reasoning parser", "analysis channel", "chain of thought",
    "thinking text",
    "ignore_eos", "min_tokens: 5", "never stops", "doesn't stop", "does not stop", "past <|return|>",
    "attention sinks", "Sinks are only supported on", "sinks not supported",
    "Unexpected token 200002 while expecting start token 200006",
    "gpt-oss-20b", "gptoss", "harmony", "the 120b model",
    "meta-llama/Llama-3.1-8B", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B", "mistralai/Mistral-7B",
    "google/gemma-3", "microsoft/phi-4", "zai-org/GLM-4.5", "moonshotai/Kimi-K2", "DeepSeek-R1", "Llama-3",
    "Qwen3", "Mistral-7", "gemma-3",
    "$ vllm serve x", "# docker run --gpus all", "> python -m vllm.entrypoints.openai.api_server",
    "against vllm (0.19.0)", "openai_harmony-0.0.4-cp38-abi3-manylinux_2_28_aarch64.whl",
    'msg="Listening on [::]:11434 (version 0.11.3)"',
    "tool_choice: required",
    "vLLM API server version 0.10.1", "vllm==0.10.1", "vllm-openai:v0.10.2", "vllm 0.10.1", "vllm version 0.10.1",
    "openai-harmony==0.0.4", "openai_harmony 0.0.4", "transformers==4.55.0", "torch 2.8.0", "torch==2.8.0",
    "triton 3.4.0", "sglang==0.5.0", "ollama version is 0.11.4", "vllm-mlx 0.3.2", "CUDA Version: 12.8",
    "CUDA 12.8", "LM Studio", "lmstudio", "lms server", "lms load", "httpx.ReadTimeout", "ray-project/llmperf",
    "requests.exceptions.ConnectionError", "ollama run gpt-oss:120b", "http://localhost:11434/api/chat",
    "server_args=ServerArgs(model_path='x')", "Prefill batch. #new-seq: 1", "Decode batch, #running-req: 2",
    "vLLM Version                 : 0.10.2", "vllm version\t: 0.11.0",
    "\u2588 \u2580\u2584\u2580 \u2588  version 0.19.1", "Initializing a V1 LLM engine (v0.22.0) with config:",
    "build: 6992 (aa3b7a90b) with cc", "version: 4205 (c6bc7395)", "llama.cpp b6680", "llama-server b7256",
    "[TensorRT-LLM] TensorRT LLM version: 1.2.0rc4", "tensorrt_llm==1.0.0", "LM Studio 0.3.23",
    "ChatOllama(model='gpt-oss:20b')", "ChatBedrockConverse", "Claude Code 2.1", "claude-code", "@ai-sdk/openai",
    "Vercel AI SDK", "ollama/_client.py",
    "### Ollama version\n\n0.12.3", "lmdeploy version:0.11.1", "Ollama version 0.11.11", '"matched_stop": null',
    "[serving_chat.py:1001]", "[api_server.py:12]", "OpenHands CLI", "open-hands", "CodexCLI", "codex-cli 0.22.0",
    "aiq.agent.react_agent.agent", "NeMo Agent Toolkit", "/v1/responses", "responses.create", "Responses API",
    "ResponsesRequest", "object='response'", "chat/completions", "chat.completions", "ChatCompletion",
    "chat completions", "llama_model_load: error loading model", "xinference.api.restful_api",
    "runs without problems", "works fine on llama.cpp", "no issues with vllm",
]  # fmt: skip


def _needled(*modules: types.ModuleType) -> dict[str, Needled]:
    return {
        f"{module.__name__}.{name}": value
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, Needled)
    }


PATTERNS = {
    **_needled(advice, input),
    **{f"{input.__name__}._VERSION_PATTERNS[{i}]": rule for i, (_, rule) in enumerate(input._VERSION_PATTERNS)},
    **{
        f"{engines.__name__}._NEEDLES[{name}]": Needled(
            pattern.pattern, engines._NEEDLES.get(name, (name,)), pattern.flags
        )
        for name, pattern in (*engines.ENGINES, *engines.CLIENTS)
    },
}


def _variants(text: str) -> list[str]:
    """The text, upper-cased, and with letters spelled as the non-ASCII ones re.IGNORECASE folds to them."""
    odd = text.replace("s", "\u017f").replace("k", "\u212a").replace("i", "\u0131")
    return [text, text.upper(), odd, text.replace("I", "\u0130")]


def _kb_texts() -> list[str]:
    texts = (REPO / "indexer" / "data" / "cards.jsonl").read_text(encoding="utf-8").splitlines()
    for doc in sorted((REPO / "reference").glob("*.md")):
        texts += doc.read_text(encoding="utf-8").split("\n\n")
    return texts


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_every_match_holds_a_needle(name: str) -> None:
    rule = PATTERNS[name]
    matched = 0
    for text in EXAMPLES + _kb_texts():
        for variant in _variants(text):
            if rule.pattern.search(variant):
                matched += 1
                assert rule.could_match(variant, folded(variant)), (name, variant[:200])
                assert rule.search(variant, folded(variant)) is not None
    assert matched, f"{name}: no example matches it, so its needles are untested"


def test_each_example_is_matched_by_some_pattern() -> None:
    """The examples stay examples: one that no pattern matches any more is a stale branch."""
    unmatched = [e for e in EXAMPLES if not any(rule.pattern.search(e) for rule in PATTERNS.values())]
    assert not unmatched


def test_folding_keeps_lines_and_maps_what_ignorecase_maps() -> None:
    text = "A \u0130D\nline \u017fix\r\nK\u212a\u0131"
    assert len(folded(text).splitlines()) == len(text.splitlines())
    assert folded(text) == "a id\nline six\r\nkki"


DISTILL_EXAMPLES = [
    "Avg prompt throughput: 0.0 tokens/s", "GPU KV cache usage: 0.0%", "Running: 1 reqs, Waiting: 0 reqs",
    "prefix cache hit rate: 0.0%", 'INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "INFO 08-21 09:00:00 [api_server.py:1] ok", "[INFO] ok", "level=INFO msg=ok", "DEBUG ok", "[I] ok",
    "[2026-01-02 03:04:05 TP0] Prefill batch, #new-seq: 1", "[2026-01-02 03:04:05] Decode batch. #running-req: 1",
    "token usage: 0.01, gen throughput (token/s): 84.39, #queue-req: 0",
    "PyTorch version              : 2.8.0", "Is CUDA available  : True", "CPU(s):                 64",
    "Vulnerability Mds:                    Not affected", "[pip3] numpy==2.2.6", "[conda] Could not collect",
    "==============================", "  L1d cache:   1.5 MiB",
]  # fmt: skip


def test_distill_literals_are_in_every_match() -> None:
    """distill skips its unanchored boilerplate and INFO patterns on a line without their literals."""
    from service.analysis import distill

    anywhere = info = dump = 0
    for text in DISTILL_EXAMPLES + _kb_texts():
        for line in text.splitlines():
            if distill._DUMP.match(line):
                dump += 1
                assert any(literal in line for literal in distill._DUMP_LITERALS), line
            if distill._BOILERPLATE_ANYWHERE.search(line):
                anywhere += 1
                assert any(literal in line for literal in distill._ANYWHERE_LITERALS), line
            if distill._INFO.search(line):
                info += 1
                assert any(literal in line for literal in distill._INFO_LITERALS), line
    assert anywhere >= 5 and info >= 5 and dump >= 8
