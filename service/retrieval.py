"""Hybrid retrieval: exact-signature overlap, bm25s over the documents, dense kNN; fused and calibrated.

Three legs vote for each thread:
- signatures: IDF-weighted token overlap between the input's error lines and each document's known
  error strings (robust to changed ids, names and truncation, strict about the distinctive words);
- lexical: bm25s over title, error strings and our summary/cause/fix text; a described symptom (no
  error line) can be widened with the strongest words of the documents it finds first (RM3-style
  pseudo-relevance feedback from the index's own texts; its weight is a calibrated constant, off
  since the 2026-11-27 fit);
- dense: cosine similarity of the bundled MiniLM embedding (paraphrases and symptom descriptions).
Reference-doc sections take part too and pass their score on to the threads they cite. The ranks are
fused (weighted reciprocal-rank fusion), then adjusted for the serving engine and client the input
names (same engine up, other engines down, only a little when the error string is the same) and for upstream
versus platform copies. Each hit gets a 0..1 score and a confidence calibrated from the evidence, so
an input that nothing in the index covers gets "no confident match". Every constant of that
arithmetic lives in one :class:`Calibration` object.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

import bm25s
import numpy as np
from pydantic import BaseModel, Field

from indexer.documents import DocKind, Document, ThreadKind
from indexer.signatures import signature_tokens
from indexer.trust import trust_level, trust_weight
from service.analysis.components import RULE_COMPONENT, ComponentModel
from service.analysis.engines import ThreadEngines, name_words
from service.analysis.input import ParsedInput
from service.calibration import CALIBRATION, Calibration

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import: index builds would log at INFO

_LEG_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="python-legs")
"""Runs a search's Python legs beside its query encode; shared by every Retriever generation (the engine
bounds how many lookups run at once)."""
Confidence = Literal["high", "medium", "low"]

_TOKEN = re.compile(r"[a-z0-9_]{2,40}|<\|[a-z_]{1,20}\|>")
_STOPWORDS = frozenset(
    "the a an and or of to in on for is are was were be been it its this that with as at by from "
    "but not no if then so my our your we i you they he she me us them do does did have has had "
    "can could should would will just when while what which who how why there here into out up "
    "about after before over under again same than too very also only any all some each other "
    "am get got gets getting use using used".split()
)

TITLED_MIN_CHARS = 30
EXACT_COVERAGE = 0.95
"""Share of a signature's (and the line's) weighted words two must share to be the same string."""


_JSON_MESSAGE = re.compile(r"""["']message["']\s{0,3}:\s{0,3}["']([^"']{30,300})["']""")


def titled(signature: str, title: str) -> bool:
    """True when a thread's title quotes this error string (30+ characters): the thread is about it.

    An HTTP error body (``{"error":{"message":"..."}}``) counts by its message: a title quotes what
    the server said, not the JSON around it.
    """
    wrapped = _JSON_MESSAGE.search(signature)
    core = wrapped.group(1) if wrapped else signature
    return len(core) >= TITLED_MIN_CHARS and core.lower() in title.lower()


ERROR_LINE_CHARS = 300
"""An error line longer than this is the user's paragraph around the error, not a line the software wrote."""


def _software_errors(parsed: ParsedInput) -> list[str]:
    """The strongest error lines (exceptions, messages, error records), without the user's sentences."""
    return [
        line.text
        for line in parsed.evidence
        if line.weight >= 1.0 and not line.said and len(line.text) <= ERROR_LINE_CHARS
    ][:3]


class DenseSearch(Protocol):
    """The dense leg: nearest documents to a query vector (the Chroma store implements it)."""

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]: ...


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised vectors."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class Hit(BaseModel):
    """One ranked thread with its calibrated score and the evidence behind it."""

    doc: Document
    score: float = Field(ge=0, le=1)
    confidence: Confidence
    why: list[str]


class RetrievalResult(BaseModel):
    """Ranked threads, related reference sections, and whether anything is a confident match."""

    hits: list[Hit]
    sections: list[Hit] = []
    confident: bool
    degraded: bool = False


# pydantic's "N validation error(s) for <Model>": the model that failed to validate is what tells one such
# failure from another (an SDK's ChatCompletion, a server's request, a Responses object).
_VALIDATION_FOR = re.compile(r"validation errors? for ([A-Za-z_]\w{0,80})")


def _validates_another_model(line: str, signature: str) -> bool:
    """True when the line and the error string are validation errors of two different models."""
    if "validation error" not in line or "validation error" not in signature:
        return False
    mine, theirs = _VALIDATION_FOR.search(line), _VALIDATION_FOR.search(signature)
    return mine is not None and theirs is not None and mine.group(1) != theirs.group(1)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords."""
    out: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if token in _STOPWORDS:
            continue
        out.append(token)
    return out


@dataclass(frozen=True)
class LegHit:
    """One document a leg found, with the leg's own score (and, for signatures, what matched)."""

    index: int
    score: float
    line: str = ""
    match: str = ""
    conflict: bool = False


class LegUnavailable(Exception):
    """The dense leg could not answer. The retriever only raises it: the engine, which owns the health
    of the index, decides the fallback (the same search without the dense leg, marked degraded)."""


class Leg(Protocol):
    """One retrieval leg: a name, documents ranked best first, and its weight in the fusion.

    ``by_score`` legs add ``weight * score**2`` (a signature score is an absolute measure); the others
    add ``weight / (rrf_k + rank)`` (their scores only order documents).
    """

    name: str
    by_score: bool

    def rank(self, parsed: ParsedInput) -> list[LegHit]: ...

    def weight(self, parsed: ParsedInput) -> float: ...


class _ThreadFacts(NamedTuple):
    """What :meth:`Retriever._adjustment` reads of one document, fixed for a generation."""

    engine: str | None
    client: str | None
    repo_name: str
    """The repository's name without its owner, lower-cased (``ml-explore/mlx-lm`` -> ``mlx-lm``)."""
    platform_copy: bool
    base_boost: float
    """The input-independent part of the adjustment (:meth:`Retriever._thread_boost`)."""


@dataclass(slots=True)
class _Evidence:
    signature: float = 0.0
    signature_match: str = ""
    lexical_rank: int | None = None
    lexical: float = 0.0
    dense_rank: int | None = None
    dense: float = 0.0
    via_sections: list[str] = field(default_factory=list)
    conflict: bool = False
    """The best signature match differs from the input in a rare word on both sides."""
    fused: float = 0.0
    adjusted: list[str] = field(default_factory=list)
    """Why the ranking moved this thread (engine, client, upstream)."""

    def record(self, leg: str, rank: int, hit: LegHit, top: float) -> None:
        """Keep what one leg said about this document."""
        if leg == "signature":
            self.signature, self.signature_match = hit.score, hit.match
            self.conflict = hit.conflict
        elif leg == "lexical":
            self.lexical_rank, self.lexical = rank, hit.score / top if top else 0.0
        elif leg == "dense":
            self.dense_rank, self.dense = rank, hit.score


class SignatureLeg:
    """Exact error strings: IDF-weighted overlap of the input's error lines with each thread's."""

    name = "signature"
    by_score = True

    def __init__(self, retriever: Retriever) -> None:
        self._retriever = retriever

    def rank(self, parsed: ParsedInput) -> list[LegHit]:
        found = self._retriever._signature_leg(parsed)
        hits = [LegHit(i, score, line, sig, conflict) for i, (score, line, sig, conflict) in found.items()]
        return sorted(hits, key=lambda h: -h.score)

    def weight(self, parsed: ParsedInput) -> float:
        return self._retriever.calibration.signature_weight


class LexicalLeg:
    """BM25 over title, error strings and our summary/cause/fix text."""

    name = "lexical"
    by_score = False

    def __init__(self, retriever: Retriever) -> None:
        self._retriever = retriever

    def rank(self, parsed: ParsedInput) -> list[LegHit]:
        return [LegHit(i, score) for i, score in self._retriever._lexical_leg(parsed)]

    def weight(self, parsed: ParsedInput) -> float:
        return self._retriever.calibration.lexical_weight


class DenseLeg:
    """Cosine similarity of the bundled embedding model: paraphrases and described symptoms."""

    name = "dense"
    by_score = False

    def __init__(self, retriever: Retriever) -> None:
        self._retriever = retriever

    def rank(self, parsed: ParsedInput) -> list[LegHit]:
        return [LegHit(i, sim) for i, sim in self._retriever._dense_leg(parsed)]

    def weight(self, parsed: ParsedInput) -> float:
        c = self._retriever.calibration
        return c.dense_weight_log if parsed.is_log else c.dense_weight_prose


class Retriever:
    """Search over one generation of the index; build a new one when the generation changes."""

    def __init__(
        self,
        documents: Sequence[Document],
        embedder: Embedder | None,
        dense: DenseSearch | None,
        *,
        generation: str = "",
        calibration: Calibration = CALIBRATION,
    ) -> None:
        self.generation = generation
        self.calibration = calibration
        self.embedder = embedder
        self.dense = dense
        self.documents = list(documents)
        self.by_id = {doc.id: doc for doc in self.documents}
        self._position = {doc.id: i for i, doc in enumerate(self.documents)}
        self._bm25 = bm25s.BM25()
        corpus = [tokenize(self._lexical_text(doc)) or ["_empty_"] for doc in self.documents]
        self._bm25.index(corpus, show_progress=False)
        # Document frequency over the whole corpus: how distinctive each word of an error string is.
        df: dict[str, int] = {}
        for tokens in corpus:
            for token in set(tokens):
                df[token] = df.get(token, 0) + 1
        n = max(len(corpus), 1)
        self._idf = {t: math.log(1 + n / c) for t, c in df.items()}
        self._max_idf = math.log(1 + n)
        self._words = [frozenset(tokens) for tokens in corpus]
        # Pseudo-relevance feedback, per generation: each document's strongest words as BM25 vocabulary
        # ids and weights, so a lookup only merges a few short arrays. Built only when the calibration
        # gives the feedback a weight; an empty list is what switches it off in ``_lexical_leg``.
        feedback = max(self.calibration.lexical_feedback_prose, self.calibration.lexical_feedback_log) > 0
        self._feedback_terms = [self._document_terms(tokens) for tokens in corpus] if feedback else []
        # (document, signature, token weights, rank factor): a thread's first error string is its
        # main one, later ones are errors it also mentions.
        self._signatures: list[tuple[int, str, dict[str, float], float]] = []
        for index, doc in enumerate(self.documents):
            for position, sig in enumerate(doc.error_signatures[:20]):
                weights = self._weights(signature_tokens(sig))
                if weights:
                    # A thread's first error string is its main one, and so is one its title quotes.
                    main = position == 0 or titled(sig, doc.title)
                    self._signatures.append((index, sig, weights, 1.0 if main else 0.96))
        # Token -> signatures holding it, so a line is compared only with signatures it can match.
        self._sig_postings: dict[str, list[int]] = {}
        for j, (_, _, weights, _) in enumerate(self._signatures):
            for token in weights:
                self._sig_postings.setdefault(token, []).append(j)
        self._sig_totals = [sum(weights.values()) for _, _, weights, _ in self._signatures]
        self._sig_max = [max(weights.values()) for _, _, weights, _ in self._signatures]
        # Per generation, not per lookup: each thread's engine and client, and the family model.
        self.engines = ThreadEngines.from_documents(self.documents)
        self.components = ComponentModel(self.documents, tokenize)
        self.legs: tuple[Leg, ...] = (SignatureLeg(self), LexicalLeg(self), DenseLeg(self))
        # Repository names a user may write ("mlx_lm", "LibreChat"); an engine's canonical name is not
        # distinctive (it names the whole family) and is left to the engine adjustment.
        upstream = {repo.split("/", 1)[-1].lower() for repo in self.engines.canonical.values()}
        names = {doc.repo.split("/", 1)[-1].lower() for doc in self.documents if doc.repo}
        self._repo_names = frozenset(n for n in names if len(n) >= 4 and n not in upstream)
        # What a lookup's fusion asks of each document by its position, once per generation: its kind,
        # component, the thread facts :meth:`_adjustment` reads (with the part of the adjustment that
        # depends on the thread alone), and the community author :meth:`_one_per_author` counts once.
        self._is_thread = [doc.is_thread for doc in self.documents]
        self._is_section = [doc.kind is DocKind.REFERENCE_SECTION for doc in self.documents]
        self._component = [doc.component for doc in self.documents]
        self._is_pull = [doc.thread_kind is ThreadKind.PULL for doc in self.documents]
        self._community_author = [
            doc.author if doc.author and trust_level(doc) == "community" else None for doc in self.documents
        ]
        self._facts = [
            _ThreadFacts(
                self.engines.engine.get(doc.id),
                self.engines.client.get(doc.id),
                (doc.repo or "").split("/", 1)[-1].lower(),
                self.engines.is_platform_copy(doc),
                self._thread_boost(doc),
            )
            for doc in self.documents
        ]

    @classmethod
    def from_store(cls, store: object, embedder: Embedder | None) -> Retriever:
        """Build from the store's current documents; their vectors are searched in memory (service/vectors.py)."""
        from service.vectors import VectorIndex

        documents = store.documents()  # type: ignore[attr-defined]
        generation = store.generation()  # type: ignore[attr-defined]
        vectors = VectorIndex.from_store(store)  # type: ignore[arg-type]
        return cls(documents, embedder, vectors, generation=generation)

    @staticmethod
    def _lexical_text(doc: Document) -> str:
        # The title and error strings say what the thread is about: give them double weight.
        head = "\n".join([doc.title, *doc.error_signatures])
        return f"{head}\n{head}\n{doc.text}"

    FEEDBACK_TERMS_PER_DOC = 40
    """How many of a document's words are kept as feedback candidates (its strongest)."""

    def _document_terms(self, tokens: Sequence[str]) -> list[tuple[str, float]]:
        """A document's strongest words with their in-document share times IDF, best first.

        Numbers are left out: a port, a token id or a version found in one thread says nothing about
        another report.
        """
        counts: dict[str, int] = {}
        for token in tokens:
            if token != "_empty_" and not token.isdigit():
                counts[token] = counts.get(token, 0) + 1
        total = max(sum(counts.values()), 1)
        vocab = self._bm25.vocab_dict
        # Ties go by the word itself: bm25s numbers its vocabulary in hash order, so ordering by id would
        # make the chosen words (and every answer) depend on PYTHONHASHSEED.
        weighted = sorted((-count / total * self._idf[t], t) for t, count in counts.items() if t in vocab)
        return [(t, -w) for w, t in weighted[: self.FEEDBACK_TERMS_PER_DOC]]

    def _weights(self, tokens: Sequence[str]) -> dict[str, float]:
        return {t: self._idf.get(t, self._max_idf) for t in tokens if t not in _STOPWORDS}

    # -- legs ---------------------------------------------------------------------------------------

    def _signature_leg(self, parsed: ParsedInput) -> dict[int, tuple[float, str, str, bool]]:
        """Best signature match per document; a document matching several input lines gains a little."""
        best: dict[int, tuple[float, str, str, bool]] = {}
        extra: dict[int, float] = {}
        lines = [(e.text, e.weight) for e in parsed.evidence if e.kind not in {"wrapper", "source"}][:8]
        if not lines and not parsed.is_log:
            lines = [(parsed.query_text[:600], 1.0)]
        for line, weight in lines:
            tokens = signature_tokens(line)
            q = self._weights(tokens)
            q_total = sum(q.values())
            if not q_total:
                continue
            partial = tokens[-1] if tokens and not line.rstrip()[-1:].isspace() else ""
            factor = min(1.0, weight)
            line_best: dict[int, tuple[float, str, bool]] = {}
            for j in self._sig_candidates(q, bool(partial)):
                index, sig, s, rank_factor = self._signatures[j]
                common = q.keys() & s.keys()
                shared = sum(s[t] for t in common)
                s_total = self._sig_totals[j]
                if partial and partial not in s:
                    # A paste cut mid-word ("... while expect"): the cut word counts as its completion.
                    completion = next((t for t in s if t.startswith(partial) and t not in common), None)
                    if completion:
                        shared += s[completion]
                        common = common | {partial}
                sig_cov = shared / s_total
                if sig_cov < 0.5:
                    continue
                q_cov = sum(q[t] for t in common if t in q) / q_total
                # A signature inside a longer line matches; so does a line inside a longer signature
                # (a truncated paste). Longer shared evidence beats a short generic signature.
                coverage = max(sig_cov * min(1.0, q_cov + 0.4), q_cov * min(1.0, sig_cov + 0.3))
                specificity = 0.8 + 0.2 * min(1.0, shared / 30.0)
                # A line logged below ERROR counts for less, unless it is, word for word, an error string
                # the knowledge base records for a failure: then the KB says it is the failure.
                line_factor = 1.0 if sig_cov >= EXACT_COVERAGE and q_cov >= EXACT_COVERAGE else factor
                # Both sides keep a rare word the other lacks (token 12606 vs 200002, another module
                # name): the same message template about a different failure, not the same error.
                conflict = self._conflicts(q, s, common) or _validates_another_model(line, sig)
                penalty = self.calibration.conflict_penalty if conflict else 1.0
                score = coverage * specificity * line_factor * rank_factor * penalty
                if score > line_best.get(index, (0.0, "", False))[0]:
                    line_best[index] = (score, sig, conflict)
            for index, (score, sig, conflict) in line_best.items():
                previous = best.get(index)
                if previous is None or score > previous[0]:
                    if previous is not None:
                        extra[index] = extra.get(index, 0.0) + previous[0]
                    best[index] = (score, line, sig, conflict)
                else:
                    extra[index] = extra.get(index, 0.0) + score
        for index, more in extra.items():
            score, line, sig, conflict = best[index]
            best[index] = (min(1.0, score + 0.03 * min(more, 2.0)), line, sig, conflict)
        return best

    def _sig_candidates(self, q: dict[str, float], partial: bool) -> list[int]:
        """Signatures that share a word with the line and could still cover half of their weight.

        An upper bound of the real test below (a cut word may add one more word of the signature), so
        nothing that would match is skipped.
        """
        shared: dict[int, float] = {}
        for token in q:
            for j in self._sig_postings.get(token, ()):
                shared[j] = shared.get(j, 0.0) + self._signatures[j][2][token]
        return sorted(
            j
            for j, mass in shared.items()
            if mass + (self._sig_max[j] if partial else 0.0) >= 0.5 * self._sig_totals[j]
        )

    def shares_error_words(self, doc: Document, parsed: ParsedInput) -> bool:
        """True when the input has no strong error line, or the thread uses a distinctive word of one (idf at
        least ``error_word_idf`` of the largest)."""
        lines = _software_errors(parsed)
        if not lines:
            return True
        rare = self.calibration.error_word_idf * self._max_idf
        words = {t for t in tokenize("\n".join(lines)) if self._idf.get(t, self._max_idf) >= rare}
        return not words or bool(words & self._words[self._position[doc.id]])

    def _conflicts(self, q: dict[str, float], s: dict[str, float], common: set[str]) -> bool:
        rare = 0.45 * self._max_idf
        q_rare = any(w >= rare for t, w in q.items() if t not in common)
        return q_rare and any(w >= rare for t, w in s.items() if t not in common)

    def _lexical_leg(self, parsed: ParsedInput, limit: int = 100) -> list[tuple[int, float]]:
        tokens = tokenize(parsed.query_text)
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        c = self.calibration
        weight = c.lexical_feedback_log if parsed.is_log else c.lexical_feedback_prose
        if weight > 0 and self._feedback_terms:  # _lexical_feedback handles no documents or no terms
            scores = self._lexical_feedback(tokens, scores, weight)
        order = np.argsort(-scores)[:limit]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]

    def _lexical_feedback(self, tokens: Sequence[str], scores: np.ndarray, weight: float) -> np.ndarray:
        """RM3-style expansion: the first pass's best documents lend their strongest words to the query.

        Each of the ``lexical_feedback_docs`` best documents votes for its words (see
        :meth:`_document_terms`) in proportion to its share of the best score; the
        ``lexical_feedback_terms`` best words the query lacks are added, together weighing ``weight``
        of the query's own words, and every document is scored again. The words come from the index's
        own texts, never from a list: the feedback is derived from the KB.
        """
        c = self.calibration
        m = min(c.lexical_feedback_docs, len(scores))
        if m <= 0:
            return scores
        top = np.argpartition(-scores, m - 1)[:m]
        best = float(scores[top].max())
        if best <= 0:
            return scores
        own = set(tokens)
        votes: dict[str, float] = {}
        for d in top.tolist():
            share = float(scores[d]) / best
            if share <= 0:
                continue
            for word, w in self._feedback_terms[d]:
                if word not in own:
                    votes[word] = votes.get(word, 0.0) + share * w
        chosen = sorted(votes.items(), key=lambda item: (-item[1], item[0]))[: c.lexical_feedback_terms]
        mass = sum(w for _, w in chosen)
        if not mass:
            return scores
        # bm25s keeps each word's per-document BM25 scores as a sparse column: add the chosen words'
        # columns, scaled, to the first pass's scores (what get_scores does, with a weight per word).
        index, vocab = self._bm25.scores, self._bm25.vocab_dict
        data, indices, indptr = index["data"], index["indices"], index["indptr"]
        expanded = scores.astype(np.float64)
        scale = weight * len(tokens) / mass
        for word, w in chosen:
            i = vocab[word]
            start, end = indptr[i], indptr[i + 1]
            np.add.at(expanded, indices[start:end], scale * w * data[start:end])
        return expanded

    @property
    def has_dense(self) -> bool:
        """True when this retriever has a dense leg (an embedder and vectors to search)."""
        return self.embedder is not None and self.dense is not None

    def _dense_leg(self, parsed: ParsedInput, limit: int = 40) -> list[tuple[int, float]]:
        """Nearest documents to the query's embedding; any failure is raised as LegUnavailable."""
        if self.embedder is None or self.dense is None:
            return []
        try:
            text = parsed.query_text[:400]
            # The ONNX embedder caps a query at the model's training length (indexer.embedding.QUERY_MAX_TOKENS).
            encode_query = getattr(self.embedder, "encode_query", None)
            vector = encode_query(text) if encode_query is not None else self.embedder.encode([text])[0]
            found = self.dense.query(vector, limit)
        except Exception as exc:
            raise LegUnavailable(f"dense search failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
        return [(self._position[doc_id], sim) for doc_id, sim in found if doc_id in self._position]

    # -- fusion -------------------------------------------------------------------------------------

    def search(
        self, parsed: ParsedInput, *, top_k: int = 5, repos: Sequence[str] | None = None, dense: bool = True
    ) -> RetrievalResult:
        """Rank threads for a parsed input; ``repos`` restricts the threads to those repositories.

        ``dense=False`` leaves the dense leg out. A failing dense leg raises LegUnavailable: whether to
        answer without it is the caller's decision (the engine's, which tracks the index's health).
        """
        c = self.calibration
        evidence: dict[int, _Evidence] = {}

        def ev(index: int) -> _Evidence:
            e = evidence.get(index)
            if e is None:
                e = evidence[index] = _Evidence()
            return e

        def fuse(leg: Leg, found: list[LegHit]) -> None:
            weight = leg.weight(parsed)
            top = found[0].score if found else 0.0
            name, by_score, rrf_k = leg.name, leg.by_score, c.rrf_k
            for rank, hit in enumerate(found):
                e = ev(hit.index)
                e.record(name, rank, hit, top)
                e.fused += weight * hit.score * hit.score if by_score else weight / (rrf_k + rank)

        def python_side() -> tuple[frozenset[str], set[str]]:
            found, words, components = self._python_legs(parsed)
            for leg, leg_hits in zip(self.legs[:-1], found, strict=True):
                fuse(leg, leg_hits)
            return words, components

        # The query encode (ONNX, which releases the GIL) is the longest step. It runs on this thread,
        # so it starts at once; the two Python legs, their fusion and the input-only work run beside it
        # in the pool (this thread touches ``evidence`` only once they are done). Submitted the other
        # way round, the encode waited for the GIL until the Python work paused, which left little of
        # it running beside the encode. The legs are fused in the same order either way (signature,
        # lexical, then dense): the sums, and so the ranking, are the same.
        if dense and self.has_dense:
            side = _LEG_POOL.submit(python_side)
            try:
                dense_found = self.legs[-1].rank(parsed)
            finally:
                words, components = side.result()  # also when the dense leg raised
            fuse(self.legs[-1], dense_found)
        else:
            words, components = python_side()

        # Sections pass a share of their score to the threads they cite (the best section counts).
        is_section = self._is_section
        sections = sorted((i for i in evidence if is_section[i]), key=lambda i: -evidence[i].fused)[:5]
        passed: dict[int, float] = {}
        for i in sections:
            section = self.documents[i]
            targets = [self._position[ref] for ref in section.references if ref in self._position]
            share = c.section_share * evidence[i].fused / max(1, len(targets)) ** 0.5
            for j in targets:
                passed[j] = max(passed.get(j, 0.0), share)
                ev(j).via_sections.append(section.id)
        for j, share in passed.items():
            evidence[j].fused += share

        allowed = set(repos) if repos else None
        top_signature = max((e.signature for e in evidence.values()), default=0.0)
        relayed = self._relays_server_error(parsed)
        scores: dict[int, float] = {}
        is_thread, component = self._is_thread, self._component
        for index, e in evidence.items():
            if not is_thread[index]:
                continue
            if allowed is not None and self.documents[index].repo not in allowed:
                continue
            boost = self._adjustment(index, e, parsed, words, top_signature, relayed=relayed)
            if component[index] in components:
                boost += c.same_component_boost
            scores[index] = e.fused * boost
        self._lift_upstream(scores, evidence, parsed, allowed)
        self._report_before_fix(scores, evidence)
        self._named_threads_first(scores, evidence, parsed, allowed)
        ranked = self._one_per_author(sorted(((score, i) for i, score in scores.items()), reverse=True))

        hits = [self._hit(self.documents[i], evidence[i], parsed, components) for _, i in ranked[:top_k]]
        hits = self._one_high(hits)
        section_hits = [self._hit(self.documents[i], evidence[i], parsed, components) for i in sections[:3]]
        confident = any(h.confidence == "high" for h in hits)
        return RetrievalResult(hits=hits, sections=section_hits, confident=confident)

    def _python_legs(self, parsed: ParsedInput) -> tuple[list[list[LegHit]], frozenset[str], set[str]]:
        """What a search needs besides the dense leg: the other legs' hits (in ``legs`` order), the
        input's name-like words and its error family; pure Python, run beside the query encode."""
        found = [leg.rank(parsed) for leg in self.legs[:-1]]
        return found, self._input_words(parsed), self._input_components(parsed)

    def _adjustment(
        self,
        index: int,
        e: _Evidence,
        parsed: ParsedInput,
        words: frozenset[str],
        top_signature: float,
        *,
        relayed: bool = False,
    ) -> float:
        """The factor on the fused score of the thread at ``index`` from its engine, client, repository and
        fix state.

        ``relayed``: the input's failing line is the server's message that the named client only passes on
        (``litellm.InternalServerError: OpenAIException - <the server's error>``); the client's tracker then
        gets no same-client lift, since the failure and its threads are the server's.
        """
        c = self.calibration
        doc = self.documents[index]
        engine, client, name, platform_copy, boost = self._facts[index]
        if parsed.engines and engine is not None:
            if engine in parsed.engines:
                boost += c.same_engine_boost
                e.adjusted.append(f"same engine ({engine})")
            elif e.signature < c.signature_high:
                # Another engine's thread is only as good as ours when it has the very same error.
                boost *= c.other_engine_factor
                e.adjusted.append(f"another engine ({engine})")
            else:
                # The very same error from another engine: a look-alike of this failure. The engine's
                # own thread, or the engine-neutral library thread, with that error comes first.
                boost *= c.other_engine_same_error_factor
        if parsed.client and client == parsed.client and not relayed:
            boost += c.same_client_boost
            e.adjusted.append(f"same client ({parsed.client})")
        elif client is not None and client not in words and e.signature < c.signature_high:
            # Another application's report of what the engine does (its own parser, its own UI): the
            # input's application or the engine's own thread is closer, unless the error is the same.
            boost *= c.other_client_factor
            e.adjusted.append(f"another client ({client})")
        if name in words and name in self._repo_names:
            boost += c.named_repo_boost
            e.adjusted.append(f"the input names {doc.repo}")
        elif platform_copy and not self._names_repo(words, doc.repo or ""):
            boost *= c.platform_factor
        # Only a title quoting one of the best-matching error strings: a title that quotes a generic
        # prefix ("HarmonyError: Unexpected token") must not lift a thread above the exact one.
        best = max(c.signature_high, top_signature - c.titled_margin)
        if e.signature >= best and titled(e.signature_match, doc.title):
            boost *= c.titled_factor
            e.adjusted.append("its title quotes the error")
        return boost

    @staticmethod
    def _relays_server_error(parsed: ParsedInput) -> bool:
        """True when a failing line (not the user's description) carries a message a server rule names."""
        from service.analysis.origin import match_input

        found = match_input(parsed)
        return found is not None and found.rule.side == "server" and not found.described

    def _thread_boost(self, doc: Document) -> float:
        """The input-independent part of :meth:`_adjustment`: canonical tracker, curation, fix state, trust."""
        c = self.calibration
        boost = 1.0
        engine = self.engines.engine.get(doc.id)
        if doc.repo is not None and doc.repo == self.engines.canonical.get(engine or ""):
            boost += c.canonical_boost
        if doc.curated:
            boost += c.curated_boost
        if doc.fix_confirmed or doc.state == "merged" or any(self._merged(pr) for pr in doc.fixed_by):
            boost += c.fixed_boost
        # The trust hook: uncorroborated synced text counts for less than curated or confirmed knowledge.
        return boost * trust_weight(doc)

    def _merged(self, pr_id: str) -> bool:
        """True when the PR is in the index and merged: an open PR that says "Fixes #N" is a proposal."""
        pr = self.by_id.get(pr_id)
        return pr is not None and pr.state == "merged"

    def _one_per_author(self, ranked: list[tuple[float, int]]) -> list[tuple[float, int]]:
        """The best of each community author's threads: one account repeating itself adds no evidence."""
        seen: set[str] = set()
        out: list[tuple[float, int]] = []
        authors = self._community_author
        for score, i in ranked:
            author = authors[i]
            if author is not None:
                if author in seen:
                    continue
                seen.add(author)
            out.append((score, i))
        return out

    @staticmethod
    def _input_words(parsed: ParsedInput) -> frozenset[str]:
        """The input's name-like words (``mlx_lm`` read as ``mlx-lm``), computed once per search.

        A dotted word also counts by its parts: ``mlx_lm.server`` is a module of ``mlx-lm``.
        """
        words = {w.replace("_", "-") for w in name_words(parsed.account[:200_000])}
        return frozenset(words | {part for w in words if "." in w for part in w.split(".") if len(part) >= 3})

    @staticmethod
    def _names_repo(words: frozenset[str], repo: str) -> bool:
        """True when the input names the repository's owner or name (a vendor fork, a platform, a tool)."""
        return any(part in words for part in repo.lower().split("/", 1))

    def resolve_numbers(self, parsed: ParsedInput) -> list[str]:
        """The threads a bare number names (``#22403``): the one with that number in the canonical tracker
        of an engine the input names (vLLM's when it names none), when the index holds it."""
        engines = parsed.failure_engines or parsed.engines or ["vllm"]
        repos = [repo for e in engines if (repo := self.engines.canonical.get(e))]
        found: list[str] = []
        for number in parsed.numbers:
            ref = next((f"{repo}#{number}" for repo in repos if f"{repo}#{number}" in self._position), None)
            if ref is not None and ref not in parsed.threads and ref not in found:
                found.append(ref)
        return found

    def _named_threads_first(
        self, scores: dict[int, float], evidence: dict[int, _Evidence], parsed: ParsedInput, allowed: set[str] | None
    ) -> None:
        """The threads the user names (a URL, owner/name#number) that the index holds come first, in the
        order named: the user asked about them, whatever else the words match."""
        held = [self._position[ref] for ref in parsed.threads if ref in self._position]
        named = [
            i for i in held if self.documents[i].is_thread and (allowed is None or self.documents[i].repo in allowed)
        ]
        if not named:
            return
        top = max(scores.values(), default=0.0) + 1.0
        for place, i in enumerate(named):
            e = evidence.setdefault(i, _Evidence())
            e.adjusted.insert(0, "the input names this thread")
            scores[i] = top + len(named) - place

    def _lift_upstream(
        self, scores: dict[int, float], evidence: dict[int, _Evidence], parsed: ParsedInput, allowed: set[str] | None
    ) -> None:
        """Rank the upstream thread a platform copy cites (and that thread's fix PR) above the copy."""
        c = self.calibration
        facts = self._facts
        copies = sorted((i for i in scores if facts[i].platform_copy), key=lambda i: -scores[i])[:10]
        for i in copies:
            copy = self.documents[i]
            engine = self.engines.engine.get(copy.id)
            upstream = self.engines.canonical.get(engine or "")
            for ref in [*copy.references, *copy.fixed_by, *copy.fixes]:
                j = self._position.get(ref)
                if j is None:
                    continue
                target = self.documents[j]
                if target.repo != upstream or not target.is_thread:
                    continue
                if allowed is not None and target.repo not in allowed:
                    continue
                lifted = scores[i] * c.upstream_lift
                if scores.get(j, 0.0) < lifted:
                    scores[j] = lifted
                    evidence.setdefault(j, _Evidence()).adjusted.append(f"upstream of {copy.id}")
                for fix in target.fixed_by:
                    if not self._merged(fix):
                        continue
                    k = self._position.get(fix)
                    if k is not None and (allowed is None or self.documents[k].repo in allowed):
                        if scores.get(k, 0.0) < scores[i] * c.fix_lift:
                            scores[k] = scores[i] * c.fix_lift
                            evidence.setdefault(k, _Evidence()).adjusted.append(f"fixes {target.id}")

    def _report_before_fix(self, scores: dict[int, float], evidence: dict[int, _Evidence]) -> None:
        """A thread that shows the input's error ranks above the PR that removed it or proposes to.

        Both quote the same error string, so the signature leg cannot tell them apart and the PR's title
        (which names what it changes) often wins on words. But a user who sees the error runs a build
        without a merged PR: the thread that shows the error is the answer, and the PR is its fix (linked
        from it, and still "high" beside it). A PR that was never merged is only a proposal for that
        thread, so the thread leads all the more.
        """
        c = self.calibration
        pulls = (i for i in scores if self._is_pull[i] and evidence[i].signature >= c.signature_medium)
        for i in sorted(pulls, key=lambda i: -scores[i]):
            pr = self.documents[i]
            what = "removed" if pr.state == "merged" else "proposes to fix"
            for target in pr.fixes:
                j = self._position.get(target)
                if j is None or j not in scores or scores[j] > scores[i]:
                    continue  # a tie goes to the thread that shows the error, as a lower score does
                # The same error: the fixed thread matches the input's error string as well as the PR.
                if evidence[j].signature >= evidence[i].signature - c.titled_margin:
                    # The two trade places: the thread takes the PR's place, the PR follows it.
                    scores[j], scores[i] = scores[i], scores[i] / c.fixed_report_lift
                    evidence[j].adjusted.append(f"shows the error {pr.id} {what}")

    def _input_components(self, parsed: ParsedInput) -> set[str]:
        """The error family the input is about: the origin rule's, else the KB-trained model's best guess."""
        from service.analysis.origin import match_input

        found = match_input(parsed)
        if found is not None and found.rule.tier == 0:
            category = found.rule.category
            return {RULE_COMPONENT.get(category, category)}
        return set(self.components.rank(parsed.query_text, limit=1))

    @staticmethod
    def _one_high(hits: list[Hit]) -> list[Hit]:
        """ "high" names the thread for this failure: the best one, and what fixes it or it fixes.

        Many threads quote the same error string (duplicates, downstream platforms, other projects);
        they stay visible as "medium", since nothing says they are about this failure rather than a
        look-alike. A linked PR that was never merged stays "medium" too: it proposes a fix.
        """
        first = next((h for h in hits if h.confidence == "high"), None)
        if first is None:
            return hits
        linked = {first.doc.id, *first.doc.fixed_by, *first.doc.fixes, *first.doc.references}
        out = []
        for hit in hits:
            reason = None
            if hit.confidence == "high" and hit is not first:
                if hit.doc.id not in linked:
                    reason = f"same error string as {first.doc.id}, which ranks first"
                elif hit.doc.thread_kind is ThreadKind.PULL and hit.doc.state != "merged":
                    # A proposed fix never merged: about this failure, but nothing it says holds yet.
                    reason = f"an unmerged PR linked from {first.doc.id}: a proposal, not a fix"
            if reason is not None:
                hit = hit.model_copy(update={"confidence": "medium", "why": [*hit.why, reason]})
            out.append(hit)
        return out

    def _engine_consistent(self, doc: Document, parsed: ParsedInput) -> bool:
        """The thread is engine-neutral or about the engine the input runs on (or the default one)."""
        engine = self.engines.engine.get(doc.id)
        if engine is None:
            return True
        return engine in parsed.engines if parsed.engines else engine == self.engines.default_engine

    def _same_engine(self, doc: Document, parsed: ParsedInput) -> bool:
        """The thread is in the tracker (or a fork) of the engine the input names.

        An input that names no engine has no "same engine": it most likely runs the engine most threads
        are about, but a guess is not enough to call a thread found by its words alone the same failure.
        In a pasted log the failure must name it (its failing lines or the user's sentence): the start-up
        and access lines around a described symptom name the engine of every failure in that log.
        """
        engine = self.engines.repo_engine.get(doc.repo or "")
        return engine is not None and engine in parsed.failure_engines

    def _client_thread_near(self, doc: Document, e: _Evidence, parsed: ParsedInput) -> bool:
        """A thread in the tracker of the client the input names, near the top of a rank leg.

        The client's own tracker is where its failures with gpt-oss are reported, so a close thread there
        is worth showing with its fix even when the words differ (a described symptom, no error line).
        """
        if not parsed.client or self.engines.client.get(doc.id) != parsed.client:
            return False
        ranks = [r for r in (e.lexical_rank, e.dense_rank) if r is not None]
        return bool(ranks) and min(ranks) < self.calibration.lexical_high_rank

    def _hit(self, doc: Document, e: _Evidence, parsed: ParsedInput, components: set[str]) -> Hit:
        c = self.calibration
        why: list[str] = []
        if e.signature >= c.signature_medium:
            why.append(f"error signature matches {e.signature_match[:160]!r} ({e.signature:.2f})")
        if e.lexical_rank is not None and e.lexical_rank < 10:
            why.append(f"lexical rank {e.lexical_rank + 1}")
        if e.dense_rank is not None and e.dense_rank < 10:
            why.append(f"semantic similarity {e.dense:.2f} (rank {e.dense_rank + 1})")
        if e.via_sections:
            why.append("cited by " + ", ".join(sorted(set(e.via_sections))[:2]))
        why += e.adjusted[:2]
        dense_part = min(1.0, max(0.0, (e.dense - 0.3) / 0.55))
        lexical_part = e.lexical if e.lexical_rank is not None and e.lexical_rank < 20 else 0.0
        score = max(e.signature, 0.55 * dense_part + 0.45 * lexical_part * dense_part**0.5)
        score = round(min(1.0, max(0.0, score)), 3)
        exact = e.signature >= c.signature_high or doc.id in parsed.threads  # named by the user: no guess
        close_text = (
            e.dense >= c.dense_high
            and e.lexical_rank is not None
            and e.lexical_rank < c.lexical_high_rank
            and not e.conflict
            and self._same_engine(doc, parsed)
            and (doc.component in components if doc.kind is not DocKind.REFERENCE_SECTION else bool(components))
            # An error line the software wrote whose distinctive words the thread never uses: another failure
            # in the same engine, however close the words around it (a model-load error against a tool-template
            # thread). One such word in the thread is enough to stay.
            and (e.signature >= c.signature_medium or self.shares_error_words(doc, parsed))
        )
        if exact or close_text:
            confidence: Confidence = "high"
        elif (
            e.signature >= c.signature_medium
            or e.dense >= c.dense_medium
            or (e.lexical_rank == 0 and e.dense >= c.dense_medium_lexical_top)
            or self._client_thread_near(doc, e, parsed)
        ):
            confidence = "medium"
        else:
            confidence = "low"
        if confidence == "high" and trust_level(doc) == "community":
            confidence = "medium"  # nobody who maintains the project has confirmed this thread
            why.append("unconfirmed: written by an outside account, no maintainer or merged PR backs it")
        if confidence == "high" and not self._engine_consistent(doc, parsed):
            confidence = "medium"  # the same words from another engine: a look-alike, not this failure
            why.append("another engine's thread")
        if confidence == "high" and parsed.other_model:
            confidence = "medium"  # the input is about another model: at best a look-alike
        if not parsed.failure_found:
            if not parsed.plain:
                confidence = "low"  # a log without a failure line: nothing to match confidently
            elif confidence == "high":
                # No failing line, but words the user put among the records: a lead, never a certainty.
                confidence = "medium"
                why.append("matched on the lines put among the log's records, not on a failing line")
        return Hit(doc=doc, score=score, confidence=confidence, why=why or ["weak lexical or semantic overlap"])
