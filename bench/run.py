"""One bench run: quality, latency, index, sync, start-up, memory and load, on this machine.

    .venv/bin/python -m bench.run                 # full run (~5 min on 2 cores)
    .venv/bin/python -m bench.run --quick         # a few queries, short load run (a smoke test)

Writes ``bench/results/latest.md`` and ``latest.json`` (``--out`` to change the folder) and a cProfile
listing ``profile.txt``. Every phase runs even when an earlier one failed; a failure is recorded in the
report under "Phase errors" and its targets read "not measured".

Phases, in order (each in a fresh temp data dir, nothing outside it is written):
1. ``gptoss-doctor index`` into an empty data dir (timed: the full index), then ``index --full``.
2. Idle GitHub re-sync: a copy of that data dir synced twice against the local fake GitHub
   (``tests/github_fake.py``); the second sync's request count is the idle cost.
3. Quality: the full pipeline through ``LookupEngine`` on the built index, BM25 and dense baselines,
   on ``dev.jsonl`` and ``dev-hard.jsonl`` (``GPTOSS_DOCTOR_EVAL_DIR``, default ``../shared/eval``);
   the pipeline and BM25 on the outside set (``bench/outside/``), per split and pasted / in-log;
   then a stage breakdown and a cProfile of in-process lookups.
4. ``gptoss-doctor serve`` on a free 127.0.0.1 port: cold start, then ``--repeat`` speed runs
   (``bench/speed.py``): one client over distinct queries with the naive embedding step,
   ``SentenceTransformer(bundled).encode([q])``, and ``LookupEngine.lookup`` in this process, each timed
   on the same text just before each request (interleaved, so all see the same machine load),
   8 concurrent clients, a cold CLI lookup; then the load run (8, 16, 32 clients; short errors and ~100 KB logs) while a
   re-index runs, RSS sampled throughout; ``--fuzz-cases N`` hands the live URL to ``bench/fuzz.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import machine, phases, served
from bench.report import markdown, targets

RESULTS = Path(__file__).resolve().parent / "results"
PHASES = ("github", "quality", "profile", "serve", "load")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Few queries and short runs: a smoke test.")
    parser.add_argument(
        "--limit", type=int, default=None, help="At most this many queries per eval set (default all; --quick: 12)."
    )
    parser.add_argument(
        "--load-seconds",
        type=float,
        default=None,
        help="Length of the load run, split over 8/16/32 clients (default 60; --quick: 6).",
    )
    parser.add_argument(
        "--fuzz-cases", type=int, default=0, help="Schemathesis cases against the served app (bench/fuzz.py; 0 skips)."
    )
    parser.add_argument(
        "--reindex-via",
        choices=("auto", "cli", "admin"),
        default="auto",
        help="How the load run re-indexes: `gptoss-doctor index` beside the server, the admin "
        "endpoint, or auto (the CLI when the store lock allows it, else the endpoint).",
    )
    parser.add_argument(
        "--skip",
        type=lambda v: [p for p in v.split(",") if p],
        default=[],
        help=f"Comma-separated phases to leave out: {', '.join(PHASES)} (for iterating; a full run has none).",
    )
    parser.add_argument(
        "--from-data-dir",
        type=Path,
        default=None,
        help="Copy this built data dir instead of running the index phase (for iterating on speed).",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="Speed runs (fresh server, one client against the baselines, 8 clients, cold CLI); targets are "
        "judged on the median of the runs' ratios (issue 17 asks for 5).",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="Folder for latest.md/latest.json.")
    parser.add_argument("--keep", action="store_true", help="Keep the temp data dirs (their path is printed).")
    args = parser.parse_args(argv)
    unknown = set(args.skip) - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s) in --skip: {', '.join(sorted(unknown))}")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.limit is None and args.quick:
        args.limit = 12
    if args.load_seconds is None:
        args.load_seconds = 6.0 if args.quick else 60.0
    return args


class Run:
    """The results being gathered and the phase errors, with a phase wrapper that never raises."""

    def __init__(self) -> None:
        self.results: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        try:
            yield
        except Exception as exc:  # recorded in the report; the next phase still runs
            self.errors[name] = f"{type(exc).__name__}: {str(exc)[:400]}"
            print(f"[bench] {name} FAILED: {self.errors[name]}", file=sys.stderr, flush=True)
            traceback.print_exc(file=sys.stderr)
        print(f"[bench] {name} done in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for key, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(key, value)
    t0 = time.perf_counter()
    run = Run()
    r = run.results
    r["started_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    r["mode"] = "quick" if args.quick else "full"
    r["command"] = shlex.join(["python", "-m", "bench.run", *(argv if argv is not None else sys.argv[1:])])
    r["machine"] = machine.describe()
    load_start = machine.load_average()
    root = Path(tempfile.mkdtemp(prefix="gptoss-doctor-bench-"))
    data_dir = root / "data"
    args.out.mkdir(parents=True, exist_ok=True)
    skip = set(args.skip)
    texts: list[tuple[str, str]] = []
    try:
        if args.from_data_dir is not None:
            # A built data dir is copied, never used in place: the load run re-indexes it.
            shutil.copytree(args.from_data_dir, data_dir)
            r["index"] = {"from": str(args.from_data_dir)}
        else:
            with run.phase("index"):
                r["index"] = phases.index(data_dir)
        if "github" not in skip:
            with run.phase("github"), phases.fake_github() as fake:
                r["github"] = phases.github_resync(data_dir, root / "github-data", fake)
        if "quality" not in skip:
            with run.phase("quality"):
                profile_to = None if "profile" in skip else args.out
                quality, texts, engine_report = phases.quality(data_dir, limit=args.limit, profile_to=profile_to)
                r["quality"] = quality
                r["embedder"] = engine_report.pop("embedder", None)
                r.setdefault("latency", {})["in_process"] = engine_report.pop("in_process", None)
                r["profile"] = engine_report
        if not texts:  # quality skipped or failed: still time the service on the eval texts
            texts = phases.eval_texts(limit=args.limit)
        if "serve" not in skip:
            naive = None
            with run.phase("naive-encode model"):
                naive = phases.naive_encoder()  # loaded before the server starts; timed interleaved with it
                r["torch_threads"] = phases.torch_threads()
            in_process = None
            with run.phase("in-process engine"):
                in_process = served.InProcess(data_dir)  # the floor, timed interleaved with the server
            with run.phase("serve"), phases.fake_github() as fake:
                result = served.served(
                    data_dir,
                    texts,
                    fake,
                    load_seconds=0 if "load" in skip else args.load_seconds,
                    quick=args.quick,
                    reindex_via=args.reindex_via,
                    fuzz_cases=args.fuzz_cases,
                    naive=naive,
                    on_error=run.errors.__setitem__,
                    in_process=in_process,
                    repeat=args.repeat,
                )
                if in_process is not None:
                    in_process.close()  # closed by served() after its speed runs; again here if it failed
                for key in ("cold_start", "load", "service_memory", "memory_before_load", "fuzz"):
                    if key in result:
                        r[key] = result[key]
                r.setdefault("latency", {}).update(result.get("latency", {}))
    finally:
        if args.keep:
            print(f"[bench] data kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    r["duration_s"] = round(time.perf_counter() - t0, 1)
    r["load_avg"] = f"{load_start} / {machine.load_average()}"
    r["targets"] = [t.as_dict() for t in targets(r)]
    r["errors"] = run.errors
    (args.out / "latest.json").write_text(json.dumps(r, indent=1, default=str) + "\n")
    (args.out / "latest.md").write_text(markdown(r) + "\n")
    print(markdown(r))
    failed: Callable[[dict[str, Any]], bool] = lambda t: t["pass"] is False  # noqa: E731
    print(
        f"[bench] wrote {args.out / 'latest.md'}; {sum(map(failed, r['targets']))} target(s) missed, "
        f"{len(run.errors)} phase error(s)",
        file=sys.stderr,
    )
    return 1 if run.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
