"""The source seam (indexer/sources/base.py): a new source plugs in with one registration, keeps its cursor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from indexer.build import build_index
from indexer.documents import DocKind, Document
from indexer.meta import Cursor
from indexer.sources.base import Batch, Source, SourceRun, register, registered, unregister
from indexer.store import Store
from service.config import Settings
from tests.fakes import HashingEmbedder

REPO = "example-org/tracker"  # not in the bundled KB


class Tracker:
    """Another project's issue tracker: threads numbered from the cursor's ``next`` on, two per run."""

    name = "tracker"
    complete = False
    network = False

    def __init__(self) -> None:
        self.cursors: list[Cursor] = []

    def fetch(self, run: SourceRun, cursor: Cursor) -> Iterator[Batch]:
        self.cursors.append(dict(cursor))
        start = int(cursor.get("next", "1"))
        for number in (start, start + 1):
            doc = Document(
                id=f"{REPO}#{number}",
                kind=DocKind.ISSUE,
                repo=REPO,
                number=number,
                title=f"gpt-oss tool call fails #{number}",
                text=f"openai_harmony.HarmonyError: unexpected token in tracker thread {number}",
                sources=[self.name],
            )
            yield Batch([doc], {"next": str(number + 1)})


@pytest.fixture
def tracker() -> Iterator[Tracker]:
    source = Tracker()
    register(source)
    yield source
    unregister(source.name)


def test_a_registered_source_is_indexed_and_resumes_from_its_cursor(
    settings: Settings, embedder: HashingEmbedder, tracker: Tracker
) -> None:
    assert isinstance(tracker, Source)
    assert [s.name for s in registered(network=False)] == ["docs", "snapshot", "tracker"]

    first = build_index(settings, embedder=embedder, progress=False)
    second = build_index(settings, embedder=embedder, progress=False)

    assert tracker.cursors == [{}, {"next": "3"}]
    assert (first.issues_new - second.issues_new, second.issues_new) == (first.issues_new - 2, 2)
    with Store.open(settings, embedder, read_only=True) as store:
        assert store.cursor("tracker") == {"next": "5"}
        status = store.status()
        assert status.cursors["tracker"].cursor == {"next": "5"} and status.synced_at("tracker") is not None
        threads = sorted(d.number or 0 for d in store.documents() if d.repo == REPO)
        assert threads == [1, 2, 3, 4]
        assert store.get(f"{REPO}#4") is not None and store.get(f"{REPO}#4").sources == ["tracker"]  # type: ignore[union-attr]


def test_a_full_rebuild_keeps_an_incremental_sources_documents_and_cursor(
    settings: Settings, embedder: HashingEmbedder, tracker: Tracker
) -> None:
    build_index(settings, embedder=embedder, progress=False)
    unregister(tracker.name)  # a rebuild that does not run the source carries its threads over

    build_index(settings, embedder=embedder, progress=False, full=True)

    with Store.open(settings, embedder, read_only=True) as store:
        assert sorted(d.number or 0 for d in store.documents() if d.repo == REPO) == [1, 2]
        assert store.cursor("tracker") == {"next": "3"}


def test_register_refuses_what_is_not_a_source() -> None:
    with pytest.raises(TypeError, match="not a Source"):
        register(object())  # type: ignore[arg-type]
