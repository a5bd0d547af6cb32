"""The one data model every step shares: KB cards and the Documents built from every source."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ISSUE_ID = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)#(?P<number>\d+)$")



class DocKind(StrEnum):
    """What a Document is: a reference-doc section, a KB card, or a live GitHub issue or pull request."""

    REFERENCE_SECTION = "reference-section"
    CARD = "card"
    ISSUE = "issue"
    PULL = "pull"


class ThreadKind(StrEnum):
    """A GitHub thread's own kind (a KB card is one of these too)."""

    ISSUE = "issue"
    PULL = "pull"


class SourceName(StrEnum):
    """The built-in sources (``Document.sources``); a plugged-in source names itself (indexer/sources/base.py)."""

    DOCS = "docs"
    SNAPSHOT = "snapshot"
    GITHUB = "github"


State = Literal["open", "closed", "merged"]
Component = Literal[
    "harmony-parser",
    "tool-calling",
    "reasoning-output",
    "responses-api",
    "streaming",
    "chat-template-rendering",
    "model-files",
    "tokenizer-vocab",
    "quantization-kernels",
    "attention-backend",
    "multi-gpu",
    "speculative-decoding",
    "structured-output",
    "client-integration",
    "install-build",
    "performance",
    "other",
]
FlagRole = Literal["fix", "avoid", "context"]


class ReleaseSource(StrEnum):
    """Where a PR's ``released_in`` comes from: the sync compared tags (github), or a curator read it (card)."""

    GITHUB = "github"
    CARD = "card"

ErrorSource = Literal["vllm-server", "harmony-library", "client", "other-server", "model-files", "unknown"]


def issue_id(repo: str, number: int) -> str:
    """The canonical thread id ``owner/repo#N``."""
    return f"{repo}#{number}"


def split_issue_id(value: str) -> tuple[str, int]:
    """``owner/repo#N`` -> (``owner/repo``, N); ValueError when it is not an issue id."""
    match = ISSUE_ID.match(value)
    if not match:
        raise ValueError(f"{value!r} is not an issue id like owner/repo#123")
    return match["repo"], int(match["number"])


class Verification(BaseModel):
    """When and against what a card's actionable claims (fix, flags, versions, states) were checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="Date of the check, YYYY-MM-DD")
    against: list[str] = Field(
        min_length=1, description="What was read: the thread (body and comments), PRs, upstream source files"
    )
    outcome: Literal["confirmed", "corrected", "unverifiable"] = Field(
        description="confirmed: the card matched; corrected: fields were changed to match; unverifiable: the "
        "thread could not be read, so the card stands as curated but unchecked"
    )
    note: str | None = Field(default=None, description="What was corrected or could not be checked")


class Card(BaseModel):
    """One curated KB card: a public GitHub thread summarised in the project's own words."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    repo: str
    number: int = Field(gt=0)
    kind: ThreadKind
    state: State
    url: str
    title: str = Field(min_length=1)
    labels: list[str] = []
    error_signatures: list[str] = []
    component: Component
    error_source: ErrorSource
    summary: str | None = None
    cause: str | None = None
    fix: str | None = None
    workarounds: list[str] = []
    versions: dict[str, list[str]] = {}
    flags: list[str] = []
    references: list[str] = []
    fixes: list[str] = []
    fix_confirmed: bool = False
    merged_at: date | None = Field(
        default=None, description="For merged PRs: the merge date, when the thread shows it (curated)"
    )
    released_in: str | None = Field(
        default=None,
        description="For merged PRs: the first release tag that contains the merge, when a curator checked it; "
        "unset means not verified (the GitHub sync fills it in from the release tags)",
    )
    flag_roles: dict[str, FlagRole] = Field(
        default={},
        description="What each entry of flags is in the thread: fix (set it), avoid (it triggers the failure), "
        "context (what the reporter ran; never advice). Flags without a role are treated as context.",
    )
    verified: Verification | None = None
    signatures_checked: Verification | None = Field(
        default=None,
        description="When error_signatures were re-checked against the thread's body and comments (issue 12): "
        "confirmed (they match), corrected (strings added or fixed), unverifiable (thread not readable)",
    )

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        split_issue_id(value)
        return value

    @field_validator("url")
    @classmethod
    def _github_url(cls, value: str) -> str:
        if not value.startswith("https://github.com/"):
            raise ValueError(f"url {value!r} is not a github.com thread")
        return value

    def model_post_init(self, __context: object) -> None:
        if self.id != issue_id(self.repo, self.number):
            raise ValueError(f"id {self.id!r} does not match repo {self.repo!r} and number {self.number}")


THREAD_KINDS: frozenset[DocKind] = frozenset({DocKind.CARD, DocKind.ISSUE, DocKind.PULL})
"""Document kinds that are GitHub threads (a KB card is one too); the rest are reference-doc sections."""


class Document(BaseModel):
    """A unit of retrieval: a reference-doc section, a KB card, or a live GitHub issue/PR.

    A card and a live thread with the same id merge into one Document: the card's curated fields,
    GitHub's state, title, dates and comments.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="owner/repo#N for threads, reference/x.md#anchor for doc sections")
    kind: DocKind
    repo: str | None = None
    number: int | None = None
    title: str
    url: str | None = None
    state: State | None = None
    labels: list[str] = []
    created_at: datetime | None = None
    updated_at: datetime | None = None
    closed_at: datetime | None = None
    merged_at: datetime | None = None
    text: str = Field(description="What is embedded and searched lexically")
    error_signatures: list[str] = Field(default=[], description="Exact error strings, as seen")
    normalized_signatures: list[str] = Field(default=[], description="Signatures after normalisation")
    component: str | None = None
    error_source: str | None = None
    summary: str | None = None
    cause: str | None = None
    fix: str | None = None
    workarounds: list[str] = []
    versions: dict[str, list[str]] = {}
    flags: list[str] = []
    references: list[str] = []
    fixes: list[str] = Field(default=[], description="For PRs: the threads this PR fixes")
    fixed_by: list[str] = Field(default=[], description="PRs that fix this thread")
    fix_confirmed: bool = False
    flag_roles: dict[str, FlagRole] = Field(
        default={}, description="For curated threads: the card's role of each flag (fix, avoid, context)"
    )
    merge_commit: str | None = Field(default=None, description="For merged PRs: the merge commit's sha (GitHub)")
    released_in: str | None = Field(
        default=None, description="For merged PRs: the first release tag that contains the merge commit"
    )
    release_checked: str | None = Field(
        default=None,
        description="The newest release tag when the sync last compared this PR's merge commit with the release "
        "tags; with released_in unset it means merged but not in any release up to that tag",
    )
    release_source: ReleaseSource | None = Field(
        default=None,
        description="Where released_in comes from: github (the sync compared the merge commit with the release "
        "tags), card (a curator read it in the thread); unset: not verified",
    )
    heading_path: list[str] = Field(default=[], description="For doc sections: the heading trail")
    curated: bool = Field(default=False, description="True when a KB card backs this document")
    author: str | None = Field(default=None, description="For synced threads: the author's GitHub login")
    author_association: str | None = Field(
        default=None,
        description="For synced threads: GitHub's author_association of the author (OWNER, MEMBER, "
        "COLLABORATOR, CONTRIBUTOR, NONE, ...)",
    )
    maintainer_commented: bool = Field(
        default=False, description="For synced threads: an owner, member or collaborator commented"
    )
    comments: int = 0
    sources: list[str] = Field(default=[], description="Where the fields came from: snapshot, github, docs")

    @property
    def is_thread(self) -> bool:
        """A GitHub issue or PR (curated card or live), as opposed to a reference-doc section."""
        return self.kind in THREAD_KINDS

    @property
    def thread_kind(self) -> ThreadKind | None:
        """Issue or pull request for a thread (a card's is read from its URL), None for a doc section."""
        if not self.is_thread:
            return None
        if self.kind is DocKind.PULL or (self.url is not None and "/pull/" in self.url):
            return ThreadKind.PULL
        return ThreadKind.ISSUE

    @property
    def from_github(self) -> bool:
        """True when the GitHub sync contributed fields (the live thread), not only the docs or the snapshot."""
        return SourceName.GITHUB in self.sources

    def content_hash(self) -> str:
        """A stable hash of everything stored; unchanged documents are never re-embedded."""
        payload = self.model_dump(mode="json")
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def embedding_hash(self) -> str:
        """A hash of the embedded text only: metadata changes do not need a new embedding."""
        return hashlib.sha256(self.text.encode()).hexdigest()
