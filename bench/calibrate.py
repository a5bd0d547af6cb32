"""Fit the ranking and confidence constants (``service.calibration.Calibration``) on labelled queries.

Tuning data: ``dev.jsonl``, ``dev-hard.jsonl``, the outside set's ``tune`` half as pasted and buried in
its engine's log, and the silver set (``bench/outside/silver.jsonl``). The outside set's ``heldout`` half
is only scored, with the fitted values, and only as aggregate figures: its texts and
per-query results are never printed, so nothing can be tuned to it.

The search is coordinate descent from the current values: each constant in turn takes the candidate
value that scores best with the others fixed, twice over, and only when it gains at least min_gain()
(two queries' worth of rank; one query moving a rank is noise). The
objective rewards the right thread first and in the top 5, answers without "high" on negatives, and
punishes a wrong "high" hardest:

    hit@1 + 0.5 * hit@5 + 0.5 * MRR@10 + 0.5 * negatives without high - 3 * wrong-high rate

Run it on a built index (``gptoss-doctor index`` first, or ``--data-dir`` of a built one):

    python -m bench.calibrate --data-dir ~/.local/share/gptoss-doctor
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.outside import load_outside
from bench.quality import EVAL_DIR, Metrics, PipelineSystem, Query, evaluate, load_queries
from service.calibration import CALIBRATION, Calibration

# Candidate values per constant: around the current one, on both sides.
GRID: dict[str, tuple[float, ...]] = {
    "dense_weight_prose": (1.15, 1.3, 1.45),
    "same_engine_boost": (0.15, 0.3, 0.45),
    "other_engine_factor": (0.5, 0.7, 0.9),
    "other_engine_same_error_factor": (0.8, 0.9, 1.0),
    "same_client_boost": (0.05, 0.1, 0.2),
    "other_client_factor": (0.6, 0.8, 1.0),
    "named_repo_boost": (0.1, 0.2, 0.3),
    "same_component_boost": (0.0, 0.05, 0.1),
    "titled_factor": (1.35, 1.5, 1.65),
    "dense_high": (0.58, 0.62, 0.66),
    "signature_high": (0.68, 0.72, 0.78),
    "lexical_feedback_prose": (0.0, 0.1, 0.2),
}


def objective(metrics: Sequence[Metrics]) -> float:
    """One number for a calibration over the tuning sets, weighted by their sizes."""
    n = sum(m.n for m in metrics) or 1
    negatives = sum(m.negatives for m in metrics) or 1
    hit1 = sum(m.hit1 * m.n for m in metrics) / n
    hit5 = sum(m.hit5 * m.n for m in metrics) / n
    mrr = sum(m.mrr10 * m.n for m in metrics) / n
    wrong = sum((m.positives_wrong_high or 0.0) * m.n for m in metrics) / n
    no_high = sum((m.negatives_no_match or 0.0) * m.negatives for m in metrics) / negatives
    return hit1 + 0.5 * hit5 + 0.5 * mrr + 0.5 * no_high - 3.0 * wrong


class _Scorer:
    """Scores calibrations through the real engine, swapping only its retriever."""

    def __init__(self, data_dir: Path) -> None:
        from service.config import load_settings
        from service.engine import LookupEngine

        self.engine = LookupEngine.open(load_settings(data_dir=data_dir), build_if_empty=False)
        self.system = PipelineSystem(self.engine)

    def use(self, calibration: Calibration) -> None:
        from service.retrieval import Retriever

        snap = self.engine._snapshot  # the bench swaps the derived retriever; the store is untouched
        snap.retriever = Retriever(
            snap.documents,
            self.engine.embedder,
            snap.retriever.dense,
            generation=snap.generation,
            calibration=calibration,
        )

    def score(self, calibration: Calibration, sets: Sequence[Sequence[Query]]) -> list[Metrics]:
        self.use(calibration)
        return [evaluate(queries, self.system) for queries in sets]

    def close(self) -> None:
        self.engine.close()


MIN_QUERIES = 2.0
"""A move must gain what this many queries moving from second to first would: one query's rank is noise."""


def min_gain(tune: Sequence[Sequence[Query]]) -> float:
    """The objective gain of ``MIN_QUERIES`` positives moving from rank 2 to rank 1 (hit@1 +1/n, MRR@10
    +0.5/n at half weight), so the bar stays a number of queries as the tuning sets grow."""
    n = sum(1 for queries in tune for q in queries if q.relevant) or 1
    return MIN_QUERIES * 1.25 / n


def fit(scorer: _Scorer, tune: Sequence[Sequence[Query]], rounds: int = 2) -> tuple[Calibration, float]:
    """Coordinate descent over ``GRID`` from the current calibration."""
    best = CALIBRATION
    best_score = objective(scorer.score(best, tune))
    bar = min_gain(tune)
    for _ in range(rounds):
        moved = False
        for name, values in GRID.items():
            for value in values:
                if getattr(best, name) == value:
                    continue
                change: dict[str, Any] = {name: value}
                candidate = replace(best, **change)
                score = objective(scorer.score(candidate, tune))
                if score > best_score + bar:
                    best, best_score, moved = candidate, score, True
        if not moved:
            break
    return best, best_score


def _figures(metrics: Metrics) -> dict[str, Any]:
    keep = ("n", "hit1", "hit5", "mrr10", "negatives", "negatives_no_match", "origin_accuracy", "positives_wrong_high")
    data = metrics.as_dict()
    return {k: data[k] for k in keep}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="A built index's data dir.")
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR)
    parser.add_argument("--out", type=Path, help="Write the fitted values and figures as JSON here.")
    args = parser.parse_args(argv)

    from bench.outside import engines, load_records, load_silver
    from bench.outside_log import in_log

    outside_tune = load_outside("tune")
    tune_names = ["dev", "dev-hard", "outside-tune", "outside-tune-in-log", "silver"]
    tune = [
        load_queries("dev.jsonl", args.eval_dir),
        load_queries("dev-hard.jsonl", args.eval_dir),
        outside_tune,
        in_log(outside_tune, engines(load_records())),
        load_silver(),
    ]
    heldout = load_outside("heldout")
    scorer = _Scorer(args.data_dir)
    try:
        before_tune = scorer.score(CALIBRATION, tune)
        before_heldout = scorer.score(CALIBRATION, [heldout])[0]
        fitted, score = fit(scorer, tune)
        after_tune = scorer.score(fitted, tune)
        after_heldout = scorer.score(fitted, [heldout])[0]
    finally:
        scorer.close()
    changed = {k: v for k, v in asdict(fitted).items() if v != getattr(CALIBRATION, k)}
    report = {
        "objective": {"current": round(objective(before_tune), 4), "fitted": round(score, 4)},
        "changed": changed,
        "tune": {
            name: {"current": _figures(b), "fitted": _figures(a)}
            for name, b, a in zip(tune_names, before_tune, after_tune, strict=True)
        },
        "heldout": {"current": _figures(before_heldout), "fitted": _figures(after_heldout)},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
