"""The lookup engine: parse -> Harmony analysis -> retrieval -> origin/advice -> answer.

The HTTP app, the CLI, the MCP server and the bench all go through :class:`LookupEngine`. It holds the
embedder, the store, the Harmony analyzer and a snapshot of the derived indexes (the Retriever with its
lexical index, and the fix/citation maps) for one store generation, and swaps that snapshot atomically
when the store's generation changes (another process or the scheduler re-indexed).

Heavy modules (chromadb, torch, bm25s, openai_harmony) are imported inside the methods that need them
so importing the app stays cheap.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from indexer.trust import UNTRUSTED_NOTE
from service.analysis.input import ParsedInput, parse_input
from service.answer import (
    Knowledge,
    advice_out,
    build_fixes,
    calibrate,
    is_thread,
    issue_out,
    of_failing_engines,
    of_the_match,
    of_the_platform,
    origin_out,
    reproduction_out,
    scope_note,
    tokens_out,
    without_repeats,
)
from service.config import Settings
from service.errors import NotReady
from service.memory import release_free_heap
from service.models import AnalysisOut, IndexInfo, LookupResponse, QueryInfo, TokenOut

if TYPE_CHECKING:
    from indexer.api import StoreStatus
    from indexer.documents import Document
    from indexer.embedding import Embedder
    from service.analysis.advice import CuratedThreads
    from service.analysis.harmony import HarmonyAnalyzer
    from service.diagnosis import Problems
    from service.retrieval import RetrievalResult, Retriever

log = logging.getLogger(__name__)


class IndexStore(Protocol):
    """The read side of ``indexer.store.Store`` the engine needs (tests pass an in-memory one).

    Lookups never call it: the engine reads a generation's documents and vectors once and answers from
    memory; only the generation check, the reload and the status go to the store.
    """

    def documents(self) -> list[Document]: ...
    def get(self, doc_id: str) -> Document | None: ...
    def vectors(self) -> tuple[list[str], Any]: ...
    def generation(self) -> str: ...
    def status(self) -> StoreStatus: ...
    def renew_client(self, timeout: float) -> bool: ...
    def close(self) -> None: ...


T = TypeVar("T")

CHECK_INTERVAL = 1.0
"""Seconds between two generation checks: the check is cheap, but not free on a Chroma server."""
STORE_TIMEOUT = 5.0
"""Seconds before a store call made on the request path counts as failed (a hung Chroma server)."""
DENSE_DEGRADED_WINDOW = 60.0
"""How long after a failed dense leg /health keeps saying degraded."""
MAX_TOKENS = 64
"""Token ids decoded per input; a pathological log can name thousands."""
PROBLEMS_CACHE_DIR = "cache"
"""The data dir's folder for the parsed known problems of the reference docs (indexer.problems.CACHE_FILE)."""


RECOVER_INTERVAL = 10.0
"""Seconds between two tries, while a full disk's read-only copy serves, to go back to the real store."""
RECOVER_MAX = 300.0
"""The longest wait between two such tries (the wait doubles after each try that found no usable store)."""

BUDGET_WINDOW = 60.0
"""How long after a lookup ran out of its budget /health keeps saying so."""

Lane = Literal["short", "long"]


class StoreHealth(StrEnum):
    """The index store as the engine last saw it; the engine alone decides what each state means.

    ``failing``: the last generation check or status read raised (a stopped server, a broken file);
    ``hung``: it did not answer within ``store_timeout`` (a paused server), so checks go on in the
    background instead of on a request. Either way lookups answer from the last loaded generation.
    """

    OK = "ok"
    FAILING = "failing"
    HUNG = "hung"


class Budget:
    """A lookup's time budget: steps check it before they start, and the skipped ones are recorded.

    A step in progress is not interrupted (the analysis is linear in the input, so each step is
    bounded); what the budget stops is the next step, so an overloaded lookup returns a partial,
    marked answer instead of running on.
    """

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.skipped: list[str] = []

    def allows(self, step: str) -> bool:
        """True when ``step`` may start; otherwise it is recorded as skipped."""
        if time.monotonic() < self.deadline:
            return True
        self.skipped.append(step)
        return False


@dataclass
class _Snapshot:
    """What one store generation derives (documents, vectors, lexical index, knowledge); replaced whole."""

    generation: str
    documents: list[Document]
    retriever: Retriever
    knowledge: Knowledge
    curated: CuratedThreads
    """The generation's curated threads, as advice reads them (built once per generation)."""
    problems: Problems
    index: IndexInfo
    status: StoreStatus
    vector_problem: str | None = None
    """What the store's vector self-check found on this generation (``serve`` runs it once)."""


def index_info(status: StoreStatus) -> IndexInfo:
    """The ``index`` block of an answer, from ``Store.status()``."""
    return IndexInfo(
        documents=status.documents,
        issues=status.issues,
        built_at=status.built_at,
        github_synced_at=status.github_synced_at,
    )


class LookupEngine:
    """Answers lookups from one store; reloads its derived indexes when the store's generation moves."""

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder,
        store: IndexStore,
        harmony: HarmonyAnalyzer | None,
        harmony_error: str | None = None,
        check_interval: float = CHECK_INTERVAL,
        store_timeout: float = STORE_TIMEOUT,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.store = store
        self.harmony = harmony
        self.harmony_error = harmony_error
        self.check_interval = check_interval
        self.store_timeout = store_timeout
        self._reload_lock = threading.Lock()
        # Lookups beyond the cores only queue for the CPU and hold their buffers meanwhile. Long inputs
        # have their own lane, so a burst of pasted logs never takes the slots short lookups need.
        self._lanes: dict[Lane, threading.BoundedSemaphore] = {
            "short": threading.BoundedSemaphore(settings.lookup_concurrency),
            "long": threading.BoundedSemaphore(settings.long_lookup_concurrency),
        }
        self._over_budget_at: float | None = None
        self._last_check = 0.0
        self.store_health = StoreHealth.OK
        self._store_error: str | None = None
        self._dense_failed_at: float | None = None
        self._background_probe: Future[bool] | None = None
        # A small pool for bounded store probes: a hung call occupies a worker, not a request thread.
        self._probe_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="store-probe")
        # While a full disk's read-only copy serves: when to try the real store next, and the try running.
        self._recover_at = 0.0
        self._recover_wait = RECOVER_INTERVAL
        self._recovering: threading.Thread | None = None
        self._closed = False
        self._snapshot = self._load(self.store.generation())

    # -- construction -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        build_if_empty: bool = True,
        on_build: Callable[[str], None] | None = None,
        long_lived: bool = False,
    ) -> LookupEngine:
        """Open the bundled embedder, the store and Harmony; build the index first when it is empty.

        ``on_build`` is told (one line) when a first build starts, so the CLI can say so on stderr.
        ``long_lived`` (MCP, the bench's in-process floor): the embedder also opens the session a query
        uses when it encodes alone (``indexer.embedding.query_threads``); a one-shot CLI lookup would
        only pay its load time.
        """
        from indexer.api import ensure_index, open_reader
        from indexer.chroma_client import load_library
        from indexer.embedding import load_embedder, query_threads

        # Opening the ONNX session spends its time in native code that releases the GIL, so it runs in a
        # thread while this one does the GIL-bound start-up work: Harmony's vocabulary and importing
        # Chroma (a cold CLI lookup spent about 0.25 s on the session before the rest began).
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder-load") as pool:
            if embedder is None and long_lived:
                loading = pool.submit(lambda: load_embedder(settings, query_threads=query_threads()))
            elif embedder is None:
                loading = pool.submit(load_embedder, settings)
            harmony, harmony_error = open_harmony(settings)
            if not settings.chroma_url:
                load_library()
            ready: Embedder = loading.result() if embedder is None else embedder
        store: IndexStore = open_reader(settings, ready)
        if build_if_empty:
            try:
                empty = not store.status().documents
            except BaseException:
                store.close()
                raise
            if empty:  # the one reader is closed while the first build runs, then opened on what it built
                store.close()
                ensure_index(settings, ready, on_build=on_build)
                store = open_reader(settings, ready)
        return cls(settings, embedder=ready, store=store, harmony=harmony, harmony_error=harmony_error)

    def close(self) -> None:
        """Release the store and the probe threads."""
        self._probe_pool.shutdown(wait=False, cancel_futures=True)
        with self._reload_lock:  # a store a recovery opens after this is closed at once
            self._closed = True
            self.store.close()

    # -- the lookup --------------------------------------------------------------------------------

    def lane(self, text: str) -> Lane:
        """Which lane computes ``text``: long inputs (``long_input_chars``) wait only for each other."""
        return "long" if len(text) > self.settings.long_input_chars else "short"

    def lookup(self, text: str, top_k: int = 5, repos: Sequence[str] | None = None) -> LookupResponse:
        """Diagnose one pasted error or log (a bounded number at once per lane; others wait)."""
        with self._lanes[self.lane(text)]:
            return self._lookup(text, top_k, repos)

    def _lookup(self, text: str, top_k: int, repos: Sequence[str] | None) -> LookupResponse:
        from service.analysis.advice import advise
        from service.analysis.origin import categorize, classify_origin
        from service.diagnosis import diagnose
        from service.retrieval import RetrievalResult

        budget = Budget(self.settings.lookup_budget)
        self.reload_if_changed()
        snap = self._snapshot
        threads = snap.retriever.engines
        parsed = parse_input(text)
        if parsed.client is None:
            # Client applications the index knows (repositories of client-side threads), by name.
            named = threads.named_client(parsed.account)
            if named is not None:
                parsed = parsed.model_copy(update={"client": named})
        if not parsed.engines:
            # Serving engines the index knows beyond the engine table (exo, gpustack, ...), by name.
            server = threads.named_server(parsed.account)
            if server is not None:
                by_name = threads.named_server
                failure = parsed.named_by_failure([server], lambda t: [by_name(t)])
                parsed = parsed.model_copy(update={"engines": [server], "failure_engines": failure})
        if parsed.numbers:
            # "#22403": the thread of that number in the tracker of the engine the input names.
            resolved = snap.retriever.resolve_numbers(parsed)
            if resolved:
                parsed = parsed.model_copy(update={"threads": [*parsed.threads, *resolved]})
        if budget.allows("search"):
            result = self._search(snap, parsed, top_k, repos)
        else:
            result = RetrievalResult(hits=[], confident=False)
        hits = [h for h in result.hits if is_thread(h.doc)][:top_k]
        # The retrieval's own judgement gates the evidence; the shown scores and labels are calibrated
        # to read in order (calibrate only lowers a label, so nothing shown claims more than was judged).
        confident = [h for h in hits if h.confidence != "low"]
        # Origin and advice see only hits worth trusting: noise must not steer the diagnosis.
        evidence = [h.doc for h in confident]
        # Another model than gpt-oss (and no Harmony sign): the reference docs' problems and their actions
        # are gpt-oss's, so none is this input's diagnosis; the answer says what it covers instead.
        other = parsed.other_model
        diagnosis = (
            None
            if other is not None
            else diagnose(
                parsed,
                snap.problems,
                snap.knowledge,
                hits=confident,
                sections=result.sections,
                threads=threads,
            )
        )
        # An error string a known problem lists is a match to trust even when no thread is close.
        sure = diagnosis is not None and diagnosis.confidence == "high"
        no_match = not sure and (not any(h.confidence == "high" for h in hits) or not confident)
        # Reference sections are offered as fixes when they match strongly on their own or cite a
        # thread we trust; the skill's own sections are instructions, not fixes.
        trusted = {h.doc.id for h in confident}
        sections = [
            h
            for h in result.sections
            if h.doc.id.startswith("reference/")
            and (h.confidence == "high" or trusted.intersection(h.doc.references))
        ]
        fitting = of_the_match(
            of_the_platform(
                of_failing_engines(confident, parsed.failure_engines, threads.engine), parsed.platform, threads.platform
            )
        )
        fixes = (
            []
            if no_match
            else build_fixes(
                [*fitting, *sections], snap.knowledge, ranked_sections={h.doc.id for h in result.sections}
            )
        )
        issues = [issue_out(h, snap.knowledge) for h in calibrate(hits)]
        return LookupResponse(
            diagnosis=diagnosis,
            query=QueryInfo(signatures=list(parsed.signatures), normalized="\n".join(parsed.normalized)),
            analysis=AnalysisOut(
                origin=origin_out(classify_origin(parsed, evidence)),
                category=categorize(parsed, evidence),
                tokens=self._tokens(parsed) if budget.allows("tokens") else [],
                versions=dict(parsed.versions),
                flags=list(parsed.flags),
                model=parsed.model,
                client=parsed.client,
                engine=parsed.engine,
                platform=parsed.platform,
                failure_found=parsed.failure_found,
                outside_scope=other is not None,
                other_model=other,
                reproduction=self._reproduce(parsed) if budget.allows("reproduction") else None,
            ),
            issues=issues,
            no_confident_match=no_match,
            fixes=fixes,
            advice=(
                without_repeats(
                    advice_out(
                        advise(
                            parsed,
                            evidence,
                            snap.curated,
                            matched=not no_match,
                            threads=threads,
                            related={doc.id for doc in evidence if snap.retriever.shares_error_words(doc, parsed)},
                        )
                    ),
                    fixes,
                )
                if budget.allows("advice")
                else []
            ),
            index=snap.index,
            degraded=result.degraded,
            partial=self._partial(budget, store_failed=result.degraded),
            scope_note=scope_note(other) if other is not None else None,
            untrusted_text=UNTRUSTED_NOTE if any(issue.trust != "curated" for issue in issues) else None,
        )

    def documents(self) -> list[Document]:
        """Every document of the loaded index, from memory: a paused store cannot hang it (MCP's issue tools).

        Under the same lane bound as short lookups, and as fresh as lookups are (the generation check is
        bounded and, while the store hangs, runs in the background).
        """
        with self._lanes["short"]:
            self.reload_if_changed()
            return list(self._snapshot.documents)

    def document(self, doc_id: str) -> Document | None:
        """One document of the loaded index, from memory (see :meth:`documents`)."""
        with self._lanes["short"]:
            self.reload_if_changed()
            return self._snapshot.knowledge.by_id.get(doc_id)

    def _partial(self, budget: Budget, *, store_failed: bool) -> list[str]:
        """The steps ``budget`` skipped, remembered for /health and logged once per lookup.

        A lookup that ran out of time waiting on a failing store is the store's outage, which /health
        reports (and clears) on its own; only a lookup slow for its own work counts as overload.
        """
        if budget.skipped and not store_failed:
            self._over_budget_at = time.monotonic()
        if budget.skipped:
            log.info("lookup over its %gs budget; skipped %s", self.settings.lookup_budget, budget.skipped)
        return list(budget.skipped)

    def _search(self, snap: _Snapshot, parsed: ParsedInput, k: int, repos: Sequence[str] | None) -> RetrievalResult:
        """Hybrid search; when the dense leg fails, the same search without it, marked degraded.

        The search runs from memory (the generation's vectors are loaded with it), so the store's
        health does not enter here: only the embedder can fail the dense leg.
        """
        from service.retrieval import LegUnavailable

        try:
            result = snap.retriever.search(parsed, top_k=k, repos=repos)
        except LegUnavailable as exc:
            log.warning("%s; answering without the dense leg", exc)
            self._dense_failed_at = time.monotonic()
            result = snap.retriever.search(parsed, top_k=k, repos=repos, dense=False)
            return result.model_copy(update={"degraded": True})
        self._dense_failed_at = None
        return result

    def _tokens(self, parsed: ParsedInput) -> list[TokenOut]:
        if self.harmony is None or not parsed.token_ids:
            return []
        return tokens_out(self.harmony.decode(parsed.token_ids[:MAX_TOKENS]))

    def _reproduce(self, parsed: ParsedInput) -> dict[str, Any] | None:
        if self.harmony is None:
            return None
        return reproduction_out(self.harmony.reproduce(parsed))

    # -- generations -------------------------------------------------------------------------------

    def reload_if_changed(self, *, now: bool = False) -> bool:
        """Rebuild the derived indexes when the store's generation changed; True when it did.

        The check runs at most once per ``check_interval`` (unless ``now``) and never blocks a lookup
        behind another thread's rebuild: that lookup answers from the previous snapshot.
        """
        if not now and time.monotonic() - self._last_check < self.check_interval:
            return False
        self._recover_in_background()
        if not now and self.store_health is StoreHealth.HUNG:
            # The store is known to hang: probe it in the background, so requests during the outage
            # answer at once (degraded) instead of each waiting out the probe's deadline.
            self._probe_in_background()
            return False
        if not self._reload_lock.acquire(blocking=now):
            return False
        try:
            self._last_check = time.monotonic()
            try:
                generation = self._bounded(self.store.generation)
            except Exception as exc:
                self._store_failed(exc)
                log.warning("index store unreachable: %s", self._store_error)
                return False
            self._store_ok()
            if generation == self._snapshot.generation:
                return False
            self._snapshot = self._load(generation)
            log.info("index generation %s loaded (%d documents)", generation, len(self._snapshot.documents))
            self._renew_store_client()
            release_free_heap()  # the previous generation's snapshot is garbage now
            return True
        except Exception as exc:
            # A failed reload keeps the previous snapshot serving; the next check retries.
            self._store_failed(exc)
            self._store_error = f"reload failed: {self._store_error}"
            log.warning("%s", self._store_error)
            return False
        finally:
            self._reload_lock.release()

    def after_index_run(self) -> bool:
        """After an index run of this process: load its generation, and let chromadb drop what it kept.

        The run's own store is closed by now, so renewing this engine's Chroma client stops the System the
        two shared (with the native state of the collections the run replaced). When the generation was
        already picked up during the run, a renewal then could not stop that System (the run's client still
        held it), so it is renewed here once more. True when this call swapped generations (and so has
        already released the freed heap).
        """
        if self.reload_if_changed(now=True):
            return True
        with self._reload_lock:
            if not self._closed:
                self._renew_store_client()
        return False

    def _renew_store_client(self) -> None:
        """Swap the store's Chroma client for a fresh one (``Store.renew_client``); called under the reload lock.

        Lookups never call the store (they answer from the loaded snapshot), so only the generation check
        and the status read wait for it. A failure is the store's: the snapshot keeps serving, the next
        check opens a client again.
        """
        try:
            self.store.renew_client(timeout=self.store_timeout)
        except Exception as exc:
            self._store_failed(exc)
            log.warning("could not reopen the index store after a new generation: %s", self._store_error)

    def _store_failed(self, exc: BaseException) -> None:
        """Record a failed store call: hung when it timed out (checks move to the background), else failing."""
        self._store_error = f"{type(exc).__name__}: {str(exc)[:200]}"
        self.store_health = StoreHealth.HUNG if isinstance(exc, TimeoutError) else StoreHealth.FAILING

    def _store_ok(self) -> None:
        self._store_error = None
        self.store_health = StoreHealth.OK

    def _probe_in_background(self) -> None:
        probe = self._background_probe
        if probe is not None and not probe.done():
            return
        self._last_check = time.monotonic()
        try:
            self._background_probe = self._probe_pool.submit(self.reload_if_changed, now=True)
        except RuntimeError:  # the pool is shut down: the engine is closing
            pass

    # -- back from a full disk ----------------------------------------------------------------------

    def _recover_in_background(self) -> None:
        """While a full disk's read-only copy serves, try the real store again (rate-limited, in a thread).

        The copy is the index as it was when the disk filled up; once there is room again, index runs
        publish to the real store, so the copy would only grow stale (issue 16, finding 9).
        """
        if not getattr(self.store, "full_disk", None) or time.monotonic() < self._recover_at:
            return
        running = self._recovering
        if running is not None and running.is_alive():
            return
        self._recover_at = time.monotonic() + self._recover_wait
        self._recovering = threading.Thread(target=self._recover, name="store-recover", daemon=True)
        self._recovering.start()

    def _recover(self) -> None:
        try:
            if self.reopen_real_store():
                self._recover_wait = RECOVER_INTERVAL
                return
        except Exception as exc:  # the copy keeps serving; the next try is later
            log.warning("could not go back to the real index store yet: %s", exc)
        self._recover_wait = min(self._recover_wait * 2, RECOVER_MAX)

    def reopen_real_store(self) -> bool:
        """Serve the real store again once the disk has room: open it, load its generation, drop the copy.

        False (the copy keeps serving) while the disk is still full or the store cannot be opened yet. As
        at start-up, a probe process opens the store first (indexer/probe.py): this process failed to
        open it once already, and a hang in chromadb's native code must not take the server with it.
        """
        from indexer.api import open_reader, probe_store
        from indexer.diskspace import OPEN_ROOM, free_bytes

        settings = self.settings
        if not getattr(self.store, "full_disk", None):
            return False
        free = free_bytes(settings.data_dir)
        if free is not None and free < OPEN_ROOM:
            return False
        probe = probe_store(settings, timeout=settings.store_probe_timeout)
        if probe.verdict != "ok":  # still full, or a writer holds the store ("locked"): not yet
            log.info("the index store cannot be opened yet (%s: %s)", probe.verdict, probe.detail)
            return False
        store = open_reader(settings, self.embedder)
        try:
            if store.full_disk:  # the disk filled up again meanwhile: the copy already serving will do
                store.close()
                return False
            snapshot = self._load(store.generation(), store)
        except BaseException:
            store.close()
            raise
        with self._reload_lock:  # no generation check runs on the store being replaced
            if self._closed:
                store.close()
                return False
            old, self.store, self._snapshot = self.store, store, snapshot
            self._store_ok()
            old.close()  # removes the copy
        log.warning(
            "the disk holding %s has room again: serving the index from it (generation %s); the read-only "
            "copy is removed",
            settings.data_dir,
            snapshot.generation,
        )
        return True

    def _load(self, generation: str, store: IndexStore | None = None) -> _Snapshot:
        from service.analysis.advice import CuratedThreads
        from service.diagnosis import Problems
        from service.retrieval import Retriever

        store = store or self.store
        retriever = Retriever.from_store(store, self.embedder)
        documents = retriever.documents
        status = store.status()
        return _Snapshot(
            generation=generation,
            documents=documents,
            retriever=retriever,
            knowledge=Knowledge(documents),
            curated=CuratedThreads(documents),
            problems=Problems.load(self.settings.docs_dir, self.settings.data_dir / PROBLEMS_CACHE_DIR),
            index=index_info(status),
            status=status,
        )

    def _bounded(self, fn: Callable[[], T]) -> T:
        """Run a store call with a deadline so a hung server degrades instead of hanging a request."""
        future = self._probe_pool.submit(fn)
        try:
            return future.result(timeout=self.store_timeout)
        except FutureTimeout as exc:
            future.cancel()
            raise TimeoutError(f"the index store did not answer within {self.store_timeout:g}s") from exc

    # -- status ------------------------------------------------------------------------------------

    @property
    def generation(self) -> str:
        """The generation the engine currently answers from."""
        return self._snapshot.generation

    def known_repos(self) -> set[str]:
        """Repositories the loaded index holds threads from: a repo filter outside them matches nothing."""
        return {doc.repo for doc in self._snapshot.documents if doc.repo}

    def degraded_reasons(self, *, writing: bool = False) -> list[str]:
        """Why answers are currently degraded; empty when all is well.

        ``writing``: an index run of this process is in progress, so the index's mid-write marker is its
        own, not a killed run's.
        """
        reasons = []
        if self.store_health is not StoreHealth.OK:
            reasons.append(f"index store unreachable ({self._store_error}); serving the last loaded index")
        failed = self._dense_failed_at
        if failed is not None and time.monotonic() - failed < DENSE_DEGRADED_WINDOW:
            reasons.append("dense search failing; answers come from the lexical index")
        if self._snapshot.status.dirty and not writing:
            reasons.append(
                "the index was left mid-write by a run that did not finish (killed?): dense search may miss "
                "documents until the next `gptoss-doctor index` run repairs it (it re-embeds what is stored)"
            )
        if self._snapshot.status.full_disk:
            reasons.append(self._snapshot.status.full_disk)
        if self._snapshot.vector_problem:
            reasons.append(
                f"dense search is damaged: {self._snapshot.vector_problem}; the next "
                "`gptoss-doctor index` run repairs it"
            )
        over = self._over_budget_at
        if over is not None and time.monotonic() - over < BUDGET_WINDOW:
            reasons.append(
                f"lookups are running out of their {self.settings.lookup_budget:g}s budget (overloaded); "
                "recent answers are partial"
            )
        if self.harmony is None:
            reasons.append(f"Harmony analysis unavailable: {self.harmony_error or 'not loaded'}")
        return reasons

    def check_vectors(self) -> str | None:
        """Run the store's sampled vector self-check on the loaded generation and remember its finding.

        Not part of loading a generation (it embeds a small sample: a few hundred ms on a busy CPU), so
        ``serve`` runs it once in its start-up thread; the finding shows on /health until the next
        generation (a repair) replaces the snapshot.
        """
        check = getattr(self.store, "vector_problem", None)  # the real store has it; test stores do not
        if check is None:
            return None
        snap = self._snapshot
        problem: str | None = check()
        snap.vector_problem = problem
        return problem

    def index_needs_repair(self) -> bool:
        """The loaded index was left mid-write or failed its vector self-check: a writer run repairs it."""
        snap = self._snapshot
        return bool(snap.status.dirty or snap.vector_problem)

    def index_status(self) -> StoreStatus:
        """``Store.status()`` fresh when the store answers in time, else the last loaded one."""
        try:
            return self._bounded(self.store.status)
        except Exception as exc:
            self._store_failed(exc)
            return self._snapshot.status


def open_harmony(settings: Settings) -> tuple[HarmonyAnalyzer | None, str | None]:
    """The Harmony analyzer, or None with the reason: lookups still answer without token decoding."""
    from service.analysis.harmony import HarmonyAnalyzer

    try:
        return HarmonyAnalyzer(settings), None
    except Exception as exc:  # vocab provisioning or the native library; reported by /health
        log.warning("Harmony analysis unavailable: %s", exc)
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def require_ready(engine: LookupEngine | None, detail: str, retry_after: int = 5) -> LookupEngine:
    """The engine, or NotReady (503 + Retry-After) while it is still loading."""
    if engine is None:
        raise NotReady(detail, headers={"Retry-After": str(retry_after)})
    return engine
