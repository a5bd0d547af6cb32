"""Assembling the answer: ranked issues, fixes with their sources, and advice.

Every fix names where it comes from (an issue or PR URL, or a reference section ``path#anchor``);
nothing is claimed without a source, and nothing is drawn from a low-confidence hit.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from indexer.documents import DocKind, Document, ThreadKind
from indexer.sources.github_threads import github_thread_url
from indexer.trust import trust_level
from service.analysis.engines import fix_engine
from service.analysis.platforms import other_platform
from service.models import AdviceOut, Confidence, FixOut, IssueOut, OriginOut, TokenOut

if TYPE_CHECKING:
    from service.analysis.advice import Advice
    from service.analysis.harmony import Reproduction, TokenInfo
    from service.analysis.origin import Origin
    from service.retrieval import Hit

MAX_FIXES = 8
_LIST_ITEM = re.compile(r"^\s{0,6}(?:[-*+]|\d{1,3}[.)])\s+(.{3,400})$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def public_source(source: str) -> str:
    """A source as answers cite it: reference docs under ``references/`` (the packaged skill's folder and
    the service's route), so the same string resolves in the skill, on the service and on the page."""
    return "references/" + source.removeprefix("reference/") if source.startswith("reference/") else source


class Knowledge:
    """Maps derived from one generation of the document set: fix links and reference citations."""

    def __init__(self, documents: Iterable[Document]) -> None:
        self.by_id: dict[str, Document] = {}
        self._fixed_by: dict[str, set[str]] = {}
        self._cited_by: dict[str, list[str]] = {}
        for doc in documents:
            self.by_id[doc.id] = doc
            for pr in doc.fixed_by:
                self._fixed_by.setdefault(doc.id, set()).add(pr)
            if doc.thread_kind is ThreadKind.PULL:
                for target in doc.fixes:
                    self._fixed_by.setdefault(target, set()).add(doc.id)
            if doc.kind is DocKind.REFERENCE_SECTION:
                for target in doc.references:
                    self._cited_by.setdefault(target, []).append(doc.id)

    def fixing_prs(self, thread_id: str) -> list[str]:
        """PRs that fix a thread, from its ``fixed_by`` and from PR documents' ``fixes``."""
        return sorted(self._fixed_by.get(thread_id, ()))

    def sections_citing(self, thread_id: str) -> list[str]:
        """Reference sections whose ``references`` cite a thread."""
        return self._cited_by.get(thread_id, [])


def scope_note(model: str) -> str:
    """What the answer to an input about another model than gpt-oss says about itself."""
    return (
        f"The input is about {model}, with no gpt-oss or Harmony sign. gptoss-doctor covers gpt-oss and its "
        "Harmony format, so it gives no diagnosis here (its fixes are gpt-oss settings); the issues listed are "
        "gpt-oss threads that read alike, not this failure."
    )


def is_thread(doc: Document) -> bool:
    """True for GitHub issues and PRs (curated or live), False for reference sections."""
    return doc.is_thread and doc.repo is not None and doc.number is not None


def thread_url(doc: Document) -> str:
    """The thread's github.com URL (a stored URL elsewhere is replaced), or its id for other documents."""
    if doc.repo is not None and doc.number is not None:
        return github_thread_url(doc.repo, doc.number, doc.thread_kind is ThreadKind.PULL, doc.url)
    return doc.url or doc.id


def issue_out(hit: Hit, knowledge: Knowledge) -> IssueOut:
    """One ranked thread as the API shows it."""
    doc = hit.doc
    assert doc.repo is not None and doc.number is not None
    linked = sorted(set(doc.fixed_by) | set(knowledge.fixing_prs(doc.id)))
    # Only a merged PR is a fix; an open (or unknown) PR that says "Fixes #N" is a proposal.
    merged = [pr for pr in linked if (p := knowledge.by_id.get(pr)) is not None and p.state == "merged"]
    return IssueOut(
        id=doc.id,
        repo=doc.repo,
        number=doc.number,
        kind="pull" if doc.thread_kind is ThreadKind.PULL else "issue",
        title=doc.title,
        url=thread_url(doc),
        state=doc.state,
        score=round(min(max(hit.score, 0.0), 1.0), 4),
        confidence=hit.confidence,
        why=list(hit.why),
        fixed_by=merged,
        proposed_fixes=[pr for pr in linked if pr not in merged],
        trust=trust_level(doc),
    )


CONFIDENCE_BANDS: dict[str, tuple[float, float]] = {"high": (0.7, 1.0), "medium": (0.4, 0.69), "low": (0.0, 0.39)}
"""The score range each label shows: one monotone mapping from score to label."""


def confidence_for(score: float) -> Confidence:
    """The label of a shown score (the inverse of CONFIDENCE_BANDS)."""
    return "high" if score >= 0.7 else "medium" if score >= 0.4 else "low"


def calibrate(hits: Sequence[Hit]) -> list[Hit]:
    """Hits in rank order with scores that never rise down the list and labels that follow the score.

    Retrieval ranks by fused evidence and judges confidence from it; its raw 0..1 score is a separate
    reading. Shown together they contradicted each other (0.92 above 0.95, "medium" at 0.29 above
    "low" at 0.42). Here each score is placed in its label's band, capped by the score above it, and the
    label re-read from the capped score: the order stays the retrieval's, a label can only go down.
    """
    out: list[Hit] = []
    ceiling = 1.0
    for hit in hits:
        low, high = CONFIDENCE_BANDS[hit.confidence]
        score = round(min(max(hit.score, low), high, ceiling), 3)
        out.append(hit.model_copy(update={"score": score, "confidence": confidence_for(score)}))
        ceiling = score
    return out


def _first_sentences(text: str, limit: int = 300) -> str:
    """The section's opening prose: headings, list items and code left out (they become steps)."""
    prose: list[str] = []
    in_code = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code or not line.strip() or line.startswith("#") or _LIST_ITEM.match(line):
            continue
        prose.append(line.strip())
    joined = " ".join(prose)
    if len(joined) <= limit:
        return joined
    cut = joined[:limit]
    ends = [m.start() for m in _SENTENCE_END.finditer(cut)]
    return cut[: ends[-1]] if ends else cut.rstrip() + "..."


_LABEL = re.compile(r"^\*\*(?P<label>[A-Z][\w -]{0,30}?):?\*\*:?\s*(?P<rest>.*)$")
_NUMBERED = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"\*\*(.{1,200}?)\*\*")


def _labelled_blocks(text: str) -> dict[str, list[str]]:
    """Lines of a reference section grouped by their bold label (``**Cause:**``, ``**Fix**``)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _LABEL.match(line.strip())
        if match:
            current = blocks.setdefault(match["label"].strip().lower(), [])
            if match["rest"]:
                current.append(match["rest"])
        elif line.startswith("#"):
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _items(lines: list[str]) -> list[str]:
    """List items of a block, continuation lines joined, emphasis markers dropped."""
    items: list[str] = []
    for line in lines:
        if _NUMBERED.match(line):
            items.append(_NUMBERED.sub("", line, count=1).strip())
        elif line.strip() and items and line.startswith(" "):
            items[-1] += " " + line.strip()
    return [_EMPHASIS.sub(r"\1", item) for item in items]


def section_fix(section: Document, *, also_cites: str | None = None) -> FixOut:
    """A reference-doc section as a fix: its title and cause, its **Fix** steps (else its list items)."""
    summary, steps = _section_summary(section.text, section.fix, section.title, " > ".join(section.heading_path))
    sources = [public_source(section.id)] + ([also_cites] if also_cites else [])
    return FixOut(summary=summary, steps=list(steps), sources=sources, confirmed=False)


@functools.lru_cache(maxsize=1024)
def _section_summary(text: str, fix: str | None, title: str, trail: str) -> tuple[str, tuple[str, ...]]:
    """A section's fix summary and steps: parsed once per section text, not on every lookup citing it."""
    blocks = _labelled_blocks(text)
    cause = " ".join(line.strip() for line in blocks.get("cause", []) if line.strip())
    lead = fix or _first_sentences(_EMPHASIS.sub(r"\1", cause)) if cause else ""
    if not lead:
        lines = text.splitlines()
        if lines and lines[0].strip() == trail:
            lines = lines[1:]  # the indexer puts the heading trail first: it is not prose
        lead = _first_sentences(_EMPHASIS.sub(r"\1", "\n".join(lines)))
    steps = _items(blocks["fix"]) if "fix" in blocks else _items(text.splitlines())
    return (f"{title}: {lead}" if lead else title), tuple(steps[:6])


def _first_release(pr: Document) -> str:
    """The words 'first released in <repo> <tag>' for a merged PR whose first release is verified."""
    return f"first released in {pr.repo} {pr.released_in}"


def thread_fixes(
    doc: Document, knowledge: Knowledge, ranked_sections: Collection[str] = (), *, with_sections: bool = True
) -> list[FixOut]:
    """Fixes a thread leads to: its curated fix and workarounds, merged PRs fixing it, sections citing it.

    A thread cited by several sections (one per token id, say) keeps only the sections that also rank
    for this query; a thread cited by one section keeps it. ``with_sections=False`` leaves sections out
    (a medium-confidence thread should not pull a whole other error family's section into the answer).
    """
    fixes: list[FixOut] = []
    url = thread_url(doc)
    if doc.fix:
        # A merged PR's own fix is in the releases from its first one on, when that is known.
        own_release = doc.released_in if doc.state == "merged" else None
        summary = doc.fix if own_release is None else f"{doc.fix} It was {_first_release(doc)}."
        fixes.append(
            FixOut(
                summary=summary,
                steps=list(doc.workarounds),
                sources=[url],
                confirmed=doc.fix_confirmed,
                released_in=own_release,
            )
        )
    elif doc.workarounds:
        fixes.append(FixOut(summary=f"Workarounds reported in {doc.id}", steps=list(doc.workarounds), sources=[url]))
    for pr_id in knowledge.fixing_prs(doc.id):
        pr = knowledge.by_id.get(pr_id)
        # Only merged PRs count as fixes; an open PR is a proposal, already visible in fixed_by.
        if pr is None or pr.state != "merged" or pr_id == doc.id:
            continue
        steps = [pr.fix] if pr.fix else []
        release = f" ({_first_release(pr)})" if pr.released_in else ""
        fixes.append(
            FixOut(
                summary=f"Merged PR {pr_id} fixes {doc.id}{release}: {pr.title}",
                steps=steps,
                sources=[thread_url(pr), url],
                confirmed=True,
                released_in=pr.released_in,
            )
        )
    citing = knowledge.sections_citing(doc.id) if with_sections else []
    if len(citing) > 1:
        citing = [section_id for section_id in citing if section_id in ranked_sections]
    for section_id in citing:
        section = knowledge.by_id.get(section_id)
        if section is not None:
            fixes.append(section_fix(section, also_cites=url))
    return fixes


def of_failing_engines(hits: Sequence[Hit], failing: Sequence[str], engine_of: Mapping[str, str]) -> list[Hit]:
    """The hits whose fix is for an engine the failure names, or for none (``engine_of``: thread id -> its
    engine; :func:`~service.analysis.engines.fix_engine`). A thread about another engine is a look-alike: its
    fix is that engine's (an Ollama PR for an LM Studio report, vLLM's attention backend for a TensorRT-LLM
    one), not one to offer. All of them when the failure names no engine."""
    if not failing:
        return list(hits)
    return [hit for hit in hits if fix_engine(hit.doc, engine_of) in {None, *failing}]


def of_the_platform(hits: Sequence[Hit], platform: str | None, platform_of: Mapping[str, str]) -> list[Hit]:
    """The hits whose fix is not for another GPU platform than the input's (``platform_of``: thread id -> the
    platform of a hardware thread). A newer CUDA image or an NVIDIA attention backend is no fix for a HIP
    error on an AMD GPU. All of them when the input shows no platform."""
    return [hit for hit in hits if not other_platform(platform, platform_of.get(hit.doc.id))]


def of_the_match(hits: Sequence[Hit]) -> list[Hit]:
    """The hits whose fixes an answer offers: when a thread is known to be this failure ("high"), only such
    threads; a thread that is only close to it has another failure's fix (a PR for a tool-call parse error
    under a template error), which would read as this one's."""
    sure = [hit for hit in hits if hit.confidence == "high"]
    return sure or list(hits)


def build_fixes(
    hits: Sequence[Hit],
    knowledge: Knowledge,
    *,
    ranked_sections: Collection[str] = (),
    limit: int = MAX_FIXES,
) -> list[FixOut]:
    """Fixes from the confident hits, in rank order, deduplicated by summary and section.

    ``ranked_sections``: reference-section ids the retrieval ranked for this query (any confidence).
    """
    fixes: list[FixOut] = []
    seen: set[str] = set()
    for hit in hits:
        if hit.confidence == "low":
            continue
        candidates = (
            thread_fixes(hit.doc, knowledge, ranked_sections, with_sections=hit.confidence == "high")
            if is_thread(hit.doc)
            else []
        )
        if hit.doc.kind is DocKind.REFERENCE_SECTION:
            candidates = [section_fix(hit.doc)]
        for fix in candidates:
            key = fix.sources[0] if fix.sources[0].startswith(("references/", "skill/")) else fix.summary
            if key in seen:
                continue
            seen.add(key)
            fixes.append(fix)
            if len(fixes) >= limit:
                return fixes
    return fixes


def advice_out(items: Iterable[Advice]) -> list[AdviceOut]:
    """The analysis Advice as API models: the same fields, reference sources cited as answers cite them."""
    return [
        AdviceOut(
            summary=item.summary,
            flags=[flag.model_copy() for flag in item.flags],
            sources=[public_source(source) for source in item.sources],
        )
        for item in items
    ]


def origin_out(origin: Origin) -> OriginOut:
    """The analysis Origin as the API model (the same fields; the API documents them for its readers)."""
    return OriginOut(side=origin.side, component=origin.component, explanation=origin.explanation)


def tokens_out(tokens: Iterable[TokenInfo]) -> list[TokenOut]:
    """Decoded TokenInfo objects as the API model."""
    return [TokenOut(id=token.id, text=token.text, special=token.special) for token in tokens]


def reproduction_out(reproduction: Reproduction | None) -> dict[str, Any] | None:
    """The Harmony parser replay as the answer's JSON object (``AnalysisOut.reproduction``)."""
    return None if reproduction is None else reproduction.model_dump(mode="json")


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9_.<|>=-]+", text.lower()))


def without_repeats(advice: Sequence[AdviceOut], fixes: Sequence[FixOut]) -> list[AdviceOut]:
    """Advice minus what the fixes already say: a card's fix or workaround appears once, as a fix."""
    said = {_words(t) for fix in fixes for t in [fix.summary, *fix.steps] if t.strip()}
    out: list[AdviceOut] = []
    for item in advice:
        head, sep, rest = item.summary.partition(": ")
        if sep and head.startswith("From "):
            # Card advice: "From owner/repo#N: step / step"; keep only the steps no fix states.
            steps = [step for step in rest.split(" / ") if _words(step) not in said]
            if not steps and not item.flags:
                continue
            summary = f"{head}: " + (" / ".join(steps) if steps else "the settings it changes (steps under fixes)")
            item = item.model_copy(update={"summary": summary})
        elif _words(item.summary) in said:
            continue
        out.append(item)
    return out
