"""HTTP clients for the latency, throughput and load runs against a served app on loopback.

Every run is bounded twice: by a request count and by a deadline. Latency is measured on the client
(send to last byte of the response), so it includes HTTP and JSON on both sides, like a real caller.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

REQUEST_TIMEOUT = 60.0
SETTLE_S = 0.05
"""Pause between a baseline call and the request that follows it (see :func:`interleaved`)."""


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (linear interpolation), or None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), p))


def summarize(latencies_ms: Sequence[float]) -> dict[str, Any]:
    """n, p50, p90, p99, max and mean of latencies in milliseconds, rounded."""

    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return {
        "n": len(latencies_ms),
        "p50_ms": r(percentile(latencies_ms, 50)),
        "p90_ms": r(percentile(latencies_ms, 90)),
        "p99_ms": r(percentile(latencies_ms, 99)),
        "max_ms": r(max(latencies_ms) if latencies_ms else None),
        "mean_ms": r(float(np.mean(latencies_ms)) if latencies_ms else None),
    }


@dataclass
class Sample:
    """One request: when it started (s since the run began), how long it took, what came back."""

    start: float
    ms: float
    status: int
    kind: str
    error: str | None = None


@dataclass
class RunResult:
    """Every request of one run."""

    clients: int
    seconds: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    @property
    def errors(self) -> list[Sample]:
        return [s for s in self.samples if s.status != 200]

    def report(self) -> dict[str, Any]:
        """Latency summary overall and per request kind, throughput, and the errors by cause."""
        ok = [s.ms for s in self.samples]
        kinds = sorted({s.kind for s in self.samples})
        causes = Counter(s.error or f"HTTP {s.status}" for s in self.errors)
        return {
            "clients": self.clients,
            "seconds": round(self.seconds, 2),
            "requests": len(self.samples),
            "throughput_rps": round(len(self.samples) / self.seconds, 2) if self.seconds else None,
            "errors": len(self.errors),
            "error_causes": dict(causes.most_common(5)),
            **summarize(ok),
            "by_kind": {k: summarize([s.ms for s in self.samples if s.kind == k]) for k in kinds},
        }


def post_lookup(client: httpx.Client, text: str, kind: str, t0: float) -> Sample:
    """POST /lookup once and time it; a transport error becomes a sample with status 0."""
    start = time.perf_counter()
    try:
        response = client.post("/lookup", json={"error": text, "top_k": 5})
        response.read()
        status, error = response.status_code, None
        if status != 200:
            error = f"HTTP {status}: {response.text[:120]}"
    except httpx.HTTPError as exc:
        status, error = 0, f"{type(exc).__name__}: {str(exc)[:120]}"
    end = time.perf_counter()
    return Sample(start=start - t0, ms=(end - start) * 1000, status=status, kind=kind, error=error)


def single_client(base_url: str, texts: Sequence[tuple[str, str]], *, deadline_s: float) -> RunResult:
    """One client, each (kind, text) once, in order; stops early at the deadline."""
    run = RunResult(clients=1)
    t0 = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT) as client:
        for kind, text in texts:
            if time.perf_counter() - t0 > deadline_s:
                break
            run.samples.append(post_lookup(client, text, kind, t0))
    run.seconds = time.perf_counter() - t0
    return run


def interleaved(
    base_url: str, texts: Sequence[tuple[str, str]], baseline: Callable[[str], object], *, deadline_s: float
) -> tuple[RunResult, list[float]]:
    """One client, each (kind, text) once; before each request the same text through ``baseline``.

    Interleaving puts both figures under the same machine conditions, so their ratio stays fair when
    other work comes and goes on a small machine. Returns the lookups and the baseline's milliseconds.
    """
    run, base = interleaved_many(base_url, texts, {"baseline": baseline}, deadline_s=deadline_s)
    return run, base["baseline"]


def interleaved_many(
    base_url: str,
    texts: Sequence[tuple[str, str]],
    baselines: Mapping[str, Callable[[str], object]],
    *,
    deadline_s: float,
) -> tuple[RunResult, dict[str, list[float]]]:
    """:func:`interleaved` with several baselines, each run on the text (in order) before its request."""
    run = RunResult(clients=1)
    base_ms: dict[str, list[float]] = {name: [] for name in baselines}
    t0 = time.perf_counter()
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT) as client:
        for kind, text in texts:
            if time.perf_counter() - t0 > deadline_s:
                break
            for name, baseline in baselines.items():
                started = time.perf_counter()
                baseline(text)
                base_ms[name].append((time.perf_counter() - started) * 1000)
                # torch's intra-op threads spin-wait after a call; on 2 cores they would steal the CPU the
                # server needs for the request that follows (measured: +50% on the lookup p50).
                time.sleep(SETTLE_S)
            run.samples.append(post_lookup(client, text, kind, t0))
    # Busy time of the lookups alone, so req/s is not diluted by the baselines' share of the loop.
    run.seconds = sum(s.ms for s in run.samples) / 1000
    return run, base_ms


def concurrent(
    base_url: str,
    texts: Sequence[tuple[str, str]],
    *,
    clients: int,
    seconds: float,
    max_requests: int,
) -> RunResult:
    """``clients`` threads take the next (kind, text) in turn (cycling) until the deadline or the count.

    Threads, not asyncio: each client is blocking like most real callers, and the GIL is released
    while a thread waits on its socket, which is nearly all of a client's time.
    """
    run = RunResult(clients=clients)
    lock = threading.Lock()
    counter = iter(range(max_requests))
    t0 = time.perf_counter()
    deadline = t0 + seconds

    def worker() -> None:
        with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT) as client:
            while time.perf_counter() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                kind, text = texts[i % len(texts)]
                sample = post_lookup(client, text, kind, t0)
                with lock:
                    run.samples.append(sample)

    threads = [threading.Thread(target=worker, name=f"client-{n}", daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        # A request in flight at the deadline may take up to REQUEST_TIMEOUT to finish.
        thread.join(seconds + REQUEST_TIMEOUT + 5)
    run.seconds = time.perf_counter() - t0
    return run


_NOISE = [
    "(APIServer pid={pid}) INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: {a:.1f} tokens/s, "
    "Avg generation throughput: {b:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: "
    "{kv:.1f}%, Prefix cache hit rate: {hit:.1f}%",
    '(APIServer pid={pid}) INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid={pid}) INFO {ts} [logger.py:41] Received request chatcmpl-{rid}: prompt: '<|start|>user"
    "<|message|>summarise the report<|end|>', params: SamplingParams(n=1, temperature=1.0, top_p=1.0, "
    "max_tokens={r}00), prompt_token_ids: None, lora_request: None.",
    "(APIServer pid={pid}) INFO {ts} [async_llm.py:273] Added request chatcmpl-{rid}.",
    "(EngineCore_0 pid={pid}) DEBUG {ts} [core.py:769] EngineCore loop active, {r} running requests",
]


def big_log(error: str, *, size: int = 100_000, seed: int = 0) -> str:
    """A ~``size``-byte vLLM server log of routine lines with ``error`` buried at about 70% of it."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    insert_at: int | None = None
    while total < size:
        if insert_at is None and total >= size * 0.7:
            insert_at = len(lines)
            lines.extend(error.splitlines())
            total += len(error) + 1
            continue
        line = rng.choice(_NOISE).format(
            pid=48213,
            ts=f"08-21 09:{rng.randrange(60):02d}:{rng.randrange(60):02d}",
            a=rng.uniform(0, 900),
            b=rng.uniform(0, 300),
            r=rng.randrange(1, 40),
            kv=rng.uniform(0, 60),
            hit=rng.uniform(0, 90),
            port=rng.randrange(30000, 60000),
            rid=f"{rng.getrandbits(64):016x}",
        )
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)


MB = 1_000_000


def pathological_bodies() -> list[str]:
    """1 MB inputs of the shapes issue 16 found superlinear (distinct flags, arg keys, env vars)."""
    return [
        "".join("vllm serve " + " ".join(f"--f{i * 100 + j}" for j in range(100)) + "\n" for i in range(1_900))[:MB],
        "".join(
            "non-default args: {" + ", ".join(f"'k{i * 50 + j}': 'v'" for j in range(50)) + "}\n" for i in range(1_500)
        )[:MB],
        " ".join(f"VLLM_X{i}=1" for i in range(90_000))[:MB],
        "".join(f"error: worker {i} failed: error: code {i * 7}\n" for i in range(40_000))[:MB],
    ]


def hostile_mix(short: Sequence[str], *, every: int = 8) -> list[tuple[str, str]]:
    """Short errors with every ``every``-th request a pathological 1 MB body."""
    bodies = pathological_bodies()
    mix: list[tuple[str, str]] = []
    for i in range(every * len(bodies)):
        if i % every == every - 1:
            mix.append(("1MB pathological", bodies[(i // every) % len(bodies)]))
        else:
            mix.append(("short error", short[i % len(short)]))
    return mix


def mixed_hostile_run(
    base_url: str, short: Sequence[str], *, clients: int = 32, seconds: float = 30.0
) -> dict[str, Any]:
    """Issue 16: the short-lookup p99 with pathological 1 MB bodies among the lookups vs without them.

    Two runs of ``clients`` clients each: short errors only, then the same with every 8th request a
    pathological 1 MB body. Passes when the short lookups' p99 stays within 3x of the first run's.
    """
    baseline = concurrent(
        base_url, [("short error", t) for t in short], clients=clients, seconds=seconds, max_requests=100_000
    )
    mixed = concurrent(base_url, hostile_mix(short), clients=clients, seconds=seconds, max_requests=100_000)
    base_p99 = percentile([s.ms for s in baseline.samples if s.status == 200], 99)
    short_ok = [s.ms for s in mixed.samples if s.kind == "short error" and s.status == 200]
    mixed_p99 = percentile(short_ok, 99)
    ratio = None if not base_p99 or mixed_p99 is None else round(mixed_p99 / base_p99, 2)
    return {
        "clients": clients,
        "seconds_per_run": seconds,
        "without_pathological": baseline.report(),
        "with_pathological": mixed.report(),
        "short_p99_without_ms": None if base_p99 is None else round(base_p99, 2),
        "short_p99_with_ms": None if mixed_p99 is None else round(mixed_p99, 2),
        "ratio": ratio,
        "rule": "short-lookup p99 with 1 MB pathological bodies among them <= 3x its value without them",
        "ok": ratio is not None and ratio <= 3.0 and not any(s.status == 0 for s in mixed.samples),
    }
