"""The mixed hostile load run on its own (issue 16): ``python -m bench.hostile [--seconds 30]``.

Starts a real ``gptoss-doctor serve`` on a fresh data dir (it builds the docs + KB index offline),
then runs :func:`bench.load.mixed_hostile_run`: 32 clients of short eval errors, then 32 clients with
every 8th request a pathological 1 MB body. Writes ``bench/results/hostile.json`` and prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.load import mixed_hostile_run
from bench.phases import eval_texts
from bench.procs import Server
from bench.served import PROBE, READY_TIMEOUT, WARMUP

RESULTS = Path(__file__).resolve().parent / "results" / "hostile.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="Length of each of the two runs.")
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args(argv)
    short = [text for kind, text in eval_texts() if kind == "short"][:40] or WARMUP
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        server = Server(Path(tmp) / "data", {}).start()
        try:
            server.wait_ready(PROBE, timeout=READY_TIMEOUT)
            result = mixed_hostile_run(server.url, short, clients=args.clients, seconds=args.seconds)
            result["service_memory"] = server.memory()
        finally:
            server.stop()
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)}, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
