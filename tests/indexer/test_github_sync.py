"""GitHub sync against a real local HTTP server speaking the REST API, into the real (embedded) Chroma store."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from indexer.documents import Card, Document, issue_id
from indexer.errors import SyncError
from indexer.signatures import normalize_signature
from indexer.sources.cards import bundled_cards, card_documents
from indexer.sources.github import SyncResult, make_client, sync_github
from indexer.store import Store
from service.config import Settings
from tests.fakes import HashingEmbedder, github_mark
from tests.github_fake import FakeGitHub, FakeThread, iter_requests

VLLM, HARMONY = "vllm-project/vllm", "openai/harmony"
TOKEN = "ghp_fakeTOKEN0123456789abcdefSECRET"
PER_PAGE = 5
BATCH = 5
CHILD = Path(__file__).with_name("github_sync_child.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
T0 = datetime.fromisoformat("2025-09-01T00:00:00+00:00")
CURATED = (
    *("summary", "cause", "fix", "workarounds", "component", "error_source", "flags"),
    *("versions", "fixes", "fix_confirmed", "references"),
)


class CountingEmbedder:
    """The hashing fake, counting how many texts it embeds."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dimension=64)
        self.name = self.inner.name
        self.dimension = self.inner.dimension
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return self.inner.encode(texts)


def seed_cards() -> list[Card]:
    """Every openai/harmony card and a slice of vllm ones, including PR/issue pairs and a curated card."""
    vllm = sorted((c for c in bundled_cards() if c.repo == VLLM), key=lambda c: c.number)
    keep = {22331, 22337, 25514, 45736, 47062}
    chosen = [c for i, c in enumerate(vllm) if i % 8 == 0 or c.number in keep]
    return chosen + [c for c in bundled_cards() if c.repo == HARMONY]


def extra_threads(fake: FakeGitHub) -> None:
    """Threads that pin selection and fix-link behaviour."""

    def add(repo: str, number: int, title: str, body: str, hours: int, **kw: object) -> None:
        at = T0.replace(hour=hours)
        fake.add_thread(FakeThread(repo, number, title, body, created_at=at, updated_at=at, **kw))  # type: ignore[arg-type]

    add(VLLM, 60001, "[Bug]: HarmonyError on tool call", "openai_harmony.HarmonyError: unexpected token 200012", 1)
    add(VLLM, 60002, "Fix harmony tool-call parsing", "Fixes #60001\n\nTested on gpt-oss-20b.", 2, pull=True)
    add(VLLM, 60010, "[Bug]: 120b model stops after the first token", "Plain report.", 3, labels=["gpt-oss"])
    add(VLLM, 60020, "[Bug]: Llama 3 OOM at startup", "RuntimeError: CUDA out of memory", 4, labels=["bug"])
    add(
        HARMONY,
        900,
        "Handle unknown tokens",
        "Closes https://github.com/vllm-project/vllm/issues/22331",
        5,
        pull=True,
        state="closed",
        merged_at=T0.replace(hour=5),
        closed_at=T0.replace(hour=5),
    )


def selected(fake: FakeGitHub, settings: Settings) -> dict[str, FakeThread]:
    """The threads the sync should take: whole repos, plus label or keyword matches elsewhere."""
    out: dict[str, FakeThread] = {}
    for (repo, number), t in fake.threads.items():
        text = f"{t.title}\n{t.body}".lower()
        if (
            repo in settings.github_whole_repos
            or any(label in t.labels for label in settings.github_labels)
            or any(k.lower() in text for k in settings.github_keywords)
        ):
            out[issue_id(repo, number)] = t
    return out


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub([VLLM, HARMONY]) as server:
        server.seed_cards(seed_cards())
        extra_threads(server)
        yield server


@pytest.fixture
def settings(fake: FakeGitHub) -> Settings:
    return Settings(
        github_api_url=fake.base_url,
        github_token=TOKEN,  # type: ignore[arg-type]
        github_timeout=1,
        github_retries=3,
        github_max_wait=60,
    )


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def store(settings: Settings, embedder: CountingEmbedder) -> Iterator[Store]:
    with Store.open(settings, embedder) as opened:
        yield opened


@pytest.fixture
def sleeps() -> list[float]:
    return []


def run(settings: Settings, store: Store, sleeps: list[float], **kwargs: object) -> SyncResult:
    client = make_client(settings, per_page=PER_PAGE)
    return sync_github(settings, store, client=client, batch_size=BATCH, sleep=sleeps.append, **kwargs)  # type: ignore[arg-type]


def assert_watermarks_cover_committed(store: Store, fake: FakeGitHub, settings: Settings) -> None:
    """The invariant: every selected thread updated at or before a repo's watermark is stored as of then."""
    for doc_id, thread in selected(fake, settings).items():
        mark = github_mark(store, thread.repo)
        if mark is not None and thread.updated_at <= mark:
            doc = store.get(doc_id)
            assert doc is not None, f"{doc_id} is before the watermark {mark} but not stored"
            assert doc.updated_at is not None and doc.updated_at >= thread.updated_at


def without_fix_links(docs: Sequence[Document]) -> dict[str, str]:
    """Content hashes ignoring ``fixed_by``, which a later batch may legitimately add to."""
    return {d.id: d.model_copy(update={"fixed_by": []}).content_hash() for d in docs}


def assert_complete(store: Store, fake: FakeGitHub, settings: Settings) -> None:
    """Every selected thread is stored with its current updated_at."""
    for doc_id, thread in selected(fake, settings).items():
        doc = store.get(doc_id)
        assert doc is not None, f"{doc_id} missing"
        assert doc.updated_at == thread.updated_at, doc_id


def test_first_sync_takes_selected_threads_with_derived_fields(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    result = run(settings, store, sleeps)
    expected = selected(fake, settings)

    assert result.stopped_reason is None
    assert result.new == len(expected)
    assert result.requests == fake.request_count()
    assert_complete(store, fake, settings)
    assert store.get(issue_id(VLLM, 60020)) is None  # neither labelled nor matching a keyword
    assert store.get(issue_id(VLLM, 60010)) is not None  # found through the label only
    for repo in (VLLM, HARMONY):
        newest = max(t.updated_at for t in expected.values() if t.repo == repo)
        assert github_mark(store, repo) == newest

    issue = store.get(issue_id(VLLM, 22331))
    assert issue is not None and issue.kind == "issue" and issue.sources == ["github"]
    assert issue.error_signatures == ["AssertionError: Sinks are only supported in FlashAttention 3"]
    assert issue.versions["vllm"] == ["0.10.1+gptoss"] and issue.versions["torch"] == ["2.8.0+cu128"]
    for noise in ("<!--", "collect_env", "- [x]", "Before submitting", "Your current environment"):
        assert noise not in issue.text
    assert "Sinks are only supported" in issue.text

    merged = [d for d in store.documents() if d.kind == "pull" and d.state == "merged"]
    assert merged and all(expected[d.id].merged_at is not None for d in merged)
    commented = next(d for d in store.documents() if d.id in expected and expected[d.id].comments)
    assert commented.comments == len(expected[commented.id].comments)
    assert "Same here on H100" in commented.text
    print(f"first sync: {result.requests} requests for {len(expected)} threads")


def test_fix_links_set_fixes_on_prs_and_fixed_by_on_targets(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    run(settings, store, sleeps)
    pr, target = store.get(issue_id(VLLM, 60002)), store.get(issue_id(VLLM, 60001))
    assert pr is not None and pr.fixes == [issue_id(VLLM, 60001)]
    assert target is not None and target.fixed_by == [issue_id(VLLM, 60002)]
    # Cross-repository link by URL, from a PR committed in a later batch than its target.
    cross = store.get(issue_id(VLLM, 22331))
    assert cross is not None and cross.fixed_by == [issue_id(HARMONY, 900)]
    # Card PR/issue pair seeded from the KB ("Fixes #22337" in #25514's body).
    paired = store.get(issue_id(VLLM, 22337))
    assert paired is not None and issue_id(VLLM, 25514) in paired.fixed_by

    # A later run: a new PR fixing a stored issue, and a new issue a stored PR already claimed.
    at = fake.tick(60)
    fake.add_thread(FakeThread(VLLM, 60003, "Fix gpt-oss stop tokens", "Resolves #60010", updated_at=at, pull=True))
    fake.add_thread(FakeThread(HARMONY, 901, "Fix #902 decoding", "see title", updated_at=at, pull=True))
    run(settings, store, sleeps)
    labelled = store.get(issue_id(VLLM, 60010))
    assert labelled is not None and labelled.fixed_by == [issue_id(VLLM, 60003)]
    at = fake.tick(60)
    fake.add_thread(FakeThread(HARMONY, 902, "Decoding fails on 200012", "HarmonyError", updated_at=at))
    run(settings, store, sleeps)
    late = store.get(issue_id(HARMONY, 902))
    assert late is not None and late.fixed_by == [issue_id(HARMONY, 901)]


def test_incremental_sync_picks_up_changes_and_does_not_reembed_unchanged(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float], embedder: CountingEmbedder
) -> None:
    run(settings, store, sleeps)
    before = {d.id: d.content_hash() for d in store.documents()}
    embedder.texts.clear()
    fake.reset_log()

    fake.update_thread(HARMONY, 900, title="Handle unknown tokens in the decoder")
    fake.add_comment(VLLM, 60001, "Confirmed fixed on vllm==0.11.0 with openai-harmony==0.0.8.")
    result = run(settings, store, sleeps)

    assert (result.new, result.updated) == (0, 2)
    assert len(embedder.texts) == 2  # only the two changed threads
    assert store.get(issue_id(HARMONY, 900)).title == "Handle unknown tokens in the decoder"  # type: ignore[union-attr]
    commented = store.get(issue_id(VLLM, 60001))
    assert commented is not None and commented.comments == 1 and "Confirmed fixed" in commented.text
    assert commented.versions["openai-harmony"] == ["0.0.8"]
    assert commented.fixed_by == [issue_id(VLLM, 60002)]  # kept across the re-sync
    after = {d.id: d.content_hash() for d in store.documents()}
    changed = {i for i in before if before[i] != after.get(i)}
    assert changed == {issue_id(HARMONY, 900), issue_id(VLLM, 60001)}
    assert len(list(iter_requests(fake, "/comments"))) == 1  # only the changed thread with comments
    assert result.requests == fake.request_count() <= 10
    print(f"update sync: {result.requests} requests")


def test_idle_resync_of_two_repos_costs_at_most_ten_requests(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float], embedder: CountingEmbedder
) -> None:
    run(settings, store, sleeps)
    fake.reset_log()
    embedder.texts.clear()
    generation = store.generation()

    result = run(settings, store, sleeps)

    assert (result.new, result.updated) == (0, 0)
    assert result.requests == fake.request_count() <= 10
    assert not any(r.path.endswith(("/comments", "/rate_limit")) for r in fake.requests)
    assert not any(r.path.endswith(("/repos/" + VLLM, "/repos/" + HARMONY)) for r in fake.requests)
    assert embedder.texts == [] and store.generation() == generation
    print(f"idle sync: {result.requests} requests")


def test_curated_card_merges_with_its_live_thread(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    cards = {d.id: d for d in card_documents()}
    store.upsert(list(cards.values()))
    card = cards[issue_id(VLLM, 22331)]
    new_title = "[Bug]: Sinks need FlashAttention 3"
    fake.update_thread(VLLM, 22331, title=new_title, state="closed", labels=["bug", "gpt-oss"])
    fake.add_comment(VLLM, 22331, "Works with VLLM_ATTENTION_BACKEND=TRITON_ATTN on 4090.")

    run(settings, store, sleeps)

    doc = store.get(issue_id(VLLM, 22331))
    assert doc is not None
    assert doc.kind == "card" and doc.curated and doc.sources == ["snapshot", "github"]
    for name in CURATED:
        assert getattr(doc, name) == getattr(card, name), name
    thread = fake.thread(VLLM, 22331)
    assert doc.title == new_title and doc.state == "closed"
    assert doc.labels == ["bug", "gpt-oss"]
    assert (doc.created_at, doc.updated_at, doc.closed_at) == (thread.created_at, thread.updated_at, thread.closed_at)
    assert "TRITON_ATTN" in doc.text and card.summary and card.summary in doc.text
    assert issue_id(HARMONY, 900) in doc.fixed_by
    assert doc.error_signatures[: len(card.error_signatures)] == card.error_signatures


def test_error_strings_quoted_in_comments_join_the_cards_signatures(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    cards = {d.id: d for d in card_documents()}
    store.upsert(list(cards.values()))
    card = cards[issue_id(VLLM, 22331)]
    quoted = "AssertionError: Sinks are only supported in FlashAttention 3 (got backend XFORMERS on sm_89)"
    fake.add_comment(VLLM, 22331, f"Same on 0.10.2, the log says:\n```\n{quoted}\n```")

    run(settings, store, sleeps)

    doc = store.get(issue_id(VLLM, 22331))
    assert doc is not None and doc.curated
    assert doc.error_signatures[: len(card.error_signatures)] == card.error_signatures
    assert quoted in doc.error_signatures
    assert normalize_signature(quoted) in doc.normalized_signatures


def test_rate_limit_with_near_reset_waits_then_continues(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fake.rate_limit(reset_in=20, skip=4)
    result = run(settings, store, sleeps)
    assert result.stopped_reason is None
    assert any(19 <= s <= 22 for s in sleeps), sleeps
    assert_complete(store, fake, settings)


def test_rate_limit_with_far_reset_stops_cleanly_and_resumes(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fake.rate_limit(reset_in=3600, skip=6)
    result = run(settings, store, sleeps)
    assert result.stopped_reason is not None
    assert "resets at" in result.stopped_reason and "UTC" in result.stopped_reason
    assert "resumes" in result.stopped_reason
    assert not any(s > settings.github_max_wait for s in sleeps)
    stored_first = len([d for d in store.documents() if "github" in d.sources])
    assert 0 < stored_first < len(selected(fake, settings))
    assert_watermarks_cover_committed(store, fake, settings)

    resumed = run(settings, store, sleeps)
    assert resumed.stopped_reason is None
    assert_complete(store, fake, settings)


def test_5xx_storm_is_retried_with_backoff(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fake.server_errors(times=3, status=502, skip=2)
    result = run(settings, store, sleeps)
    assert result.stopped_reason is None
    assert sleeps[:3] == [1.0, 2.0, 4.0]
    assert sum(1 for r in fake.requests if r.status == 502) == 3
    assert_complete(store, fake, settings)


def test_5xx_beyond_retries_raises_sync_error_and_resumes(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fake.server_errors(times=10, status=503, skip=8)
    with pytest.raises(SyncError, match="503"):
        run(settings, store, sleeps)
    assert_watermarks_cover_committed(store, fake, settings)
    fake.clear_faults()
    run(settings, store, sleeps)
    assert_complete(store, fake, settings)


def test_timeout_is_retried(fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]) -> None:
    fake.slow(delay=2.5, skip=1, path="/issues")
    result = run(settings, store, sleeps)
    assert result.stopped_reason is None
    assert sleeps and sleeps[0] == 1.0
    assert_complete(store, fake, settings)


def test_malformed_json_raises_sync_error_and_loses_nothing(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fault = fake.malformed(f"/repos/{HARMONY}/issues", page=2)
    with pytest.raises(SyncError, match="malformed JSON") as err:
        run(settings, store, sleeps)
    assert fault.hits == 1  # not retried
    assert f"/repos/{HARMONY}/issues" in str(err.value)
    harmony_mark = github_mark(store, HARMONY)
    first_page = sorted(t.updated_at for t in selected(fake, settings).values() if t.repo == HARMONY)[:PER_PAGE]
    assert harmony_mark == first_page[-1]  # page 1 committed, nothing from page 2
    assert_watermarks_cover_committed(store, fake, settings)

    fake.clear_faults()
    run(settings, store, sleeps)
    assert_complete(store, fake, settings)


def test_crash_after_some_pages_then_resume_completes(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fake.fail_after_pages(5)
    with pytest.raises(SyncError):
        run(settings, store, sleeps)
    committed = without_fix_links([d for d in store.documents() if "github" in d.sources])
    assert committed
    assert_watermarks_cover_committed(store, fake, settings)

    fake.clear_faults()
    result = run(settings, store, sleeps)
    assert result.stopped_reason is None
    assert_complete(store, fake, settings)
    after = without_fix_links(store.documents())
    assert {i: after[i] for i in committed} == committed


def test_token_is_sent_but_never_logged_or_put_in_errors(
    fake: FakeGitHub,
    settings: Settings,
    store: Store,
    sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records: list[logging.LogRecord] = []

    class Everything(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Everything(level=logging.DEBUG)
    logging.getLogger().addHandler(handler)
    caplog.set_level(logging.DEBUG)
    try:
        fake.rate_limit(reset_in=5, skip=1)
        fake.server_errors(times=2, skip=3)
        fake.malformed(f"/repos/{HARMONY}/issues", page=2)
        with pytest.raises(SyncError) as err:
            run(settings, store, sleeps)
        fake.clear_faults()
        fake.rate_limit(reset_in=7200, skip=2)
        stopped = run(settings, store, sleeps)
    finally:
        logging.getLogger().removeHandler(handler)

    assert any(TOKEN in r.headers.get("Authorization", "") for r in fake.requests)  # the token is used
    logged = [handler.format(r) for r in records] + [r.getMessage() for r in caplog.records]
    assert len(logged) > 10 and any("github" in r.name.lower() for r in records)
    for text in logged:
        assert TOKEN not in text
    out = capsys.readouterr()
    for text in (out.out, out.err, str(err.value), repr(err.value), stopped.line(), repr(settings), str(stopped)):
        assert TOKEN not in text
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    from_env = Settings()
    assert from_env.github_token is not None and from_env.github_token.get_secret_value() == TOKEN
    assert TOKEN not in repr(from_env)


def test_sigkill_mid_sync_loses_nothing_and_the_next_run_completes(
    fake: FakeGitHub, settings: Settings, tmp_path: Path
) -> None:
    hold = fake.hold(f"/repos/{HARMONY}/issues", page=2, delay=30)
    env = dict(os.environ)
    env.update(
        {
            "GPTOSS_DOCTOR_GITHUB_API_URL": fake.base_url,
            "GPTOSS_DOCTOR_GITHUB_TOKEN": TOKEN,
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(PER_PAGE), str(BATCH)],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        if not hold.started.wait(60):
            child.kill()
            output = child.communicate(timeout=10)[0].decode(errors="replace")
            pytest.fail(f"the child never reached the held page:\n{output[-3000:]}")
        time.sleep(0.2)  # it is blocked reading the response: nothing half-done on our side
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL

    with Store.open(settings, HashingEmbedder(dimension=64)) as store:
        expected = selected(fake, settings)
        survived = without_fix_links([d for d in store.documents() if "github" in d.sources])
        harmony_first_page = sorted(t.updated_at for t in expected.values() if t.repo == HARMONY)[:PER_PAGE]
        assert github_mark(store, HARMONY) == harmony_first_page[-1]
        assert all(i in survived for i, t in expected.items() if t.repo == VLLM)
        assert_watermarks_cover_committed(store, fake, settings)

        fake.clear_faults()
        result = sync_github(settings, store, client=make_client(settings, per_page=PER_PAGE), batch_size=BATCH)
        assert result.stopped_reason is None
        assert_complete(store, fake, settings)
        after = without_fix_links(store.documents())
        assert {i: after[i] for i in survived} == survived


def test_search_result_cap_never_lets_the_watermark_skip_threads(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float]
) -> None:
    fake.search_cap = 7  # GitHub's is 1,000; the label listing runs on past the cut-off
    runs = 0
    while runs < 15:
        runs += 1
        run(settings, store, sleeps)
        assert_watermarks_cover_committed(store, fake, settings)
        if all(store.get(i) is not None for i in selected(fake, settings)):
            break
    assert runs > 1  # the cap made the first run stop early
    assert_complete(store, fake, settings)


def test_a_store_from_before_generic_cursors_resyncs_without_fetching_again(
    fake: FakeGitHub, settings: Settings, store: Store, sleeps: list[float], embedder: CountingEmbedder
) -> None:
    run(settings, store, sleeps)
    before = store.status()
    assert before.watermarks and before.github_synced_at is not None
    # Turn the state record into what stores kept before per-source cursors (issue 14): the GitHub
    # watermarks and sync time as their own fields, no cursors.
    name = store.generation().split(":", 1)[0]
    meta = store._meta
    assert meta is not None
    state = {k: v for k, v in meta.state(name).items() if k != "cursors"}
    meta.write(
        {
            f"state:{name}": state
            | {
                "watermarks": json.dumps(before.watermarks, sort_keys=True),
                "github_synced_at": before.github_synced_at.isoformat(),
            }
        }
    )
    store.close()

    with Store.open(settings, embedder) as reopened:
        migrated = reopened.status()
        assert (migrated.watermarks, migrated.github_synced_at) == (before.watermarks, before.github_synced_at)
        fake.reset_log()
        embedder.texts.clear()
        generation = reopened.generation()

        result = run(settings, reopened, sleeps)

        assert (result.new, result.updated) == (0, 0)
        assert result.requests == fake.request_count() <= 10  # the idle cost: nothing fetched again
        assert not any(r.path.endswith("/comments") for r in fake.requests)
        assert embedder.texts == [] and reopened.generation() == generation
        assert reopened.status().watermarks == before.watermarks
        # The next write of the state record stores the new form, with the same positions.
        reopened.mark_built()
        assert reopened._meta is not None
        written = reopened._meta.state(name)
        assert "cursors" in written and "watermarks" not in written and "github_synced_at" not in written
        assert reopened.status().watermarks == before.watermarks
