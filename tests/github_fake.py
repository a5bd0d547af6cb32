"""A real local HTTP server that speaks enough of the GitHub REST API for the sync, with fault modes.

``FakeGitHub`` runs a ``ThreadingHTTPServer`` on 127.0.0.1 (random port) in a thread and serves under
``/api/v3`` (the GitHub Enterprise layout, so PyGithub is pointed at it with ``base_url``):

- ``GET /repos/{o}/{r}``, ``/repos/{o}/{r}/issues`` (state, labels, since, sort, direction, per_page,
  page; ``Link`` rel=next/last with absolute URLs), ``/repos/{o}/{r}/issues/{n}``,
  ``/repos/{o}/{r}/issues/{n}/comments``, ``/repos/{o}/{r}/pulls/{n}`` (with ``merge_commit_sha``),
  ``/search/issues`` (q with repo:, is:, label:, state:, updated:/created: comparisons, keywords joined by
  OR or AND), ``/rate_limit``, ``/repos/{o}/{r}/releases`` (newest first, paginated) and
  ``/repos/{o}/{r}/compare/{base}...{head}``.

History is linear per repository: a merged PR's merge commit lands at its ``merged_at``, and a release
tag (``add_release``) contains every commit merged up to its ``cut_at`` (default: its publication time),
so a compare of a merge commit with a tag answers ``ahead`` (the tag contains it) or ``behind``.

Threads are seeded from KB cards (realistic bodies: template boilerplate, collect_env output, a
traceback) and changed by tests (``update_thread``, ``add_comment``, ``add_thread``). Every request is
recorded (path, query, headers). Faults (``Fault``) answer matching requests with a 403 rate limit,
a 5xx, a slow response, a malformed JSON body, or a delay that signals an event when it starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shlex
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from indexer.documents import Card

PREFIX = "/api/v3"
_QUALIFIERS = {"repo", "is", "label", "state", "updated", "created"}
LIST_SUFFIXES = ("/issues", "/search/issues")


def iso(value: datetime | None) -> str | None:
    """GitHub's timestamp format."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


@dataclass
class FakeComment:
    """One issue comment."""

    id: int
    user: str
    body: str
    created_at: datetime
    updated_at: datetime
    association: str = "NONE"


@dataclass
class FakeThread:
    """One issue or pull request as the fake stores it."""

    repo: str
    number: int
    title: str
    body: str
    state: str = "open"
    labels: list[str] = field(default_factory=list)
    user: str = "octocat"
    created_at: datetime = field(default_factory=lambda: datetime(2025, 8, 5, tzinfo=UTC))
    updated_at: datetime = field(default_factory=lambda: datetime(2025, 8, 5, tzinfo=UTC))
    closed_at: datetime | None = None
    pull: bool = False
    merged_at: datetime | None = None
    comments: list[FakeComment] = field(default_factory=list)
    merge_commit_sha: str | None = None
    association: str = "NONE"
    """GitHub's author_association of the author: NONE (an outside account), MEMBER, OWNER, ..."""


@dataclass
class FakeRelease:
    """A release: its tag contains every commit merged up to ``cut_at``."""

    repo: str
    tag: str
    published_at: datetime
    cut_at: datetime
    id: int
    draft: bool = False
    prerelease: bool = False


@dataclass
class Fault:
    """A misbehaviour for matching requests: after ``skip`` matching requests, the next ``times`` fail.

    kind: ``rate_limit`` (403, X-RateLimit-Remaining 0, reset ``reset_in`` seconds away), ``error``
    (``status``), ``slow`` (sleep ``delay`` then answer normally), ``malformed`` (truncated JSON), or
    ``hold`` (sleep ``delay`` and set ``started`` when the request arrives, then answer normally).
    ``path`` matches the end of the path (e.g. ``/issues``); ``page`` the page number (1 when absent).
    """

    kind: str
    times: float = 1
    skip: int = 0
    path: str | None = None
    page: int | None = None
    status: int = 502
    delay: float = 0.0
    reset_in: float = 30.0
    started: threading.Event = field(default_factory=threading.Event)
    hits: int = 0

    def matches(self, path: str, page: int) -> bool:
        if self.path is not None and not path.endswith(self.path):
            return False
        return self.page is None or self.page == page


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    status: int = 0


class FakeGitHub:
    """The fake GitHub: data, faults, request log, and the HTTP server serving them."""

    def __init__(self, repos: Iterable[str] = ("vllm-project/vllm", "openai/harmony")) -> None:
        self.repos = list(repos)
        self.threads: dict[tuple[str, int], FakeThread] = {}
        self.releases: list[FakeRelease] = []
        self.faults: list[Fault] = []
        self.requests: list[Recorded] = []
        self.lock = threading.RLock()
        self.clock = datetime(2025, 8, 5, tzinfo=UTC)
        self._comment_ids = 1000
        self.search_cap = 1000  # GitHub's search API returns at most this many results
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._host: str | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        self._stopping.clear()
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # stop() joins the handler threads, so no request outlives the test that made it.
        self._server.daemon_threads = False
        self._server.block_on_close = True
        self._host = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._stopping.set()  # wakes held and slow requests, so closing the server joins them at once
            self._server.shutdown()
            with self.lock:
                open_connections = list(self._connections)
            for connection in open_connections:  # an idle keep-alive connection would block the join
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        # Kept after stop(): a handler thread still answering builds its links from it.
        assert self._host is not None, "the fake is not started"
        return self._host

    @property
    def base_url(self) -> str:
        """What GPTOSS_DOCTOR_GITHUB_API_URL points at."""
        return self.host + PREFIX

    # -- data ------------------------------------------------------------------------------------

    def tick(self, minutes: int = 1) -> datetime:
        """Advance the fake's clock; mutations are stamped with it."""
        with self.lock:
            self.clock += timedelta(minutes=minutes)
            return self.clock

    def add_thread(self, thread: FakeThread) -> FakeThread:
        with self.lock:
            _give_merge_commit(thread)
            self.threads[(thread.repo, thread.number)] = thread
            self.clock = max(self.clock, thread.updated_at)
        return thread

    def thread(self, repo: str, number: int) -> FakeThread:
        return self.threads[(repo, number)]

    def update_thread(self, repo: str, number: int, **changes: Any) -> FakeThread:
        """Change fields of a thread and bump its ``updated_at``."""
        with self.lock:
            thread = self.threads[(repo, number)]
            for name, value in changes.items():
                setattr(thread, name, value)
            thread.updated_at = self.tick()
            if changes.get("state") == "closed" and thread.closed_at is None:
                thread.closed_at = thread.updated_at
            _give_merge_commit(thread)
            return thread

    def add_release(
        self,
        repo: str,
        tag: str,
        published_at: datetime,
        *,
        cut_at: datetime | None = None,
        draft: bool = False,
        prerelease: bool = False,
    ) -> FakeRelease:
        """A release of ``repo`` whose tag holds every commit merged up to ``cut_at`` (default: published)."""
        with self.lock:
            release = FakeRelease(
                repo, tag, published_at, cut_at or published_at, 7000 + len(self.releases), draft, prerelease
            )
            self.releases.append(release)
            return release

    def release_payload(self, r: FakeRelease) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{r.repo}"
        return {
            "url": f"{api}/releases/{r.id}",
            "html_url": f"https://github.com/{r.repo}/releases/tag/{r.tag}",
            "id": r.id,
            "tag_name": r.tag,
            "target_commitish": "main",
            "name": r.tag,
            "draft": r.draft,
            "prerelease": r.prerelease,
            "created_at": iso(r.cut_at),
            "published_at": iso(r.published_at),
            "author": {"login": "release-bot", "id": 1, "type": "User"},
            "assets": [],
            "body": f"Release {r.tag}.",
        }

    def list_releases(self, repo: str) -> list[FakeRelease]:
        with self.lock:
            found = [r for r in self.releases if r.repo == repo]
        return sorted(found, key=lambda r: r.published_at, reverse=True)

    def _ref_time(self, repo: str, ref: str) -> datetime:
        """Where a ref sits on the linear history: a release's cut, or a merge commit's merge time."""
        with self.lock:
            for release in self.releases:
                if release.repo == repo and release.tag == ref:
                    return release.cut_at
            for (r, _), t in self.threads.items():
                if r == repo and t.merge_commit_sha == ref and t.merged_at is not None:
                    return t.merged_at
        raise KeyError(ref)

    def compare(self, repo: str, base: str, head: str) -> dict[str, Any]:
        """GitHub's compare body (status and counts; no commit list) for two refs on the linear history."""
        base_at, head_at = self._ref_time(repo, base), self._ref_time(repo, head)
        status = "identical" if base_at == head_at else "ahead" if base_at < head_at else "behind"
        ahead = 1 if status == "ahead" else 0
        behind = 1 if status == "behind" else 0
        return {
            "url": f"{self.base_url}/repos/{repo}/compare/{base}...{head}",
            "html_url": f"https://github.com/{repo}/compare/{base}...{head}",
            "status": status,
            "ahead_by": ahead,
            "behind_by": behind,
            "total_commits": ahead,
            "commits": [],
            "files": [],
        }

    def add_comment(
        self, repo: str, number: int, body: str, user: str = "commenter", association: str = "NONE"
    ) -> FakeComment:
        """Add a comment (GitHub bumps the thread's ``updated_at``)."""
        with self.lock:
            thread = self.threads[(repo, number)]
            self._comment_ids += 1
            now = self.tick()
            comment = FakeComment(self._comment_ids, user, body, now, now, association)
            thread.comments.append(comment)
            thread.updated_at = now
            return comment

    def seed_cards(self, cards: Iterable[Card], *, comments_every: int = 3) -> list[FakeThread]:
        """Threads for the cards of the served repos, with realistic bodies and some comments."""
        seeded: list[FakeThread] = []
        for i, card in enumerate(sorted((c for c in cards if c.repo in self.repos), key=lambda c: c.number)):
            created = datetime(2025, 8, 5, tzinfo=UTC) + timedelta(hours=i)
            updated = created + timedelta(days=1, minutes=i)
            thread = FakeThread(
                repo=card.repo,
                number=card.number,
                title=card.title,
                body=pull_body(card) if card.kind == "pull" else issue_body(card),
                state="open" if card.state == "open" else "closed",
                labels=list(card.labels),
                user=f"user{i}",
                created_at=created,
                updated_at=updated,
                closed_at=updated if card.state != "open" else None,
                pull=card.kind == "pull",
                merged_at=updated if card.state == "merged" else None,
            )
            if comments_every and i % comments_every == 0:
                replies = ["Same here on H100 with vllm==0.10.2.", "Still seen with transformers 4.56.0."]
                for j, text in enumerate(replies):
                    self._comment_ids += 1
                    at = created + timedelta(hours=2 + j)
                    thread.comments.append(FakeComment(self._comment_ids, f"helper{j}", text, at, at))
            seeded.append(self.add_thread(thread))
        return seeded

    # -- faults ----------------------------------------------------------------------------------

    def add_fault(self, fault: Fault) -> Fault:
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def rate_limit(self, reset_in: float, *, times: int = 1, skip: int = 0) -> Fault:
        return self.add_fault(Fault("rate_limit", times=times, skip=skip, reset_in=reset_in))

    def server_errors(
        self, times: float, *, status: int = 502, skip: int = 0, path: str | None = None
    ) -> Fault:
        return self.add_fault(Fault("error", times=times, skip=skip, status=status, path=path))

    def slow(self, delay: float, *, times: int = 1, skip: int = 0, path: str | None = None) -> Fault:
        return self.add_fault(Fault("slow", times=times, skip=skip, delay=delay, path=path))

    def malformed(self, path: str, page: int, *, times: float = float("inf")) -> Fault:
        return self.add_fault(Fault("malformed", times=times, path=path, page=page))

    def fail_after_pages(self, pages: int, *, status: int = 500) -> Fault:
        """Every listing page after the first ``pages`` answers ``status`` (a sync that dies mid-way)."""
        return self.add_fault(Fault("error", times=float("inf"), skip=pages, status=status, path="/issues"))

    def hold(self, path: str, page: int, delay: float) -> Fault:
        """Hold the request for ``page`` of a listing ``delay`` seconds; ``.started`` is set on arrival."""
        return self.add_fault(Fault("hold", times=1, path=path, page=page, delay=delay))

    # -- request log -----------------------------------------------------------------------------

    def reset_log(self) -> None:
        with self.lock:
            self.requests.clear()

    def request_count(self) -> int:
        with self.lock:
            return len(self.requests)

    # -- payloads --------------------------------------------------------------------------------

    def issue_payload(self, t: FakeThread) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{t.repo}"
        kind = "pull" if t.pull else "issues"
        payload: dict[str, Any] = {
            "url": f"{api}/issues/{t.number}",
            "repository_url": api,
            "comments_url": f"{api}/issues/{t.number}/comments",
            "html_url": f"https://github.com/{t.repo}/{kind}/{t.number}",
            "id": abs(hash((t.repo, t.number))) % 10**9,
            "node_id": f"I_{t.number}",
            "number": t.number,
            "title": t.title,
            "user": {"login": t.user, "id": abs(hash(t.user)) % 10**7, "type": "User"},
            "labels": [
                {"id": abs(hash(name)) % 10**7, "name": name, "color": "ededed", "default": False}
                for name in t.labels
            ],
            "state": t.state,
            "state_reason": "completed" if t.state == "closed" else None,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": len(t.comments),
            "created_at": iso(t.created_at),
            "updated_at": iso(t.updated_at),
            "closed_at": iso(t.closed_at),
            "author_association": t.association,
            "body": t.body,
        }
        if t.pull:
            payload["pull_request"] = {
                "url": f"{api}/pulls/{t.number}",
                "html_url": f"https://github.com/{t.repo}/pull/{t.number}",
                "diff_url": f"https://github.com/{t.repo}/pull/{t.number}.diff",
                "patch_url": f"https://github.com/{t.repo}/pull/{t.number}.patch",
                "merged_at": iso(t.merged_at),
            }
        return payload

    def pull_payload(self, t: FakeThread) -> dict[str, Any]:
        payload = self.issue_payload(t)
        payload.pop("pull_request")
        payload.update(
            {"url": f"{self.base_url}/repos/{t.repo}/pulls/{t.number}", "merged": t.merged_at is not None}
        )
        payload["merged_at"] = iso(t.merged_at)
        payload["merge_commit_sha"] = t.merge_commit_sha
        return payload

    def comment_payload(self, t: FakeThread, c: FakeComment) -> dict[str, Any]:
        api = f"{self.base_url}/repos/{t.repo}"
        return {
            "url": f"{api}/issues/comments/{c.id}",
            "html_url": f"https://github.com/{t.repo}/issues/{t.number}#issuecomment-{c.id}",
            "issue_url": f"{api}/issues/{t.number}",
            "id": c.id,
            "user": {"login": c.user, "id": c.id, "type": "User"},
            "created_at": iso(c.created_at),
            "updated_at": iso(c.updated_at),
            "author_association": c.association,
            "body": c.body,
        }

    def list_threads(self, repo: str, query: dict[str, str]) -> list[FakeThread]:
        state = query.get("state", "open")
        labels = [name for name in query.get("labels", "").split(",") if name]
        since = _parse_when(query["since"]) if "since" in query else None
        with self.lock:
            found = [
                t
                for (r, _), t in self.threads.items()
                if r == repo
                and (state == "all" or t.state == state)
                and all(name in t.labels for name in labels)
                and (since is None or t.updated_at >= since)
            ]
        key = query.get("sort", "created")
        descending = query.get("direction", "desc") == "desc"
        found.sort(key=lambda t: (_sort_key(t, key), t.number), reverse=descending)
        return found

    def search(self, q: str) -> list[FakeThread]:
        terms: list[str] = []
        any_of = False
        repo = None
        checks: list[Any] = []
        for token in shlex.split(q):
            if token == "OR":
                any_of = True
            elif ":" in token and token.split(":", 1)[0] in _QUALIFIERS:
                name, value = token.split(":", 1)
                if name == "repo":
                    repo = value
                elif name == "is" and value in {"issue", "pr"}:
                    checks.append(lambda t, pr=value == "pr": t.pull == pr)
                elif name in {"is", "state"}:
                    checks.append(lambda t, s=value: t.state == s)
                elif name == "label":
                    label = value.strip('"')
                    checks.append(lambda t, label=label: label in t.labels)
                else:
                    checks.append(_date_check(name, value))
            else:
                terms.append(token.lower())
        with self.lock:
            found = []
            for (r, _), t in self.threads.items():
                if repo is not None and r != repo:
                    continue
                haystack = f"{t.title}\n{t.body}".lower()
                hits = [term in haystack for term in terms]
                if terms and not (any(hits) if any_of else all(hits)):
                    continue
                if all(check(t) for check in checks):
                    found.append(t)
        return found


def _give_merge_commit(thread: FakeThread) -> None:
    """A merged PR gets a stable merge commit sha (what GitHub's pulls API reports)."""
    if thread.pull and thread.merged_at is not None and thread.merge_commit_sha is None:
        thread.merge_commit_sha = hashlib.sha1(f"{thread.repo}#{thread.number}".encode()).hexdigest()


def _parse_when(value: str) -> datetime:
    value = value.strip()
    if len(value) == 10:
        value += "T00:00:00+00:00"
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _date_check(name: str, value: str) -> Any:
    for op in (">=", "<=", ">", "<"):
        if value.startswith(op):
            when = _parse_when(value[len(op) :])
            break
    else:
        op, when = "=", _parse_when(value)
    compare = {
        ">=": lambda a: a >= when,
        "<=": lambda a: a <= when,
        ">": lambda a: a > when,
        "<": lambda a: a < when,
        "=": lambda a: a.date() == when.date(),
    }[op]
    return lambda t: compare(getattr(t, f"{name}_at"))


def _sort_key(t: FakeThread, key: str) -> Any:
    if key == "updated":
        return t.updated_at
    if key == "comments":
        return len(t.comments)
    return t.created_at


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes

    def setup(self) -> None:
        super().setup()
        with self.fake.lock:
            self.fake._connections.add(self.connection)

    def finish(self) -> None:
        with self.fake.lock:
            self.fake._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # keep test output clean; requests are recorded in fake.requests

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        fake = self.fake
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        record = Recorded("GET", parts.path, query, dict(self.headers.items()))
        with fake.lock:
            fake.requests.append(record)
        page = int(query.get("page", "1") or 1)
        fault = self._fault(parts.path, page)
        if fault is not None:
            if fault.kind == "rate_limit":
                reset = int(time.time() + fault.reset_in)
                body = {
                    "message": "API rate limit exceeded for 127.0.0.1. (But here's the good news: "
                    "Authenticated requests get a higher rate limit.)",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                }
                headers = {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0"}
                headers["X-RateLimit-Reset"] = str(reset)
                return self._send(403, body, headers, record)
            if fault.kind == "error":
                return self._send(fault.status, {"message": "Server Error"}, {}, record)
            if fault.kind in {"slow", "hold"}:
                fault.started.set()
                if self.fake._stopping.wait(fault.delay):
                    return  # the fake is stopping: drop the connection unanswered
        try:
            status, body, headers = self._route(parts.path, query, page)
        except KeyError:
            status, body, headers = 404, {"message": "Not Found"}, {}
        if fault is not None and fault.kind == "malformed":
            raw = json.dumps(body)
            return self._send_raw(200, raw[: max(2, len(raw) // 2)].encode(), headers, record)
        self._send(status, body, headers, record)

    def _fault(self, path: str, page: int) -> Fault | None:
        with self.fake.lock:
            for fault in self.fake.faults:
                if fault.times <= 0 or not fault.matches(path, page):
                    continue
                if fault.skip > 0:
                    fault.skip -= 1
                    continue
                fault.times -= 1
                fault.hits += 1
                return fault
        return None

    def _route(self, path: str, query: dict[str, str], page: int) -> tuple[int, Any, dict[str, str]]:
        fake = self.fake
        if not path.startswith(PREFIX):
            raise KeyError(path)
        parts = path[len(PREFIX) :].strip("/").split("/")
        if parts == ["rate_limit"]:
            core = {"limit": 5000, "remaining": 4999, "reset": int(time.time()) + 3600, "used": 1}
            return 200, {"resources": {"core": core, "search": core}, "rate": core}, {}
        if parts == ["search", "issues"]:
            found = fake.search(query.get("q", ""))
            key = query.get("sort", "best-match")
            if key in {"updated", "created", "comments"}:
                descending = query.get("order", "desc") == "desc"
                found.sort(key=lambda t: (_sort_key(t, key), t.number), reverse=descending)
            items, headers = self._paginate(path, query, page, found[: fake.search_cap])
            body = {
                "total_count": len(found),
                "incomplete_results": False,
                "items": [dict(fake.issue_payload(t), score=1.0) for t in items],
            }
            return 200, body, headers
        if len(parts) < 3 or parts[0] != "repos" or f"{parts[1]}/{parts[2]}" not in fake.repos:
            raise KeyError(path)
        repo = f"{parts[1]}/{parts[2]}"
        rest = parts[3:]
        if not rest:
            return 200, _repo_payload(fake, repo), {}
        if rest == ["issues"]:
            items, headers = self._paginate(path, query, page, fake.list_threads(repo, query))
            return 200, [fake.issue_payload(t) for t in items], headers
        if rest == ["releases"]:
            items, headers = self._paginate(path, query, page, fake.list_releases(repo))
            return 200, [fake.release_payload(r) for r in items], headers
        if len(rest) == 2 and rest[0] == "compare" and "..." in rest[1]:
            base, head = unquote(rest[1]).split("...", 1)
            return 200, fake.compare(repo, base, head), {}
        if len(rest) >= 2 and rest[0] in {"issues", "pulls"} and rest[1].isdigit():
            thread = fake.thread(repo, int(rest[1]))
            if rest[0] == "pulls":
                if not thread.pull:
                    raise KeyError(path)
                return 200, fake.pull_payload(thread), {}
            if len(rest) == 2:
                return 200, fake.issue_payload(thread), {}
            if rest[2:] == ["comments"]:
                since = _parse_when(query["since"]) if "since" in query else None
                comments = [c for c in thread.comments if since is None or c.updated_at >= since]
                items, headers = self._paginate(path, query, page, comments)
                return 200, [fake.comment_payload(thread, c) for c in items], headers
        raise KeyError(path)

    def _paginate(
        self, path: str, query: dict[str, str], page: int, items: list[Any]
    ) -> tuple[list[Any], dict[str, str]]:
        per_page = min(int(query.get("per_page", "30") or 30), 100)
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def url(n: int) -> str:
            return f"{self.fake.host}{path}?{urlencode({**query, 'page': n})}"

        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(page - 1)}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def _send(self, status: int, body: Any, headers: dict[str, str], record: Recorded) -> None:
        self._send_raw(status, json.dumps(body).encode(), headers, record)

    def _send_raw(self, status: int, raw: bytes, headers: dict[str, str], record: Recorded) -> None:
        record.status = status
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            defaults = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999"}
            defaults["X-RateLimit-Reset"] = str(int(time.time()) + 3600)
            for name, value in {**defaults, **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer


def _repo_payload(fake: FakeGitHub, repo: str) -> dict[str, Any]:
    owner, name = repo.split("/")
    return {
        "id": abs(hash(repo)) % 10**8,
        "name": name,
        "full_name": repo,
        "owner": {"login": owner, "type": "Organization"},
        "private": False,
        "html_url": f"https://github.com/{repo}",
        "url": f"{fake.base_url}/repos/{repo}",
        "default_branch": "main",
    }


# -- realistic bodies ----------------------------------------------------------------------------

_ENVIRONMENT = """### Your current environment

<details>
<summary>The output of <code>python collect_env.py</code></summary>

```text
Collecting environment information...
PyTorch version: 2.8.0+cu128
Is debug build: False
CUDA used to build PyTorch: 12.8
vLLM Version: 0.10.1+gptoss
openai-harmony==0.0.4
transformers==4.55.0
GPU 0: NVIDIA H100 80GB HBM3
```

</details>
"""

_CHECKLIST = (
    "### Before submitting a new issue...\n\n"
    "- [x] Make sure you already searched for relevant issues, and asked the chatbot living at the bottom "
    "right corner of the documentation page, which can answer lots of frequently asked questions.\n"
)


def _exception_line(signature: str) -> str:
    if "Error" in signature or "Exception" in signature:
        return signature
    return f"RuntimeError: {signature}"


def issue_body(card: Card) -> str:
    """A vLLM-style bug report for a card: template comments, environment, a traceback, the checklist."""
    mentions_model = "gpt-oss" not in card.labels  # labelled threads are found by label, not keyword
    model = "openai/gpt-oss-120b" if mentions_model else "the 120b model"
    traceback = ""
    if card.error_signatures:
        traceback = (
            "\n```\nTraceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py", '
            "line 1145, in chat_completion_stream_generator\n"
            "    raise exc\n"
            f"{_exception_line(card.error_signatures[0])}\n```\n"
        )
    return (
        "<!-- Thanks for reporting a bug! Please fill in every section below. -->\n"
        f"{_ENVIRONMENT}\n"
        "### 🐛 Describe the bug\n\n"
        f"Serving {model} with `vllm serve`. {card.summary or card.title}\n"
        f"{traceback}\n"
        f"{_CHECKLIST}"
    )


def pull_body(card: Card) -> str:
    """A PR description in vLLM's template: purpose, the fixed issues, test plan, the checklist."""
    fixes = "\n".join(
        f"Fixes #{target.split('#')[1]}" if target.split("#")[0] == card.repo else f"Fixes {target}"
        for target in card.fixes
    )
    return (
        "<!-- markdownlint-disable -->\n"
        "## Purpose\n\n"
        f"{card.summary or card.title}\n\n{fixes}\n\n"
        "## Test Plan\n\nTested with openai/gpt-oss-20b.\n\n"
        "<details>\n<summary> Essential Elements of an Effective PR Description Checklist </summary>\n\n"
        "- [x] The purpose of the PR, such as \"Fix some issue (link existing issues this PR will "
        "resolve)\".\n"
        "- [ ] The test plan.\n</details>\n"
    )


def iter_requests(fake: FakeGitHub, suffix: str) -> Iterator[Recorded]:
    """Recorded requests whose path ends with ``suffix``."""
    with fake.lock:
        snapshot = list(fake.requests)
    return (r for r in snapshot if r.path.endswith(suffix))
