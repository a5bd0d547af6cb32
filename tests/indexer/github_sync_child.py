"""One GitHub sync in a subprocess (the SIGKILL test kills it mid-sync).

Usage: ``python github_sync_child.py PER_PAGE BATCH_SIZE``; settings (data dir, API URL, repos) come
from the GPTOSS_DOCTOR_* environment.
"""

from __future__ import annotations

import sys

from indexer.sources.github import make_client, sync_github
from indexer.store import Store
from service.config import Settings
from tests.fakes import HashingEmbedder


def main(per_page: int, batch_size: int) -> int:
    settings = Settings()
    with Store.open(settings, HashingEmbedder(dimension=64)) as store:
        print("syncing", flush=True)
        result = sync_github(settings, store, client=make_client(settings, per_page=per_page), batch_size=batch_size)
        print(result.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
