"""``gptoss-doctor doctor``: a healthy setup passes; each broken part fails with advice that fixes it."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from service.cli import main
from service.config import Settings
from service.doctor import Check, _Context, check_index, check_vocab
from tests.fakes import commit_marks, free_port

# Every CLI run below loads the real embedding model (from the session's export cache): slow.
slow = pytest.mark.slow


def _doctor(*args: str) -> tuple[int, str, dict[str, Any]]:
    """Run the command twice (text and --json) and return exit code, text and the JSON report."""
    runner = CliRunner()
    text = runner.invoke(main, ["doctor", *args])
    as_json = runner.invoke(main, ["doctor", "--json", *args])
    assert text.exit_code == as_json.exit_code, (text.output, as_json.output)
    return text.exit_code, text.output, json.loads(as_json.stdout)


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def _use(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_DATA_DIR", str(data_dir))


@slow
def test_healthy_setup_passes_every_check(built_index: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    _use(built_index.data_dir, monkeypatch)
    code, output, report = _doctor()
    assert code == 0, output
    assert report["ok"] is True and report["failures"] == 0
    checks = _by_name(report)
    for name in (
        "data dir",
        "reference docs",
        "harmony vocab",
        "embedding model",
        "chroma",
        "index",
        "index freshness",
        "github sync",
    ):
        assert checks[name]["status"] == "ok", (name, checks[name])
    assert checks["index"]["facts"]["documents"] > 600
    assert "All checks passed." in output
    assert "fix:" not in output


@slow
def test_missing_index_fails_and_says_to_build_it(caches: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "fresh"
    caches(data)
    _use(data, monkeypatch)
    code, output, report = _doctor()
    assert code == 1
    index = _by_name(report)["index"]
    assert index["status"] == "fail" and "no index at" in index["detail"]
    assert "gptoss-doctor index" in index["fix"]
    assert "FAIL  index" in output and "fix: run `gptoss-doctor index`" in output
    assert "1 problem." in output


def _docs_copy(source: Path, target: Path) -> Path:
    for sub in ("reference", "skill"):
        shutil.copytree(source / sub, target / sub)
    return target


@slow
def test_fix_provisions_the_vocab_and_refreshes_a_stale_index(
    built_index: Settings, caches: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    caches(data, vocab=False, index=True)
    docs = _docs_copy(built_index.docs_dir, tmp_path / "docs")
    (docs / "reference" / "tool-calling-setup.md").touch()  # edited after the build: stale
    _use(data, monkeypatch)
    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(docs))
    code, _, report = _doctor()
    assert code == 1
    assert _by_name(report)["harmony vocab"]["status"] == "fail"
    assert _by_name(report)["index freshness"]["status"] == "warn"
    assert _doctor("--strict")[0] == 1

    result = CliRunner().invoke(main, ["doctor", "--fix"])
    assert result.exit_code == 0, result.output
    assert "(rebuilt now)" in result.output and "index build" in result.output
    code, output, report = _doctor("--strict")
    assert code == 0, output
    assert _by_name(report)["index freshness"]["status"] == "ok"


@slow
def test_corrupt_vocab_fails_with_the_repair_command(
    caches: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    caches(data, index=True)
    vocab = data / "harmony-vocab" / "o200k_base.tiktoken"
    vocab.write_bytes(vocab.read_bytes()[:-1000] + b"garbage")
    _use(data, monkeypatch)
    code, output, report = _doctor()
    assert code == 1
    check = _by_name(report)["harmony vocab"]
    assert check["status"] == "fail" and "is corrupt: sha256" in check["detail"]
    assert "gptoss-doctor doctor --fix" in check["fix"]
    assert _by_name(report)["index"]["status"] == "ok"  # the other parts are still checked

    fixed = CliRunner().invoke(main, ["doctor", "--fix"])
    assert fixed.exit_code == 0, fixed.output
    assert "(rebuilt now)" in fixed.output


@slow
def test_unreachable_chroma_url_fails_and_skips_the_index(
    caches: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caches(tmp_path / "data")
    _use(tmp_path / "data", monkeypatch)
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("GPTOSS_DOCTOR_CHROMA_URL", url)
    code, output, report = _doctor()
    assert code == 1
    checks = _by_name(report)
    assert checks["chroma"]["status"] == "fail"
    assert f"cannot reach the Chroma server at {url}" in checks["chroma"]["detail"]
    assert "chroma run" in checks["chroma"]["fix"] and "GPTOSS_DOCTOR_CHROMA_URL" in checks["chroma"]["fix"]
    assert checks["index"]["status"] == "skip"
    assert "FAIL  chroma" in output


@slow
def test_invalid_configuration_is_one_failed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_CHROMA_URL", "not a url")
    code, output, report = _doctor()
    assert code == 1
    assert [c["name"] for c in report["checks"]] == ["config"]
    assert "GPTOSS_DOCTOR_CHROMA_URL" in report["checks"][0]["detail"]


@slow
def test_missing_reference_docs_point_at_docs_dir(
    built_index: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(built_index.data_dir, monkeypatch)
    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(tmp_path))
    code, _, report = _doctor()
    assert code == 1
    docs = _by_name(report)["reference docs"]
    assert docs["status"] == "fail" and "known-issues.md" in docs["detail"]
    assert "GPTOSS_DOCTOR_DOCS_DIR" in docs["fix"]


# --- freshness rules, on the real built index without the CLI ----------------------------------------


def _index_checks(settings: Settings, **kwargs: Any) -> dict[str, Check]:
    from indexer.embedding import load_embedder

    ctx = _Context()
    ctx.embedder = load_embedder(settings)
    return {c.name: c for c in check_index(settings, ctx, **kwargs)}


@slow
def test_docs_edited_after_the_build_make_the_index_stale(built_index: Settings, tmp_path: Path) -> None:
    docs = _docs_copy(built_index.docs_dir, tmp_path / "docs")
    (docs / "reference" / "known-issues.md").touch()
    settings = built_index.model_copy(update={"docs_dir": docs})
    checks = _index_checks(settings)
    assert checks["index freshness"].status == "warn"
    assert "reference/known-issues.md changed after the index was built" in checks["index freshness"].detail
    assert checks["index freshness"].fix and "gptoss-doctor index" in checks["index freshness"].fix


@slow
def test_an_old_github_sync_is_a_warning(built_index: Settings, caches: Any, tmp_path: Path) -> None:
    from indexer.embedding import load_embedder
    from indexer.store import Store

    data = tmp_path / "data"
    caches(data, index=True)
    settings = built_index.model_copy(update={"data_dir": data})
    with Store.open(settings, load_embedder(settings)) as store:
        commit_marks(store, [], {"vllm-project/vllm": datetime(2026, 1, 1, tzinfo=UTC)})
        synced = store.status().github_synced_at
    checks = _index_checks(settings, now=synced + timedelta(days=30))
    assert checks["github sync"].status == "warn"
    assert checks["github sync"].fix and "index --github" in checks["github sync"].fix
    assert _index_checks(settings, now=synced + timedelta(days=1))["github sync"].status == "ok"


def test_vocab_check_reports_a_missing_file_without_writing_it(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    check = check_vocab(settings)
    assert check.status == "fail" and "is missing" in check.detail
    assert check.fix and "doctor --fix" in check.fix
    assert not settings.vocab_dir.exists()
