"""Which accelerator platform an input or a thread is about: an AMD GPU (ROCm), Intel Gaudi, Ascend or an
NVIDIA GPU (CUDA).

A fix for one platform is rarely one for another: a newer CUDA image, a CUDA attention backend or an
NVIDIA driver step does nothing for a HIP error on an AMD GPU. The markers are the platforms' own names,
their error prefixes, device files, architecture and GPU names, and the platform vLLM's start-up record says
it detected. ROCm's builds of PyTorch answer to ``torch.cuda`` and vLLM on ROCm still
captures "CUDA graphs", so another platform's marker decides over a CUDA one.
"""

from __future__ import annotations

import re

PLATFORM_NAMES = {"amd": "AMD GPU", "gaudi": "Intel Gaudi", "ascend": "Ascend NPU", "nvidia": "NVIDIA GPU"}
"""How a platform is written in an answer."""

_ROCM = re.compile(
    r"\brocm|\bhip[ _]?error|\bhipblas(?:lt)?\b|/dev/kfd\b|\bgfx\d{3,4}[a-z]?\b|\bamdgpu\b|\bradeon\b"
    r"|\bamd (?:instinct|gpus?)\b|\[amd\]|\bmiopen\b|\brccl\b|\btorch\.version\.hip\b|\baiter\b",
    re.ASCII,
)
_MI = re.compile(r"\bmi\d{2,3}[xa]?\b", re.ASCII)  # AMD Instinct names (MI300X, mi50)
_CUDA = re.compile(
    r"\bcuda\b|\bnvidia\b|\bnvcc\b|\bnvml\b|\bcudnn\b|\bsm_?\d{2,3}[af]?\b|\bcu1[1-3]\d\b"
    r"|\b(?:[hab]100|[hab]200|h[28]00|h20|a800|a10g?|a6000|b300|gb[23]00|gh200|l40s?|t4|v100)\b"
    r"|\brtx[ -]?(?:pro[ -])?\d{4}\b|\bgtx[ -]?\d{3,4}\b|\b[2-5]0[6-9]0(?: ?ti)?\b|\bdgx\b|\bjetson\b|\bblackwell\b"
    r"|\bhopper\b|\bcompute capability\b|\bcurrent capability: \d{2,3}\b",
    re.ASCII,
)
# Platforms whose own stack fakes none of CUDA's names decide before it, in this order. Each pattern runs on
# the lower-cased text, and only when one of its literals is there (a regex of many alternatives scans a long
# log slowly; a substring test does not).
_PLATFORMS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("amd", _ROCM, ("rocm", "hip", "/dev/kfd", "gfx", "amdgpu", "radeon", "amd", "miopen", "rccl", "aiter")),
    ("amd", _MI, ("mi",)),
    ("gaudi", re.compile(r"gaudi\d?\b|\bhpu\b|\bhabana\b", re.ASCII), ("gaudi", "hpu", "habana")),
    ("ascend", re.compile(r"\bascend\b|\bnpu\b|\btorch_npu\b", re.ASCII), ("ascend", "npu")),
    ("nvidia", _CUDA, ()),
)
# A report's environment table says what is absent too ("ROCM used to build PyTorch: N/A" on every CUDA
# machine, "Is CUDA available: False"): such a line names no platform the input runs.
_ABSENT = re.compile(
    r"^[^\n:]{0,60}:[ \t]*(?:n/?a|none|no|false|0|could not collect|not available|not found|disabled|unknown)[ \t]*$",
    re.I | re.M,
)
MAX_SCAN = 40_000
"""Characters of an input read for platform markers: its head (a report's environment, a log's start-up lines,
where vLLM names the platform it detected) and its tail (the failure)."""


def detect_platform(text: str) -> str | None:
    """``amd``, ``gaudi``, ``ascend``, ``nvidia`` or None: the accelerator platform ``text`` shows (any other
    platform's markers decide over CUDA's)."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN * 3 // 4] + "\n" + text[-MAX_SCAN // 4 :]
    shown = _ABSENT.sub("", text).lower()
    for name, pattern, needles in _PLATFORMS:
        if (not needles or any(n in shown for n in needles)) and pattern.search(shown):
            return name
    return None


def platform_name(platform: str) -> str:
    """``amd`` -> AMD GPU."""
    return PLATFORM_NAMES.get(platform, platform)


def other_platform(input_platform: str | None, thread_platform: str | None) -> bool:
    """True when both are known and differ: the thread's fix is for another GPU platform than the input's."""
    return input_platform is not None and thread_platform is not None and input_platform != thread_platform
