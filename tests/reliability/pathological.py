"""Hostile inputs for the log parser: 1 MB bodies, pathological repetition, control characters.

Each entry is built lazily (a name -> zero-argument factory) so importing this module costs nothing.
The inputs aim at the shapes that make regular expressions backtrack or per-line work add up: long
runs that almost match a pattern, a megabyte of one-character lines, the same error line 70,000 times.
"""

from __future__ import annotations

from collections.abc import Callable

MB = 1_000_000


def _fill(piece: str, size: int = MB) -> str:
    """``piece`` repeated up to ``size`` characters."""
    return (piece * (size // max(1, len(piece)) + 1))[:size]


PATHOLOGICAL: dict[str, Callable[[], str]] = {
    "open parens x100k": lambda: "(" * 100_000,
    "'/a' x300k (one endless path)": lambda: "/a" * 300_000,
    "'Error: ' x100k": lambda: "Error: " * 100_000,
    "one 1 MB line of 'x'": lambda: "x" * MB,
    "1 MB of spaces": lambda: " " * MB,
    "1 MB of newlines": lambda: "\n" * MB,
    "lines of only spaces": lambda: _fill(" " * 120 + "\n"),
    "unicode line separators": lambda: _fill("\u00e9\u2028\u0085"),
    "every control character": lambda: _fill("".join(chr(i) for i in range(32)) + "\x7f"),
    "NUL bytes": lambda: "\x00" * MB,
    "the same exception line x70k": lambda: _fill("ValueError: x\n"),
    # Distinct lines with one normalised key: no line repeats, yet none adds a new signature.
    "one error, varying addresses, unterminated fields": lambda: "".join(
        f"ERROR 0x{i:08x} " + "'message': 'abc" * 140 + "\n" for i in range(500)
    ),
    "50k distinct error lines": lambda: "".join(f"ERROR worker {i} failed: code {i * 7}\n" for i in range(50_000)),
    "unterminated JSON message fields": lambda: _fill("ERROR " + "'message': 'abc" * 150 + "\n"),
    "unterminated msg= fields": lambda: _fill('error msg="' * 300 + "\n"),
    "long 'Error in request:' lines": lambda: _fill("ERROR Error in request: " + "a" * 2500 + "\n"),
    "unterminated token-id list": lambda: "[" + "1," * 450_000,
    "token-id lists without a bracket": lambda: _fill("token 1 [" + "1, " * 600 + "\n"),
    "1 MB of hex": lambda: _fill("0123456789abcdef"),
    "near-miss dotted exception names": lambda: _fill("a." * 60 + "A" + "b" * 60 + "\n"),
    "flag-like runs on a serve line": lambda: _fill("vllm serve " + "--a-" * 500 + "\n"),
    "'vllm ' x200k": lambda: "vllm " * 200_000,
    "near-miss version lines": lambda: _fill("vllm" + " " * 39 + "1.1"),
    "unterminated access-log lines": lambda: _fill('"GET ' + "a" * 299),
    "IP:port runs": lambda: _fill("1.1.1.1:"),
    "Harmony special tokens": lambda: _fill("<|start|>"),
    "token ids x60k": lambda: _fill("Unexpected token 200002 while expecting start token 200006 "),
    "non-default args dict": lambda: _fill("non-default args: {" + "'a_b': 'x', " * 160 + "\n"),
    "request params without values": lambda: _fill("tool_choice: "),
    "env-var prefixes": lambda: _fill("VLLM_"),
    "model names glued together": lambda: _fill("gpt-oss-20b"),
    "traceback frames": lambda: _fill('File "' + "a" * 390 + '", line 1, in f\n' + "raise X\n"),
    "deep nesting of brackets and quotes": lambda: _fill("{'error': [\"(" ),
    "mixed scripts and emoji": lambda: _fill("Ошибка 错误 エラー \U0001f525 HarmonyError: \u202e\u200b\n"),
    "surrogate-free astral plane": lambda: _fill("\U00010000\U0010fffd"),
    # Issue 16: shapes that were superlinear because a list grew without a cap until the return.
    "distinct flags on serve lines": lambda: "".join(
        "vllm serve " + " ".join(f"--f{i * 100 + j}" for j in range(100)) + "\n" for i in range(1_900)
    )[:MB],
    "distinct non-default args keys": lambda: "".join(
        "non-default args: {" + ", ".join(f"'k{i * 50 + j}': 'v'" for j in range(50)) + "}\n"
        for i in range(1_500)
    )[:MB],
    "distinct VLLM_ env vars": lambda: " ".join(f"VLLM_X{i}=1" for i in range(90_000))[:MB],
    "distinct request params": lambda: " ".join(f"tool_choice={i}" for i in range(70_000))[:MB],
    "distinct token ids in one error line": lambda: "ERROR " + " ".join(f"token {i}" for i in range(200_000))[:MB],
    "an unbounded run after ProcessGroupNCCL": lambda: _fill("ProcessGroupNCCL "),
    "one word of 'nccl'": lambda: "nccl" * 250_000,
    "keyword soup": lambda: _fill(
        "litellm langchain llama_stack openai.BadRequestError codex ollama 0.1 vllm==0.10.1 "
        "openai-harmony 0.0.4 --tool-call-parser openai tool_choice=required CUDA 12.8 "
    ),
}
"""Named hostile inputs; the name is what a failing test prints."""
