"""How an engine is written in an answer: a module of its own, so the CLI renders names without loading the
engine tables (and the document model they read)."""

from __future__ import annotations

_ENGINE_NAMES = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "ollama": "Ollama",
    "lm-studio": "LM Studio",
    "tensorrt-llm": "TensorRT-LLM",
    "dynamo": "Dynamo",
    "mlx": "MLX",
    "lmdeploy": "LMDeploy",
    "tgi": "TGI",
    "xinference": "Xinference",
}


def engine_name(engine: str) -> str:
    """How an engine is written in an answer (``lm-studio`` -> LM Studio); a data-derived one as it is."""
    return _ENGINE_NAMES.get(engine, engine)
