"""Cold ``gptoss-doctor lookup``: one fresh process per answer, timed from spawn to exit (issue 13).

    .venv/bin/python -m bench.cold_cli                         # builds an index first (~30 s)
    .venv/bin/python -m bench.cold_cli --from-data-dir DIR     # copies a built data dir instead

Two ways a cold CLI answers, each run ``--runs`` times (median reported):
- ``in-process``: no service on this host (GPTOSS_DOCTOR_PORT points at a closed port), so the process
  opens Chroma, the ONNX embedder and Harmony itself. Whether torch was imported is checked with
  ``python -X importtime`` on one more run.
- ``via service``: a ``gptoss-doctor serve`` is ready on GPTOSS_DOCTOR_PORT, and ``lookup`` (no --url)
  finds it with its loopback probe and asks it.
Writes ``cold_cli.json`` and ``cold_cli.md`` in ``--out`` (default bench/results). The target is 1.5 s.
The child processes run whatever ``PYTHONPATH`` selects, so the same module measures an older checkout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import machine
from bench.procs import CLI, REPO, Server, child_env, free_port, run_cli

RESULTS = Path(__file__).resolve().parent / "results"
QUERY = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
TARGET_SECONDS = 1.5


def _series(runs: list[Any]) -> dict[str, Any]:
    seconds = [round(r.seconds, 3) for r in runs]
    return {
        "runs": seconds,
        "median_s": round(statistics.median(seconds), 3),
        "ok": all(r.ok for r in runs),
        "errors": [r.tail() for r in runs if not r.ok][:2],
    }


def torch_imported(env: dict[str, str]) -> bool:
    """True when a cold in-process lookup imports torch (checked with -X importtime)."""
    code = "import sys; from service.cli import main; sys.argv[0] = 'gptoss-doctor'; main()"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, "lookup", QUERY],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return any(line.rsplit("|", 1)[-1].strip() == "torch" for line in proc.stderr.splitlines())


def measure(data_dir: Path, runs: int) -> dict[str, Any]:
    """Both series on a built data dir."""
    closed = free_port()  # bound and released: nothing listens there
    env = child_env(data_dir, {"GPTOSS_DOCTOR_PORT": str(closed)})
    run_cli(["lookup", QUERY], env, timeout=600)  # warm-up: page cache, the ONNX export check, the vocab
    in_process = [run_cli(["lookup", QUERY], env, timeout=300) for _ in range(runs)]
    result: dict[str, Any] = {"in_process": _series(in_process), "torch_imported": torch_imported(env)}
    server = Server(data_dir).start()
    try:
        server.wait_ready(QUERY, timeout=180)
        env = child_env(data_dir, {"GPTOSS_DOCTOR_PORT": str(server.port)})
        via = [run_cli(["lookup", QUERY], env, timeout=120) for _ in range(runs)]
        result["via_service"] = _series(via)
        result["via_service"]["used_service"] = all("answered by the gptoss-doctor service" in r.stderr for r in via)
    finally:
        server.stop()
    return result


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Cold `gptoss-doctor lookup`",
        "",
        f"{report['when']}, {report['machine']['cpu']} ({report['machine']['cores']} cores), Python "
        f"{report['machine']['python']}, 1-minute load average {report['load_average_1m']} at the end. Each run is "
        f"a fresh process (spawn to exit); median of {report['runs']}. Target: {TARGET_SECONDS} s.",
        "",
        "| path | median | runs (s) | target |",
        "| --- | --- | --- | --- |",
    ]
    for key, label in (("in_process", "in-process (no service running)"), ("via_service", "via the running service")):
        series = report.get(key)
        if not series:
            lines.append(f"| {label} | not measured | | |")
            continue
        verdict = "pass" if series["ok"] and series["median_s"] <= TARGET_SECONDS else "FAIL"
        runs = ", ".join(f"{s:.2f}" for s in series["runs"])
        lines.append(f"| {label} | {series['median_s']:.2f} s | {runs} | {verdict} |")
    lines += ["", f"torch imported by an in-process lookup: {'yes' if report.get('torch_imported') else 'no'}."]
    if report.get("via_service") and not report["via_service"].get("used_service"):
        lines.append("The CLI did NOT report using the running service on every run.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_cli", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="Runs per path (median reported).")
    parser.add_argument("--from-data-dir", type=Path, help="Copy this built data dir instead of indexing.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Folder for cold_cli.json / cold_cli.md.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gptoss-doctor-cold-") as tmp:
        data_dir = Path(tmp) / "data"
        if args.from_data_dir:
            shutil.copytree(args.from_data_dir, data_dir)
        else:
            built = run_cli(["index"], child_env(data_dir), timeout=900)
            if not built.ok:
                print(f"index failed: {built.tail()}", file=sys.stderr)
                return 1
        report: dict[str, Any] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine.describe(),
            "runs": args.runs,
            "cli": " ".join(CLI),
            **measure(data_dir, args.runs),
        }
        report["load_average_1m"] = machine.load_average()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cold_cli.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "cold_cli.md").write_text(markdown(report))
    print(markdown(report))
    return 0 if report["in_process"]["ok"] and report.get("via_service", {}).get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
