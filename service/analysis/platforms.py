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
    r"\brocm|\bhip[ _]?error|\bhipblas(?:lt)?\b|/dev/kfd\b|\bgfx\d{3,4}[a-z]?\b|\bmi\d{2,3}[xa]?\b|\bamdgpu\b"
    r"|\bradeon\b|\bamd (?:instinct|gpus?)\b|\[amd\]|\bmiopen\b|\brccl\b|\btorch\.version\.hip\b|\baiter\b",
    re.I | re.ASCII,
)
_CUDA = re.compile(
    r"\bcuda\b|\bnvidia\b|\bnvcc\b|\bnvml\b|\bcudnn\b|\bsm_?\d{2,3}[af]?\b|\bcu1[1-3]\d\b"
    r"|\b(?:[hab]100|[hab]200|h[28]00|h20|a800|a10g?|a6000|b300|gb[23]00|gh200|l40s?|t4|v100)\b"
    r"|\brtx[ -]?(?:pro[ -])?\d{4}\b|\bgtx[ -]?\d{3,4}\b|\b[2-5]0[6-9]0(?: ?ti)?\b|\bdgx\b|\bjetson\b|\bblackwell\b"
    r"|\bhopper\b|\bcompute capability\b|\bcurrent capability: \d{2,3}\b",
    re.I | re.ASCII,
)
# Platforms whose own stack fakes none of CUDA's names decide before it, in this order.
_PLATFORMS = (
    ("amd", _ROCM),
    ("gaudi", re.compile(r"\bgaudi\d?\b|\bhpu\b|\bhabana\b", re.I | re.ASCII)),
    ("ascend", re.compile(r"\bascend\b|\bnpu\b|\btorch_npu\b", re.I | re.ASCII)),
    ("nvidia", _CUDA),
)
# A report's environment table says what is absent too ("ROCM used to build PyTorch: N/A" on every CUDA
# machine, "Is CUDA available: False"): such a line names no platform the input runs.
_ABSENT = re.compile(
    r"^[^\n:]{0,60}:[ \t]*(?:n/?a|none|no|false|0|could not collect|not available|not found|disabled|unknown)[ \t]*$",
    re.I | re.M,
)
MAX_SCAN = 200_000
"""Characters of an input read for platform markers: the head and tail of a long log are enough."""


def detect_platform(text: str) -> str | None:
    """``amd``, ``gaudi``, ``ascend``, ``nvidia`` or None: the accelerator platform ``text`` shows (any other
    platform's markers decide over CUDA's)."""
    if len(text) > MAX_SCAN:
        text = text[: MAX_SCAN // 2] + "\n" + text[-MAX_SCAN // 2 :]
    shown = _ABSENT.sub("", text)
    return next((name for name, pattern in _PLATFORMS if pattern.search(shown)), None)


def platform_name(platform: str) -> str:
    """``amd`` -> AMD GPU."""
    return PLATFORM_NAMES.get(platform, platform)


def other_platform(input_platform: str | None, thread_platform: str | None) -> bool:
    """True when both are known and differ: the thread's fix is for another GPU platform than the input's."""
    return input_platform is not None and thread_platform is not None and input_platform != thread_platform
