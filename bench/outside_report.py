"""The outside set's in-report variant: each query as the description of a filled-in bug report.

Users paste whole GitHub reports as often as bare errors: the description sits between an issue
template's headings, a checklist and an environment section (vLLM's ``collect_env`` output, Ollama's
OS / GPU / version fields, llama.cpp's "Name and Version"). This module writes such a report around each
query, in the template of the tracker its engine files bugs in (a generic one when the report names no
engine), deterministically from a seed. The headings follow the public templates' field names; every
value and sentence is made up here, none is copied from a thread or a template.

Reporting only: issue 12's bars stay on the pasted and in-log variants.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

from bench.quality import Query

REPORT_SEED = 1126

Template = Callable[[random.Random, str], list[str]]

_GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090", "NVIDIA L40S")
_PIP = (
    "numpy==2.2.6",
    "torch==2.8.0+cu128",
    "transformers==4.56.1",
    "triton==3.4.0",
    "flashinfer-python==0.3.1",
    "openai==1.107.0",
    "pyzmq==27.1.0",
)


def _details(summary: str, body: list[str]) -> list[str]:
    return ["<details>", f"<summary>{summary}</summary>", "", "```text", *body, "```", "", "</details>"]


def _collect_env(rng: random.Random) -> list[str]:
    """An environment dump in the layout of vLLM's collect_env (section rules, aligned fields, pip list)."""
    gpu = rng.choice(_GPUS)
    count = rng.choice([1, 2, 4, 8])
    version = rng.choice(["0.10.1.1", "0.10.2", "0.11.0", "0.11.2"])

    def rule(title: str) -> list[str]:
        return ["=" * 30, f"{title:^30}", "=" * 30]

    return [
        *rule("System Info"),
        "OS                           : Ubuntu 22.04.5 LTS (x86_64)",
        "GCC version                  : (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0",
        "Libc version                 : glibc-2.35",
        "",
        *rule("PyTorch Info"),
        "PyTorch version              : 2.8.0+cu128",
        "Is debug build               : False",
        "CUDA used to build PyTorch   : 12.8",
        "",
        *rule("Python Environment"),
        f"Python version               : 3.12.{rng.randrange(3, 12)} (main) [GCC 11.4.0] (64-bit runtime)",
        "",
        *rule("CUDA / GPU Info"),
        "Is CUDA available            : True",
        "GPU models and configuration :",
        *(f"GPU {i}: {gpu}" for i in range(count)),
        f"Nvidia driver version        : 570.{rng.randrange(100, 200)}.{rng.randrange(10, 99)}",
        "",
        *rule("CPU Info"),
        "Architecture:                         x86_64",
        f"CPU(s):                               {rng.choice([32, 64, 128])}",
        "Flags:                                fpu vme de pse tsc msr pae mce cx8 apic sep avx2 avx512f",
        "Vulnerability Spectre v2:             Mitigation; Enhanced / Automatic IBRS; RSB filling",
        "",
        *rule("Versions of relevant libraries"),
        *(f"[pip3] {p}" for p in rng.sample(_PIP, 5)),
        "[conda] Could not collect",
        "",
        *rule("vLLM Info"),
        f"vLLM Version                 : {version}",
        "vLLM Build Flags:",
        "  CUDA Archs: Not Set; ROCm: Disabled",
        "",
        *rule("Environment Variables"),
        "NCCL_CUMEM_ENABLE=0",
        "PYTORCH_NVML_BASED_CUDA_CHECK=1",
    ]


def _section(title: str, *body: str) -> list[str]:
    """One issue-form field: its heading, a blank line, its lines, a blank line."""
    return [f"### {title}", "", *body, ""]


def _vllm(rng: random.Random, query: str) -> list[str]:
    return [
        "### Your current environment",
        "",
        *_details("The output of <code>python collect_env.py</code>", _collect_env(rng)),
        "",
        *_section("🐛 Describe the bug", query),
        *_section("Before submitting a new issue...", "- [x] I looked through the open and closed issues first."),
    ]


def _ollama(rng: random.Random, query: str) -> list[str]:
    return [
        *_section("What is the issue?", query),
        *_section("Relevant log output", "```shell", "", "```"),
        *_section("OS", rng.choice(["Linux", "macOS", "Windows", "Docker"])),
        *_section("GPU", rng.choice(["Nvidia", "AMD", "Apple"])),
        *_section("CPU", rng.choice(["Intel", "AMD", "Apple"])),
        *_section("Ollama version", f"0.{rng.randrange(11, 13)}.{rng.randrange(0, 11)}"),
    ]


def _llama_cpp(rng: random.Random, query: str) -> list[str]:
    version = [
        "$ ./llama-server --version",
        f"version: {rng.randrange(6000, 7000)} ({rng.getrandbits(28):07x})",
        "built with cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0 for x86_64-linux-gnu",
    ]
    return [
        *_section("Name and Version", *version),
        *_section("Operating systems", rng.choice(["Linux", "Mac", "Windows"])),
        *_section("Which llama.cpp modules do you know to be affected?", "llama-server"),
        *_section("Problem description & steps to reproduce", query),
        *_section("First Bad Commit", "_No response_"),
    ]


def _sglang(rng: random.Random, query: str) -> list[str]:
    environment = [
        f"Python: 3.12.{rng.randrange(3, 12)} (main) [GCC 11.4.0]",
        "CUDA available: True",
        f"GPU 0,1: {rng.choice(_GPUS)}",
        "CUDA Driver Version: 570.133.20",
        "PyTorch: 2.8.0+cu128",
        f"sglang: 0.5.{rng.randrange(0, 6)}",
        "flashinfer_python: 0.3.1",
        "transformers: 4.56.1",
    ]
    checklist = [
        "- [x] I searched related issues and found nothing that answers this.",
        "- [x] It still fails on the latest version.",
    ]
    return [
        *_section("Checklist", *checklist),
        *_section("Describe the bug", query),
        *_section("Environment", *environment),
    ]


def _generic(rng: random.Random, query: str) -> list[str]:
    return [
        "**Describe the bug**",
        "",
        query,
        "",
        "**Environment**",
        "",
        f"- OS: {rng.choice(['Ubuntu 24.04', 'macOS 15.5', 'Windows 11'])}",
        f"- Python: 3.{rng.randrange(10, 14)}.{rng.randrange(0, 10)}",
        f"- Version: {rng.randrange(0, 3)}.{rng.randrange(0, 30)}.{rng.randrange(0, 10)}",
    ]


TEMPLATES: dict[str, Template] = {"vllm": _vllm, "ollama": _ollama, "llama.cpp": _llama_cpp, "sglang": _sglang}
"""The trackers whose template is written out; every other report (no engine, or another one) gets the
generic "Describe the bug / Environment" layout."""


def in_report_text(query: Query, engine: str | None, *, seed: int = REPORT_SEED) -> str:
    """``query.text`` as the description of a bug report in ``engine``'s tracker template."""
    rng = random.Random(f"{seed}:{query.id}")
    return "\n".join(TEMPLATES.get(engine or "", _generic)(rng, query.text))


def in_report(queries: Sequence[Query], engines: dict[str, str | None], *, seed: int = REPORT_SEED) -> list[Query]:
    """The in-report variant of each query (same id, labels and expectations; the text inside a report)."""
    return [replace(q, text=in_report_text(q, engines.get(q.id), seed=seed)) for q in queries]
