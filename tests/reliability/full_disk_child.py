"""Inside its own mount namespace: a real full disk under a built index, and what each entry point does.

``python full_disk_child.py BASE MOUNT`` expects a small tmpfs mounted at MOUNT (the test does it with
``unshare``). It copies the index BASE there, fills the file system to the last byte, then runs the
console script (``cli_child.py``, the hashing embedder) and the served app, frees the space and runs
an index again. It prints one JSON object with what each step returned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ERROR = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
CLI = Path(__file__).with_name("cli_child.py")


def fill(mount: Path) -> Path:
    """Write zeros until the file system refuses even one more block."""
    filler = mount / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 4096):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError:
                pass
    return filler


def cli(data_dir: Path, *args: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPTOSS_DOCTOR_")}
    env["GPTOSS_DOCTOR_DATA_DIR"] = str(data_dir)
    done = subprocess.run([sys.executable, str(CLI), *args], env=env, capture_output=True, text=True, timeout=300)
    return {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def served(data_dir: Path, filler: Path) -> dict[str, object]:
    """The served app on the full disk; then, still serving, the space comes back and an index run publishes."""
    from fastapi.testclient import TestClient

    import indexer.build
    import indexer.embedding
    from service.app import create_app
    from service.config import Settings
    from tests.fakes import HashingEmbedder
    from tests.service.support import wait_until

    def fake(settings: object, **_: object) -> HashingEmbedder:
        return HashingEmbedder()

    indexer.embedding.load_embedder = fake  # type: ignore[assignment]
    indexer.build.load_embedder = fake  # type: ignore[assignment]
    app = create_app(Settings(data_dir=data_dir))
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_until(lambda: app.state.runtime.state != "starting", timeout=120)
        answer = client.post("/lookup", json={"error": ERROR})
        report: dict[str, object] = {
            "state": app.state.runtime.state,
            "lookup_status": answer.status_code,
            "issues": len(answer.json().get("issues") or []),
            "health": client.get("/health").json(),
            "generation": client.get("/ready").json().get("generation"),
        }
        # Space comes back while the copy serves. The serving process holds no lock on the real store
        # (its copy is its own), so an index run elsewhere publishes there: a new generation.
        filler.unlink()
        report["rebuild"] = cli(data_dir, "index", "--full", "--json")

        deadline = time.monotonic() + 180
        while True:  # /health polls the store, and with it the way back to the real one
            health = client.get("/health").json()
            report["health_after"] = health
            if not any("read-only copy" in reason for reason in health["reasons"]) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        report["generation_after"] = client.get("/ready").json().get("generation")
        after = client.post("/lookup", json={"error": ERROR})
        report["lookup_after_status"] = after.status_code
        report["issues_after"] = len(after.json().get("issues") or [])

        def copies() -> list[str]:
            return sorted(p.name for p in Path(os.environ["TMPDIR"]).glob("gptoss-doctor-full-disk-*"))

        # The copy's store is closed right after the swap (its Chroma client first, then the folder), so on a
        # busy machine /health can answer between the two: wait a bounded moment, never for a copy that stays.
        deadline = time.monotonic() + 30
        while copies() and time.monotonic() < deadline:
            time.sleep(0.2)
        report["copies_while_serving"] = copies()
        # Serving the real store again, it holds the data dir's shared lock as any serve does.
        report["index_beside"] = cli(data_dir, "index")
        return report


def main(base: Path, mount: Path) -> None:
    data_dir = mount / "data"
    shutil.copytree(base, data_dir)
    from service.analysis.harmony import ensure_vocab

    ensure_vocab(data_dir / "harmony-vocab")  # a data dir in use has its vocab
    filler = fill(mount)
    report: dict[str, object] = {"free": shutil.disk_usage(mount).free}
    report["lookup"] = cli(data_dir, "lookup", "--local", "--json", ERROR)
    report["index"] = cli(data_dir, "index")
    report["doctor"] = cli(data_dir, "doctor")
    report["serve"] = served(data_dir, filler)  # frees the space while it serves
    report["index_after"] = cli(data_dir, "index")
    report["lookup_after"] = cli(data_dir, "lookup", "--local", "--json", ERROR)
    report["copies_left"] = sorted(p.name for p in Path(os.environ["TMPDIR"]).glob("gptoss-doctor-full-disk-*"))
    print(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
