"""Quiet set-up: the project's metadata builds without deprecation warnings (issue 13, "Set-up noise")."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_metadata_builds_without_warnings_and_names_the_license(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    (tmp_path / "service").mkdir()
    (tmp_path / "service" / "__init__.py").write_text("")
    (tmp_path / "out").mkdir()
    code = "from setuptools import build_meta as b; print(b.prepare_metadata_for_build_wheel('out'))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # `pip install -e .` would print these, for every build
    metadata = (tmp_path / "out" / result.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata
