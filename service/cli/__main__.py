"""``python -m service.cli``: the console script without installing it (e.g. from a worktree)."""

from service.cli import main

main()
