"""Which release first ships a merged PR: the merge commit compared with the repository's release tags.

For each merged PR the sync stored, it records the merge commit, the first release tag that contains it
(``released_in``) and the newest tag it was compared with (``release_checked``). What is known is kept:
a PR already placed in a release costs nothing again; a merged but unreleased PR is compared once more
only when a newer release appears; a repository with no PR left to place costs no request at all. A
rate limit or an error stops the check and leaves the last good data (the next run continues).

Containment comes from GitHub's compare API (``base=<merge sha>...head=<tag>`` answers ``ahead`` or
``identical`` when the tag's history includes the commit). Releases published before the merge cannot
contain it; among the later ones (final releases, in version order) the first that does is found by
bisection, so a PR costs one request for its merge commit and a few compares.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from github import Github
from packaging.version import InvalidVersion, Version

from indexer.documents import Document, ReleaseSource, ThreadKind
from indexer.errors import RateLimited, SyncError
from indexer.sources.github_threads import parse_time

logger = logging.getLogger(__name__)

MAX_PRS_PER_RUN = 200
"""PRs placed per run at most; the rest wait for the next run (a first sync on 60 requests an hour)."""
CONTAINS = frozenset({"ahead", "identical"})


class ReleaseReader(Protocol):
    """What the release check reads of the index."""

    def documents(self) -> list[Document]: ...


@dataclass(frozen=True, order=True)
class Release:
    """A final (not draft, not pre-release) release: its version, tag and publication time."""

    version: Version
    tag: str
    published_at: datetime | None


def release_version(tag: str) -> Version | None:
    """``v0.11.0`` -> 0.11.0; None for tags that are not versions (``nightly``) or are pre-releases."""
    try:
        version = Version(tag.removeprefix("v").removeprefix("V"))
    except InvalidVersion:
        return None
    return None if version.is_prerelease or version.is_devrelease else version


def releases_from(payloads: Sequence[dict[str, Any]]) -> list[Release]:
    """The final releases of a releases listing, oldest version first."""
    found: list[Release] = []
    for payload in payloads:
        tag = str(payload.get("tag_name") or "")
        version = release_version(tag)
        if version is None or payload.get("draft") or payload.get("prerelease"):
            continue
        found.append(Release(version, tag, parse_time(payload.get("published_at") or payload.get("created_at"))))
    return sorted(found)


def pending(doc: Document, repo: str, newest: str | None) -> bool:
    """True when a merged PR of ``repo`` still needs comparing with the releases up to ``newest``."""
    if doc.repo != repo or doc.state != "merged" or (doc.release_source is ReleaseSource.GITHUB and doc.released_in):
        return False
    if doc.thread_kind is not ThreadKind.PULL:
        return False
    return newest is None or doc.release_checked != newest


def first_containing(releases: Sequence[Release], contains: Callable[[str], bool]) -> str | None:
    """The first release (in version order) whose tag contains the commit; None when none does.

    Bisection assumes containment is monotone over the versions (a commit on the main line stays in
    every later release). The newest release is asked first: a miss there means merged but unreleased.
    """
    if not releases or not contains(releases[-1].tag):
        return None
    lo, hi = 0, len(releases) - 1  # releases[hi] contains it
    while lo < hi:
        mid = (lo + hi) // 2
        if contains(releases[mid].tag):
            hi = mid
        else:
            lo = mid + 1
    return releases[hi].tag


class _RepoReleases:
    """One repository's release check, through the sync's counted, rate-limit-aware client."""

    def __init__(self, gh: Github, repo: str) -> None:
        self.repo = repo
        self.repository = gh.get_repo(repo)  # lazy: no request
        self._releases: list[Release] | None = None

    def releases(self) -> list[Release]:
        if self._releases is None:
            # One page, newest first: 100 releases reach back further than any PR the KB cites.
            page = self.repository.get_releases().get_page(0)
            self._releases = releases_from([r._rawData for r in page])
        return self._releases

    def place(self, doc: Document) -> Document:
        """The PR with its merge commit, merge date and first release recorded."""
        assert doc.number is not None
        sha, merged_at = doc.merge_commit, doc.merged_at
        if sha is None or merged_at is None:
            pull = self.repository.get_pull(doc.number)
            sha = pull.merge_commit_sha  # completes the lazy object: one request
            merged_at = parse_time(pull._rawData.get("merged_at")) or merged_at
        releases = self.releases()
        if not sha:
            raise SyncError(f"GitHub shows no merge commit for {doc.id}")
        later = [r for r in releases if merged_at is None or r.published_at is None or r.published_at >= merged_at]

        def contains(tag: str) -> bool:
            return self.repository.compare(sha, tag).status in CONTAINS

        released_in = first_containing(later, contains)
        return doc.model_copy(
            update={
                "merge_commit": sha,
                "merged_at": merged_at,
                "released_in": released_in,
                "release_checked": releases[-1].tag if releases else None,
                "release_source": ReleaseSource.GITHUB,
            }
        )


@dataclass
class ReleaseCheck:
    """What one release check did."""

    placed: int = 0
    unreleased: int = 0
    failed: int = 0
    stopped: str | None = None


def release_batches(
    gh: Github, store: ReleaseReader, repos: Sequence[str], outcome: ReleaseCheck, *, limit: int = MAX_PRS_PER_RUN
) -> Iterator[list[Document]]:
    """The merged PRs of ``repos`` in ``store`` not placed yet, with their first release: one batch per
    repository, for the consumer to commit (``outcome`` counts what was placed).

    Requests go through ``gh`` (the sync installs its counting, retrying transport on it). A rate limit
    stops the check; an error on one PR skips it; either way what was placed before is yielded.
    """
    docs = store.documents()
    budget = limit
    for repo in repos:
        candidates = [d for d in docs if pending(d, repo, None)]
        if not candidates:
            continue  # nothing to place: not even the releases listing is requested
        check = _RepoReleases(gh, repo)
        updated: list[Document] = []
        try:
            releases = check.releases()
            if not releases:
                continue  # no final release to compare with: nothing to record
            newest = releases[-1].tag
            for doc in (d for d in candidates if pending(d, repo, newest)):
                if budget <= 0:
                    outcome.stopped = f"more than {limit} PRs to place; the next run continues"
                    break
                budget -= 1
                try:
                    placed = check.place(doc)
                except SyncError as exc:
                    if isinstance(exc, RateLimited):
                        raise
                    outcome.failed += 1
                    logger.warning("release check of %s failed: %s", doc.id, exc)
                    continue
                updated.append(placed)
                if placed.released_in:
                    outcome.placed += 1
                else:
                    outcome.unreleased += 1
        except RateLimited as exc:
            outcome.stopped = str(exc)
        except SyncError as exc:
            outcome.stopped = f"release listing of {repo} failed: {exc}"
        finally:
            if updated:
                yield updated
        if outcome.stopped:
            logger.warning("release check stopped: %s", outcome.stopped)
            break
