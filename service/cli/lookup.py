"""``gptoss-doctor lookup TEXT``: diagnose an error with a running service, or in-process on the local index.

Without ``--url`` it first asks a gptoss-doctor already serving on this host (``GPTOSS_DOCTOR_PORT``): a
warm service answers in milliseconds where a cold in-process lookup takes seconds. ``--local`` skips that.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from service.analysis.engine_names import engine_name
from service.analysis.platforms import platform_name
from service.cli.terminal import terminal_safe, terminal_safe_data
from service.models import MAX_ERROR_CHARS, LookupResponse

_CONFIDENCE_STYLE = {"high": "bold green", "medium": "yellow", "low": "dim"}
_STATE_STYLE = {"open": "green", "closed": "red", "merged": "magenta"}


def read_input(text: str) -> str:
    """TEXT itself, or stdin for ``-`` (keeping the last 1 MB: a log's root cause is near its end)."""
    if text != "-":
        return text
    data = sys.stdin.read()
    if len(data) > MAX_ERROR_CHARS:
        click.echo(f"Input over {MAX_ERROR_CHARS:,} characters: using its last part.", err=True)
        data = data[-MAX_ERROR_CHARS:]
    return data


def lookup_remote(url: str, text: str, top_k: int, repos: list[str] | None, token: str | None) -> dict[str, Any]:
    """POST /lookup on a running service; problem+json errors become a readable ClickException."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    payload: dict[str, Any] = {"error": text, "top_k": top_k}
    if repos:
        payload["repos"] = repos
    endpoint = url.rstrip("/") + "/lookup"
    try:
        response = httpx.post(endpoint, json=payload, headers=headers, timeout=60.0)
    except httpx.HTTPError as exc:
        raise click.ClickException(f"cannot reach {endpoint}: {exc}") from exc
    from service.cli.service_probe import is_doctor

    if not is_doctor(response.headers):
        raise click.ClickException(
            f"{endpoint} answered {response.status_code}, but not as gptoss-doctor (another program on that "
            "port?); check --url or GPTOSS_DOCTOR_URL"
        )
    if response.status_code != 200:
        try:
            problem = response.json()
            message = f"{problem.get('title', 'error')}: {problem.get('detail', '')}"
        except ValueError:
            message = response.text[:300]
        retry = response.headers.get("retry-after")
        hint = f" (retry in {retry}s)" if retry else ""
        raise click.ClickException(terminal_safe(f"{endpoint} answered {response.status_code}: {message}{hint}"))
    data: dict[str, Any] = response.json()
    return data


def check_request(text: str, top_k: int, repos: list[str] | None) -> None:
    """Refuse what the API would refuse with 422 (e.g. ``--repo vllm``), as a usage error (exit 2)."""
    from pydantic import ValidationError

    from service.models import LookupRequest

    try:
        LookupRequest(error=text, top_k=top_k, repos=repos)
    except ValidationError as exc:
        problems = "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in exc.errors())
        raise click.UsageError(problems) from None


def warn_unknown_repos(repos: list[str] | None, known: set[str] | None, issues: list[Any]) -> None:
    """Say so when a --repo filter names a repository with nothing in the index (it filters everything)."""
    if not repos:
        return
    if known is not None:
        unknown = [repo for repo in repos if repo not in known]
        for repo in unknown:
            click.echo(f"warning: the index holds no thread from {repo}; no issue can match it.", err=True)
    elif not issues:
        click.echo(f"warning: no issue from {', '.join(repos)} matched; check the owner/name spelling.", err=True)


def lookup_local(text: str, top_k: int, repos: list[str] | None) -> dict[str, Any]:
    """Run the engine in this process on the local index, building it first when it is missing."""
    from indexer.errors import IndexerError
    from service.config import load_settings
    from service.engine import LookupEngine
    from service.errors import DoctorError

    try:
        settings = load_settings()
        engine = LookupEngine.open(settings, on_build=lambda line: click.echo(line, err=True))
    except (DoctorError, IndexerError) as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        warn_unknown_repos(repos, engine.known_repos(), [])
        return engine.lookup(text, top_k=top_k, repos=repos).model_dump(mode="json")
    finally:
        engine.close()


def running_service() -> str | None:
    """The URL of a ready gptoss-doctor on this host (``GPTOSS_DOCTOR_HOST``/``PORT``), or None."""
    from service.cli.service_probe import local_url, ready_service
    from service.config import load_settings
    from service.errors import DoctorError

    try:
        settings = load_settings()
    except DoctorError as exc:
        raise click.ClickException(str(exc)) from exc
    url = local_url(settings.host, settings.port)
    if not ready_service(url):
        return None
    click.echo(f"(answered by the gptoss-doctor service at {url}; --local uses the local index)", err=True)
    return url


_MD_LINK = re.compile(r"\[([^\]\n]{1,200})\]\(([^)\s]{1,300})\)")
BRIEF_ISSUES = 3


def plain(text: str) -> str:
    """Markdown links as ``text (target)``: a terminal shows paths and URLs, not link syntax."""
    return _MD_LINK.sub(lambda m: m[1] if m[1] == m[2] else f"{m[1]} ({m[2]})", text)


def source_text(source: str, base_url: str | None) -> str:
    """A source as the terminal shows it: a URL on the service when there is one, else the path."""
    if base_url and source.startswith("references/"):
        return f"{base_url.rstrip('/')}/{source}"
    return source


def _sources_line(sources: list[str], base_url: str | None) -> str:
    return "sources: " + ", ".join(source_text(s, base_url) for s in sources)


def _no_match_text(answer: LookupResponse) -> str:
    """Why nothing is confident: a log with no failing line, nothing close at all, or only related threads
    (shown as medium)."""
    if not answer.analysis.failure_found:
        return f"no failing line to match. {answer.analysis.origin.explanation}"
    if any(issue.confidence == "medium" for issue in answer.issues):
        return "the issues below are related, but none is known to be this failure."
    return "no known issue is close to this error."


def render_verdict(answer: LookupResponse, console: Console, *, base_url: str | None = None) -> None:
    """The verdict first: the problem, what happened, the status for your version, up to three actions."""
    diagnosis = answer.diagnosis
    analysis = answer.analysis
    if answer.scope_note:
        console.print(f"[yellow]Outside what this tool covers:[/yellow] {escape(answer.scope_note)}")
    if diagnosis is not None:
        console.print(f"[bold]{escape(plain(diagnosis.title))}[/bold] ({diagnosis.confidence} confidence)")
        console.print(escape(plain(diagnosis.summary)))
        console.print(f"[bold]Status:[/bold] {escape(plain(diagnosis.verdict.text))}")
        section = source_text(diagnosis.problem, base_url)
        for number, action in enumerate(diagnosis.actions, start=1):
            console.print(f"{number}. {escape(f'[{action.label()}]')} {escape(plain(action.text))}")
            # The section is named once below; each action lists the threads behind it.
            others = [s for s in action.sources if source_text(s, base_url) != section]
            if others:
                console.print(f"   [dim]{escape(_sources_line(others, base_url))}[/dim]", soft_wrap=True)
        # Paths and URLs are never broken by a hard wrap: the terminal wraps them, copy and click work.
        console.print(f"[dim]Section: {escape(section)}[/dim]", soft_wrap=True)
    elif answer.scope_note:
        pass  # said above: no diagnosis for another model, and the issues below are look-alikes
    elif answer.no_confident_match:
        console.print(f"[yellow]No confident match:[/yellow] {_no_match_text(answer)}")
    else:
        console.print("[bold]No known problem in the reference docs matches;[/bold] the closest issues:")
    origin = analysis.origin
    line = f"[bold]Origin:[/bold] {escape(origin.side)} ({escape(origin.component)})"
    if analysis.tokens:
        decoded = ", ".join(f"{t.id}={t.text if t.text is not None else '?'}" for t in analysis.tokens[:4])
        line += f"; tokens {escape(decoded)}"
    console.print(line)
    if answer.issues:
        console.print("[bold]Top issues:[/bold]")
        for issue in answer.issues[:BRIEF_ISSUES]:
            head = f" {issue.id} ({issue.state or '?'}, {issue.confidence} {issue.score:.2f}) "
            room = max(20, (console.width or 80) - len(head) - 1)
            title = issue.title if len(issue.title) <= room else issue.title[: room - 3] + "..."
            console.print(escape(head + title), no_wrap=True, overflow="ellipsis")
    if diagnosis is None and answer.fixes:
        fix = answer.fixes[0]
        console.print(f"[bold]Closest fix:[/bold] {escape(plain(fix.summary))}")
        console.print(f"  [dim]{escape(_sources_line(fix.sources, base_url))}[/dim]")
    if answer.degraded:
        console.print("[yellow]degraded:[/yellow] semantic search was unavailable; lexical matches only.")
    console.print("[dim](--full: decoded tokens, every issue, fixes and advice)[/dim]")


SEEN_CHARS = 400
"""Characters of the Seen line: whole items up to it, then how many more there are."""


def seen_line(items: list[str], limit: int = SEEN_CHARS) -> str:
    """The versions and settings read, comma-separated, whole items only (a value is never cut in two)."""
    shown: list[str] = []
    used = 0
    for item in items:
        if shown and used + len(item) + 2 > limit:
            return ", ".join(shown) + f", and {len(items) - len(shown)} more (--json lists them)"
        shown.append(item)
        used += len(item) + 2
    return ", ".join(shown)


def seen_items(answer: LookupResponse) -> list[str]:
    """What the answer read from the input: the engine, the client and the model first (what the ranking and
    the advice were fitted to, so a reader can tell a misread at once), then the versions and settings."""
    analysis = answer.analysis
    named = [engine_name(analysis.engine)] if analysis.engine else []
    if analysis.platform:
        named.append(platform_name(analysis.platform))
    if analysis.client:
        named.append(f"client {analysis.client}")
    if analysis.model:
        named.append(f"model {analysis.model}")
    return named + [f"{k} {v}" for k, v in analysis.versions.items()] + list(analysis.flags)


def render(answer: LookupResponse, console: Console, *, base_url: str | None = None) -> None:
    """The whole answer for a person: verdict, origin, tokens, issues, fixes, advice."""
    analysis = answer.analysis
    origin = analysis.origin
    if answer.scope_note:
        console.print(f"[yellow]Outside what this tool covers:[/yellow] {escape(answer.scope_note)}")
        console.print()
    if answer.diagnosis is not None:
        d = answer.diagnosis
        console.print(f"[bold]Diagnosis:[/bold] {escape(plain(d.title))} ({d.confidence} confidence)")
        console.print(f"  {escape(plain(d.summary))}")
        console.print(f"  [bold]Status:[/bold] {escape(plain(d.verdict.text))}")
        for number, action in enumerate(d.actions, start=1):
            console.print(f"  {number}. {escape(f'[{action.label()}]')} {escape(plain(action.text))}")
            console.print(f"     [dim]{escape(_sources_line(action.sources, base_url))}[/dim]", soft_wrap=True)
        console.print()
    console.print(
        f"[bold]Origin:[/bold] {escape(origin.side)} ({escape(origin.component)}), "
        f"category {escape(analysis.category)}: {escape(origin.explanation)}"
    )
    if answer.query.signatures:
        console.print(f"[bold]Error:[/bold] {escape(answer.query.signatures[0][:300])}")
    seen = seen_items(answer)
    if seen:
        console.print(f"[bold]Seen:[/bold] {escape(seen_line(seen))}")
    if analysis.tokens:
        table = Table(title="Tokens", title_justify="left", show_edge=False)
        table.add_column("id", justify="right")
        table.add_column("text")
        table.add_column("special")
        for token in analysis.tokens:
            shown = "(not in vocabulary)" if token.text is None else repr(token.text)
            table.add_row(str(token.id), escape(shown), "yes" if token.special else "")
        console.print(table)
    reproduction = analysis.reproduction
    if reproduction and reproduction.get("explanation"):
        console.print(f"[bold]openai-harmony reproduction:[/bold] {escape(str(reproduction['explanation']))}")
    console.print()
    if answer.no_confident_match:
        console.print(f"[yellow]No confident match:[/yellow] {_no_match_text(answer)}")
    if answer.issues:
        table = Table(title="Known issues", title_justify="left", show_edge=False)
        table.add_column("#")
        table.add_column("issue", no_wrap=True)
        table.add_column("state")
        table.add_column("confidence", no_wrap=True)
        table.add_column("title", ratio=1)
        for rank, issue in enumerate(answer.issues, start=1):
            link = f"[link={issue.url}]{escape(issue.id)}[/link]" if issue.url else escape(issue.id)
            state = issue.state or "?"
            table.add_row(
                str(rank),
                link,
                f"[{_STATE_STYLE.get(state, '')}]{state}[/]" if state in _STATE_STYLE else state,
                f"[{_CONFIDENCE_STYLE[issue.confidence]}]{issue.confidence} {issue.score:.2f}[/]",
                escape(issue.title),
            )
        console.print(table)
        if console.is_terminal is False:
            for issue in answer.issues:
                if issue.url:
                    console.print(f"  {escape(issue.id)}: {escape(issue.url)}", soft_wrap=True)
    if answer.fixes:
        console.print("\n[bold]Fixes[/bold]")
        for number, fix in enumerate(answer.fixes, start=1):
            mark = " [green](confirmed)[/green]" if fix.confirmed else ""
            console.print(f"{number}. {escape(plain(fix.summary))}{mark}")
            for step in fix.steps:
                console.print(f"   - {escape(plain(step))}")
            console.print(f"   [dim]{escape(_sources_line(fix.sources, base_url))}[/dim]", soft_wrap=True)
    if answer.advice:
        console.print("\n[bold]Advice[/bold]")
        for item in answer.advice:
            flags = " ".join(f"{f.action} {f.text()}" for f in item.flags)
            shown = f" [cyan]({escape(flags)})[/cyan]" if flags else ""
            console.print(f"- {escape(plain(item.summary))}{shown}")
            if item.sources:
                console.print(f"  [dim]{escape(_sources_line(item.sources, base_url))}[/dim]", soft_wrap=True)
    index = answer.index
    built = index.built_at.isoformat(timespec="minutes") if index.built_at else "unknown"
    console.print(f"\n[dim]index: {index.documents} documents, {index.issues} issues, built {built}[/dim]")
    if answer.degraded:
        console.print("[yellow]degraded:[/yellow] semantic search was unavailable; lexical matches only.")
    if answer.partial:
        skipped = escape(", ".join(answer.partial))
        console.print(f"[yellow]partial:[/yellow] the lookup ran out of its time budget; skipped {skipped}.")


@click.command()
@click.argument("text")
@click.option("-k", "--top-k", default=5, show_default=True, type=click.IntRange(1, 50), help="Issues to show.")
@click.option("--repo", "repos", multiple=True, help="Only issues from this owner/name repo (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")
@click.option("--full", is_flag=True, help="Show the evidence too: tokens, every issue, fixes and advice.")
@click.option(
    "--url",
    envvar="GPTOSS_DOCTOR_URL",
    help="Ask this service (e.g. http://127.0.0.1:20120); default: the one on this host if it answers, else "
    "the local index.",
)
@click.option("--local", is_flag=True, help="Use the local index in-process even when a service answers.")
@click.option(
    "--token",
    envvar="GPTOSS_DOCTOR_READ_TOKEN",
    help="Bearer token for a service that requires one (--url).",
)
def lookup(
    text: str,
    top_k: int,
    repos: tuple[str, ...],
    as_json: bool,
    full: bool,
    url: str | None,
    local: bool,
    token: str | None,
) -> None:
    """Diagnose TEXT (an error line, a client exception or a log); - reads stdin.

    The verdict comes first (the known problem, its status for your version, what to do); --full adds
    the evidence.

    \b
    Examples:
      gptoss-doctor lookup "Unexpected token 200002 while expecting start token 200006"
      docker logs vllm 2>&1 | tail -200 | gptoss-doctor lookup -
      gptoss-doctor lookup --full "Unknown role: assistantary"
      gptoss-doctor lookup --url http://127.0.0.1:20120 --json "HarmonyError: ..."
    """
    error = read_input(text)
    if not error.strip():
        raise click.UsageError("nothing to look up: TEXT (or stdin) is empty")
    selected = list(repos) or None
    check_request(error, top_k, selected)
    url = url or (None if local else running_service())
    if url:
        data = lookup_remote(url, error, top_k, selected, token)
        warn_unknown_repos(selected, None, data.get("issues") or [])
    else:
        data = lookup_local(error, top_k, selected)
    data = terminal_safe_data(data)  # thread titles and text come from GitHub users
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    answer = LookupResponse.model_validate(data)
    console = Console(highlight=False)
    (render if full else render_verdict)(answer, console, base_url=url)
