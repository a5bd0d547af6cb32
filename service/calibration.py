"""Every constant of ranking and confidence, in one object.

The values were fitted with ``bench/calibrate.py`` on labelled queries (dev, dev-hard and the tune half
of the outside set) and checked on the outside set's held-out half; see ``bench/README.md``. Change
them there, not by hand in the code that uses them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """How the retrieval legs are fused, adjusted and turned into a confidence."""

    # -- fusion (weighted reciprocal-rank fusion of the rank legs, plus the signature score) --------
    rrf_k: float = 8.0
    """Rank offset of reciprocal-rank fusion: larger flattens the difference between ranks."""
    lexical_weight: float = 1.0
    """Weight of the BM25 leg's rank."""
    dense_weight_log: float = 1.0
    """Weight of the dense leg's rank when the input carries error lines (the words are exact)."""
    dense_weight_prose: float = 1.3
    """Weight of the dense leg's rank for a described symptom (paraphrase is what dense is for)."""
    signature_weight: float = 0.5
    """Weight of the squared signature score: an exact error string outweighs any rank."""
    section_share: float = 0.25
    """Share of a reference section's fused score passed on to the threads it cites."""

    # -- lexical pseudo-relevance feedback (RM3-style, from the KB's own texts) ---------------------
    lexical_feedback_docs: int = 3
    """How many of the BM25 leg's first-pass documents lend their words to the query (0: no feedback)."""
    lexical_feedback_terms: int = 6
    """How many of those documents' words (in-document share times IDF, weighted by the document's share
    of the best BM25 score) are added to the query, the query's own words left out."""
    lexical_feedback_prose: float = 0.0
    """Total weight of the added words, as a share of the query's own words, for a described symptom: a
    report in other words than the card's borrows the card's vocabulary from the documents it found.
    Off since the 2026-11-27 fit: at 0.1 it moved no dev, dev-hard or outside-tune query to rank 1 and
    kept two silver threads from it (bench/README.md, Calibration)."""
    lexical_feedback_log: float = 0.0
    """The same for input with error lines (their words are exact; feedback there only adds drift)."""

    # -- adjustments (multiplicative, on the fused score) -------------------------------------------
    curated_boost: float = 0.03
    """A thread backed by a curated card."""
    fixed_boost: float = 0.02
    """A thread with a confirmed fix, a fixing PR, or a merged PR."""
    canonical_boost: float = 0.03
    """A thread in its engine's canonical (upstream) repository."""
    same_engine_boost: float = 0.3
    """A thread about the serving engine the input names."""
    other_engine_factor: float = 0.7
    """A thread about another engine than the one the input names, without the same error string."""
    other_engine_same_error_factor: float = 0.9
    """A thread about another engine than the one the input names, with the same error string."""
    same_client_boost: float = 0.2
    """A thread in the repository of the client framework the input names."""
    other_client_factor: float = 0.6
    """A thread in another client application's tracker than the one the input names (or none), without
    the same error string."""
    same_component_boost: float = 0.0
    """A thread of the error family the input's words point to (origin rule, else the KB-trained model)."""
    named_repo_boost: float = 0.2
    """A thread in a repository the input names by its own name (``mlx_lm`` -> ml-explore/mlx-lm)."""
    platform_factor: float = 0.95
    """A thread in a fork or downstream platform of an engine the input does not name by its owner."""
    upstream_lift: float = 1.05
    """The upstream thread a platform copy cites ranks this much above the copy."""
    fix_lift: float = 1.02
    """The fix PR of that upstream thread ranks this much above the copy."""
    fixed_report_lift: float = 1.02
    """A thread that shows the input's error ranks this much above the merged PR that removed that error."""
    titled_factor: float = 1.5
    """A thread whose title quotes the error string the input matches (at signature_high or above): the
    canonical report of that error, above threads that only mention it. 1.35 until 2026-11-27, when the
    canonical 200002 thread (vllm-project/vllm#50690) lost the bare error line to a thread that quotes the
    longer traceback line (#46464) by 0.0004 after unrelated card edits moved it one lexical rank; at 1.5
    it leads by 0.08, and dev, dev-hard, the outside tune half and silver rank as at 1.35."""
    titled_margin: float = 0.05
    """How far below the best signature score a titled thread's match may be and still get titled_factor."""

    # -- confidence ---------------------------------------------------------------------------------
    signature_high: float = 0.78
    """Signature score from which a thread is the same error ("high"); also what overrides demotion."""
    signature_medium: float = 0.5
    """Signature score from which a thread is worth showing as "medium"."""
    conflict_penalty: float = 0.85
    """Signature score factor when both sides keep a rare word the other lacks (another token id)."""
    dense_high: float = 0.66
    """Cosine from which a same-engine, same-component thread in the top lexical ranks is "high"."""
    lexical_high_rank: int = 3
    """Lexical rank (0-based, exclusive) a semantic "high" must also reach."""
    error_word_idf: float = 0.5
    """A semantic "high" for an input with a strong error line that no signature of the thread matches needs the
    thread to share a distinctive word of that line, one whose idf is at least this share of the largest
    (half: rarer than in one document of ~30). From probe 8's model-load error matched "high" to a
    tool-template thread of the same engine, which shares only "type" (0.47); dev, dev-hard, the outside tune
    half and silver keep every "high" at 0.5 (at 0.6 the tune half loses one)."""
    dense_medium: float = 0.5
    """Cosine from which a thread is "medium"."""
    dense_medium_lexical_top: float = 0.4
    """Cosine from which the lexical leg's first thread is "medium"."""
    verdict_agree_hits: int = 1
    """A reference section found by its words at medium confidence is the diagnosis only when it cites one of
    this many best-matching issues (above low confidence). Fitted on the outside set's tune half: the share of
    diagnoses citing a labelled thread went 0.42 -> 0.67 at 1 (3 issues: 0.56); dev and dev-hard advice
    unchanged. Held out, diagnoses citing no labelled thread went 0.175 -> 0.050 of positives."""


CALIBRATION = Calibration()
"""The fitted values the service uses."""
