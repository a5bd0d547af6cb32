"""The verdict first: the known problem behind an input, its status for the user's version, what to do.

Known problems come from the reference docs (``indexer.problems``: one regular block per section). The
problem is chosen by evidence, strongest first: an exact error string the problem lists, then a
reference section the retrieval ranked, then a problem citing a confident thread. The status compares
the first release with the fix to the version the input shows; release tags the GitHub sync verified
(``Document.released_in``) win over the docs' own "fixed in", and an open PR is never a fix.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from indexer.documents import ReleaseSource
from indexer.signatures import normalize_signature
from service.analysis.advice import settings_in_effect, shows_set
from service.analysis.engine_names import engine_name
from service.analysis.engines import ThreadEngines, repo_engines
from service.analysis.input import ParsedInput
from service.answer import public_source
from service.calibration import CALIBRATION
from service.models import ActionOut, Confidence, DiagnosisOut, VerdictOut, VerdictStatus
from service.versions import parse_version

if TYPE_CHECKING:
    from indexer.problems import Action, Problem
    from service.answer import Knowledge
    from service.retrieval import Hit

log = logging.getLogger(__name__)

MAX_ACTIONS = 3
MIN_ERROR_CHARS = 12
"""Shortest listed error string matched by containment ("Unknown role" is 12 characters)."""
_UNCONFIRMED = " No report yet confirms the error gone in that release."
"""Added to a verdict when none of the merged fix PRs' cards has a report confirming the fix."""

_PACKAGES = {"vllm": "vLLM", "openai-harmony": "openai-harmony"}
_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bvs\.)(?<=[.!?])\s")


def problem_id(problem: Problem) -> str:
    """The section the problem is (its document id): ``reference/<doc>.md#<anchor>``."""
    return problem.anchor


_QUESTION = re.compile(r"^(?:which|how|what|can|could|does|do|is|are|should|why|where|when)\b[^\n]{0,300}\?$", re.I)


def asks(parsed: ParsedInput) -> bool:
    """True when the input is one question and carries no error line ("which flags do I need ...?")."""
    return not parsed.signatures and _QUESTION.match(parsed.account.strip()) is not None


class Problems:
    """The known problems of one docs folder, indexed by section id, error string and cited thread."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.items = list(problems)
        self.by_id = {problem_id(p): p for p in self.items}
        self._errors: list[tuple[str, Problem]] = []
        self._citing: dict[str, list[Problem]] = {}
        for problem in self.items:
            for error in problem.errors:
                key = normalize_signature(error)
                if len(key) >= MIN_ERROR_CHARS:
                    self._errors.append((key, problem))
            for source in problem.threads:
                self._citing.setdefault(source, []).append(problem)
        # Longest first: the most specific error string wins ("Unknown role: user" over "Unknown role").
        self._errors.sort(key=lambda item: -len(item[0]))
        # The message template of "Class: message: detail" strings, for the same error with another detail
        # (another role name, another header text).
        # A template several problems list goes to the one whose title has it, else the one listing it most.
        votes: dict[str, dict[str, tuple[int, int, Problem]]] = {}
        for key, problem in self._errors:
            if (shape := template(key)) is not None:
                titled = int(shape.rstrip(":").split(": ")[-1] in problem.title.lower())
                held = votes.setdefault(shape, {}).get(problem.anchor, (titled, 0, problem))
                votes[shape][problem.anchor] = (titled, held[1] + 1, problem)
        best = {shape: max(by.values(), key=lambda v: (v[0], v[1]))[2] for shape, by in votes.items()}
        self._templates = sorted(best.items(), key=lambda item: -len(item[0]))

    @classmethod
    def load(cls, docs_dir: Path, cache_dir: Path | None = None) -> Problems:
        """The problems of ``docs_dir/reference``; none (logged) when the docs cannot be read.

        ``cache_dir``: where the parsed problems are kept for the next process (``load_problems``)."""
        try:
            from indexer.problems import load_problems

            return cls(load_problems(docs_dir, cache_dir))
        except Exception as exc:  # a broken doc must not stop lookups: answers lose only the verdict
            log.warning("known problems unavailable (%s: %s); answers carry no diagnosis", type(exc).__name__, exc)
            return cls([])

    def by_error(self, parsed: ParsedInput) -> tuple[Problem, str] | None:
        """The problem whose listed error string the input quotes (or that quotes the input's line), else
        the one whose error message the input has with another detail; with the reason."""
        lines = [n for n in parsed.normalized[:10] if len(n) >= MIN_ERROR_CHARS]
        if not lines:
            return None
        for key, problem in self._errors:
            if any(key in line or (len(line) >= 30 and line in key) for line in lines):
                return problem, "the input quotes its error string"
        for key, problem in self._templates:
            if any(key in line for line in lines):
                return problem, "the input has its error message (with another detail)"
        return None

    def best_in(self, doc: str, question: str) -> Problem | None:
        """The problem of ``doc`` whose title, settings and actions share the most (rare) words with a
        question; None when none shares any."""
        candidates = [p for p in self.items if p.doc == doc]
        bags = {
            p.anchor: _words(" ".join([p.title, *p.symptoms, *(f"{a.target} {a.text}" for a in p.actions)]))
            for p in candidates
        }
        asked = _words(question)
        df: dict[str, int] = {}
        for bag in bags.values():
            for word in bag:
                df[word] = df.get(word, 0) + 1
        scored = [
            (
                sum(math.log(1 + len(bags) / df[w]) for w in asked & bags[p.anchor])
                + 0.5 * len(asked & _words(p.title)),
                p,
            )
            for p in candidates
        ]
        score, best = max(scored, key=lambda item: item[0], default=(0.0, None))
        return best if score > 0 else None

    def by_title(self, title: str) -> Problem | None:
        """The problem whose section title is ``title`` (letter case aside)."""
        wanted = title.casefold()
        return next((p for p in self.items if p.title.casefold() == wanted), None)

    def citing(self, thread_id: str) -> list[Problem]:
        """Problems that cite a thread as a source, a fix or an open PR."""
        return self._citing.get(thread_id, [])


_EXCEPTION_CLASS = re.compile(r"^[\w.]{0,80}(?:error|exception)(?::\s*|$)")


def template(key: str) -> str | None:
    """``harmonyerror: unknown role: <x>`` -> ``unknown role:``: the message before its last detail, when
    that is specific (12+ characters once the exception class is dropped); None otherwise."""
    head, sep, _ = key.rpartition(": ")
    message = _EXCEPTION_CLASS.sub("", head).strip()
    if not sep or ": " in message or len(message) < MIN_ERROR_CHARS or not re.search(r"[a-z]{3}", message):
        return None
    return message + ":"


_WORD = re.compile(r"[a-z][a-z0-9]{2,}")
_COMMON = frozenset(
    "the and for with you your what which how does need needs can not are use using gpt oss vllm".split()
)


def _words(text: str) -> set[str]:
    """Lower-case words of 3+ letters, a plural or -ing ending dropped, common ones out."""
    out = set()
    for word in _WORD.findall(text.lower()):
        for suffix in ("ing", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        if word not in _COMMON:
            out.add(word)
    return out


def problem_engines(problem: Problem, threads: ThreadEngines) -> frozenset[str]:
    """The serving engines a problem's threads are about (its sources, fix and open PRs), by the index's
    reading of each thread (else its repository's name); empty for an engine-neutral problem."""
    return frozenset(engine for thread in problem.threads if (engine := threads.thread_engine(thread)) is not None)


def problem_platforms(problem: Problem, threads: ThreadEngines) -> frozenset[str]:
    """The GPU platforms a problem's hardware threads are about (service/analysis/platforms.py); empty when
    none of its threads names one."""
    return frozenset(threads.platform[thread] for thread in problem.threads if thread in threads.platform)


def problem_clients(problem: Problem) -> frozenset[str]:
    """The client frameworks a problem is about: those every one of its actions is for (the reference docs'
    client sections, whose actions all have a client condition), else none."""
    per_action = [frozenset(action.when) & _CLIENT_WHENS for action in problem.actions]
    return frozenset().union(*per_action) if per_action and all(per_action) else frozenset()


def another_engine(parsed: ParsedInput, engines: frozenset[str]) -> bool:
    """True when the failure names engines and ``engines`` (of some threads) are only others."""
    named = set(parsed.failure_engines)
    return bool(named) and bool(engines) and not engines & named


# The user's own code calling openai-harmony (a script, a REPL session): no server is in the failure.
_OWN_HARMONY = re.compile(r"\bfrom openai_harmony import\b|\bimport openai_harmony\b|\bload_harmony_encoding\(")
OWN_HARMONY = "openai-harmony in your own code"


def drives_harmony(parsed: ParsedInput) -> bool:
    """True when the input shows the user's code calling openai-harmony and names no serving engine."""
    return not parsed.engines and "harmony" in parsed.text and _OWN_HARMONY.search(parsed.text[:200_000]) is not None


def runs_elsewhere(parsed: ParsedInput) -> str | None:
    """The engines the failure names when vLLM is not one of them (``SGLang``); when the failure names none,
    the engines the input names anywhere, if vLLM is not one (a described symptom under another engine's
    launch command or log); openai-harmony when the user's own code calls it and no engine is named; else
    None."""
    engines = parsed.failure_engines or parsed.engines
    if not engines:
        return OWN_HARMONY if drives_harmony(parsed) else None
    if "vllm" in engines:
        return None
    return ", ".join(engine_name(e) for e in engines)


def _vllm_threads(ids: Iterable[str]) -> bool:
    """True when every thread is in a vLLM repository (vllm-project/vllm, its recipes, forks, workers; not
    vllm-mlx, an MLX server)."""
    ids = list(ids)
    return bool(ids) and all(repo_engines(i.partition("#")[0])[:1] == ("vllm",) for i in ids)


def vllm_only(action: Action) -> bool:
    """An action only a vLLM server takes: upgrading or checking vLLM, a ``VLLM_`` variable, a server flag
    every source of which is a vLLM thread, or a workaround that names vLLM and every source of which is a
    vLLM thread (which endpoint of vLLM to call, where vLLM puts a fine-tune's answer)."""
    target = action.target.strip("`")
    if target.lower() == "vllm" or target.startswith("VLLM_"):
        return True
    if action.kind == "workaround" and "vllm" in action.text.lower():
        return _vllm_threads(action.sources)
    return target.startswith("--") and _vllm_threads(action.sources)


def choose(
    parsed: ParsedInput,
    problems: Problems,
    hits: Sequence[Hit],
    sections: Sequence[Hit],
    threads: ThreadEngines | None = None,
) -> tuple[Problem, Confidence, str] | None:
    """The problem behind the input, how sure, and why; None when nothing points at one.

    A problem found by words (not by its error string) must be about the engine the failure names, when
    both name one: a section built from vLLM threads does not diagnose an Ollama report. Likewise for the GPU
    platform: a problem whose hardware threads are all NVIDIA's does not diagnose an AMD report by words.
    """

    def fits(problem: Problem) -> bool:
        clients = problem_clients(problem)
        if clients and not any(_holds(client, parsed) for client in clients):
            return False  # a client's section (LangChain, LiteLLM, ...) for an input that names another or none
        if threads is None:
            return True
        # A kernel or parallelism problem seen only on another GPU platform (a CUDA start-up failure for a
        # ROCm report that shows no such error).
        platforms = problem_platforms(problem, threads)
        if parsed.platform is not None and platforms and parsed.platform not in platforms:
            return False
        return not another_engine(parsed, problem_engines(problem, threads))

    exact = problems.by_error(parsed)
    if exact is not None:  # its own error string: whatever engine raised it (a Harmony library error)
        return exact[0], "high", exact[1]
    for shown in parsed.response_shows:  # a pasted response whose fields show a known symptom
        problem = problems.by_title(shown)
        if problem is not None and fits(problem):
            return problem, "medium", f"the pasted response shows it ({shown.lower()})"
    for ref in parsed.threads:  # the user names the thread ("is vllm-project/vllm#22403 fixed?")
        citing = problems.citing(ref)
        if citing:
            return citing[0], "high", f"it cites {ref}, the thread the input names"
    # An input with an error line that no problem lists needs a strong section match; a question or a
    # described symptom (no error line) can go by a medium one.
    floor = {"high"} if parsed.signatures else {"high", "medium"}

    def backed(problem: Problem, confidence: str) -> bool:
        # A section found by its words alone, at medium, must agree with the evidence: it cites one of
        # the best-matching issues, since words a section shares with the input are weaker than the
        # threads. A question about setup ("which flags do I need ...?") goes by its section's words.
        if confidence == "high" or (problem.kind == "setup" and asks(parsed)):
            return True
        return any(h.doc.id in problem.threads for h in hits[: CALIBRATION.verdict_agree_hits])

    if sections and not parsed.signatures and sections[0].confidence in floor:
        top = sections[0].doc.id
        if top not in problems.by_id:
            # A doc's introduction matched a question as a whole: the doc's topic that shares the most
            # words with the question answers it.
            best = problems.best_in(top.partition("#")[0], parsed.query_text)
            if best is not None and fits(best) and backed(best, sections[0].confidence):
                return best, sections[0].confidence, "its reference doc matches the question"
    for section in sections:
        problem = problems.by_id.get(section.doc.id)
        if problem is not None and section.confidence in floor and fits(problem):
            if backed(problem, section.confidence):
                return problem, section.confidence, "its reference section matches the input"
    for hit in hits:
        if hit.confidence != "high":  # a problem cites many threads: only a close one points at it
            continue
        for problem in problems.citing(hit.doc.id):
            if fits(problem):
                return problem, hit.confidence, f"it cites {hit.doc.id}, the best matching issue"
    return None


# --- versions -----------------------------------------------------------------------------------------


def user_version(parsed: ParsedInput, package: str) -> str | None:
    """The version of ``package`` the input shows."""
    if package == "vllm":
        from service.analysis.advice import user_vllm_version

        return user_vllm_version(parsed)
    return parsed.versions.get(package)


def _thread_ids(values: Iterable[str]) -> list[str]:
    return [v for v in values if "#" in v and not v.startswith("reference/")]


def verdict(problem: Problem, parsed: ParsedInput, knowledge: Knowledge) -> VerdictOut:
    """The problem's status for the user's version: affected, already fixed, unreleased or no fix."""
    fix_prs = _thread_ids(problem.fix_prs)
    open_prs = _thread_ids(problem.open_prs)
    merged = [pr for pr in fix_prs if (doc := knowledge.by_id.get(pr)) is not None and doc.state == "merged"]
    checked = {pr: knowledge.by_id[pr] for pr in merged if knowledge.by_id[pr].release_source is ReleaseSource.GITHUB}
    released = {pr: doc.released_in for pr, doc in checked.items() if doc.released_in}
    stated = _stated_release(problem, parsed)
    elsewhere = runs_elsewhere(parsed)
    fixed: tuple[str, str] | None = stated
    verified = False
    if released:
        # The fix is complete in the release that has every merged fix PR the sync placed.
        tag = max(released.values(), key=lambda t: parse_version(t) or Version("0"))
        package = stated[0] if stated else _package_of(merged, knowledge)
        fixed, verified = (package, tag.removeprefix("v")), True
    if fixed is not None:
        package, release = fixed
        name = _PACKAGES.get(package, package)
        yours = user_version(parsed, package)
        source = "release tag checked on GitHub" if verified else "per the reference docs"
        # A release that carries the fix PRs is not a report that the error is gone: say so when no card confirms it.
        caveat = _UNCONFIRMED if merged and not any(knowledge.by_id[pr].fix_confirmed for pr in merged) else ""
        if package == "vllm" and elsewhere is not None:
            # vLLM's release with the fix says nothing about the engine this input runs.
            return VerdictOut(
                status="no-fix",
                text=f"Fixed in {name} {release} ({source}), but the input runs {elsewhere}: no fix for it is "
                "recorded here; see its own threads below.",
                fix_prs=merged,
                open_prs=open_prs,
            )
        if yours is None:
            return VerdictOut(
                status="fixed",
                text=f"Fixed in {name} {release} ({source}); the input does not show your version: upgrade if "
                f"yours is older.{caveat}",
                package=package,
                fixed_in=release,
                fix_prs=merged,
                open_prs=open_prs,
                release_verified=verified,
            )
        have, need = parse_version(yours), parse_version(release)
        status: VerdictStatus
        if have is not None and need is not None and have < need:
            status, text = "affected", f"Fixed in {name} {release}, you run {yours}: upgrade.{caveat}"
        elif have is not None and need is not None:
            status = "has-fix"
            text = f"Your {name} {yours} already has the fix (first in {release}): look elsewhere for the cause."
            if caveat:
                text += " No report yet confirms the fix, so an error on this release is worth reporting."
        else:
            status, text = "fixed", f"Fixed in {name} {release}; your version {yours} could not be compared.{caveat}"
        return VerdictOut(
            status=status,
            text=text,
            package=package,
            fixed_in=release,
            your_version=yours,
            fix_prs=merged,
            open_prs=open_prs,
            release_verified=verified,
        )
    if merged and elsewhere is not None and _vllm_threads(merged):
        return VerdictOut(
            status="no-fix",
            text=f"Merged in vLLM ({', '.join(merged)}), but the input runs {elsewhere}: no fix for it is "
            "recorded here; see its own threads below.",
            fix_prs=merged,
            open_prs=open_prs,
        )
    if merged:
        unreleased = [pr for pr, doc in checked.items() if not doc.released_in and doc.release_checked]
        if unreleased:
            newest = checked[unreleased[0]].release_checked
            text = (
                f"Merged in {', '.join(unreleased)} but in no release yet (newest checked: {newest}): use the "
                "workaround until a release has it."
            )
        else:
            text = (
                f"Merged in {', '.join(merged)}; its first release is not verified: check the PR's release "
                "before upgrading, and use the workaround meanwhile."
            )
        return VerdictOut(status="unreleased", text=text, fix_prs=merged, open_prs=open_prs)
    if open_prs:
        whose = f", for vLLM; the input runs {elsewhere}" if elsewhere is not None and _vllm_threads(open_prs) else ""
        return VerdictOut(
            status="no-release",
            text=f"No release has a fix (open PR {', '.join(open_prs)}{whose}): use the workaround.",
            open_prs=open_prs,
        )
    if problem.kind == "setup":
        return VerdictOut(status="setup", text="A setup matter: no release changes it; apply the settings below.")
    if problem.status == "not-a-bug":
        return VerdictOut(
            status="not-a-bug", text="Not a bug to wait for: no release changes it; the settings below avoid it."
        )
    # A release's code may read as fixing it (the advice says so where the docs do); no thread confirms it.
    return VerdictOut(status="no-fix", text="No thread confirms a fix in any release: use the workaround below.")


def _stated_release(problem: Problem, parsed: ParsedInput) -> tuple[str, str] | None:
    """The docs' first release with the fix: for the package whose version the input shows, else vLLM's."""
    if not problem.fixed_in:
        return None
    known = [p for p in problem.fixed_in if user_version(parsed, p)]
    package = known[0] if known else ("vllm" if "vllm" in problem.fixed_in else next(iter(problem.fixed_in)))
    return package, problem.fixed_in[package]


def _package_of(prs: Sequence[str], knowledge: Knowledge) -> str:
    repos = {knowledge.by_id[pr].repo for pr in prs if pr in knowledge.by_id}
    return "openai-harmony" if repos == {"openai/harmony"} else "vllm"


# --- actions --------------------------------------------------------------------------------------------


# What in the input shows that an action's condition holds (indexer.problems.When documents each one).
_SEEN: dict[str, re.Pattern[str]] = {
    "tools": re.compile(r"\btools?\b|tool_calls?|tool[_ -]choice|function[_ ]call", re.I),
    "built-in-tools": re.compile(r"--tool-server|\bbrowser tool|\bpython tool|\bmcp\b", re.I),
    "tool-choice-required": re.compile(r"tool_choice\W{0,4}required", re.I),
    "reasoning": re.compile(r"reasoning", re.I),
    "multi-turn": re.compile(r"multi-?turn|previous (?:assistant )?(?:turn|message)|conversation history", re.I),
    "streaming": re.compile(r"\bstream(?:ing|ed)?\b|stream=true|\bsse\b", re.I),
    "chat-completions": re.compile(r"chat[/ _.-]?completions?", re.I),
    "responses-api": re.compile(r"/v1/responses|responses api|serving_responses", re.I),
    "offline": re.compile(r"offline|no internet|air-?gapped|download", re.I),
    "benchmark": re.compile(r"bench(?:mark)?|guidellm|\beval(?:uation)?\b", re.I),
    "offline-inference": re.compile(r"LLM\.generate|\bllm\.chat\(", re.I),
    "custom-checkpoint": re.compile(r"fine-?tun|\blora\b|checkpoint|re-?quanti|merged weights", re.I),
    "multi-gpu": re.compile(r"tensor[-_ ]parallel|expert[-_ ]parallel|\btp\s?=?\s?\d|multi-?gpu", re.I),
    "install": re.compile(r"pip install|\buv\b|build(?:ing)? (?:vllm|from source)|wheel", re.I),
}
_CLIENT_WHENS = {"langchain", "litellm", "openai-agents", "codex", "pydantic-ai"}
_ENGINE_WHENS = {"sglang"}
"""Conditions naming a serving engine: such an action is another engine's flag or release, offered only
to an input whose failure names that engine."""


def _engine_mismatch(action: Action, parsed: ParsedInput) -> bool:
    """True when the action is for another engine than the one the failure names: an SGLang flag for any
    other input, or code that drives openai-harmony itself (``non-vllm``) for a vLLM failure."""
    for condition in action.when:
        if condition in _ENGINE_WHENS and condition not in parsed.failure_engines:
            return True
        if condition == "non-vllm" and "vllm" in parsed.failure_engines:
            return True
    return False


def _holds(condition: str, parsed: ParsedInput) -> bool:
    if condition == "always":
        return True
    if condition == "non-vllm":
        return runs_elsewhere(parsed) is not None
    if condition in _ENGINE_WHENS:
        return condition in parsed.failure_engines
    if condition in _CLIENT_WHENS:
        return (parsed.client or "").lower().replace("_", "-").startswith(condition.split("-")[0])
    rx = _SEEN.get(condition)
    return bool(rx and rx.search(parsed.text[:200_000]))


def _ordered(problem: Problem, parsed: ParsedInput) -> list[Action]:
    """The problem's actions whose conditions the input shows (or that always apply) first, each group in
    the docs' order: three lines must be the three that fit this input."""
    fits = [a for a in problem.actions if all(_holds(c, parsed) for c in a.when)]
    return fits + [a for a in problem.actions if a not in fits]


def actions(problem: Problem, status: VerdictOut, parsed: ParsedInput | None = None) -> list[ActionOut]:
    """Up to three actions, those that fit the input first; an upgrade only when it names a release with
    the fix and the user's version is not known to have it (then it comes first). When the failure names
    another engine than vLLM, actions only a vLLM server takes (:func:`vllm_only`) are left out."""
    pid = public_source(problem_id(problem))
    out: list[ActionOut] = []
    upgrade: ActionOut | None = None
    if status.status in {"affected", "fixed"} and status.fixed_in:
        name = _PACKAGES.get(status.package or "vllm", status.package or "vLLM")
        brings = ""
        if len(status.fix_prs) == 1:
            brings = f", the first release with {status.fix_prs[0]}"
        elif status.fix_prs:
            brings = f", the first release with all of {', '.join(status.fix_prs)}"
        upgrade = ActionOut(
            kind="upgrade",
            target=status.package,
            value=status.fixed_in,
            text=f"Upgrade {name} to {status.fixed_in} or newer{brings}.",
            sources=[*status.fix_prs, pid][:4],
        )
    elsewhere = runs_elsewhere(parsed) if parsed is not None else None
    shown: dict[str, str] | None = None
    for action in _ordered(problem, parsed) if parsed is not None else problem.actions:
        if elsewhere is not None and vllm_only(action):
            continue
        if parsed is not None and action.kind == "set" and action.target.startswith("-"):
            shown = settings_in_effect(parsed) if shown is None else shown
            if _already_set(action, shown):
                continue  # the input shows it set so: repeating it is no advice
        if parsed is not None and _engine_mismatch(action, parsed):
            continue
        if parsed is not None and action.target == "endpoint" and _calls_named_endpoint(action, parsed):
            continue  # "call /v1/chat/completions": the input's own request already does
        if action.kind == "upgrade":
            if upgrade is not None and (action.target or "").lower() == (upgrade.target or "").lower():
                # The verdict's own upgrade (to the release with the fix) replaces the doc's upgrade of the
                # same package: its wording when the row names that very release; an earlier release (or
                # none) the verdict's covers. Another package's upgrade is a step of its own.
                order = _release_order(action.value, upgrade.value)
                if order == 0:
                    upgrade = upgrade.model_copy(update={"text": action.text or upgrade.text})
                    continue
                if order != 1:
                    continue
            if status.status == "has-fix" or not _needs(action, parsed):
                continue  # the user's version already is that release or newer
            if set(action.sources) <= set(problem.open_prs):
                continue  # an open PR is not in any release: never an upgrade
        elif upgrade is not None and action.kind == "check" and action.target == upgrade.target:
            if set(action.sources) <= set(status.fix_prs):
                continue  # "use a build with fix PR X": the verdict's upgrade names the release that has X
        out.append(_action_out(action, pid))
    if upgrade is not None:
        out.insert(0, upgrade)
    return out[:MAX_ACTIONS]


_ENDPOINT = re.compile(r"/v1/[a-z_/]{3,40}[a-z]")


def _calls_named_endpoint(action: Action, parsed: ParsedInput) -> bool:
    """True when the input's own request goes to an API path the action tells the user to call (its text's
    first sentence, before the colon): the step is what the input already does."""
    wanted = set(_ENDPOINT.findall(action.text.split(":", 1)[0]))
    # A request the input shows: a URL with that path, or an access-log line of it ("POST /v1/..."). Not the
    # route list of a server's start-up log, which names every path it serves.
    return any(re.search(rf"(?:https?://\S{{1,200}}|\bPOST ){re.escape(path)}\b", parsed.text) for path in wanted)


def _already_set(action: Action, shown: dict[str, str]) -> bool:
    """True when the input shows the action's flag set to its value (a switch: set at all)."""
    return shows_set(shown, action.target.lstrip("-"), action.value)


def _names_release(action: Action) -> bool:
    return parse_version(action.value) is not None


def _release_order(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1 as release ``a`` is older than, the same as or newer than ``b``; None when either names none."""
    mine, theirs = parse_version(a or ""), parse_version(b or "")
    if mine is None or theirs is None:
        return None
    return (mine > theirs) - (mine < theirs)


def _needs(action: Action, parsed: ParsedInput | None) -> bool:
    """An upgrade applies unless the input shows the package at that release or newer."""
    if not _names_release(action):
        return False
    yours = parse_version(user_version(parsed, action.target.lower())) if parsed is not None else None
    need = parse_version(action.value)
    return yours is None or need is None or yours < need


def _action_out(action: Action, pid: str) -> ActionOut:
    conditions = [c for c in action.when if c != "always"]
    return ActionOut(
        kind=action.kind,
        target=action.target or None,
        value=action.value or None,
        when=", ".join(conditions) or None,
        text=action.text,
        sources=list(dict.fromkeys([*action.sources, pid])),
    )


def first_sentence(text: str | None, limit: int = 240) -> str:
    """The opening sentence of a cause, markdown emphasis dropped."""
    if not text:
        return ""
    clean = re.sub(r"\*\*(.+?)\*\*", r"\1", " ".join(text.split()))
    head = _SENTENCE_END.split(clean, maxsplit=1)[0]
    return head if len(head) <= limit else head[: limit - 3].rstrip() + "..."


def diagnose(
    parsed: ParsedInput,
    problems: Problems,
    knowledge: Knowledge,
    *,
    hits: Sequence[Hit],
    sections: Sequence[Hit],
    threads: ThreadEngines | None = None,
) -> DiagnosisOut | None:
    """The diagnosis of one input, or None when no known problem is behind it."""
    chosen = choose(parsed, problems, hits, sections, threads)
    if chosen is None:
        return None
    problem, confidence, why = chosen
    status = verdict(problem, parsed, knowledge)
    pid = public_source(problem_id(problem))
    todo = actions(problem, status, parsed)
    elsewhere = runs_elsewhere(parsed)
    if not todo and elsewhere is not None and any(vllm_only(a) for a in problem.actions):
        # Every action the docs give is a vLLM server's: say so instead of pointing "below", and point at the
        # engine's own threads only when the list has one.
        engines = set(parsed.failure_engines or parsed.engines)
        listed = threads is not None and any(threads.thread_engine(h.doc.id) in engines for h in hits)
        where = "see its own threads below" if listed else "none of the issues below is about it either"
        status = status.model_copy(
            update={
                "text": f"{status.text.split(':', 1)[0]}. The settings the reference docs give are vLLM's; none "
                f"is recorded for {elsewhere}: {where}."
            }
        )
    return DiagnosisOut(
        problem=pid,
        title=problem.title,
        kind=problem.kind,
        summary=first_sentence(problem.cause) or problem.title,
        confidence=confidence,
        why=why,
        verdict=status,
        actions=todo,
        sources=list(dict.fromkeys([pid, *map(public_source, problem.sources)]))[:6],
    )
