"""Release placement of merged PRs: the sync against the fake GitHub's releases and compare API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from indexer.documents import Document, issue_id
from indexer.sources.github import SyncResult, make_client, sync_github
from indexer.sources.releases import Release, first_containing, release_version
from indexer.store import Store
from service.config import Settings
from tests.fakes import HashingEmbedder
from tests.github_fake import FakeGitHub, FakeThread, Fault, iter_requests

VLLM, HARMONY = "vllm-project/vllm", "openai/harmony"
T0 = datetime.fromisoformat("2025-09-01T00:00:00+00:00")
DAY = timedelta(days=1)


def pull(fake: FakeGitHub, repo: str, number: int, merged: datetime | None, **kw: object) -> None:
    fake.add_thread(
        FakeThread(
            repo,
            number,
            f"Fix harmony parsing {number}",
            "HarmonyError fix",
            created_at=T0,
            updated_at=(merged or T0) + timedelta(minutes=5),
            pull=True,
            state="closed" if merged else "open",
            merged_at=merged,
            closed_at=merged,
            **kw,  # type: ignore[arg-type]
        )
    )


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub([VLLM, HARMONY]) as server:
        server.add_release(VLLM, "v0.10.1", T0 + 2 * DAY)
        # Published after #101's merge but cut from a release branch before it: it does not contain it.
        server.add_release(VLLM, "v0.10.2", T0 + 12 * DAY, cut_at=T0 + 4 * DAY)
        server.add_release(VLLM, "v0.11.0rc1", T0 + 15 * DAY, prerelease=True)
        server.add_release(VLLM, "v0.11.0", T0 + 20 * DAY)
        server.add_release(HARMONY, "v0.0.4", T0 + 1 * DAY)
        pull(server, VLLM, 100, T0 + 3 * DAY)  # in v0.10.2
        pull(server, VLLM, 101, T0 + 5 * DAY)  # after v0.10.2's cut: first in v0.11.0
        pull(server, VLLM, 102, T0 + 25 * DAY)  # after the newest release: merged, unreleased
        pull(server, VLLM, 103, None)  # open: never placed
        pull(server, HARMONY, 7, T0)  # before harmony's only release
        yield server


@pytest.fixture
def settings(fake: FakeGitHub) -> Settings:
    return Settings(github_api_url=fake.base_url, github_timeout=1, github_retries=1, github_max_wait=60)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with Store.open(settings, HashingEmbedder(dimension=64)) as opened:
        yield opened


def sync(settings: Settings, store: Store, sleeps: list[float] | None = None) -> SyncResult:
    waits = [] if sleeps is None else sleeps
    return sync_github(settings, store, client=make_client(settings, per_page=50), sleep=waits.append)


def doc(store: Store, repo: str, number: int) -> Document:
    found = store.get(issue_id(repo, number))
    assert found is not None
    return found


def test_merged_prs_get_the_first_release_tag_that_contains_their_merge_commit(
    fake: FakeGitHub, settings: Settings, store: Store
) -> None:
    result = sync(settings, store)

    assert doc(store, VLLM, 100).released_in == "v0.10.2"
    assert doc(store, VLLM, 101).released_in == "v0.11.0"  # v0.10.2 was published later but cut earlier
    assert doc(store, HARMONY, 7).released_in == "v0.0.4"
    placed = doc(store, VLLM, 100)
    assert placed.merge_commit == fake.thread(VLLM, 100).merge_commit_sha
    assert placed.merged_at == T0 + 3 * DAY
    assert (placed.release_source, placed.release_checked) == ("github", "v0.11.0")
    assert doc(store, VLLM, 103).released_in is None and doc(store, VLLM, 103).release_checked is None
    assert (result.releases.placed, result.releases.unreleased) == (3, 1)
    assert not any("rc1" in r.path for r in iter_requests(fake, "")), "pre-releases are never compared"


def test_pr_merged_after_the_newest_release_is_merged_but_unreleased_until_a_release_has_it(
    fake: FakeGitHub, settings: Settings, store: Store
) -> None:
    sync(settings, store)
    unreleased = doc(store, VLLM, 102)
    assert unreleased.state == "merged"
    assert (unreleased.released_in, unreleased.release_checked) == (None, "v0.11.0")

    fake.add_release(VLLM, "v0.11.1", T0 + 30 * DAY)
    fake.reset_log()
    sync(settings, store)

    assert doc(store, VLLM, 102).released_in == "v0.11.1"
    assert list(iter_requests(fake, "...v0.11.1")), "the new release is compared"
    assert all("/pulls/" not in r.path for r in fake.requests), "the merge commit is cached"
    assert doc(store, VLLM, 100).released_in == "v0.10.2"  # placed PRs are not asked again
    assert not any(fake.thread(VLLM, 100).merge_commit_sha in r.path for r in fake.requests)


def test_idle_resync_with_releases_stays_within_ten_requests_and_compares_nothing(
    fake: FakeGitHub, settings: Settings, store: Store
) -> None:
    sync(settings, store)
    fake.reset_log()
    generation = store.generation()

    result = sync(settings, store)

    assert result.requests == fake.request_count() <= 10
    assert not [r for r in fake.requests if "/compare/" in r.path or "/pulls/" in r.path]
    assert store.generation() == generation


def test_rate_limit_during_the_release_check_keeps_the_last_good_data_and_the_next_run_finishes(
    fake: FakeGitHub, settings: Settings, store: Store
) -> None:
    sync(settings, store)
    fake.add_release(VLLM, "v0.11.1", T0 + 30 * DAY)
    before = doc(store, VLLM, 100)
    settings = settings.model_copy(update={"github_max_wait": 5})
    fake.add_fault(Fault("rate_limit", times=float("inf"), path="...v0.11.1", reset_in=3600))

    result = sync(settings, store)

    assert result.releases.stopped and "rate limit" in result.releases.stopped
    assert result.stopped_reason is None  # the threads were synced; only the release check stopped
    assert doc(store, VLLM, 100) == before
    assert doc(store, VLLM, 102).released_in is None  # not placed yet, and not marked as checked either
    assert doc(store, VLLM, 102).release_checked == "v0.11.0"

    fake.clear_faults()
    sync(settings, store)
    assert doc(store, VLLM, 102).released_in == "v0.11.1"


def test_an_error_on_one_pr_skips_it_and_places_the_others(
    fake: FakeGitHub, settings: Settings, store: Store
) -> None:
    fake.server_errors(float("inf"), status=502, path="/pulls/100")

    result = sync(settings, store)

    assert result.releases.failed == 1
    assert doc(store, VLLM, 100).released_in is None and doc(store, VLLM, 100).release_checked is None
    assert doc(store, VLLM, 101).released_in == "v0.11.0"
    fake.clear_faults()
    sync(settings, store)
    assert doc(store, VLLM, 100).released_in == "v0.10.2"


def test_release_versions_and_bisection() -> None:
    assert release_version("v0.10.1.1") is not None and release_version("v0.11.0rc1") is None
    assert release_version("nightly") is None
    tags = ["v0.9.0", "v0.10.0", "v0.10.1", "v0.10.2", "v0.11.0"]
    releases = [Release(release_version(t), t, None) for t in tags]  # type: ignore[arg-type]
    asked: list[str] = []

    def contains(tag: str) -> bool:
        asked.append(tag)
        return tags.index(tag) >= 3

    assert first_containing(releases, contains) == "v0.10.2"
    assert asked[0] == "v0.11.0" and len(asked) <= 4
    assert first_containing(releases, lambda tag: False) is None
