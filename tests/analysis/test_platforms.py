"""The GPU platform of an input and of a thread, and what an answer leaves out for another platform."""

from __future__ import annotations

import pytest

from indexer.documents import Document
from service.analysis.advice import CuratedThreads, advise
from service.analysis.engines import ThreadEngines
from service.analysis.input import parse_input
from service.analysis.platforms import detect_platform, other_platform


@pytest.mark.parametrize(
    ("text", "platform"),
    [
        ("torch.AcceleratorError: HIP error: invalid device function", "amd"),
        ("docker run --device=/dev/kfd --device=/dev/dri rocm/vllm-dev:nightly", "amd"),
        ("INFO 01-02 03:04:05 [__init__.py:241] Automatically detected platform rocm.", "amd"),
        ("gpt-oss-120b on 8x MI300X: the acme kernel fails", "amd"),
        ("arch gfx1151 (Strix Halo)", "amd"),
        ("INFO 01-02 03:04:05 [__init__.py:241] Automatically detected platform cuda.", "nvidia"),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "nvidia"),
        ("two RTX 4090 cards, driver 575", "nvidia"),
        ("compute capability sm_120 is not supported", "nvidia"),
        ("[Feature]: mxfp4 support for 3090", "nvidia"),
        ("vllm-gaudi 1.24.0 on Gaudi3: RuntimeError: the acme tensor", "gaudi"),
        ("vllm-ascend on Atlas 800I A2 (torch_npu 2.5.1)", "ascend"),
        # vLLM on ROCm still says CUDA in places: a ROCm marker decides.
        ("Automatically detected platform rocm.\nCapturing CUDA graphs (mixed prefill-decode)", "amd"),
        ("the acme parser drops the tool call", None),
    ],
)
def test_the_platform_an_input_shows(text: str, platform: str | None) -> None:
    assert detect_platform(text) == platform


def test_an_environment_tables_absent_entries_name_no_platform() -> None:
    """vLLM's collect_env prints every platform's row: "N/A" or "False" is not one the machine runs."""
    table = (
        "PyTorch version: 2.8.0+cu128\nIs debug build: False\nCUDA used to build PyTorch: 12.8\n"
        "ROCM used to build PyTorch: N/A\nHIP runtime version: N/A\nMIOpen runtime version: N/A\n"
    )
    assert detect_platform(table) == "nvidia"
    assert detect_platform("ROCM used to build PyTorch: N/A\nIs CUDA available: False") is None


def test_a_long_logs_platform_comes_from_its_head_and_tail() -> None:
    """The start-up line that names the platform heads a log, the failure ends it: both are read however long
    the log is (the lines between are not scanned)."""
    middle = "(APIServer pid=7) INFO 11-23 10:00:01 [loader.py:12] acme step {} done\n"
    body = "".join(middle.format(i) for i in range(3000))
    assert len(body) > 150_000 and detect_platform(body) is None
    start = "INFO 01-02 03:04:05 [__init__.py:241] Automatically detected platform rocm.\n"
    assert detect_platform(start + body) == "amd"
    assert detect_platform(body + "RuntimeError: CUDA error: an illegal memory access was encountered\n") == "nvidia"


def test_other_platform_needs_both_known_and_different() -> None:
    assert other_platform("amd", "nvidia") and not other_platform("amd", "amd")
    assert not other_platform(None, "nvidia") and not other_platform("amd", None)


def test_only_hardware_threads_carry_a_platform(cards: dict[str, Document]) -> None:
    """A kernel or start-up thread names its GPU; a Harmony or tool-call thread's fix holds on any GPU, so its
    reporter's hardware is not its platform."""
    threads = ThreadEngines.from_documents(list(cards.values()))
    assert threads.platform["vllm-project/vllm#22331"] == "nvidia"  # "(4090 48gb)", attention backend
    assert threads.platform["SemiAnalysisAI/InferenceX#527"] == "amd"  # "[AMD] ... MI355X"
    trt = [d for d in cards.values() if d.repo == "NVIDIA/TensorRT-LLM" and d.component == "harmony-parser"]
    assert trt and not any(d.id in threads.platform for d in trt)


def test_another_platforms_hardware_thread_gives_no_advice(cards: dict[str, Document], kb: CuratedThreads) -> None:
    """A newer CUDA image or a CUDA attention backend is no advice for a HIP error on an AMD GPU; the same
    thread's advice stays for an NVIDIA or an unnamed GPU. (The docs' own advice for the error, a backend
    both platforms have, is not the thread's and stays.)"""
    threads = ThreadEngines.from_documents(list(cards.values()))
    card = cards["vllm-project/vllm#22331"]
    assert card.workarounds

    def advised(text: str) -> bool:
        advice = advise(parse_input(text), [card], kb, matched=False, threads=threads)
        return any(a.summary.startswith(f"From {card.id}") for a in advice)

    failure = "vLLM 0.14.0 serving gpt-oss-120b: AssertionError: Sinks are only supported in FlashAttention 3"
    assert advised(failure)
    assert advised(failure + " on an RTX 4090")
    assert not advised(failure + " on an MI355X (ROCm 7.0)")
