"""Hybrid retrieval: exact-signature overlap, bm25s over the documents, dense kNN; fused and calibrated.

Three legs vote for each thread:
- signatures: IDF-weighted token overlap between the input's error lines and each document's known
  error strings (robust to changed ids, names and truncation, strict about the distinctive words);
- lexical: bm25s over title, error strings and our summary/cause/fix text;
- dense: cosine similarity of the bundled MiniLM embedding (paraphrases and symptom descriptions).
Reference-doc sections take part too and pass their score on to the threads they cite. The ranks are
fused (weighted reciprocal-rank fusion), and each hit gets a 0..1 score and a confidence calibrated
from the evidence, so an input that nothing in the index covers gets "no confident match".
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal, Protocol

import bm25s
import numpy as np
from pydantic import BaseModel, Field

from indexer.documents import Document
from indexer.signatures import signature_tokens
from service.analysis.input import ParsedInput

log = logging.getLogger(__name__)

_DENSE_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="dense-leg")
"""Shared by every Retriever generation; the engine bounds how many lookups run at once."""
THREAD_KINDS = frozenset({"card", "issue", "pull"})
CORE_REPOS = frozenset({"vllm-project/vllm", "openai/harmony"})
Confidence = Literal["high", "medium", "low"]

_TOKEN = re.compile(r"[a-z0-9_]{2,40}|<\|[a-z_]{1,20}\|>")
_STOPWORDS = frozenset(
    "the a an and or of to in on for is are was were be been it its this that with as at by from "
    "but not no if then so my our your we i you they he she me us them do does did have has had "
    "can could should would will just when while what which who how why there here into out up "
    "about after before over under again same than too very also only any all some each other "
    "am get got gets getting use using used".split()
)
# Domain words that people say in place of the words the threads use.
_SYNONYMS = {
    "function": "tool",
    "functions": "tools",
    "invocation": "call",
    "thinking": "reasoning",
    "thoughts": "reasoning",
    "sse": "streaming",
    "incremental": "streaming",
    "stream": "streaming",
    "gpus": "gpu",
    "card": "gpu",
    "lora": "adapter",
}


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


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without stopwords; domain synonyms mapped to the threads' words."""
    out: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if token in _STOPWORDS:
            continue
        out.append(_SYNONYMS.get(token, token))
    return out


@dataclass
class _Evidence:
    signature: float = 0.0
    signature_line: str = ""
    signature_match: str = ""
    lexical_rank: int | None = None
    lexical: float = 0.0
    dense_rank: int | None = None
    dense: float = 0.0
    via_sections: list[str] = field(default_factory=list)
    conflict: bool = False
    """The best signature match differs from the input in a rare word on both sides."""
    fused: float = 0.0


class Retriever:
    """Search over one generation of the index; build a new one when the generation changes."""

    def __init__(
        self,
        documents: Sequence[Document],
        embedder: Embedder | None,
        dense: DenseSearch | None,
        *,
        generation: str = "",
    ) -> None:
        self.generation = generation
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
        # (document, signature, token weights, rank factor): a thread's first error string is its
        # main one, later ones are errors it also mentions.
        self._signatures: list[tuple[int, str, dict[str, float], float]] = []
        for index, doc in enumerate(self.documents):
            for position, sig in enumerate(doc.error_signatures[:20]):
                weights = self._weights(signature_tokens(sig))
                if weights:
                    self._signatures.append((index, sig, weights, 1.0 if position == 0 else 0.96))
        # Token -> signatures holding it, so a line is compared only with signatures it can match.
        self._sig_postings: dict[str, list[int]] = {}
        for j, (_, _, weights, _) in enumerate(self._signatures):
            for token in weights:
                self._sig_postings.setdefault(token, []).append(j)
        self._sig_totals = [sum(weights.values()) for _, _, weights, _ in self._signatures]
        self._sig_max = [max(weights.values()) for _, _, weights, _ in self._signatures]

    @classmethod
    def from_store(cls, store: object, embedder: Embedder | None) -> Retriever:
        """Build from the store's current documents; the store is also the dense leg."""
        documents = store.documents()  # type: ignore[attr-defined]
        generation = store.generation()  # type: ignore[attr-defined]
        return cls(documents, embedder, store, generation=generation)  # type: ignore[arg-type]

    @staticmethod
    def _lexical_text(doc: Document) -> str:
        # The title and error strings say what the thread is about: give them double weight.
        head = "\n".join([doc.title, *doc.error_signatures])
        return f"{head}\n{head}\n{doc.text}"

    def _weights(self, tokens: Sequence[str]) -> dict[str, float]:
        return {t: self._idf.get(t, self._max_idf) for t in tokens if t not in _STOPWORDS}

    # -- legs ---------------------------------------------------------------------------------------

    def _signature_leg(self, parsed: ParsedInput) -> dict[int, tuple[float, str, str, bool]]:
        """Best signature match per document; a document matching several input lines gains a little."""
        best: dict[int, tuple[float, str, str, bool]] = {}
        extra: dict[int, float] = {}
        lines = [(e.text, e.weight) for e in parsed.evidence if e.kind not in {"wrapper", "source"}][:8]
        if not lines and not parsed.is_log:
            lines = [(parsed.text[:600], 1.0)]
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
                # Both sides keep a rare word the other lacks (token 12606 vs 200002, another module
                # name): the same message template about a different failure, not the same error.
                conflict = self._conflicts(q, s, common)
                score = coverage * specificity * factor * rank_factor * (0.85 if conflict else 1.0)
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

    def _conflicts(self, q: dict[str, float], s: dict[str, float], common: set[str]) -> bool:
        rare = 0.45 * self._max_idf
        q_rare = any(w >= rare for t, w in q.items() if t not in common)
        return q_rare and any(w >= rare for t, w in s.items() if t not in common)

    def _lexical_leg(self, parsed: ParsedInput, limit: int = 100) -> list[tuple[int, float]]:
        tokens = tokenize(parsed.query_text)
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        order = np.argsort(-scores)[:limit]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]

    def _dense_leg(self, parsed: ParsedInput, limit: int = 40) -> tuple[list[tuple[int, float]], bool]:
        if self.embedder is None or self.dense is None:
            return [], self.dense is None and self.embedder is not None
        text = parsed.query_text[:400]
        try:
            vector = self.embedder.encode([text])[0]
            found = self.dense.query(vector, limit)
        except Exception as exc:  # the store may be a remote Chroma server that just went away
            log.warning("dense search failed, answering from the lexical leg: %s", exc)
            return [], True
        return [(self._position[doc_id], sim) for doc_id, sim in found if doc_id in self._position], False

    # -- fusion -------------------------------------------------------------------------------------

    def search(
        self, parsed: ParsedInput, *, top_k: int = 5, repos: Sequence[str] | None = None
    ) -> RetrievalResult:
        """Rank threads for a parsed input; ``repos`` restricts the threads to those repositories."""
        evidence: dict[int, _Evidence] = {}

        def ev(index: int) -> _Evidence:
            return evidence.setdefault(index, _Evidence())

        # The dense leg (ONNX model, then the vector store) releases the GIL: it runs beside the two
        # Python legs instead of after them.
        dense_job = _DENSE_POOL.submit(self._dense_leg, parsed)
        for index, (score, line, sig, conflict) in self._signature_leg(parsed).items():
            e = ev(index)
            e.signature, e.signature_line, e.signature_match = score, line, sig
            e.conflict = conflict
        lexical = self._lexical_leg(parsed)
        top_lexical = lexical[0][1] if lexical else 0.0
        for rank, (index, score) in enumerate(lexical):
            e = ev(index)
            e.lexical_rank, e.lexical = rank, score / top_lexical if top_lexical else 0.0
        dense, degraded = dense_job.result()
        for rank, (index, sim) in enumerate(dense):
            e = ev(index)
            e.dense_rank, e.dense = rank, sim

        dense_weight = 1.0 if parsed.is_log else 1.3
        for e in evidence.values():
            fused = 0.0
            if e.lexical_rank is not None:
                fused += 1.0 / (8 + e.lexical_rank)
            if e.dense_rank is not None:
                fused += dense_weight / (8 + e.dense_rank)
            fused += 0.5 * e.signature * e.signature
            e.fused = fused

        # Sections pass a share of their score to the threads they cite (the best section counts).
        sections = sorted(
            (i for i in evidence if self.documents[i].kind == "reference-section"),
            key=lambda i: -evidence[i].fused,
        )[:5]
        passed: dict[int, float] = {}
        for i in sections:
            section = self.documents[i]
            targets = [self._position[ref] for ref in section.references if ref in self._position]
            share = 0.25 * evidence[i].fused / max(1, len(targets)) ** 0.5
            for j in targets:
                passed[j] = max(passed.get(j, 0.0), share)
                ev(j).via_sections.append(section.id)
        for j, share in passed.items():
            evidence[j].fused += share

        allowed = set(repos) if repos else None
        ranked: list[tuple[float, int]] = []
        for index, e in evidence.items():
            doc = self.documents[index]
            if doc.kind not in THREAD_KINDS:
                continue
            if allowed is not None and doc.repo not in allowed:
                continue
            boost = 1.0
            if doc.repo in CORE_REPOS:
                boost += 0.03
            if doc.curated:
                boost += 0.03
            if doc.fix_confirmed or doc.fixed_by or doc.state == "merged":
                boost += 0.02
            ranked.append((e.fused * boost, index))
        ranked.sort(reverse=True)

        hits = [self._hit(self.documents[i], evidence[i], parsed) for _, i in ranked[:top_k]]
        section_hits = [self._hit(self.documents[i], evidence[i], parsed) for i in sections[:3]]
        confident = any(h.confidence == "high" for h in hits)
        return RetrievalResult(hits=hits, sections=section_hits, confident=confident, degraded=degraded)

    def _hit(self, doc: Document, e: _Evidence, parsed: ParsedInput) -> Hit:
        why: list[str] = []
        if e.signature >= 0.5:
            why.append(f"error signature matches {e.signature_match[:160]!r} ({e.signature:.2f})")
        if e.lexical_rank is not None and e.lexical_rank < 10:
            why.append(f"lexical rank {e.lexical_rank + 1}")
        if e.dense_rank is not None and e.dense_rank < 10:
            why.append(f"semantic similarity {e.dense:.2f} (rank {e.dense_rank + 1})")
        if e.via_sections:
            why.append("cited by " + ", ".join(sorted(set(e.via_sections))[:2]))
        dense_part = min(1.0, max(0.0, (e.dense - 0.3) / 0.55))
        lexical_part = e.lexical if e.lexical_rank is not None and e.lexical_rank < 20 else 0.0
        score = max(e.signature, 0.55 * dense_part + 0.45 * lexical_part * dense_part ** 0.5)
        score = round(min(1.0, max(0.0, score)), 3)
        close_text = e.dense >= 0.62 and e.lexical_rank is not None and e.lexical_rank < 3 and not e.conflict
        if e.signature >= 0.72 or close_text:
            confidence: Confidence = "high"
        elif e.signature >= 0.5 or e.dense >= 0.5 or (e.lexical_rank == 0 and e.dense >= 0.4):
            confidence = "medium"
        else:
            confidence = "low"
        return Hit(doc=doc, score=score, confidence=confidence, why=why or ["weak lexical or semantic overlap"])
