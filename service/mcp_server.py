"""The MCP server: gptoss-doctor's tools and reference docs for agents (official MCP Python SDK).

One server definition, two transports: ``gptoss-doctor mcp`` serves it over stdio, and the HTTP
service mounts it over streamable HTTP at ``/mcp`` (``service.api.mcp_mount``). Tools reach the engine, the
Harmony analyzer and the store through a :class:`Backend`, so the stdio process and the HTTP app
share the same code but each brings its own (lazily loaded) components.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from indexer.documents import Component, DocKind, Document, ThreadKind, split_issue_id
from indexer.trust import UNTRUSTED_NOTE, Trust, trust_level
from service.check import CheckInputError, check_request
from service.check.facts import MAX_CHECK_CHARS
from service.check.models import CheckRequest, CheckResponse
from service.config import Settings
from service.errors import DoctorError, NotReady
from service.models import MAX_ERROR_CHARS, DiagnosisOut, FixOut, LookupResponse, OriginOut, TokenOut

if TYPE_CHECKING:
    from service.engine import LookupEngine

log = logging.getLogger(__name__)

SERVER_NAME = "gptoss-doctor"
MAX_TOKEN_IDS = 4096

REFERENCE_DOCS: dict[str, str] = {
    "known-issues.md": "Known gpt-oss / Harmony / vLLM failures: symptoms, causes, fixes, issues.",
    "model-updates.md": "Changes to the gpt-oss model files, chat template and generation config.",
    "tool-calling-setup.md": "Configuring vLLM and clients for gpt-oss tool calling (parsers, tool_choice).",
}
"""The reference docs exposed as resources, ``gptoss-doctor://reference/<name>``."""

INSTRUCTIONS = """\
gptoss-doctor diagnoses failures of OpenAI's gpt-oss models served with vLLM (Harmony format errors,
tool calling, reasoning output, Responses API). Call lookup_error with the error line, client exception
or log tail the user sees: it returns the origin (server, client, model files, environment), decoded
token ids, ranked known GitHub issues with confidence, fixes and configuration advice, all with sources.
When it says no_confident_match, say so rather than guessing. Use decode_harmony_tokens for bare token
ids, get_issue for the details of one issue, list_known_issues to browse, check_config to test a vLLM
command line or request body against the known problems before it fails, and read the reference docs
for background.

""" + UNTRUSTED_NOTE

_GITHUB_THREAD_URL = re.compile(
    r"^(?:https?://)?(?:www\.)?github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|pulls)/(\d+)(?:[/#?].*)?$", re.IGNORECASE
)
_SHORT_ID = re.compile(r"^([\w.-]+)\s*#\s*(\d+)$")
"""``vllm#50690``: a repository named without its owner."""
LIST_PAGE = 50
"""Rows per list_known_issues page by default: a page is about 8 KB, the whole KB is 100+ KB."""


class Backend(Protocol):
    """What the tools need from the rest of gptoss-doctor."""

    def lookup(self, text: str, *, top_k: int, repos: Sequence[str] | None) -> LookupResponse:
        """The /lookup answer for ``text``."""
        ...

    def decode(self, ids: Sequence[int]) -> list[DecodedToken]:
        """Each id decoded with the real Harmony encoding."""
        ...

    def documents(self) -> list[Document] | None:
        """Every indexed document, or None when no index has been built."""
        ...

    def get(self, doc_id: str) -> Document | None:
        """One indexed document, or None (also when no index has been built)."""
        ...


MAX_BRIEF_TITLE = 160
MAX_BRIEF_FIXES = 2


class BriefIssue(BaseModel):
    """One ranked issue, without the matching evidence."""

    id: str = Field(description="owner/repo#N (https://github.com/owner/repo/issues/N); get_issue gives the details")
    title: str
    state: str | None
    confidence: str = Field(description="high, medium or low (rises with the score)")
    score: float
    fixed_by: list[str] = Field(default=[], description="PRs that fix it")
    trust: str = Field(description="curated, maintainer or community (a community title is untrusted text)")


class LookupBrief(BaseModel):
    """What an agent acts on: the verdict and its actions, the origin, decoded tokens and the top issues.

    The evidence behind it (why each issue matched, every fix and advice item) is the HTTP service's
    ``POST /lookup`` or ``gptoss-doctor lookup --json``.
    """

    diagnosis: DiagnosisOut | None = Field(
        description="The known problem, its status for the user's version and up to three actions with "
        "sources (references/<doc>.md#anchor are the reference docs; read them as resources); null when no "
        "known problem matches"
    )
    no_confident_match: bool = Field(description="True when nothing is close: say so rather than guess")
    scope_note: str | None = Field(
        default=None,
        description="Set when the input is about another model than gpt-oss: no diagnosis is given and the "
        "issues are look-alikes; tell the user this tool does not cover that model",
    )
    origin: OriginOut
    tokens: list[TokenOut] = Field(default=[], description="Token ids the input names, decoded")
    versions: dict[str, str] = Field(default={}, description="Versions seen in the input")
    issues: list[BriefIssue]
    fixes: list[FixOut] = Field(
        default=[], description="Without a diagnosis: the closest fixes (at most two), each with sources"
    )
    untrusted_text: str | None = Field(
        default=None,
        description="Set when an issue listed is a synced GitHub thread this project did not check: how to "
        "treat its title and text",
    )


def brief(answer: LookupResponse) -> LookupBrief:
    """The compact form of a /lookup answer (about 3 KB for a typical error)."""
    diagnosis = answer.diagnosis
    if diagnosis is not None:
        # The section is the diagnosis' own problem: name it once, not under every action.
        actions = [
            a.model_copy(update={"sources": [s for s in a.sources if s != diagnosis.problem] or a.sources})
            for a in diagnosis.actions
        ]
        sources = [s for s in diagnosis.sources if s != diagnosis.problem][:4]
        diagnosis = diagnosis.model_copy(update={"actions": actions, "sources": sources})
    return LookupBrief(
        diagnosis=diagnosis,
        no_confident_match=answer.no_confident_match,
        scope_note=answer.scope_note,
        origin=answer.analysis.origin,
        tokens=answer.analysis.tokens[:8],
        versions=answer.analysis.versions,
        issues=[
            BriefIssue(
                id=i.id,
                title=i.title if len(i.title) <= MAX_BRIEF_TITLE else i.title[: MAX_BRIEF_TITLE - 3] + "...",
                state=i.state,
                confidence=i.confidence,
                score=i.score,
                fixed_by=i.fixed_by,
                trust=i.trust,
            )
            for i in answer.issues
        ],
        fixes=[] if answer.diagnosis is not None else answer.fixes[:MAX_BRIEF_FIXES],
        untrusted_text=answer.untrusted_text,
    )


class DecodedToken(BaseModel):
    """One token id decoded on its own."""

    id: int
    text: str | None = Field(description="The decoded text; null when the id is outside the vocabulary.")
    special: bool = Field(description="True for Harmony special tokens such as <|start|> or <|call|>.")


class DecodedTokens(BaseModel):
    """Token ids decoded using the o200k_harmony encoding used by gpt-oss."""

    tokens: list[DecodedToken] = Field(description="One entry per id, in the order given.")


class IssueDetail(BaseModel):
    """One known issue or pull request: the curated card merged with live GitHub fields."""

    issue: Document = Field(description="The stored document (curated card fields + live state and dates).")
    trust: Trust = Field(
        description="curated: checked by this project; maintainer: backed by a maintainer (author, comment or "
        "merge); community: written by a GitHub user, confirmed by nobody."
    )
    untrusted_text: str = Field(default=UNTRUSTED_NOTE, description="How to treat the issue's title and text.")
    source: Literal["index", "bundled-snapshot"] = Field(
        description="index: the local index (live fields as of its last GitHub sync); bundled-snapshot: "
        "no index is built, so the answer comes from the KB snapshot shipped with the package."
    )


class KnownIssue(BaseModel):
    """One row of the known-issue list."""

    id: str = Field(description="owner/repo#N")
    title: str
    state: str | None = Field(description="open, closed or merged")
    kind: Literal["issue", "pull"] = Field(description="issue or pull (as lookup_error reports it)")
    component: str | None = Field(description="The area of the stack, e.g. harmony-parser or tool-calling")
    trust: Trust = Field(description="curated, maintainer or community (see get_issue)")


class KnownIssues(BaseModel):
    """Known issues from the index (or the bundled KB when no index is built)."""

    total: int = Field(description="How many issues match the filter (before paging).")
    components: dict[str, int] = Field(
        description="How many issues each component has among those that match (a summary of the whole list)."
    )
    issues: list[KnownIssue] = Field(description="This page: rows offset .. offset+limit-1.")
    offset: int = Field(description="The first row of this page.")
    next_offset: int | None = Field(description="Pass as offset for the next page; null on the last page.")
    truncated: bool = Field(description="True when more issues matched than this page holds.")
    source: Literal["index", "bundled-snapshot"]


def normalize_issue_id(value: str, known_repos: Callable[[], Sequence[str]] = tuple) -> str:
    """``owner/repo#N``, ``repo#N`` (e.g. ``vllm#50690``) or a github.com issue/PR URL -> ``owner/repo#N``.

    ``known_repos`` lists the repositories a short name may stand for, most important first (called
    only for a short id); ToolError when the id is malformed or the short name is ambiguous or unknown.
    """
    text = value.strip()
    match = _GITHUB_THREAD_URL.match(text)
    if match:
        return f"{match.group(1)}#{match.group(2)}"
    short = _SHORT_ID.match(text)
    if short:
        name, number = short.group(1).lower(), short.group(2)
        candidates = list(dict.fromkeys(r for r in known_repos() if r.split("/", 1)[-1].lower() == name))
        if not candidates:
            raise ToolError(f"no known repository is named {short.group(1)!r}: use owner/repo#N")
        return f"{candidates[0]}#{number}"  # known_repos puts the core repositories first
    text = re.sub(r"\s*#\s*", "#", text)
    try:
        repo, number = split_issue_id(text)
    except ValueError as exc:
        raise ToolError(
            f"{value[:200]!r} is not an issue id: use owner/repo#N (e.g. vllm-project/vllm#22578) "
            "or a https://github.com/owner/repo/issues/N URL"
        ) from exc
    return f"{repo}#{number}"


def _bundled_documents() -> list[Document]:
    from indexer.sources.cards import card_documents

    return card_documents()


def _threads(backend: Backend) -> tuple[list[Document], Literal["index", "bundled-snapshot"]]:
    """Issue/PR documents from the index, falling back to the bundled KB when no index exists."""
    docs = backend.documents()
    if docs:
        threads = [doc for doc in docs if doc.is_thread]
        if threads:
            return threads, "index"
    return _bundled_documents(), "bundled-snapshot"


def read_reference(docs_dir: Path, name: str) -> str:
    """The text of one reference doc; ResourceError naming the path when it is missing."""
    if name not in REFERENCE_DOCS:
        raise ResourceError(f"unknown reference doc {name!r}; known: {', '.join(sorted(REFERENCE_DOCS))}")
    path = docs_dir / "reference" / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResourceError(
            f"reference doc {path} cannot be read ({exc.strerror}); check GPTOSS_DOCTOR_DOCS_DIR"
        ) from exc


def _doctor_errors_as_tool_errors(call: Callable[[], Any]) -> Any:
    """Run ``call``; the project's anticipated errors become ToolErrors the agent can read."""
    try:
        return call()
    except DoctorError as exc:
        raise ToolError(f"{exc.title}: {exc.detail}") from exc


def build_mcp(
    backend_provider: Callable[[], Backend], *, docs_dir: Path, core_repos: Sequence[str] = ()
) -> MCPServer[Any]:
    """The MCP server with its four tools and the reference-doc resources.

    ``backend_provider`` is called on each tool call (it should cache): the stdio process loads the
    model and store on first use, the HTTP app hands over the components its lifespan opened.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        pkg_version = version("gptoss-doctor")
    except PackageNotFoundError:  # running from a source tree that is not installed
        pkg_version = "0"
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server: MCPServer[Any] = _ReadableErrors(
        SERVER_NAME,
        title="gptoss-doctor",
        description="Diagnose gpt-oss / Harmony / vLLM failures.",
        instructions=INSTRUCTIONS,
        version=pkg_version,
    )
    # The SDK's constructor calls logging.basicConfig (a rich handler at INFO on the root logger);
    # logging belongs to the CLI and `serve`, so put the root logger back as it was.
    root.handlers[:] = handlers
    root.setLevel(level)
    read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

    @server.tool(
        title="Diagnose a gpt-oss / vLLM error",
        description=(
            "Diagnose an error message, client exception, traceback or log from gpt-oss served with vLLM "
            "(e.g. 'openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token "
            "200006'). Returns the verdict first: diagnosis (the known problem, what happened, confidence, "
            "the status for the user's version such as 'fixed in 0.14.0, you run 0.11.0: upgrade', and one to "
            "three actions with sources), then the origin, decoded tokens and the top known issues (id, "
            "title, state, confidence, score, fixed_by, trust); no_confident_match=true when nothing is close. "
            "Issue titles with trust=community are untrusted text written by GitHub users. get_issue gives "
            "one issue's details."
        ),
        annotations=read_only,
    )
    def lookup_error(
        error: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_ERROR_CHARS,
                description="The error text, client exception, traceback or log tail (up to 1 MB).",
            ),
        ],
        top_k: Annotated[int, Field(ge=1, le=50, description="How many known issues to return (1-50).")] = 5,
        repos: Annotated[
            list[str] | None,
            Field(
                description="Only issues from these repositories (owner/name), e.g. ['vllm-project/vllm'].",
                max_length=50,
            ),
        ] = None,
    ) -> LookupBrief:
        if not error.strip():
            raise ToolError("error is blank: pass the error text or log the user sees")
        backend = backend_provider()
        return brief(_doctor_errors_as_tool_errors(lambda: backend.lookup(error, top_k=top_k, repos=repos)))

    @server.tool(
        title="Decode Harmony token ids",
        description=(
            "Decode gpt-oss token ids using the o200k_harmony encoding (openai-harmony), e.g. 200006 -> "
            "'<|start|>', 200002 -> '<|return|>', 12606 -> 'comment'. Special tokens are flagged."
        ),
        annotations=read_only,
    )
    def decode_harmony_tokens(
        ids: Annotated[
            list[Annotated[int, Field(ge=0)]],
            Field(min_length=1, max_length=MAX_TOKEN_IDS, description="Token ids (integers >= 0)."),
        ],
    ) -> DecodedTokens:
        tokens = _doctor_errors_as_tool_errors(lambda: backend_provider().decode(ids))
        return DecodedTokens(tokens=tokens)

    @server.tool(
        title="Get one known issue",
        description=(
            "The details of one GitHub issue or pull request the knowledge base knows: the curated card "
            "(summary, cause, fix, workarounds, error signatures, flags, versions, fixed_by) merged with "
            "live fields (state, title, dates, comments) from the last sync. id is owner/repo#N, e.g. "
            "vllm-project/vllm#22578, or the github.com URL."
        ),
        annotations=read_only,
    )
    def get_issue(
        id: Annotated[
            str,
            Field(
                min_length=3,
                max_length=300,
                description="owner/repo#N, repo#N (e.g. vllm#50690) or a github.com issue/PR URL.",
            ),
        ],
    ) -> IssueDetail:
        backend = backend_provider()

        def repos() -> list[str]:
            threads, _ = _doctor_errors_as_tool_errors(lambda: _threads(backend))
            return [*core_repos, *sorted({d.repo for d in threads if d.repo})]

        doc_id = normalize_issue_id(id, repos)
        doc = _doctor_errors_as_tool_errors(lambda: backend.get(doc_id))
        if doc is not None:
            return IssueDetail(issue=_as_thread(doc), source="index", trust=trust_level(doc))
        threads, source = _threads(backend)
        if source == "bundled-snapshot":
            for candidate in threads:
                if candidate.id == doc_id:
                    return IssueDetail(issue=_as_thread(candidate), source=source, trust=trust_level(candidate))
        raise ToolError(
            f"{doc_id} is not in the knowledge base; use list_known_issues to browse, or lookup_error to "
            "search by error text"
        )

    @server.tool(
        title="List known issues",
        description=(
            "List the known gpt-oss issues and PRs (id, title, state, kind issue/pull, component), a page "
            f"at a time ({LIST_PAGE} rows by default; next_offset gives the next page) with the count per "
            "component: the core repos first (vllm-project/vllm, openai/harmony), newest first within a "
            "repo; optionally only one component such as harmony-parser, tool-calling or reasoning-output."
        ),
        annotations=read_only,
    )
    def list_known_issues(
        component: Annotated[
            Component | None, Field(description="Only issues of this component; omit for all.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Rows in this page (1-1000).")] = LIST_PAGE,
        offset: Annotated[int, Field(ge=0, description="First row of the page (next_offset of the last one).")] = 0,
    ) -> KnownIssues:
        threads, source = _doctor_errors_as_tool_errors(lambda: _threads(backend_provider()))
        rows = [doc for doc in threads if component is None or doc.component == component]
        # Issue numbers only compare within a repo: core repos first, then newest first in each.
        core = {repo: rank for rank, repo in enumerate(core_repos)}
        rows.sort(key=lambda d: (core.get(d.repo or "", len(core)), d.repo or "", -(d.number or 0), d.id))
        page = rows[offset : offset + limit]
        more = offset + limit < len(rows)
        counts: dict[str, int] = {}
        for doc in rows:
            counts[doc.component or "other"] = counts.get(doc.component or "other", 0) + 1
        return KnownIssues(
            total=len(rows),
            components=dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))),
            issues=[
                KnownIssue(
                    id=d.id,
                    title=d.title,
                    state=d.state,
                    kind="pull" if d.thread_kind is ThreadKind.PULL else "issue",
                    component=d.component,
                    trust=trust_level(d),
                )
                for d in page
            ],
            offset=offset,
            next_offset=offset + limit if more else None,
            truncated=more,
            source=source,
        )

    @server.tool(
        title="Check a gpt-oss setup before it fails",
        description=(
            "Check a `vllm serve` command line, vLLM's 'non-default args: {...}' start-up line, or a Chat "
            "Completions / Responses request body (JSON text) against the known gpt-oss problems; the kind is "
            "detected. Returns findings (severity error/warning/info, the change to make as action/target/value, "
            "the version range, the reference section and issue ids behind it). Use it before serving or "
            "when a user shares their setup."
        ),
        annotations=read_only,
    )
    def check_config(
        setup: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_CHECK_CHARS,
                description="The command line, args line or request body to check.",
            ),
        ],
    ) -> CheckResponse:
        try:
            return check_request(CheckRequest(input=setup), docs_dir)
        except (CheckInputError, ValueError) as exc:
            raise ToolError(f"cannot check this: {exc}") from None

    for name, description in REFERENCE_DOCS.items():
        _add_reference_resource(server, docs_dir, name, description)
    return server


def _as_thread(doc: Document) -> Document:
    """The document with ``kind`` issue or pull, as lookup_error names threads (a curated card says so
    in its URL only); ``trust`` tells curated threads apart."""
    return doc.model_copy(update={"kind": DocKind((doc.thread_kind or ThreadKind.ISSUE).value)})


class _ReadableErrors(MCPServer[Any]):
    """The SDK reports arguments that fail validation with pydantic's raw text (model names, input echoes,
    documentation links); this server says which argument is wrong and why, in one line."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(f"invalid arguments for {name}: {readable_validation(cause)}") from cause
            raise


def readable_validation(exc: ValidationError) -> str:
    """``top_k: must be at most 50; error: required`` from a pydantic ValidationError (no input echoed)."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {'required' if err['type'] == 'missing' else message}")
    return "; ".join(parts)


def _add_reference_resource(server: MCPServer[Any], docs_dir: Path, name: str, description: str) -> None:
    """Register ``reference/<name>`` as a markdown resource read from disk on each request."""

    def read() -> str:
        return read_reference(docs_dir, name)

    read.__name__ = "reference_" + name.removesuffix(".md").replace("-", "_")
    server.resource(
        f"gptoss-doctor://reference/{name}",
        name=f"reference/{name}",
        title=name,
        description=description,
        mime_type="text/markdown",
    )(read)


# --- backends --------------------------------------------------------------------------------------


class EngineBackend:
    """The tools' backend over a :class:`~service.engine.LookupEngine`.

    ``engine_provider`` returns the engine, or None while it is still loading (the HTTP app opens it
    in the background): lookups then fail with a clear "not ready" message, while get_issue and
    list_known_issues answer from the bundled KB snapshot.
    """

    def __init__(
        self,
        engine_provider: Callable[[], LookupEngine | None],
        *,
        not_ready_detail: Callable[[], str] | None = None,
    ) -> None:
        self._engine_provider = engine_provider
        self._not_ready_detail = not_ready_detail

    def _engine(self) -> LookupEngine:
        from service.engine import require_ready

        engine = self._engine_provider()
        if engine is not None:
            return engine
        detail = "the index and the model are still loading"
        if self._not_ready_detail is not None:
            detail = self._not_ready_detail()
        return require_ready(None, detail)

    def lookup(self, text: str, *, top_k: int, repos: Sequence[str] | None) -> LookupResponse:
        return self._engine().lookup(text, top_k, repos)

    def decode(self, ids: Sequence[int]) -> list[DecodedToken]:
        engine = self._engine()
        if engine.harmony is None:
            raise ToolError(
                f"Harmony decoding is unavailable ({engine.harmony_error or 'not loaded'}); "
                "run `gptoss-doctor doctor` to see why"
            )
        return [DecodedToken.model_validate(info.model_dump()) for info in engine.harmony.decode(ids)]

    def _engine_or_none(self) -> LookupEngine | None:
        # The KB tools still answer (from the bundled snapshot) when the index cannot be opened.
        try:
            return self._engine_provider()
        except DoctorError as exc:
            log.warning("index unavailable, answering from the bundled KB: %s", exc.detail)
            return None

    # The loaded index, not the store: like /lookup, these answer when a Chroma server is paused.
    def documents(self) -> list[Document] | None:
        engine = self._engine_or_none()
        return None if engine is None else engine.documents()

    def get(self, doc_id: str) -> Document | None:
        engine = self._engine_or_none()
        return None if engine is None else engine.document(doc_id)


class LocalEngine:
    """Opens a LookupEngine on first use and keeps it (the stdio server's engine).

    Opening is lazy so the MCP handshake answers at once; the first tool call loads the model and
    store (and builds the index offline when none exists yet).
    """

    def __init__(self, settings: Settings, *, on_build: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.on_build = on_build
        self._engine: LookupEngine | None = None
        self._lock = threading.Lock()

    def __call__(self) -> LookupEngine:
        with self._lock:
            if self._engine is None:
                from service.engine import LookupEngine

                try:
                    self._engine = LookupEngine.open(self.settings, on_build=self.on_build, long_lived=True)
                except DoctorError:
                    raise
                except Exception as exc:  # model, store or vocab: say what failed and where to look
                    log.exception("cannot open the lookup engine")
                    raise NotReady(
                        f"cannot open the index ({type(exc).__name__}: {str(exc)[:300]}); "
                        "run `gptoss-doctor doctor` to see what is wrong"
                    ) from exc
            return self._engine

    def close(self) -> None:
        """Release the engine when one was opened."""
        with self._lock:
            if self._engine is not None:
                self._engine.close()
                self._engine = None


def stdio_server(
    settings: Settings, *, on_build: Callable[[str], None] | None = None
) -> tuple[MCPServer[Any], LocalEngine]:
    """The MCP server for ``gptoss-doctor mcp``, with the engine it opens lazily."""
    engine = LocalEngine(settings, on_build=on_build)
    backend = EngineBackend(engine)
    return build_mcp(lambda: backend, docs_dir=settings.docs_dir, core_repos=settings.repos), engine
