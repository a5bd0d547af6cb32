"""build_index and the `index` CLI: docs + bundled KB into the real embedded Chroma (fake embedder)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from indexer.build import build_index
from indexer.errors import StoreLocked
from indexer.sources.cards import bundled_cards
from indexer.store import Store
from indexer.store_health import SELF_CHECK
from service.cli import main
from service.config import Settings
from tests.fakes import HashingEmbedder, github_mark, store_held_by_another_process
from tests.indexer.conftest import REFERENCE, write_docs

CARDS = len(bundled_cards())
SECTIONS = 6  # the tiny docs of conftest: 3 in SKILL.md (preamble, 2 headings), 3 in known-issues.md


def test_first_build_indexes_docs_and_cards_then_skips_unchanged(
    settings: Settings, embedder: HashingEmbedder
) -> None:
    first = build_index(settings, embedder=embedder, progress=False)
    assert first.sections == SECTIONS and first.cards == CARDS
    assert first.documents == CARDS + SECTIONS
    assert (first.issues_new, first.issues_updated, first.issues_unchanged) == (CARDS, 0, 0)
    assert first.embedded == CARDS + SECTIONS == embedder.texts
    assert first.github_requests == 0
    assert f"indexed {CARDS + SECTIONS} documents" in first.line() and "GitHub requests: 0" in first.line()

    second = build_index(settings, embedder=embedder, progress=False)
    assert (second.issues_new, second.issues_updated, second.issues_unchanged) == (0, 0, CARDS)
    # Nothing re-embedded; the writer's vector self-check embeds its small sample again (indexer/store_health.py).
    assert second.embedded == 0 and embedder.texts == CARDS + SECTIONS + SELF_CHECK
    assert second.generation == first.generation

    with Store.open(settings, embedder, read_only=True) as store:
        status = store.status()
    assert status.documents == CARDS + SECTIONS and status.issues == CARDS
    assert status.last_run["ok"] is True and status.built_at
    assert status.last_run["summary"]["documents"] == CARDS + SECTIONS


def test_changed_and_removed_doc_sections_are_updated_and_dropped(
    settings: Settings, embedder: HashingEmbedder, docs_dir: Path
) -> None:
    build_index(settings, embedder=embedder, progress=False)
    before = embedder.texts
    edited = REFERENCE.replace("Use `--enable-auto-tool-choice`", "Always pass `--enable-auto-tool-choice`")
    edited = edited.replace("## Harmony token errors\n\n### Unexpected token 200002", "## Renamed")
    write_docs(docs_dir, reference=edited)
    summary = build_index(settings, embedder=embedder, progress=False)
    assert summary.removed == 1  # the old "unexpected-token-200002" anchor
    assert summary.embedded == embedder.texts - before - SELF_CHECK == 2  # the renamed and the edited section
    assert summary.issues_unchanged == CARDS
    with Store.open(settings, embedder, read_only=True) as store:
        ids = {d.id for d in store.documents() if d.kind == "reference-section"}
    assert "reference/known-issues.md#renamed" in ids
    assert "reference/known-issues.md#unexpected-token-200002" not in ids


def test_full_rebuild_re_embeds_into_a_new_generation(settings: Settings, embedder: HashingEmbedder) -> None:
    first = build_index(settings, embedder=embedder, progress=False)
    full = build_index(settings, embedder=embedder, full=True, progress=False)
    assert full.full and full.embedded == CARDS + SECTIONS
    assert full.generation != first.generation
    assert full.documents == first.documents
    assert "(full rebuild)" in full.line()


class FailingEmbedder(HashingEmbedder):
    """Embeds until told to fail (a crash in the middle of a rebuild)."""

    fail = False

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise RuntimeError("the embedder died")
        return super().encode(texts)


def test_failed_full_rebuild_leaves_the_last_good_index_serving(settings: Settings) -> None:
    embedder = FailingEmbedder(dimension=64)
    good = build_index(settings, embedder=embedder, progress=False)
    embedder.fail = True
    with pytest.raises(RuntimeError, match="embedder died"):
        build_index(settings, embedder=embedder, full=True, progress=False)
    with Store.open(settings, embedder, read_only=True) as store:
        assert store.generation() == good.generation
        assert store.count() == good.documents
        status = store.status()
    assert status.last_run["ok"] is False and "embedder died" in status.last_run["error"]
    # Only the serving collection is left once the next rebuild runs.
    embedder.fail = False
    build_index(settings, embedder=embedder, full=True, progress=False)
    from indexer.chroma_client import make_client

    names = sorted(c.name for c in make_client(settings).list_collections())
    assert len([n for n in names if n.startswith(f"{settings.collection}__g")]) == 1


def test_full_rebuild_repairs_a_corrupt_store(settings: Settings, embedder: HashingEmbedder) -> None:
    from chromadb.api.shared_system_client import SharedSystemClient

    build_index(settings, embedder=embedder, progress=False)
    SharedSystemClient.clear_system_cache()
    (settings.chroma_dir / "chroma.sqlite3").write_bytes(b"garbage" * 1000)
    summary = build_index(settings, embedder=embedder, full=True, progress=False)
    assert summary.documents == CARDS + SECTIONS


def test_build_refuses_while_another_process_holds_the_store(settings: Settings, embedder: HashingEmbedder) -> None:
    with store_held_by_another_process() as pid:
        with pytest.raises(StoreLocked, match=f"pid {pid}"):
            build_index(settings, embedder=embedder, progress=False)
        result = CliRunner().invoke(main, ["index", "--no-progress"], obj={"embedder": embedder})
        assert result.exit_code == 75
        assert f"held by pid {pid}" in result.output
    assert build_index(settings, embedder=embedder, progress=False).documents == CARDS + SECTIONS


def test_cli_index_prints_the_summary_line(
    settings: Settings, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(settings.docs_dir))
    runner = CliRunner()
    result = runner.invoke(main, ["index", "--no-progress"], obj={"embedder": embedder})
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"indexed {CARDS + SECTIONS} documents") and f"issues: {CARDS} new" in last
    assert "GitHub requests: 0" in last
    again = runner.invoke(main, ["index", "--no-progress", "--json"], obj={"embedder": embedder})
    assert again.exit_code == 0, again.output
    summary = json.loads(again.output.strip().splitlines()[-1])
    assert summary["issues_unchanged"] == CARDS and summary["embedded"] == 0


def test_cli_index_reports_a_corrupt_store_without_a_traceback(
    settings: Settings, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chromadb.api.shared_system_client import SharedSystemClient

    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(settings.docs_dir))
    build_index(settings, embedder=embedder, progress=False)
    SharedSystemClient.clear_system_cache()
    (settings.chroma_dir / "chroma.sqlite3").write_bytes(b"garbage" * 1000)
    result = CliRunner().invoke(main, ["index", "--no-progress"], obj={"embedder": embedder})
    assert result.exit_code == 1
    assert "gptoss-doctor index --full" in result.output
    assert "Traceback" not in result.output


def test_cli_logs_are_structured_without_a_terminal(
    settings: Settings, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(settings.docs_dir))
    result = CliRunner().invoke(main, ["index"], obj={"embedder": embedder})
    assert result.exit_code == 0, result.output
    steps = [line for line in result.output.splitlines() if "step=" in line]
    assert steps and all(line.startswith("ts=") and "level=info" in line for line in steps)


@pytest.mark.slow
def test_cli_index_with_the_real_model_end_to_end(
    settings: Settings, real_embedder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes import install_model_cache

    install_model_cache(settings.data_dir)  # the session's ONNX export, so this run does not re-export
    monkeypatch.setenv("GPTOSS_DOCTOR_DOCS_DIR", str(settings.docs_dir))
    result = CliRunner().invoke(main, ["index", "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["embedder"] == "all-MiniLM-L6-v2/onnx-int8"
    assert summary["documents"] == CARDS + SECTIONS and summary["embedded"] == CARDS + SECTIONS
    assert summary["seconds"] < 60
    with Store.open(settings, real_embedder, read_only=True) as store:  # type: ignore[arg-type]
        query = "HarmonyError: Unexpected token 200002 while expecting start token 200006"
        hits = store.query(real_embedder.encode([query])[0], k=5)  # type: ignore[attr-defined]
    assert "reference/known-issues.md#unexpected-token-200002" in [i for i, _ in hits]


def test_index_github_syncs_after_the_docs_and_reports_requests(
    settings: Settings, embedder: HashingEmbedder
) -> None:
    from tests.github_fake import FakeGitHub

    harmony = [c for c in bundled_cards() if c.repo == "openai/harmony"][:6]
    with FakeGitHub(["vllm-project/vllm", "openai/harmony"]) as fake:
        fake.seed_cards(harmony)
        synced = settings.model_copy(update={"github_api_url": fake.base_url, "github_timeout": 5.0})
        first = build_index(synced, embedder=embedder, github=True, progress=False)
        assert first.github_requests == fake.request_count() > 0
        assert first.github_stopped is None
        with Store.open(synced, embedder, read_only=True) as store:
            merged = store.get_many([c.id for c in harmony])
            assert github_mark(store, "openai/harmony") is not None
        assert len(merged) == len(harmony)
        assert all("github" in d.sources and d.curated for d in merged.values())
        # An idle re-run: nothing re-embedded, the merged live threads kept, few requests.
        fake.reset_log()
        texts = embedder.texts
        idle = build_index(synced, embedder=embedder, github=True, progress=False)
        assert idle.embedded == 0 and embedder.texts == texts + SELF_CHECK  # the writer's vector self-check
        assert idle.github_requests == fake.request_count() <= 10
        # A docs-only run does not undo the GitHub merge of those cards.
        docs_only = build_index(synced, embedder=embedder, progress=False)
        assert docs_only.issues_updated == 0 and docs_only.generation == idle.generation


def test_the_snapshot_manifest_describes_the_bundled_cards() -> None:
    """SNAPSHOT.json's count and sha256 are those of cards.jsonl: a card edit updates the manifest too."""
    import hashlib

    from indexer.sources.cards import CARDS_PATH, snapshot_meta

    meta = snapshot_meta()
    assert meta["cards"] == CARDS
    assert meta["sha256"] == hashlib.sha256(CARDS_PATH.read_bytes()).hexdigest()
