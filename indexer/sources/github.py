"""Incremental GitHub sync through PyGithub: thread selection, since-watermarks, rate limits, retries.

The ``github`` source (indexer/sources/base.py): its cursor maps each repository to its watermark.
Per repository, one or more listings sorted by ``updated_at`` ascending (the whole issue list, or the
selection labels plus a keyword search) are merged in time order and yielded in batches. Each batch
carries the repository's watermark, set to the newest ``updated_at`` it fully covers, and the store
commits the two together, so the watermark never passes uncommitted data: a crash, a kill or a
rate-limit stop leaves a store the next run resumes from. Listing queries are inclusive (``since=``,
``updated:>=``), so the thread at the watermark comes back on the next run and is recognised as
unchanged without a request.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import requests
from github import Auth, Github, GithubException
from github.GithubObject import GithubObject
from github.Requester import Requester

from indexer.documents import Document, SourceName, issue_id
from indexer.errors import RateLimited, SyncError
from indexer.meta import Cursor
from indexer.sources.base import Batch, SourceRun
from indexer.sources.github_threads import live_update, merge_live, parse_time, thread_document
from indexer.sources.releases import ReleaseCheck, release_batches

if TYPE_CHECKING:
    from indexer.config import IndexSettings

__all__ = ["SOURCE", "GitHubSource", "SyncResult", "github_batches", "make_client", "merge_live", "sync_github"]

logger = logging.getLogger(__name__)

PER_PAGE = 100
BATCH_SIZE = 100
COMMENTS_HEAD = 10
COMMENTS_TAIL = 20
SEARCH_LAG = timedelta(minutes=10)
"""GitHub's search index trails updates; search queries reach this far behind the watermark."""
MAX_RATE_WAITS = 5
SECONDARY_RATE_WAIT = 60.0
BACKOFF_BASE = 1.0
BACKOFF_MAX = 30.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


GITHUB = SourceName.GITHUB.value


class SyncReader(Protocol):
    """What the sync reads of the index (the collection being written)."""

    def get(self, doc_id: str) -> Document | None: ...
    def documents(self) -> list[Document]: ...


class SyncStore(SyncReader, Protocol):
    """The part of ``indexer.store.Store`` :func:`sync_github` uses."""

    def cursor(self, source: str) -> Cursor: ...
    def commit(self, docs: Sequence[Document], *, source: str, cursor: Cursor) -> Any: ...


def watermark(cursor: Cursor, repo: str) -> datetime | None:
    """The UTC time up to which ``repo`` is synced, from the github source's cursor."""
    value = cursor.get(repo)
    return datetime.fromisoformat(value) if value else None


@dataclass
class SyncResult:
    """What one sync did: thread counts, GitHub requests made, and why it stopped early (if it did)."""

    repos: list[str]
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    requests: int = 0
    stopped_reason: str | None = None
    releases: ReleaseCheck = field(default_factory=ReleaseCheck)
    watermarks: dict[str, datetime | None] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, stats: Any) -> None:
        """Add what the store did with one committed batch."""
        self.new += int(getattr(stats, "new", 0))
        self.updated += int(getattr(stats, "updated", 0))
        self.unchanged += int(getattr(stats, "unchanged", 0))

    def line(self) -> str:
        """One summary line for logs and the CLI."""
        text = (
            f"GitHub sync of {', '.join(self.repos)}: {self.new} new, {self.updated} updated, "
            f"{self.unchanged} unchanged, {self.requests} requests, {self.seconds:.1f}s"
        )
        placed = self.releases
        if placed.placed or placed.unreleased or placed.stopped:
            text += f"; releases: {placed.placed} PRs placed, {placed.unreleased} merged but unreleased"
            text += f" (stopped: {placed.stopped})" if placed.stopped else ""
        return f"{text} (stopped: {self.stopped_reason})" if self.stopped_reason else text


def make_client(settings: IndexSettings, *, per_page: int = PER_PAGE, pace: float | None = None) -> Github:
    """A lazy PyGithub client for ``settings.github_api_url`` (retries are ours, see ``_Transport``).

    ``pace`` spaces requests (seconds); by default PyGithub's 0.25 s for github.com and none for other
    hosts (GitHub Enterprise, local fakes).
    """
    token = settings.github_token.get_secret_value() if settings.github_token else None
    host = urlsplit(settings.github_api_url).hostname or ""
    if pace is None and (host == "github.com" or host.endswith(".github.com")):
        pace = 0.25
    return Github(
        base_url=settings.github_api_url.rstrip("/"),
        auth=Auth.Token(token) if token else None,
        # PyGithub asserts an int timeout.
        timeout=max(1, math.ceil(settings.github_timeout)),
        per_page=per_page,
        retry=None,
        lazy=True,
        seconds_between_requests=pace or None,
        seconds_between_writes=None,
        user_agent="gptoss-doctor",
    )


def _raw(obj: GithubObject) -> dict[str, Any]:
    # Not ``.raw_data``: on a listed (not completed) object it fetches the object again, one extra
    # request per thread (PyGithub 2.x CompletableGithubObject.raw_data calls _completeIfNeeded).
    return obj._rawData


def _path(url: str) -> str:
    return urlsplit(url).path or url


def _error_message(exc: GithubException) -> str:
    data = exc.data
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])[:200]
    return exc.message or ""


class _Transport:
    """Counts, retries and rate-limit-waits every REST call PyGithub makes through one Requester.

    Installed over the requester's ``requestJsonAndCheck`` (the one method every listing, page and
    completion goes through), so a failed page raises before PyGithub advances its pagination and a
    retry is transparent.
    """

    def __init__(
        self,
        requester: Requester,
        settings: IndexSettings,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
    ) -> None:
        self.requester = requester
        self.retries = settings.github_retries
        self.max_wait = settings.github_max_wait
        self.sleep = sleep
        self.clock = clock
        self.count = 0
        self._original: Callable[..., tuple[dict[str, Any], Any]] | None = None

    @contextmanager
    def installed(self) -> Iterator[_Transport]:
        self._original = self.requester.requestJsonAndCheck
        self.requester.requestJsonAndCheck = self  # type: ignore[method-assign]
        try:
            yield self
        finally:
            del self.requester.requestJsonAndCheck  # the class method shows through again

    def __call__(
        self,
        verb: str,
        url: str,
        parameters: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        input: Any | None = None,
        follow_302_redirect: bool = False,
    ) -> tuple[dict[str, Any], Any]:
        assert self._original is not None
        path = _path(url)
        failures = 0
        rate_waits = 0
        while True:
            self.count += 1
            try:
                response_headers, data = self._original(
                    verb, url, parameters, headers, input, follow_302_redirect=follow_302_redirect
                )
            except GithubException as exc:
                wait = self._rate_limit_wait(exc)
                if wait is not None:
                    rate_waits += 1
                    if rate_waits > MAX_RATE_WAITS:
                        raise RateLimited(
                            f"GitHub kept rate-limiting {path}; stopped, the next run resumes"
                        ) from None
                    logger.warning("GitHub rate limit on %s; waiting %.0fs for the reset", path, wait)
                    self.sleep(wait)
                    continue
                if exc.status >= 500 and failures < self.retries:
                    failures += 1
                    self._backoff(failures, f"GitHub answered {exc.status} for {path}")
                    continue
                raise self._sync_error(exc, path, failures) from None
            except requests.exceptions.RequestException as exc:
                kind = "timed out" if isinstance(exc, requests.exceptions.Timeout) else "failed to connect"
                if failures < self.retries:
                    failures += 1
                    self._backoff(failures, f"GitHub request for {path} {kind}")
                    continue
                raise SyncError(
                    f"GitHub request for {path} {kind} {failures + 1} times; stopped, the watermark is kept "
                    f"and the next run resumes"
                ) from None
            except ValueError as exc:  # json.JSONDecodeError: PyGithub parses the body itself
                raise SyncError(
                    f"GitHub returned malformed JSON for {path} ({exc.__class__.__name__}: "
                    f"{str(exc)[:120]}); nothing from that page was committed"
                ) from None
            self._check_shape(path, data)
            return response_headers, data

    def _backoff(self, failures: int, what: str) -> None:
        delay = min(BACKOFF_BASE * 2 ** (failures - 1), BACKOFF_MAX)
        logger.warning("%s; retry %d/%d in %.1fs", what, failures, self.retries, delay)
        self.sleep(delay)

    def _rate_limit_wait(self, exc: GithubException) -> float | None:
        """Seconds to wait for a rate limit (None: not one); RateLimited when beyond ``github_max_wait``."""
        hdrs = {k.lower(): str(v) for k, v in (exc.headers or {}).items()}
        message = _error_message(exc)
        limited = exc.status == 429 or (
            exc.status == 403
            and (
                hdrs.get("x-ratelimit-remaining") == "0"
                or "retry-after" in hdrs
                or "rate limit" in message.lower()
            )
        )
        if not limited:
            return None
        now = self.clock()
        if hdrs.get("retry-after", "").isdigit():
            reset = now + int(hdrs["retry-after"])
        elif hdrs.get("x-ratelimit-reset", "").isdigit():
            reset = float(hdrs["x-ratelimit-reset"]) + 1  # the reset happens within that second
        else:
            reset = now + SECONDARY_RATE_WAIT
        wait = max(0.0, reset - now)
        if wait > self.max_wait:
            at = datetime.fromtimestamp(reset, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            raise RateLimited(
                f"GitHub rate limit reached; it resets at {at} ({wait:.0f}s away, more than "
                f"github_max_wait={self.max_wait:g}s). Stopped cleanly; the next run resumes from the "
                f"watermark."
            )
        return wait

    def _sync_error(self, exc: GithubException, path: str, failures: int) -> SyncError:
        message = _error_message(exc)
        if exc.status >= 500:
            return SyncError(
                f"GitHub answered {exc.status} for {path} {failures + 1} times; stopped, the watermark is "
                f"kept and the next run resumes"
            )
        hint = ""
        if exc.status == 401:
            hint = " (check GITHUB_TOKEN / GPTOSS_DOCTOR_GITHUB_TOKEN)"
        elif exc.status == 404:
            hint = " (repository or thread not found, or not visible with this token)"
        return SyncError(f"GitHub answered {exc.status} for {path}: {message}{hint}")

    @staticmethod
    def _check_shape(path: str, data: Any) -> None:
        # A body that is not JSON at all becomes {"data": "<text>"} in PyGithub, which pagination would
        # then walk as if it were a list of threads.
        ok = True
        if path.endswith("/search/issues"):
            ok = isinstance(data, dict) and isinstance(data.get("items"), list)
        elif path.endswith(("/issues", "/comments")):
            ok = isinstance(data, list)
        elif isinstance(data, dict) and isinstance(data.get("data"), str) and set(data) <= {"data", "url"}:
            ok = False
        if not ok:
            raise SyncError(
                f"GitHub returned a malformed page for {path}; nothing from that page was committed"
            )


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _search_query(repo: str, keywords: Sequence[str], since: datetime | None) -> str:
    terms = [f'"{k}"' if not k.replace("_", "").isalnum() else k for k in keywords]
    query = f"{' OR '.join(terms)} repo:{repo}"
    if since is not None:
        query += f" updated:>={(since - SEARCH_LAG).strftime('%Y-%m-%dT%H:%M:%S')}+00:00"
    return query


Item = tuple[datetime, Any, dict[str, Any]]


TRUNCATED: dict[str, Any] = {"truncated": True}
"""Payload of the marker a search listing yields after its last item when GitHub cut the results short."""


def _listing(pages: Any, *, search: bool = False) -> Iterator[Item]:
    last = _EPOCH
    seen = 0
    for obj in pages:
        payload = _raw(obj)
        last = parse_time(payload.get("updated_at")) or _EPOCH
        seen += 1
        yield last, obj, payload
    # The search API returns at most 1,000 results (and flags timeouts as incomplete): threads after
    # the last one returned are unknown, so the run must not move the watermark past it. totalCount
    # is known from the pages already fetched: reading it costs no request.
    if search and seen and (seen < (pages.totalCount or 0) or pages.incomplete_results):
        yield last, None, TRUNCATED


def _streams(gh: Github, repo: str, settings: IndexSettings, since: datetime | None) -> list[Iterator[Item]]:
    """Listings of the repository's threads, each sorted by ``updated_at`` ascending."""
    repository = gh.get_repo(repo)  # lazy client: no request
    base: dict[str, Any] = {"state": "all", "sort": "updated", "direction": "asc"}
    if since is not None:
        base["since"] = since
    if repo in settings.github_whole_repos:
        return [_listing(repository.get_issues(**base))]
    streams = [_listing(repository.get_issues(labels=[label], **base)) for label in settings.github_labels]
    if settings.github_keywords:
        query = _search_query(repo, settings.github_keywords, since)
        streams.append(_listing(gh.search_issues(query, sort="updated", order="asc"), search=True))
    return streams


def _comments(obj: Any, count: int, per_page: int) -> list[dict[str, Any]]:
    """The first and the newest comments of a thread: one request, two when it has more than a page."""
    pages = obj.get_comments()
    first = [_raw(c) for c in pages.get_page(0)]
    if count > per_page:
        last = [_raw(c) for c in pages.get_page((count - 1) // per_page)]
        return first[:COMMENTS_HEAD] + last[-COMMENTS_TAIL:]
    return first[:COMMENTS_HEAD] + first[COMMENTS_HEAD:][-COMMENTS_TAIL:]


class _FixLinks:
    """Turns PRs' ``fixes`` into ``fixed_by`` on their targets, in the batch or already in the store."""

    def __init__(self, store: SyncReader) -> None:
        self.store = store
        self._fixers: dict[str, set[str]] | None = None

    def _index(self) -> dict[str, set[str]]:
        if self._fixers is None:  # loaded once per run, and only when something changed
            self._fixers = {}
            for doc in self.store.documents():
                for target in doc.fixes:
                    self._fixers.setdefault(target, set()).add(doc.id)
        return self._fixers

    def apply(self, docs: dict[str, Document]) -> list[Document]:
        fixers = self._index()
        for doc in docs.values():
            for target in doc.fixes:
                fixers.setdefault(target, set()).add(doc.id)
        out: dict[str, Document] = {}
        for doc_id, doc in docs.items():
            extra = fixers.get(doc_id, set()) - set(doc.fixed_by)
            if extra:
                doc = doc.model_copy(update={"fixed_by": sorted(set(doc.fixed_by) | extra)})
            out[doc_id] = doc
        for doc in docs.values():
            for target in doc.fixes:
                if target in out:
                    continue
                stored = self.store.get(target)
                if stored is not None and doc.id not in stored.fixed_by:
                    out[target] = stored.model_copy(update={"fixed_by": sorted({*stored.fixed_by, doc.id})})
        return list(out.values())


class _RepoSync:
    """One repository's pass: merge the listings, build documents, commit batches with the watermark."""

    def __init__(
        self,
        repo: str,
        store: SyncReader,
        links: _FixLinks,
        result: SyncResult,
        *,
        stored: datetime | None,
        full: bool,
        batch_size: int,
    ) -> None:
        self.repo = repo
        self.store = store
        self.links = links
        self.result = result
        self.full = full
        self.batch_size = batch_size
        self.pending: dict[str, Document] = {}
        self.kept = _utc(stored)  # the stored watermark: a full sync never moves it back
        self.stored_watermark = None if full else self.kept
        self.watermark = self.stored_watermark

    def run(self, gh: Github, settings: IndexSettings) -> Iterator[Batch]:
        seen: dict[int, datetime] = {}
        per_page = gh.per_page
        try:
            streams = _streams(gh, self.repo, settings, self.stored_watermark)
            merged = heapq.merge(*streams, key=lambda item: item[0])
            for updated, obj, payload in merged:
                if payload is TRUNCATED:
                    logger.warning(
                        "GitHub search results for %s end at %s (result cap); the next run continues there",
                        self.repo,
                        updated,
                    )
                    break
                number = int(payload["number"])
                if number in seen and seen[number] >= updated:
                    self._advance(updated)
                    continue  # the same thread from another listing
                seen[number] = updated
                doc_id = issue_id(self.repo, number)
                existing = self.pending.get(doc_id) or self.store.get(doc_id)
                if (
                    not self.full
                    and existing is not None
                    and existing.from_github
                    and _utc(existing.updated_at) == updated
                ):
                    self.result.unchanged += 1
                else:
                    count = int(payload.get("comments") or 0)
                    comments = _comments(obj, count, per_page) if count > 0 else []
                    live = thread_document(self.repo, payload, comments)
                    self.pending[doc_id] = live_update(existing, live)
                self._advance(updated)
                if len(self.pending) >= self.batch_size:
                    yield from self.commit()
        except SyncError:
            # Everything processed before the failing request is complete: keep it.
            yield from self.commit()
            raise
        yield from self.commit()

    def _advance(self, updated: datetime) -> None:
        if updated != _EPOCH and (self.watermark is None or updated > self.watermark):
            self.watermark = updated

    def commit(self) -> Iterator[Batch]:
        """The pending documents with the watermark they reach (committed by the consumer on yield)."""
        if not self.pending and self.watermark == self.stored_watermark:
            return
        docs = self.links.apply(self.pending) if self.pending else []
        mark = self.watermark
        if mark is not None and self.kept is not None and self.kept > mark:
            mark = self.kept
        yield Batch(docs, {self.repo: mark.isoformat()} if mark is not None else {})
        self.pending = {}
        self.stored_watermark = self.watermark
        self.result.watermarks[self.repo] = self.watermark
        logger.info("committed %d documents for %s; watermark %s", len(docs), self.repo, self.watermark)


def github_batches(
    settings: IndexSettings,
    store: SyncReader,
    cursor: Cursor,
    result: SyncResult,
    *,
    full: bool = False,
    client: Github | None = None,
    batch_size: int = BATCH_SIZE,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> Generator[Batch, None, None]:
    """Batches of ``settings.repos`` threads since each repository's watermark in ``cursor`` (``full``: from
    scratch), each with the cursor it reaches; then merged PRs with their first release
    (``indexer.sources.releases``). The consumer commits each batch before asking for the next.

    Raises SyncError when GitHub fails beyond the retries or returns a malformed page (batches already
    yielded stay); a rate limit whose reset is further away than ``github_max_wait`` stops the run
    cleanly with ``result.stopped_reason`` set. ``sleep`` and ``clock`` are injectable for tests.
    """
    started = time.monotonic()
    gh = client if client is not None else make_client(settings)
    if not gh.requester.is_lazy:
        gh = gh.withLazy(True)  # a non-lazy get_repo() costs a request per repository
    transport = _Transport(gh.requester, settings, sleep=sleep, clock=clock)
    links = _FixLinks(store)
    try:
        with transport.installed():
            for repo in settings.repos:
                stored = watermark(cursor, repo)
                repo_sync = _RepoSync(repo, store, links, result, stored=stored, full=full, batch_size=batch_size)
                result.watermarks[repo] = repo_sync.watermark
                try:
                    yield from repo_sync.run(gh, settings)
                except RateLimited as exc:
                    result.stopped_reason = str(exc)
                    logger.warning("GitHub sync stopped at %s: %s", repo, exc)
                    break
            if result.stopped_reason is None:
                # Threads first: the release check only spends what is left of the budget.
                for placed in release_batches(gh, store, settings.repos, result.releases):
                    yield Batch(placed, {})
    finally:
        result.requests = transport.count
        result.seconds = time.monotonic() - started
    logger.info(result.line())


def sync_github(
    settings: IndexSettings,
    store: SyncStore,
    *,
    full: bool = False,
    client: Github | None = None,
    batch_size: int = BATCH_SIZE,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> SyncResult:
    """Sync ``settings.repos`` into ``store`` (:func:`github_batches`, each batch committed with its cursor)."""
    result = SyncResult(repos=list(settings.repos))
    batches = github_batches(
        settings,
        store,
        store.cursor(GITHUB),
        result,
        full=full,
        client=client,
        batch_size=batch_size,
        sleep=sleep,
        clock=clock,
    )
    try:
        for batch in batches:
            result.count(store.commit(batch.documents, source=GITHUB, cursor=batch.cursor or {}))
    finally:
        batches.close()
    return result


class GitHubSource:
    """Issues and pull requests of ``settings.repos``, incrementally (``index --github``, ``serve``'s sync)."""

    name = GITHUB
    complete = False
    network = True

    def fetch(self, run: SourceRun, cursor: Cursor) -> Iterator[Batch]:
        result = SyncResult(repos=list(run.settings.repos))
        try:
            yield from github_batches(run.settings, run.store, cursor, result, full=run.full, client=run.github_client)
        finally:
            run.skipped += result.unchanged
            run.requests += result.requests
            run.stopped = result.stopped_reason
            run.notes["github"] = result


SOURCE = GitHubSource()
