"""Server flags as vLLM reads them: ``--tool_call_parser`` is ``--tool-call-parser``."""

from __future__ import annotations


def vllm_flag(name: str) -> str:
    """``name`` as vLLM's argument parser reads it.

    vLLM's ``FlexibleArgumentParser`` turns underscores into dashes between ``--`` and the first ``.`` in
    every release read (``--max_model_len`` is ``--max-model-len``; ``--compilation_config.pass_config``
    keeps what follows its dot). Other engines' plain argparse does not, so callers apply this to vLLM's
    command lines only.
    """
    if not name.startswith("--"):
        return name
    head, dot, rest = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest
