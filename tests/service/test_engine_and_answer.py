"""LookupEngine generations and degraded mode; answer assembly (fixes always with sources); scheduler."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

from indexer.documents import Document, State
from service.answer import Knowledge, build_fixes, of_failing_engines, of_the_match, of_the_platform, section_fix
from service.config import Settings
from service.retrieval import Hit
from service.scheduler import Scheduler
from tests.service.support import FastComponents, RecordingRunner, wait_until


def _issue(number: int, **extra: Any) -> Document:
    return Document(
        id=f"o/r#{number}",
        kind="issue",
        repo="o/r",
        number=number,
        title=f"issue {number}",
        url=f"https://github.com/o/r/issues/{number}",
        state="open",
        text=f"issue {number}",
        **extra,
    )


def _pull(number: int, state: State, fixes: list[str]) -> Document:
    return Document(
        id=f"o/r#{number}",
        kind="pull",
        repo="o/r",
        number=number,
        title=f"fix {number}",
        url=f"https://github.com/o/r/pull/{number}",
        state=state,
        text="fix",
        fixes=fixes,
        fix="Patch the parser.",
    )


def _hit(doc: Document, confidence: str = "high") -> Hit:
    return Hit(doc=doc, score=0.9, confidence=confidence, why=["test"])  # type: ignore[arg-type]


def test_fixes_come_from_cards_merged_prs_and_citing_sections_each_with_sources() -> None:
    issue = _issue(1, fix="Upgrade to 0.11.", workarounds=["set X=1"], fix_confirmed=True, fixed_by=["o/r#3"])
    merged, still_open = _pull(2, "merged", ["o/r#1"]), _pull(3, "open", [])
    section = Document(
        id="reference/known-issues.md#x",
        kind="reference-section",
        title="X",
        heading_path=["Known issues", "X"],
        text="Why X happens.\n\n- Step one\n",
        references=["o/r#1"],
    )
    knowledge = Knowledge([issue, merged, still_open, section])
    assert knowledge.fixing_prs("o/r#1") == ["o/r#2", "o/r#3"]
    fixes = build_fixes([_hit(issue)], knowledge)
    assert [f.sources[0] for f in fixes] == [issue.url, merged.url, "references/known-issues.md#x"]
    assert fixes[0].confirmed and fixes[0].steps == ["set X=1"]
    assert fixes[1].confirmed and "o/r#2" in fixes[1].summary  # the open PR o/r#3 is not a fix
    assert fixes[2].summary == "X: Why X happens." and fixes[2].steps == ["Step one"]
    assert all(f.sources for f in fixes)


def test_a_merged_fix_names_its_first_release_only_when_one_is_verified() -> None:
    """A merged PR's first release (read by a curator or placed by the sync) goes with the fix it gives, both in
    the text and as a field; a merged PR without one, and an open PR, claim no release."""
    issue = _issue(1)
    released = _pull(2, "merged", ["o/r#1"]).model_copy(update={"released_in": "v0.11.5"})
    unreleased = _pull(3, "merged", ["o/r#1"])
    proposal = _pull(4, "open", ["o/r#1"]).model_copy(update={"released_in": "v9.9.9"})
    fixes = build_fixes([_hit(issue)], Knowledge([issue, released, unreleased, proposal]))
    by_source = {f.sources[0]: f for f in fixes}
    assert set(by_source) == {released.url, unreleased.url}
    assert by_source[released.url].released_in == "v0.11.5"
    assert "first released in o/r v0.11.5" in by_source[released.url].summary
    assert by_source[unreleased.url].released_in is None and "released" not in by_source[unreleased.url].summary
    # A matched PR's own fix carries its release too.
    own = build_fixes([_hit(released)], Knowledge([issue, released]))[0]
    assert own.released_in == "v0.11.5" and own.summary.endswith("It was first released in o/r v0.11.5.")
    assert build_fixes([_hit(unreleased)], Knowledge([issue, unreleased]))[0].released_in is None


def test_low_confidence_hits_contribute_no_fixes() -> None:
    issue = _issue(1, fix="Upgrade.")
    assert build_fixes([_hit(issue, "low")], Knowledge([issue])) == []


def test_thread_cited_by_many_sections_keeps_the_ones_ranked_for_the_query() -> None:
    issue = _issue(1)
    sections = [
        Document(
            id=f"reference/known-issues.md#s{i}",
            kind="reference-section",
            title=f"S{i}",
            text="text",
            references=["o/r#1"],
        )
        for i in range(3)
    ]
    knowledge = Knowledge([issue, *sections])
    fixes = build_fixes([_hit(issue)], knowledge, ranked_sections={"reference/known-issues.md#s1"})
    assert [f.sources[0] for f in fixes] == ["references/known-issues.md#s1"]


def test_generation_check_is_rate_limited_and_reloads_on_change(
    fast_components: FastComponents, settings: Settings
) -> None:
    store = fast_components.store()
    engine = fast_components.engine(settings, store, check_interval=60.0)
    calls = store.calls.get("generation", 0)
    for _ in range(20):
        engine.lookup("HarmonyError")
    assert store.calls.get("generation", 0) - calls <= 1
    store.upsert([_issue(7)])
    assert engine.reload_if_changed() is False  # still inside the interval
    assert engine.reload_if_changed(now=True) is True
    assert engine.generation == store.generation()


def test_unreachable_store_keeps_the_last_index_serving(fast_components: FastComponents, settings: Settings) -> None:
    store = fast_components.store()
    engine = fast_components.engine(settings, store, check_interval=0.0)
    healthy = engine.lookup("openai_harmony.HarmonyError: unexpected tokens remaining in message header")
    store.down = True
    answer = engine.lookup("openai_harmony.HarmonyError: unexpected tokens remaining in message header")
    # The loaded generation (documents and vectors) is in memory: the answer is the full hybrid one.
    assert not answer.degraded and answer.issues == healthy.issues
    assert engine.store_health == "failing"
    assert any("unreachable" in r for r in engine.degraded_reasons())
    store.down = False
    engine.lookup("HarmonyError")
    assert engine.degraded_reasons() == []


def test_hung_store_is_bounded(fast_components: FastComponents, settings: Settings) -> None:
    store = fast_components.store()
    engine = fast_components.engine(settings, store, check_interval=0.0, store_timeout=0.2)
    real = store.generation

    def hung() -> str:
        time.sleep(2)
        return real()

    store.generation = hung  # type: ignore[method-assign]
    started = time.monotonic()
    assert engine.reload_if_changed(now=True) is False
    assert time.monotonic() - started < 1.0
    assert engine.store_health == "hung"
    assert any("did not answer" in r for r in engine.degraded_reasons())


class _FailingEmbedder:
    """The fast embedder until ``broken`` is set; then every query embedding raises."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.broken = False

    def encode(self, texts: Any) -> Any:
        if self.broken:
            raise RuntimeError("onnxruntime: bad allocation")
        return self._inner.encode(texts)


def test_a_failing_dense_leg_answers_without_it_marked_degraded(
    fast_components: FastComponents, settings: Settings
) -> None:
    embedder = _FailingEmbedder(fast_components.embedder)
    engine = fast_components.engine(settings, embedder=embedder)
    error = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    assert engine.lookup(error).degraded is False
    embedder.broken = True
    answer = engine.lookup(error)
    assert answer.degraded is True
    assert answer.issues and any("error signature matches" in why for why in answer.issues[0].why)
    assert engine.store_health == "ok"  # the store is fine; the dense leg is not
    assert any("dense search failing" in r for r in engine.degraded_reasons())
    embedder.broken = False
    assert engine.lookup(error).degraded is False
    assert engine.degraded_reasons() == []


def test_periodic_resync_runs_and_never_overlaps(settings: Settings, runner: RecordingRunner) -> None:
    finished: list[int] = []
    scheduler = Scheduler(
        Settings(data_dir=settings.data_dir, reindex_interval=timedelta(seconds=0.05)),
        runner=runner,
        on_finished=lambda: finished.append(1),
    )
    runner.release.clear()
    scheduler.start()
    try:
        assert runner.started.wait(5)
        assert scheduler.trigger("rebuild") is False  # the periodic run holds the lock
        assert scheduler.state().running and scheduler.state().enabled
        time.sleep(0.2)
        assert runner.calls == ["sync"]  # no second periodic run while the first is in progress
        runner.release.set()
        wait_until(lambda: len(runner.calls) >= 2)
        assert set(runner.calls) == {"sync"} and finished
        assert scheduler.last_run is not None and scheduler.last_run["ok"]
    finally:
        scheduler.stop()


def test_a_reference_section_fix_reads_its_cause_and_numbered_fix_steps() -> None:
    section = Document(
        id="reference/known-issues.md#y",
        kind="reference-section",
        title="Y fails",
        heading_path=["Known issues", "Y fails"],
        text=(
            "Known issues > Y fails\n\n**Errors**\n- `YError: boom`\n\n**Cause:** the **parser** is strict.\n"
            "More cause.\n\n**Fix**\n1. Upgrade vLLM to 0.11.\n2. Set `--flag`, then\n   restart the server.\n\n"
            "**Issues:** o/r#1\n"
        ),
        references=["o/r#1"],
    )
    fix = section_fix(section)
    assert fix.summary == "Y fails: the parser is strict. More cause."
    assert fix.steps == ["Upgrade vLLM to 0.11.", "Set `--flag`, then restart the server."]
    assert fix.sources == ["references/known-issues.md#y"]


class _CountingEmbedder:
    """Wraps the fast embedder and records how many query embeddings run at the same time."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.active = 0
        self.peak = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode(self, texts: Any) -> Any:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            time.sleep(0.05)
            return self._inner.encode(texts)
        finally:
            with self._lock:
                self.active -= 1


def test_lookups_beyond_the_concurrency_limit_wait_their_turn(fast_components: FastComponents) -> None:
    from concurrent.futures import ThreadPoolExecutor

    peaks = {}
    for limit in (1, 3):
        counting = _CountingEmbedder(fast_components.embedder)
        engine = fast_components.engine(Settings(lookup_concurrency=limit), embedder=counting)
        with ThreadPoolExecutor(max_workers=6) as pool:
            texts = [f"Unexpected token 20000{i} while expecting" for i in range(6)]
            answers = list(pool.map(engine.lookup, texts))
        assert all(answer.issues for answer in answers)
        peaks[limit] = counting.peak
    assert peaks[1] == 1
    assert peaks[3] > 1


def test_each_run_kind_maps_to_its_index_job(monkeypatch: Any, settings: Settings) -> None:
    import indexer.api
    from service.scheduler import default_runner

    seen: dict[str, tuple[bool, bool]] = {}
    for kind in ("sync", "rebuild", "rebuild-local", "first-build", "repair"):
        monkeypatch.setattr(
            indexer.api,  # the facade the service calls (it runs indexer.build)
            "build_index",
            lambda s, kind=kind, **kw: seen.__setitem__(kind, (kw["github"], kw["full"])),
        )
        default_runner(settings, kind=kind, embedder=None)
    assert seen == {
        "sync": (True, False),
        "rebuild": (True, True),
        "rebuild-local": (False, True),
        "first-build": (False, False),
        "repair": (False, False),  # a plain local writer run: opening the store for writing repairs it
    }


def test_another_engines_thread_gives_no_fix_when_the_failure_names_its_engine() -> None:
    ollama, lmstudio, library = _issue(1), _issue(2), _issue(3)
    engine_of = {ollama.id: "ollama", lmstudio.id: "lm-studio"}  # the library thread is about no engine
    hits = [_hit(ollama), _hit(lmstudio), _hit(library)]
    assert [h.doc.id for h in of_failing_engines(hits, ["lm-studio"], engine_of)] == [lmstudio.id, library.id]
    assert of_failing_engines(hits, [], engine_of) == hits, "a failure that names no engine keeps every hit"
    # A thread about no engine whose failure vLLM's server raised (a kernel PR about vLLM's backends): vLLM's.
    vllm_fix = _issue(4, error_source="vllm-server", workarounds=["keep the default TRITON_ATTN backend"])
    client = _issue(5, error_source="client", workarounds=["set ACME_BASE_URL to the server's /v1 URL"])
    hits = [_hit(vllm_fix), _hit(client)]
    assert [h.doc.id for h in of_failing_engines(hits, ["tensorrt-llm"], {})] == [client.id]
    assert of_failing_engines(hits, ["vllm"], {}) == hits


def test_fixes_come_from_no_hardware_thread_of_another_gpu_platform() -> None:
    nvidia, amd, neutral = _hit(_issue(1)), _hit(_issue(2)), _hit(_issue(3))
    platform_of = {nvidia.doc.id: "nvidia", amd.doc.id: "amd"}  # the third is a Harmony thread: no platform
    hits = [nvidia, amd, neutral]
    assert of_the_platform(hits, "amd", platform_of) == [amd, neutral]
    assert of_the_platform(hits, "nvidia", platform_of) == [nvidia, neutral]
    assert of_the_platform(hits, None, platform_of) == hits, "an input that shows no platform keeps every hit"


def test_a_known_match_gives_the_fixes_not_the_threads_only_close_to_it() -> None:
    sure, close, far = _hit(_issue(1)), _hit(_issue(2), "medium"), _hit(_issue(3), "medium")
    hits = [sure, close, far]
    assert [h.doc.id for h in of_the_match(hits)] == [sure.doc.id]
    assert of_the_match([close, far]) == [close, far], "no known match: every confident thread may have a fix"
