"""The outside set's in-log variant: each query buried in ~120 lines of its engine's ordinary log.

A report pasted into gptoss-doctor rarely arrives alone: it sits in a server log full of start-up,
metrics and access lines. This module writes such a log around each query, in the format of the
engine the report is about (vLLM when none is named), deterministically from a seed, so the pasted and
in-log figures measure the same failures. Every boilerplate line is made up here; none is copied
from a thread.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from bench.quality import Query

LOG_SEED = 1123
LOG_LINES = 120
BURY_AT = (0.55, 0.8)
"""Where the query lands, as a fraction of the log: after start-up, amid the traffic."""

Line = Callable[[random.Random, dict[str, str]], str]


def _ts(rng: random.Random) -> str:
    return f"11-{rng.randrange(3, 28):02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"


def _hex(rng: random.Random, n: int = 16) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _vllm_banner(at: str, ctx: dict[str, str]) -> list[str]:
    """vLLM 0.15.0+'s default start-up banner: the version only beside a logo in block characters, every line
    under the record's prefix ``at`` (made up in that shape, see ``service.versions``)."""
    b, u, d = "\u2588", "\u2580", "\u2584"  # full, upper-half and lower-half blocks
    return [
        f"{at} ",
        f"{at}        {b}     {b}     {b}{d}   {d}{b}",
        f"{at}  {d}{d} {d}{b} {b}     {b}     {b} {u}{d}{u} {b}  version {ctx['version']}",
        f"{at}   {b}{d}{b}{u} {b}     {b}     {b}     {b}  model   {ctx['model']}",
        f"{at}    {u}{u}  {u * 5} {u * 5} {u}     {u}",
        f"{at} ",
    ]


def _vllm_startup(rng: random.Random, ctx: dict[str, str], *, banner: bool = False) -> list[str]:
    """vLLM's start-up: up to 0.14.x, or with ``banner`` 0.15.0+'s (the version beside the logo, the newer
    start line)."""
    api, core, t = f"(APIServer pid={ctx['pid']})", f"(EngineCore_DP0 pid={ctx['pid2']})", _ts(rng)
    tp = rng.choice([1, 2, 4])
    version = (
        _vllm_banner(f"{api} INFO {t} [utils.py:299]", ctx)
        if banner
        else [f"{api} INFO {t} [api_server.py:1839] vLLM API server version {ctx['version']}"]
    )
    start = (
        f"{api} INFO {t} [api_server/entry.py:139] Starting vLLM server on http://0.0.0.0:8000"
        if banner
        else f"{api} INFO {t} [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:8000"
    )
    return [
        f"INFO {t} [__init__.py:216] Automatically detected platform cuda.",
        *version,
        f"{api} INFO {t} [utils.py:233] non-default args: {{'model_tag': '{ctx['model']}', 'host': '0.0.0.0', "
        f"'port': 8000, 'model': '{ctx['model']}', 'tensor_parallel_size': {tp}, 'max_model_len': 65536, "
        f"'gpu_memory_utilization': 0.9}}",
        f"{api} INFO {t} [model.py:547] Resolved architecture: {ctx['arch']}",
        f"{api} INFO {t} [model.py:1510] Using max model len 65536",
        f"{api} INFO {t} [scheduler.py:205] Chunked prefill is enabled with max_num_batched_tokens=8192.",
        f"{core} INFO {t} [core.py:644] Waiting for init message from front-end.",
        f"{core} INFO {t} [core.py:77] Initializing a V1 LLM engine ({ctx['version']}) with config: "
        f"model='{ctx['model']}', dtype=torch.bfloat16, max_seq_len=65536, tensor_parallel_size={tp}, "
        f"quantization={ctx['quant']}, enforce_eager=False, kv_cache_dtype=auto, seed=0",
        f"{core} INFO {t} [parallel_state.py:1208] rank 0 in world size {tp} is assigned as DP rank 0, PP rank 0, "
        "TP rank 0, EP rank 0",
        f"{core} INFO {t} [gpu_model_runner.py:2602] Starting to load model {ctx['model']}...",
        f"{core} INFO {t} [cuda.py:366] Using TRITON_ATTN backend.",
        f"{core} INFO {t} [default_loader.py:267] Loading weights took {rng.uniform(8, 40):.2f} seconds",
        f"{core} INFO {t} [gpu_model_runner.py:2653] Model loading took {rng.uniform(12, 66):.4f} GiB and "
        f"{rng.uniform(10, 50):.6f} seconds",
        f"{core} INFO {t} [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/"
        f"{_hex(rng, 10)}/rank_0_0/backbone for vLLM's torch.compile",
        f"{core} INFO {t} [monitor.py:34] torch.compile takes {rng.uniform(20, 90):.2f} s in total",
        f"{core} INFO {t} [gpu_worker.py:298] Available KV cache memory: {rng.uniform(8, 60):.2f} GiB",
        f"{core} INFO {t} [kv_cache_utils.py:1087] GPU KV cache size: {rng.randrange(200_000, 900_000):,} tokens",
        f"{core} INFO {t} [gpu_model_runner.py:3480] Graph capturing finished in {rng.randrange(5, 40)} secs, "
        f"took {rng.uniform(0.3, 1.5):.2f} GiB",
        f"{core} INFO {t} [core.py:210] init engine (profile, create kv cache, warmup model) took "
        f"{rng.uniform(30, 200):.2f} seconds",
        f"{api} INFO {t} [loggers.py:147] Engine 000: vllm cache_config_info with initialization after num_gpu_blocks"
        f" is: {rng.randrange(20_000, 90_000)}",
        f"{api} INFO {t} [api_server.py:1634] Supported_tasks: ['generate']",
        start,
        f"{api} INFO {t} [launcher.py:34] Available routes are:",
        f"{api} INFO {t} [launcher.py:42] Route: /v1/chat/completions, Methods: POST",
        f"{api} INFO {t} [launcher.py:42] Route: /v1/responses, Methods: POST",
        f"{api} INFO {t} [launcher.py:42] Route: /metrics, Methods: GET",
        f"{api} INFO:     Started server process [{ctx['pid']}]",
        f"{api} INFO:     Waiting for application startup.",
        f"{api} INFO:     Application startup complete.",
    ]


def _vllm_banner_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    return _vllm_startup(rng, ctx, banner=True)


def _vllm_traffic() -> list[Line]:
    def api(c: dict[str, str]) -> str:
        return f"(APIServer pid={c['pid']})"

    return [
        lambda r, c: (
            f"{api(c)} INFO {_ts(r)} [loggers.py:123] Engine 000: Avg prompt throughput: "
            f"{r.uniform(0, 3000):.1f} tokens/s, Avg generation throughput: {r.uniform(0, 400):.1f} tokens/s, "
            f"Running: {r.randrange(0, 30)} reqs, Waiting: 0 reqs, GPU KV cache usage: {r.uniform(0, 40):.1f}%, "
            f"Prefix cache hit rate: {r.uniform(0, 90):.1f}%"
        ),
        lambda r, c: (
            f"{api(c)} INFO:     10.0.{r.randrange(256)}.{r.randrange(256)}:{r.randrange(30000, 60000)} - "
            f'"POST /v1/chat/completions HTTP/1.1" 200 OK'
        ),
        lambda r, c: f'{api(c)} INFO:     127.0.0.1:{r.randrange(30000, 60000)} - "GET /metrics HTTP/1.1" 200 OK',
        lambda r, c: f'{api(c)} INFO:     127.0.0.1:{r.randrange(30000, 60000)} - "GET /health HTTP/1.1" 200 OK',
        lambda r, c: (
            f"{api(c)} INFO {_ts(r)} [chat_utils.py:560] Detected the chat template content format to be "
            "'string'. You can set `--chat-template-content-format` to override this."
        ),
    ]


def _sglang_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    t = f"[2026-{_ts(rng)}]"
    return [
        f"{t} server_args=ServerArgs(model_path='{ctx['model']}', tokenizer_mode='auto', tp_size=2, "
        "mem_fraction_static=0.85, host='0.0.0.0', port=30000, "
        f"reasoning_parser='{ctx['parser']}', tool_call_parser='{ctx['parser']}')",
        f"{t} Using default HuggingFace chat template with detected content format: string",
        f"{t} Attention backend not explicitly specified. Use triton backend by default.",
        f"{t} Init torch distributed begin.",
        f"{t} Init torch distributed ends. mem usage={rng.uniform(0.1, 1):.2f} GB",
        f"{t} Load weight begin. avail mem={rng.uniform(60, 78):.2f} GB",
        f"{t} Load weight end. type={ctx['arch']}, dtype=torch.bfloat16, avail mem={rng.uniform(20, 50):.2f} GB",
        f"{t} KV Cache is allocated. #tokens: {rng.randrange(300_000, 900_000)}, K size: {rng.uniform(5, 20):.2f} GB",
        f"{t} Capture cuda graph begin. This can take up to several minutes.",
        f"{t} Capture cuda graph end. Time elapsed: {rng.uniform(5, 40):.2f} s.",
        f"{t} max_total_num_tokens={rng.randrange(300_000, 900_000)}, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=2048, context_len=131072",
        f"{t} INFO:     Started server process [{ctx['pid']}]",
        f"{t} INFO:     Waiting for application startup.",
        f"{t} INFO:     Application startup complete.",
        f"{t} INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        f"{t} The server is fired up and ready to roll!",
    ]


def _sglang_traffic() -> list[Line]:
    return [
        lambda r, c: (
            f"[2026-{_ts(r)}] Prefill batch. #new-seq: 1, #new-token: {r.randrange(20, 4000)}, "
            f"#cached-token: {r.randrange(0, 4000)}, token usage: 0.0{r.randrange(10)}, #running-req: "
            f"{r.randrange(0, 20)}, #queue-req: 0"
        ),
        lambda r, c: (
            f"[2026-{_ts(r)}] Decode batch. #running-req: {r.randrange(1, 30)}, #token: "
            f"{r.randrange(500, 90000)}, token usage: 0.0{r.randrange(10)}, gen throughput (token/s): "
            f"{r.uniform(20, 900):.2f}, #queue-req: 0"
        ),
        lambda r, c: (
            f"[2026-{_ts(r)}] INFO:     10.0.{r.randrange(256)}.{r.randrange(256)}:{r.randrange(30000, 60000)}"
            f' - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        ),
    ]


def _ollama_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    day, hour, minute, second = rng.randrange(1, 9), rng.randrange(24), rng.randrange(60), rng.randrange(60)
    t = f"time=2026-11-0{day}T{hour:02d}:{minute:02d}:{second:02d}.{rng.randrange(1000):03d}Z"
    return [
        f'{t} level=INFO source=routes.go:1331 msg="server config" env="map[OLLAMA_CONTEXT_LENGTH:8192 '
        "OLLAMA_FLASH_ATTENTION:true OLLAMA_HOST:http://0.0.0.0:11434 OLLAMA_KEEP_ALIVE:5m0s "
        'OLLAMA_NUM_PARALLEL:1]"',
        f'{t} level=INFO source=images.go:477 msg="total blobs: 14"',
        f'{t} level=INFO source=routes.go:1384 msg="Listening on [::]:11434 (version {ctx["version"]})"',
        f'{t} level=INFO source=gpu.go:217 msg="looking for compatible GPUs"',
        f'{t} level=INFO source=types.go:130 msg="inference compute" id=GPU-{_hex(rng, 8)} library=cuda '
        f'compute=8.9 driver=12.8 name="NVIDIA GeForce RTX 4090" total="23.6 GiB" available="22.9 GiB"',
        f'{t} level=INFO source=server.go:199 msg="model wants flash attention"',
        f'{t} level=INFO source=server.go:383 msg="starting runner" cmd="/usr/local/bin/ollama runner --ollama-engine'
        f' --model /root/.ollama/models/blobs/sha256-{_hex(rng, 64)} --port {rng.randrange(30000, 60000)}"',
        f'{t} level=INFO source=runner.go:1006 msg="starting ollama engine"',
        f"{t} level=INFO source=ggml.go:104 msg=system CPU.0.AVX2=1 CUDA.0.ARCHS=500,600,610,700,750,800,860,890,900,"
        "1000,1200 CUDA.0.USE_GRAPHS=1",
        f'{t} level=INFO source=backend.go:416 msg="model weights" device=CUDA0 size="12.8 GiB"',
        f'{t} level=INFO source=backend.go:427 msg="kv cache" device=CUDA0 size="300.0 MiB"',
        f'{t} level=INFO source=server.go:1289 msg="llama runner started in {rng.uniform(2, 9):.2f} seconds"',
    ]


def _ollama_traffic() -> list[Line]:
    return [
        lambda r, c: (
            f"[GIN] 2026/11/0{r.randrange(1, 9)} - {r.randrange(24):02d}:{r.randrange(60):02d}:"
            f'{r.randrange(60):02d} | 200 | {r.uniform(0.2, 40):.6f}s |       127.0.0.1 | POST     "/api/chat"'
        ),
        lambda r, c: (
            f"[GIN] 2026/11/0{r.randrange(1, 9)} - {r.randrange(24):02d}:{r.randrange(60):02d}:"
            f'{r.randrange(60):02d} | 200 | {r.uniform(0.01, 0.2):.6f}s |       127.0.0.1 | GET      "/api/tags"'
        ),
        lambda r, c: (
            f"[GIN] 2026/11/0{r.randrange(1, 9)} - {r.randrange(24):02d}:{r.randrange(60):02d}:"
            f"{r.randrange(60):02d} | 200 | {r.uniform(0.2, 40):.6f}s |       127.0.0.1 | "
            'POST     "/v1/chat/completions"'
        ),
        lambda r, c: (
            f"time=2026-11-0{r.randrange(1, 9)}T{r.randrange(24):02d}:{r.randrange(60):02d}:00.000Z "
            f'level=INFO source=server.go:1105 msg="model load progress {r.uniform(0.1, 1):.2f}"'
        ),
    ]


def _llamacpp_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    return [
        "ggml_cuda_init: found 1 CUDA devices:",
        "  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes",
        f"build: {rng.randrange(6000, 7000)} ({_hex(rng, 8)}) with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for "
        "x86_64-linux-gnu",
        "system info: n_threads = 16, n_threads_batch = 16, total_threads = 32",
        "main: binding port with default address family",
        "main: HTTP server is listening, hostname: 0.0.0.0, port: 8080, http threads: 31",
        "main: loading model",
        f"srv    load_model: loading model '{ctx['gguf']}'",
        f"llama_model_loader: loaded meta data with 37 key-value pairs and 459 tensors from {ctx['gguf']} "
        "(version GGUF V3)",
        f"llama_model_loader: - kv   0:                 general.architecture str = {ctx['gguf_arch']}",
        f"print_info: file type   = {ctx['ftype']}",
        f"print_info: file size   = {rng.uniform(11, 62):.2f} GiB (4.34 BPW)",
        "load_tensors: offloaded 25/25 layers to GPU",
        "llama_context: n_ctx         = 32768",
        "llama_context: flash_attn    = auto",
        "llama_kv_cache:      CUDA0 KV buffer size =   768.00 MiB",
        "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
        "srv          init: initializing slots, n_slots = 4",
        "main: model loaded",
        f"main: chat template, example_format: '{ctx['example']}'",
        "main: server is listening on http://0.0.0.0:8080 - starting the main loop",
        "srv  update_slots: all slots are idle",
    ]


def _llamacpp_traffic() -> list[Line]:
    return [
        lambda r, c: f"slot launch_slot_: id  {r.randrange(4)} | task {r.randrange(9999)} | processing task",
        lambda r, c: (
            f"slot update_slots: id  {r.randrange(4)} | task {r.randrange(9999)} | new prompt, n_ctx_slot = "
            f"8192, n_keep = 0, n_prompt_tokens = {r.randrange(20, 6000)}"
        ),
        lambda r, c: (
            f"prompt eval time =  {r.uniform(20, 2000):8.2f} ms / {r.randrange(20, 6000):5d} tokens "
            f"({r.uniform(0.1, 2):6.2f} ms per token, {r.uniform(300, 3000):8.2f} tokens per second)"
        ),
        lambda r, c: (
            f"       eval time =  {r.uniform(200, 20000):8.2f} ms / {r.randrange(20, 2000):5d} tokens "
            f"({r.uniform(5, 30):6.2f} ms per token, {r.uniform(30, 150):8.2f} tokens per second)"
        ),
        lambda r, c: "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
        lambda r, c: "srv  update_slots: all slots are idle",
    ]


def _lmstudio_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    t = f"2026-11-0{rng.randrange(1, 9)} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
    return [
        f"{t}  [INFO] [LM STUDIO SERVER] Verbose server logs are ENABLED",
        f"{t}  [INFO] [LM STUDIO SERVER] Success! HTTP server listening on port 1234",
        f"{t}  [INFO] [LM STUDIO SERVER] Supported endpoints:",
        f"{t}  [INFO] [LM STUDIO SERVER] ->\tGET  http://localhost:1234/v1/models",
        f"{t}  [INFO] [LM STUDIO SERVER] ->\tPOST http://localhost:1234/v1/chat/completions",
        f"{t}  [INFO] [LM STUDIO SERVER] ->\tPOST http://localhost:1234/v1/responses",
        f"{t}  [INFO] [LM STUDIO SERVER] Logs are saved into /home/user/.lmstudio/server-logs",
        f"{t}  [INFO] Server started.",
        f"{t}  [INFO] Just-in-time model loading active.",
        f"{t}  [INFO] [LM STUDIO SERVER] Loaded model openai/{ctx['short']} (llama.cpp runtime {ctx['version']})",
    ]


def _lmstudio_traffic() -> list[Line]:
    def t(r: random.Random) -> str:
        return f"2026-11-0{r.randrange(1, 9)} {r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}"

    return [
        lambda r, c: (
            f"{t(r)}  [INFO] [LM STUDIO SERVER] Running chat completion on conversation with "
            f"{r.randrange(2, 40)} messages."
        ),
        lambda r, c: f"{t(r)}  [INFO] [openai_{c['short']}] Start thinking...",
        lambda r, c: (
            f"{t(r)}  [INFO] [openai_{c['short']}] Done thinking. Thought for {r.uniform(0.5, 40):.2f} seconds."
        ),
        lambda r, c: (
            f'{t(r)}  [INFO] [openai_{c["short"]}] Generated prediction: {{"id": "chatcmpl-'
            f'{_hex(r, 12)}", "object": "chat.completion", "finish_reason": "stop"}}'
        ),
        lambda r, c: (
            f"{t(r)} [DEBUG] [openai_{c['short']}] Sampling params: repeat_penalty = 1.100, top_k = 40, "
            f"top_p = 0.950, min_p = 0.050, temp = 0.800"
        ),
    ]


def _trtllm_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    t = f"[11/0{rng.randrange(1, 9)}/2026-{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}]"
    return [
        f"{t} [TRT-LLM] [I] Starting TensorRT LLM init.",
        f"{t} [TRT-LLM] [I] TensorRT LLM inited.",
        f"[TensorRT-LLM] TensorRT LLM version: {ctx['version']}",
        f"{t} [TRT-LLM] [I] Using LLM with PyTorch backend",
        f"{t} [TRT-LLM] [I] Set nccl_plugin to None.",
        f"{t} [TRT-LLM] [I] Prefetching {rng.uniform(12, 66):.2f}GB checkpoint files.",
        f"Loading weights: 100%|██████████| 801/801 [00:{rng.randrange(10, 59)}<00:00, {rng.uniform(20, 90):.2f}it/s]",
        f"Model init total -- {rng.uniform(10, 60):.2f}s",
        f"{t} [TRT-LLM] [I] max_seq_len is not specified, using inferred value 131072",
        f"{t} [TRT-LLM] [I] Using Sampler: TorchSampler",
        f"{t} [TRT-LLM] [I] [Autotuner] Autotuning process ends",
        f"{t} [TRT-LLM] [I] Memory used after loading model weights (inside torch) in memory usage profiling: "
        f"{rng.uniform(12, 66):.2f} GiB",
        "INFO:     Started server process [1]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
    ]


def _trtllm_traffic() -> list[Line]:
    return [
        lambda r, c: (
            f"INFO:     10.0.{r.randrange(256)}.{r.randrange(256)}:{r.randrange(30000, 60000)} - "
            '"POST /v1/chat/completions HTTP/1.1" 200 OK'
        ),
        lambda r, c: (
            f"[11/0{r.randrange(1, 9)}/2026-{r.randrange(24):02d}:{r.randrange(60):02d}:00] [TRT-LLM] [I] "
            f"iter = {r.randrange(100, 90000)}, num_scheduled_requests: {r.randrange(1, 40)}, "
            f"states = {{'num_ctx_requests': {r.randrange(0, 4)}, 'num_generation_tokens': {r.randrange(0, 40)}}}"
        ),
        lambda r, c: 'INFO:     127.0.0.1:51000 - "GET /health HTTP/1.1" 200 OK',
    ]


def _python_startup(rng: random.Random, ctx: dict[str, str]) -> list[str]:
    """A generic Python model server (lmdeploy, mlx, exo, xinference, transformers serve) behind uvicorn."""
    t = f"2026-11-0{rng.randrange(1, 9)} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
    name = ctx["server"]
    return [
        f"{t},{rng.randrange(1000):03d} - {name} - INFO - Starting {name} {ctx['version']}",
        f"{t},{rng.randrange(1000):03d} - {name} - INFO - Loading model {ctx['model']}",
        f"{t},{rng.randrange(1000):03d} - {name} - INFO - Fetching {rng.randrange(3, 16)} files: 100%",
        f"{t},{rng.randrange(1000):03d} - {name} - INFO - Model loaded in {rng.uniform(3, 90):.1f}s, "
        f"peak memory {rng.uniform(12, 70):.1f} GB",
        f"{t},{rng.randrange(1000):03d} - {name} - INFO - Using chat template from tokenizer_config.json",
        f"INFO:     Started server process [{ctx['pid']}]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        f"INFO:     Uvicorn running on http://0.0.0.0:{ctx['port']} (Press CTRL+C to quit)",
    ]


def _python_traffic() -> list[Line]:
    return [
        lambda r, c: f'INFO:     127.0.0.1:{r.randrange(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        lambda r, c: f'INFO:     127.0.0.1:{r.randrange(30000, 60000)} - "GET /v1/models HTTP/1.1" 200 OK',
        lambda r, c: (
            f"2026-11-0{r.randrange(1, 9)} {r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}"
            f",{r.randrange(1000):03d} - {c['server']} - INFO - Prompt: {r.randrange(20, 6000)} tokens, "
            f"{r.uniform(100, 2000):.1f} tokens-per-sec; Generation: {r.randrange(10, 2000)} tokens, "
            f"{r.uniform(20, 120):.1f} tokens-per-sec"
        ),
        lambda r, c: (
            f"2026-11-0{r.randrange(1, 9)} {r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}"
            f",{r.randrange(1000):03d} - {c['server']} - INFO - session={r.randrange(1, 400)} finished, "
            f"finish_reason=stop, output_tokens={r.randrange(10, 2000)}"
        ),
    ]


Startup = Callable[[random.Random, dict[str, str]], list[str]]
LOGS: dict[str, tuple[Startup, Callable[[], list[Line]]]] = {
    "vllm": (_vllm_startup, _vllm_traffic),
    "vllm-banner": (_vllm_banner_startup, _vllm_traffic),
    "sglang": (_sglang_startup, _sglang_traffic),
    "ollama": (_ollama_startup, _ollama_traffic),
    "llama.cpp": (_llamacpp_startup, _llamacpp_traffic),
    "lmstudio": (_lmstudio_startup, _lmstudio_traffic),
    "tensorrt-llm": (_trtllm_startup, _trtllm_traffic),
    "python": (_python_startup, _python_traffic),
}
PYTHON_SERVERS = {"lmdeploy": "lmdeploy", "mlx": "mlx_lm.server", "exo": "exo", "xinference": "xinference"}
VERSIONS = {
    "vllm": "0.11.0",
    "vllm-banner": "0.19.1",
    "sglang": "0.5.3",
    "ollama": "0.12.6",
    "llama.cpp": "b6680",
    "lmstudio": "1.52.1",
    "tensorrt-llm": "1.1.0rc2",
    "python": "0.10.1",
}


GPT_OSS = [
    {
        "model": f"openai/gpt-oss-{size}",
        "short": f"gpt-oss-{size}",
        "arch": "GptOssForCausalLM",
        "quant": "mxfp4",
        "parser": "gpt-oss",
        "gguf": f"/models/gpt-oss-{size}-mxfp4.gguf",
        "gguf_arch": "gpt-oss",
        "ftype": "MXFP4 MoE",
        "example": "<|start|>system<|message|>You are a helpful assistant<|end|><|start|>user<|message|>Hello<|end|>",
    }
    for size in ("20b", "120b")
]
OTHER_MODELS = [
    {
        "model": model,
        "short": model.split("/")[1].lower(),
        "arch": arch,
        "quant": "None",
        "parser": parser,
        "gguf": f"/models/{model.split('/')[1]}-Q4_K_M.gguf",
        "gguf_arch": gguf_arch,
        "ftype": "Q4_K - Medium",
        "example": example,
    }
    for model, arch, parser, gguf_arch, example in (
        ("Qwen/Qwen3-8B", "Qwen3ForCausalLM", "qwen3", "qwen3", "<|im_start|>user\\nHello<|im_end|>"),
        (
            "meta-llama/Llama-3.1-8B-Instruct",
            "LlamaForCausalLM",
            "llama3",
            "llama",
            "<|start_header_id|>user<|end_header_id|>\\n\\nHello<|eot_id|>",
        ),
        ("google/gemma-3-12b-it", "Gemma3ForConditionalGeneration", "gemma3", "gemma3", "<start_of_turn>user\\nHello"),
    )
]
"""Served models: gpt-oss for reports about it, another family for the unrelated negatives."""


def log_format(engine: str | None) -> str:
    """Which log family an engine writes; vLLM for reports that name none (clients, platforms)."""
    if engine in LOGS:
        return engine
    if engine in PYTHON_SERVERS or engine == "transformers":
        return "python"
    return "vllm"


def bury(query: Query, engine: str | None, *, seed: int = LOG_SEED, lines: int = LOG_LINES) -> str:
    """``query.text`` inside ~``lines`` lines of ``engine``'s ordinary log, the same for the same seed."""
    rng = random.Random(f"{seed}:{query.id}")
    family = log_format(engine)
    served = rng.choice(OTHER_MODELS) if query.category == "negative-unrelated" else rng.choice(GPT_OSS)
    ctx = {
        "pid": str(rng.randrange(100, 99999)),
        "pid2": str(rng.randrange(100, 99999)),
        **served,
        "version": VERSIONS[family],
        "server": PYTHON_SERVERS.get(engine or "", "transformers serve"),
        "port": str(rng.choice([8000, 8080, 52415, 9997])),
    }
    startup_of, traffic_of = LOGS[family]
    head = startup_of(rng, ctx)
    traffic = traffic_of()
    error_lines = query.text.splitlines() or [query.text]
    n_traffic = max(lines - len(head) - len(error_lines), 10)
    at = int(n_traffic * rng.uniform(*BURY_AT))
    body = [rng.choice(traffic)(rng, ctx) for _ in range(n_traffic)]
    return "\n".join([*head, *body[:at], *error_lines, *body[at:]])


def in_log(queries: Sequence[Query], engines: dict[str, str | None], *, seed: int = LOG_SEED) -> list[Query]:
    """The in-log variant of each query (same id, labels and expectations; the text buried in a log)."""
    return [replace(q, text=bury(q, engines.get(q.id), seed=seed)) for q in queries]


def engine_in_format(family: str, engine: str | None) -> str | None:
    """The engine to bury a query under so that its log is in ``family``'s format.

    The query's own engine when it writes that format (so the cell of its own format repeats the in-log
    variant's text, a Python server keeping its name), else the family's name, which ``log_format`` maps
    to itself.
    """
    if family not in LOGS:
        raise ValueError(f"unknown log format {family!r}; use one of {', '.join(LOGS)}")
    return engine if log_format(engine) == family else family


def in_format(
    queries: Sequence[Query], engines: dict[str, str | None], family: str, *, seed: int = LOG_SEED
) -> list[Query]:
    """Each query buried in a log of ``family``'s format (one of ``LOGS``), whatever engine its record names."""
    return in_log(queries, {q.id: engine_in_format(family, engines.get(q.id)) for q in queries}, seed=seed)


# How a log reaches the user when a collector relays it: each relay rewrites one line (its index, its text).
_LEVEL = re.compile(r"\b(INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b")
_COLOUR = {"INFO": "32", "WARNING": "33", "WARN": "33", "ERROR": "31", "DEBUG": "36", "CRITICAL": "1;31"}
RELAYS: dict[str, Callable[[int, str], str]] = {
    "docker compose": lambda i, line: f"gptoss-server-1  | {line}",
    "kubectl --timestamps": lambda i, line: f"2025-09-03T10:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z {line}",
    "journald": lambda i, line: f"Sep 03 10:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-3 server[4242]: {line}",
    "terminal colours": lambda i, line: _LEVEL.sub(lambda m: f"\x1b[{_COLOUR[m.group(1)]}m{m.group(1)}\x1b[0m", line),
    "docker json-file": lambda i, line: json.dumps(
        {"log": f"{line}\n", "stream": "stderr", "time": f"2025-09-03T10:{i // 60 % 60:02d}:{i % 60:02d}.{i:09d}Z"}
    ),
}
"""docker compose's service column, a timestamp per line, journald's header, a terminal's colour codes,
docker's json-file driver (one JSON object per line, as under /var/lib/docker/containers)."""


def relayed(logged: Sequence[Query], pasted: Sequence[Query], relay: str) -> list[Query]:
    """Each in-log query as ``relay`` delivers its log. The log's lines are rewritten; a sentence the user
    wrote among them is not (a symptom query's own lines), an error line is (it came from the log)."""
    rewrite = RELAYS[relay]
    own = {q.id: set(q.text.splitlines()) if q.category != "error" else set() for q in pasted}
    return [
        replace(
            q,
            text="\n".join(
                line if line in own.get(q.id, ()) else rewrite(i, line) for i, line in enumerate(q.text.splitlines())
            ),
        )
        for q in logged
    ]
