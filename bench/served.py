"""The served phases: cold start, latency, throughput, the load run during a re-index, fuzzing hook.

All against a real ``gptoss-doctor serve`` process on 127.0.0.1 with the data dir the index phase built.
"""

from __future__ import annotations

import importlib
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench import speed
from bench.load import (
    RunResult,
    big_log,
    concurrent,
    interleaved_many,
    mixed_hostile_run,
    single_client,
    summarize,
)
from bench.procs import RssSampler, Server, child_env, run_cli

READY_TIMEOUT = 180.0
PROBE = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
WARMUP = [
    "KeyError: 'tool_calls'",
    "ValueError: No tool call parser registered for openai",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]
LOAD_LEVELS = (8, 16, 32)
BIG_EVERY = 4
"""One request in this many of the load run is a ~100 KB log."""
MAX_REINDEX_RUNS = 20
LOAD_CYCLES = 2
"""Load cycles run while re-indexing (between a quiet cycle before and one after)."""
EXIT_LOCKED = 75
"""``gptoss-doctor index``'s exit code when another process holds the store."""
FLAT_REL, FLAT_ABS_MB = 0.05, 20.0
"""Memory counts as flat when the quiet cycle after the re-index peaks within max(5%, 20 MB) of the one before."""


def served(
    data_dir: Path,
    texts: Sequence[tuple[str, str]],
    fake: Any,
    *,
    load_seconds: float,
    quick: bool,
    reindex_via: str,
    fuzz_cases: int,
    naive: Callable[[str], object] | None,
    on_error: Callable[[str, str], None],
    in_process: InProcess | None = None,
    repeat: int = 1,
) -> dict[str, Any]:
    """Start the server twice (cold start, restart), then ``repeat`` speed runs, fuzz and load runs.

    Each speed run after the first restarts the server; the last one's server takes the fuzz and load
    runs. ``in_process`` (the bench process's own engine) is closed once the speed runs are done.
    """
    token = secrets.token_urlsafe(16)
    env = {"GPTOSS_DOCTOR_ADMIN_TOKEN": token, "GPTOSS_DOCTOR_GITHUB_API_URL": fake.base_url}
    out: dict[str, Any] = {"latency": {}}
    first = Server(data_dir, env).start()
    try:
        marks = first.wait_ready(PROBE, timeout=READY_TIMEOUT)
    finally:
        first.stop()
    server = Server(data_dir, env).start()
    try:
        again = server.wait_ready(PROBE, timeout=READY_TIMEOUT)
        out["cold_start"] = {
            **{k: round(v, 2) for k, v in marks.items()},
            "restart_health_ok_s": round(again["health_ok"], 2),
            "restart_lookup_ok_s": round(again["lookup_ok"], 2),
        }
        out["cold_start"]["lookup_ok_s"] = out["cold_start"].pop("lookup_ok")
        out["cold_start"]["health_ok_s"] = out["cold_start"].pop("health_ok")
        runs: list[dict[str, Any]] = []
        try:
            for i in range(max(1, repeat)):
                if i > 0:
                    server.stop()
                    server = Server(data_dir, env).start()
                    server.wait_ready(PROBE, timeout=READY_TIMEOUT)
                runs.append(speed_run(server, data_dir, texts, naive=naive, in_process=in_process, quick=quick))
        finally:
            if in_process is not None:
                in_process.close()
        # The tables show the run whose served p50 is the median; targets read the medians of all runs.
        ordered = sorted(runs, key=lambda run: run["single"].get("p50_ms") or 0.0)
        out["latency"].update(ordered[len(ordered) // 2])
        out["latency"]["runs"] = runs
        out["memory_before_load"] = server.memory()
        if fuzz_cases > 0:
            out["fuzz"] = _fuzz(server.url, fuzz_cases, on_error)
        try:
            if load_seconds > 0:
                out["load"] = load_run(server, texts, env, token, seconds=load_seconds, via=reindex_via)
        except Exception as exc:  # the memory figure below is still worth having
            on_error("load", f"{type(exc).__name__}: {str(exc)[:400]}")
        try:
            short = [t for kind, t in texts if kind == "short"][:40] or WARMUP
            out["hostile_mix"] = mixed_hostile_run(server.url, short, seconds=6 if quick else 30)
        except Exception as exc:
            on_error("hostile_mix", f"{type(exc).__name__}: {str(exc)[:400]}")
        out["service_memory"] = server.memory()
    finally:
        code = server.stop()
        out.setdefault("service_memory", {})
        if out["service_memory"] is not None:
            out["service_memory"]["exit_code"] = code
    return out


class InProcess:
    """``LookupEngine.lookup`` in the bench process on the served data dir: the floor without HTTP."""

    def __init__(self, data_dir: Path) -> None:
        from service.config import load_settings
        from service.engine import LookupEngine

        # Long-lived like serve: the same embedder sessions, so the floor compares like with like.
        self.engine = LookupEngine.open(load_settings(data_dir=data_dir), build_if_empty=False, long_lived=True)
        self.closed = False
        for text in WARMUP:
            self.engine.lookup(text, 5)

    def __call__(self, text: str) -> object:
        return self.engine.lookup(text, 5)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.engine.close()


def speed_run(
    server: Server,
    data_dir: Path,
    texts: Sequence[tuple[str, str]],
    *,
    naive: Callable[[str], object] | None,
    in_process: InProcess | None,
    quick: bool,
) -> dict[str, Any]:
    """One speed run on a ready server: one client interleaved with the baselines, 8 clients, cold CLI."""
    single_client(server.url, [("warmup", w) for w in WARMUP], deadline_s=60)
    baselines: dict[str, Callable[[str], object]] = {}
    if naive is not None:
        baselines["naive_encode"] = naive
    if in_process is not None:
        baselines["in_process"] = in_process
    single, base_ms = interleaved_many(server.url, texts, baselines, deadline_s=600)
    run: dict[str, Any] = {"single": single.report()}
    if naive is not None:
        run["naive_encode"] = {**summarize(base_ms["naive_encode"]), "backend": "sentence-transformers/torch"}
    if in_process is not None:
        run["in_process"] = {**summarize(base_ms["in_process"]), "interleaved": True}
    run["concurrent"] = concurrent(
        server.url,
        texts,
        clients=speed.CLIENTS,
        seconds=20 if quick else 60,
        max_requests=len(texts) * (1 if quick else 3),
    ).report()
    run["cold_cli"] = speed.cold_cli(data_dir, server.port)
    return run


def _fuzz(url: str, cases: int, on_error: Callable[[str, str], None]) -> dict[str, Any]:
    """Hand the live server to ``bench/fuzz.py`` (the reliability engineer's), when it exists."""
    try:
        fuzz = importlib.import_module("bench.fuzz")
    except ImportError:
        return {"skipped": "bench/fuzz.py is not there yet"}
    try:
        result: dict[str, Any] = fuzz.run(url, cases)
        return result
    except Exception as exc:
        on_error("fuzz", f"{type(exc).__name__}: {str(exc)[:400]}")
        return {"error": str(exc)[:400]}


def load_mix(texts: Sequence[tuple[str, str]], n: int = 64) -> list[tuple[str, str]]:
    """Short eval errors with every ``BIG_EVERY``-th request a distinct ~100 KB log around one of them."""
    short = [t for kind, t in texts if kind == "short"] or [t for _, t in texts]
    bigs = [big_log(short[i % len(short)], seed=i) for i in range(8)]
    mix = []
    for i in range(n):
        if i % BIG_EVERY == BIG_EVERY - 1:
            mix.append(("100KB log", bigs[(i // BIG_EVERY) % len(bigs)]))
        else:
            mix.append(("short error", short[i % len(short)]))
    return mix


class Reindexer:
    """Keeps a re-index running through the load run: the CLI beside the server, or the admin endpoint.

    Runs back to back until ``until`` (at most ``MAX_REINDEX_RUNS``; a failed run waits 2 s before the
    next), each recorded with its start and end on the load run's clock.
    """

    def __init__(self, server: Server, env: dict[str, str], token: str, via: str, t0: float, until: float) -> None:
        self.server, self.env, self.token, self.via = server, env, token, via
        self.t0, self.until = t0, until
        self.runs: list[dict[str, Any]] = []
        self._settled = False
        self.thread = threading.Thread(target=self._loop, name="reindexer", daemon=True)

    def _status(self, client: httpx.Client) -> dict[str, Any]:
        data: dict[str, Any] = client.get("/v1/index/status").json()
        return data

    def _cli(self) -> dict[str, Any]:
        run = run_cli(["index", "--full"], child_env(self.server.data_dir, self.env), timeout=600)
        return {"ok": run.ok, "code": run.returncode, "detail": run.tail(2)}

    def _admin(self, client: httpx.Client) -> dict[str, Any]:
        before = self._status(client).get("last_run")
        response = client.post("/v1/index/rebuild", headers={"Authorization": f"Bearer {self.token}"})
        if response.status_code != 202:
            return {"ok": False, "detail": f"HTTP {response.status_code}: {response.text[:200]}"}
        deadline = max(self.until, time.perf_counter()) + 300
        while time.perf_counter() < deadline:
            time.sleep(0.5)
            status = self._status(client)
            last = status.get("last_run")
            if last and last != before and not (status.get("scheduler") or {}).get("running"):
                return {"ok": bool(last.get("ok")), "detail": last.get("summary") or last.get("error")}
        return {"ok": False, "detail": "did not finish in time"}

    def _timed(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        start = time.perf_counter() - self.t0
        outcome = fn()
        end = time.perf_counter() - self.t0
        return {**outcome, "start_s": round(start, 2), "end_s": round(end, 2), "seconds": round(end - start, 2)}

    def _settle(self) -> dict[str, Any] | None:
        """Decide, once, how re-indexes run: ``auto`` tries the CLI first; that try, when the CLI was
        allowed, is a re-index and is returned."""
        if self._settled:
            return None
        self._settled = True
        if self.via not in ("auto", "cli"):
            self.via = "admin endpoint"
            return None
        first = self._timed(self._cli)
        locked = first.get("code") == EXIT_LOCKED or "held by" in str(first["detail"])
        if self.via == "cli" or not locked:
            self.via = "cli (`gptoss-doctor index --full` beside the server)"
            return first
        self.via = "admin endpoint (the CLI is refused while serve holds the store lock)"
        return None

    def _run(self, client: httpx.Client) -> dict[str, Any]:
        return self._timed(self._cli if self.via.startswith("cli") else partial(self._admin, client))

    def _loop(self) -> None:
        with httpx.Client(base_url=self.server.url, timeout=30) as client:
            first = self._settle()
            if first is not None:
                self.runs.append(first)
            while time.perf_counter() < self.until and len(self.runs) < MAX_REINDEX_RUNS:
                run = self._run(client)
                self.runs.append(run)
                if not run["ok"]:
                    time.sleep(2)

    def once(self) -> dict[str, Any]:
        """One re-index now, in this thread, the way the loop runs them; its record (not one of ``runs``)."""
        with httpx.Client(base_url=self.server.url, timeout=30) as client:
            return self._settle() or self._run(client)

    def report(self, start: float, end: float) -> dict[str, Any]:
        """The runs, and the share of the window ``start``-``end`` (seconds on the load clock) spent re-indexing."""
        done = [r for r in self.runs if r["ok"]]
        busy = sum(max(0.0, min(r["end_s"], end) - max(r["start_s"], start)) for r in done)
        window = end - start
        return {
            "via": self.via,
            "runs": self.runs,
            "completed": len(done),
            "failed": len(self.runs) - len(done),
            "seconds": [r["seconds"] for r in done],
            "busy_fraction": round(busy / window, 2) if window > 0 else None,
        }


def load_run(
    server: Server, texts: Sequence[tuple[str, str]], env: dict[str, str], token: str, *, seconds: float, via: str
) -> dict[str, Any]:
    """Cycles of 8, 16, then 32 clients over the mixed inputs: a quiet one, a first re-index (no load), a
    quiet one, two while re-indexing, a quiet one.

    ``seconds`` is the length of the re-indexing cycles; each quiet cycle's phases are as long as theirs.
    The memory rule compares the last two quiet cycles: the same concurrency, no re-index running and one
    index generation loaded, before and after thousands of requests and a generation swap. The first quiet
    cycle is reported, not judged: the step from it to the next is the first re-index of the process
    loading, once, what only index runs use (modules, the encoder's bulk buffers). The re-index cycles
    are reported but not judged: they hold the re-index's working memory, and while a new generation loads
    the last good one keeps serving, so both are in memory for a moment by design.
    """
    mix = load_mix(texts)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        generation_before = client.get("/v1/index/status").json().get("generation")
    phase_s = seconds / (LOAD_CYCLES * len(LOAD_LEVELS))
    t0 = time.perf_counter()
    phases: list[dict[str, Any]] = []
    results: list[RunResult] = []
    cycles: list[tuple[float, float]] = []

    def cycle(label: str) -> None:
        begin = time.perf_counter() - t0
        for clients in LOAD_LEVELS:
            result = concurrent(server.url, mix, clients=clients, seconds=phase_s, max_requests=100_000)
            results.append(result)
            phases.append({**result.report(), "cycle": label})
        cycles.append((begin, time.perf_counter() - t0))

    with RssSampler(server.pid, t0=t0) as sampler:
        cycle("quiet, first")
        # The process's first re-index loads what only index runs use, once: the memory rule judges the
        # re-indexes after it (growth per re-index is what adds up in a long-running service).
        reindexer = Reindexer(server, env, token, via, t0=t0, until=0.0)
        first_run = reindexer.once()
        time.sleep(2)
        cycle("quiet, before")
        reindex_start = time.perf_counter()
        reindexer.until = reindex_start + seconds
        reindexer.thread.start()
        for i in range(LOAD_CYCLES):
            cycle(f"re-index {i + 1}")
        load_end = time.perf_counter() - t0
        reindexer.thread.join(600)  # the last re-index finishes (and its generation loads) before the quiet cycle
        time.sleep(2)
        cycle("quiet, after")
    with httpx.Client(base_url=server.url, timeout=30) as client:
        generation_after = client.get("/v1/index/status").json().get("generation")
    samples = [s for r in results for s in r.samples]
    overall = RunResult(clients=max(LOAD_LEVELS), seconds=sum(r.seconds for r in results), samples=samples)
    return {
        "seconds": seconds,
        "phases": phases,
        "overall": {**overall.report(), "clients": f"{min(LOAD_LEVELS)}-{max(LOAD_LEVELS)}"},
        "reindex": {
            **reindexer.report(reindex_start - t0, load_end),
            "generation_before": generation_before,
            "generation_after": generation_after,
            "warmup": first_run,
        },
        "rss": rss_report(sampler.samples, cycles=cycles, after=server.memory(), anon=sampler.anon, baseline=1),
    }


def rss_report(
    samples: list[tuple[float, float]],
    *,
    cycles: list[tuple[float, float]],
    after: dict[str, float] | None,
    anon: list[tuple[float, float]] | None = None,
    baseline: int = 0,
) -> dict[str, Any]:
    """RSS at the start, the end and the peak of the load, each cycle's peak, and whether it is flat.

    Flat: the last cycle peaks no higher than cycle ``baseline`` by more than max(FLAT_REL of it,
    FLAT_ABS_MB); ``load_run`` makes those two its quiet cycles before and after the judged re-indexes,
    and reports the step from its first quiet cycle to the baseline (``first_step_mb``) beside them.
    ``anon`` (RssAnon samples) adds each cycle's peak of private memory, for telling a leak from mapped
    files paged in: it is reported, the rule stays on RSS.
    """
    if not samples or not cycles:
        return {"samples": 0}
    during = [(t, v) for t, v in samples if t <= cycles[-1][1]] or samples
    peaks = _cycle_peaks(samples, cycles)
    growth = _difference(peaks, baseline)
    base = peaks[baseline] if growth is not None else None
    first_step = _difference(peaks[: baseline + 1], 0) if baseline else None
    anon_peaks = _cycle_peaks(anon, cycles) if anon else None
    return {
        "samples": len(during),
        "start_mb": during[0][1],
        "end_mb": during[-1][1],
        "max_mb": max(v for _, v in during),
        "cycle_peaks_mb": peaks,
        "after_mb": (after or {}).get("rss_mb"),
        "growth_mb": growth,
        "first_step_mb": first_step,
        "anon_growth_mb": _difference(anon_peaks, baseline),
        "rule": f"quiet cycle after the re-index: peak - the quiet cycle before's <= max({FLAT_REL:.0%} of it, "
        f"{FLAT_ABS_MB:g} MB)" + (" (both after the process's first re-index)" if baseline else ""),
        "flat": None if growth is None or base is None else growth <= max(FLAT_REL * base, FLAT_ABS_MB),
        "series": [[t, v] for t, v in samples[:: max(1, len(samples) // 120)]],
        "anon_cycle_peaks_mb": anon_peaks,
    }


def _difference(peaks: list[float | None] | None, baseline: int) -> float | None:
    """The last cycle's peak minus cycle ``baseline``'s, when both are known."""
    if not peaks or len(peaks) <= baseline + 1:
        return None
    base, last = peaks[baseline], peaks[-1]
    return None if base is None or last is None else round(last - base, 1)


def _cycle_peaks(series: list[tuple[float, float]], cycles: list[tuple[float, float]]) -> list[float | None]:
    """The highest value of a (time, value) series within each (start, end) cycle."""
    return [max((v for t, v in series if a <= t <= b), default=None) for a, b in cycles]
