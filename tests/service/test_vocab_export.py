"""``gptoss-doctor vocab export DIR`` writes a vocab openai-harmony loads offline (issue 13)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from service.analysis.harmony import VOCAB_FILE, VOCAB_SHA256
from service.cli import main


def test_export_writes_the_verified_vocab_and_prints_the_variable(tmp_path: Path) -> None:
    target = tmp_path / "opt" / "harmony-vocab"
    result = CliRunner().invoke(main, ["vocab", "export", str(target)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"TIKTOKEN_ENCODINGS_BASE={target.resolve()}"
    assert hashlib.sha256((target / VOCAB_FILE).read_bytes()).hexdigest() == VOCAB_SHA256
    # What the vLLM host does with the line: openai-harmony loads the encoding from it, no network.
    env = {**os.environ, "TIKTOKEN_ENCODINGS_BASE": str(target), "HTTPS_PROXY": "http://127.0.0.1:9"}
    code = (
        "from openai_harmony import HarmonyEncodingName, load_harmony_encoding; "
        "print(load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS).decode([200006, 200002]))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "<|start|><|return|>"


def test_export_into_a_path_that_cannot_be_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(main, ["vocab", "export", str(blocker / "vocab")])
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output
