"""``gptoss-doctor vocab export DIR``: the verified Harmony vocab for an offline vLLM host.

openai-harmony downloads ``o200k_base.tiktoken`` on first use; an offline server then fails with
"error downloading or loading vocab file". The package already builds that file from quicktok-v1
and checks its sha256; this command writes it where the operator wants it and prints the variable
to set in the server's environment.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def vocab() -> None:
    """The Harmony vocabulary (o200k_base.tiktoken) for hosts without internet access."""


@vocab.command(name="export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def export(directory: Path) -> None:
    """Write the sha256-verified o200k_base.tiktoken into DIRECTORY and print the line to set on the vLLM host.

    \b
    Examples:
      gptoss-doctor vocab export /opt/harmony-vocab
      TIKTOKEN_ENCODINGS_BASE=/opt/harmony-vocab vllm serve openai/gpt-oss-20b
    """
    from service.analysis.harmony import VOCAB_FILE, VOCAB_SHA256, ensure_vocab
    from service.errors import VocabError

    folder = directory.expanduser().resolve()
    try:
        ensure_vocab(folder)
    except VocabError as exc:
        raise click.ClickException(exc.detail) from exc
    click.echo(f"wrote {folder / VOCAB_FILE} (sha256 {VOCAB_SHA256}, verified)", err=True)
    click.echo("set this in the vLLM server's environment (copy the folder there if it runs elsewhere):", err=True)
    click.echo(f"TIKTOKEN_ENCODINGS_BASE={folder}")
