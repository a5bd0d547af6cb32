"""The outside set: public reports whose threads are not in the KB, labelled before any run.

The set lives in ``bench/outside/outside.jsonl`` (format in ``bench/outside/README.md``). Each record
names the report it was taken from (``owner/repo#N``), so a test can check that the report is not a
bundled card and that every label is one. Half of each category is held out from tuning; which half
is fixed by a seeded draw, so the split cannot drift towards whatever scores well.

    python -m bench.outside --check            # validate outside.jsonl and silver.jsonl against the bundled KB
    python -m bench.outside --assign-splits    # (re)draw the splits with the fixed seed
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.quality import Outcome, Query, evaluate, query_from_record

OUTSIDE_FILE = Path(__file__).resolve().parent / "outside" / "outside.jsonl"
SILVER_FILE = Path(__file__).resolve().parent / "outside" / "silver.jsonl"
"""The silver set: threads outside the KB and outside OUTSIDE_FILE linked to a card, either by their own text
(a duplicate, same-problem or fixed-by link; ``link`` starts "thread:") or by the card's curated ``fixes`` or
``references`` field (``link`` starts "card-side:", weaker evidence); the label is the linked card. For
tuning only, never a target."""
JUDGED_FILE = Path(__file__).resolve().parent / "outside" / "judged.jsonl"
"""Blind relevance judgments of the outside set's positives: per report, each pooled card (the pipeline's and
plain BM25's first answers at the pooling commit, the pipeline's high issues, the labels, and cards later
rankings put first) judged ``direct``, ``related`` or ``no`` by an assessor who was not told which card came
from where. Reporting only; labels never change."""
JUDGEMENTS = ("direct", "related", "no")
LINK_KINDS = ("thread:", "card-side:")
SILVER_ID = re.compile(r"^sil[0-9]{3}$")
SPLITS = ("tune", "heldout")
SPLIT_SEED = 20261123
BATCH_SEEDS = {
    1: SPLIT_SEED,
    2: 20261125,
    3: 20261126,
    4: 20261127,
    5: 20261128,
    6: 20261129,
    7: 20261130,
    8: 20261201,
    9: 20261202,
    10: 20261203,
    11: 20261204,
    12: 20261205,
    13: 20261206,
    14: 20261207,
    15: 20261208,
    16: 20261209,
}
"""Each batch of records is drawn with its own seed, so adding a batch never moves an earlier record's
split. A record without ``batch`` is in batch 1 (the set as first committed)."""
CATEGORIES = ("error", "symptom", "negative-uncovered", "negative-unrelated")
SIDES = ("server", "client", "model-files", "environment")
REPORT_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+#[1-9][0-9]*$")


def load_records(path: Path = OUTSIDE_FILE) -> list[dict[str, Any]]:
    """The raw records of the outside set, in file order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_outside(split: str | None = None, path: Path = OUTSIDE_FILE) -> list[Query]:
    """The outside set as eval queries, optionally one split only (``tune`` or ``heldout``)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    return [query_from_record(r) for r in load_records(path) if split is None or r.get("split") == split]


def engines(records: Sequence[dict[str, Any]]) -> dict[str, str | None]:
    """Query id -> the engine its report is about (``expect.engine``), None when the report names none."""
    return {r["id"]: (r.get("expect") or {}).get("engine") for r in records}


def batch_of(record: dict[str, Any]) -> int:
    """The batch a record was added in (1 when it says none)."""
    return int(record.get("batch", 1))


def assign_splits(records: Sequence[dict[str, Any]], seed: int = SPLIT_SEED) -> dict[str, str]:
    """Query id -> split: half of each category of each batch held out, drawn with a seeded shuffle.

    Batch 1 is drawn with ``seed``, a later batch with its own seed (``BATCH_SEEDS``), each over its own
    ids only, so a new batch leaves every earlier split where it was. A category of odd size gives its
    extra query to the two splits in turn (across batches too), so the totals stay within one of each
    other. The draw depends only on the ids, the batches, the categories and the seeds.
    """
    groups: dict[tuple[int, str], list[str]] = {}
    for r in records:
        groups.setdefault((batch_of(r), r["category"]), []).append(r["id"])
    out: dict[str, str] = {}
    extra_to = 1  # index into SPLITS of the split that gets the next odd category's extra query
    for batch, category in sorted(groups):
        ids = sorted(groups[(batch, category)])
        batch_seed = seed if batch == 1 else BATCH_SEEDS[batch]
        random.Random(f"{batch_seed}:{category}").shuffle(ids)
        n_tune = len(ids) // 2
        if len(ids) % 2:
            n_tune += extra_to == 0
            extra_to = 1 - extra_to
        for i, qid in enumerate(ids):
            out[qid] = SPLITS[0] if i < n_tune else SPLITS[1]
    return out


def _each_record(records: Sequence[dict[str, Any]], cards: set[str]) -> Iterator[tuple[dict[str, Any], str, list[str]]]:
    """Each record with its id and what is wrong with its id and thread (both validators start so)."""
    seen_ids: set[str] = set()
    seen_reports: set[str] = set()
    for r in records:
        qid = str(r.get("id", "?"))
        yield r, qid, _thread_problems(r, qid, cards, seen_ids, seen_reports)


def _thread_problems(
    r: dict[str, Any], qid: str, cards: set[str], seen_ids: set[str], seen_reports: set[str]
) -> list[str]:
    """What is wrong with one record's id and thread: a repeated id, a malformed or repeated report, a
    report that is a bundled card, a source URL that is not that thread (``seen_*`` are updated)."""
    problems = []
    if qid in seen_ids:
        problems.append(f"{qid}: duplicate query id")
    seen_ids.add(qid)
    report = str(r.get("report", ""))
    if not REPORT_ID.match(report):
        problems.append(f"{qid}: report {report!r} is not owner/repo#N")
    if report in cards:
        problems.append(f"{qid}: report {report} is a bundled card, not an outside thread")
    if report in seen_reports:
        problems.append(f"{qid}: report {report} appears twice")
    seen_reports.add(report)
    owner_repo, _, number = report.partition("#")
    source = str(r.get("source", ""))
    if not source.startswith(f"https://github.com/{owner_repo}/") or not source.endswith(f"/{number}"):
        problems.append(f"{qid}: source {source!r} does not point at {report}")
    return problems


def _label_problems(qid: str, relevant: Iterable[str], cards: set[str]) -> list[str]:
    """Labels that are not ``owner/repo#N`` or not a bundled card."""
    problems = []
    for label in relevant:
        if not REPORT_ID.match(label):
            problems.append(f"{qid}: label {label!r} is not owner/repo#N")
        elif label not in cards:
            problems.append(f"{qid}: label {label} is not a bundled card")
    return problems


def validate(records: Sequence[dict[str, Any]], card_ids: Iterable[str]) -> list[str]:
    """Every problem with the set, as sentences; an empty list means the file is sound."""
    cards = set(card_ids)
    problems: list[str] = []
    for r, qid, found in _each_record(records, cards):
        problems += found
        if r.get("category") not in CATEGORIES:
            problems.append(f"{qid}: unknown category {r.get('category')!r}")
        if not str(r.get("query", "")).strip():
            problems.append(f"{qid}: empty query")
        relevant = r.get("relevant") or []
        expect = r.get("expect") or {}
        negative = str(r.get("category", "")).startswith("negative")
        if negative and (relevant or not expect.get("no_match")):
            problems.append(f"{qid}: a negative needs relevant [] and expect.no_match true")
        if not negative and (not relevant or expect.get("no_match")):
            problems.append(f"{qid}: a positive needs relevant card ids and no expect.no_match")
        problems += _label_problems(qid, relevant, cards)
        if expect.get("side") is not None and expect["side"] not in SIDES:
            problems.append(f"{qid}: unknown side {expect['side']!r}")
        if r.get("split") not in SPLITS:
            problems.append(f"{qid}: split {r.get('split')!r} is not one of {', '.join(SPLITS)}")
    problems += _split_problems(records)
    return problems


def load_judged(path: Path = JUDGED_FILE) -> dict[str, dict[str, str]]:
    """Report id -> {card id -> judgement} from ``JUDGED_FILE``; empty when there is none."""
    if not path.exists():
        return {}
    return {r["id"]: dict(r["judgments"]) for r in load_records(path)}


def judged_top1(
    tops: dict[str, str | None],
    judged: dict[str, dict[str, str]],
    high: Iterable[str] = (),
    labels: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any] | None:
    """How an assessor judged each judged positive's first answer: shares of ``direct``, ``related`` and
    ``no``, how many first answers were outside the judged pool (``unjudged``, counted in no share), and
    of the first answers rated high (``high``: query ids) how many there were and how many were direct.
    With ``labels`` (query id -> relevant ids) also hit@1 over the same judged positives, so the two
    figures compare the same reports. None when no positive here was judged."""
    ids = [qid for qid in tops if qid in judged]
    if not ids:
        return None
    verdict = {qid: judged[qid].get(tops[qid] or "", "unjudged") for qid in ids}
    counts = Counter(verdict.values())
    out: dict[str, Any] = {"n": len(ids)}
    if labels is not None:
        out["hit1"] = round(sum(tops[qid] in labels.get(qid, ()) for qid in ids) / len(ids), 3)
    out.update({j: round(counts[j] / len(ids), 3) for j in JUDGEMENTS})
    out["unjudged"] = counts["unjudged"]
    high = set(high)
    rated_high = [qid for qid in ids if qid in high]
    out["high_n"] = len(rated_high)
    out["high_direct"] = sum(verdict[qid] == "direct" for qid in rated_high)
    return out


def label_agreement(records: Sequence[dict[str, Any]], judged: dict[str, dict[str, str]]) -> dict[str, Any] | None:
    """How often the assessor judged the labeller's cards ``direct``: per label, and per report (at least
    one label direct). A low share bounds any system's hit@1: the labels themselves are contested."""
    pairs = [(r, judged[r["id"]]) for r in records if r["id"] in judged and r.get("relevant")]
    if not pairs:
        return None
    labels = [j.get(card) for r, j in pairs for card in r["relevant"]]
    return {
        "reports": len(pairs),
        "labels": len(labels),
        "labels_direct": round(labels.count("direct") / len(labels), 3),
        "reports_with_a_direct_label": round(
            sum(any(j.get(c) == "direct" for c in r["relevant"]) for r, j in pairs) / len(pairs), 3
        ),
        "reports_with_any_direct": round(sum("direct" in j.values() for _, j in pairs) / len(pairs), 3),
    }


def validate_judged(judged_records: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]]) -> list[str]:
    """Problems of the judgments file: an unknown or negative report, a judgement outside ``JUDGEMENTS``, a
    label left unjudged, a report judged twice."""
    by_id = {r["id"]: r for r in records}
    problems: list[str] = []
    seen: set[str] = set()
    for j in judged_records:
        qid = j.get("id", "?")
        record = by_id.get(qid)
        if qid in seen:
            problems.append(f"{qid}: judged twice")
        seen.add(qid)
        if record is None or not record.get("relevant"):
            problems.append(f"{qid}: not a positive of the outside set")
            continue
        verdicts = j.get("judgments") or {}
        problems += [
            f"{qid}: {card}: {v!r} is not one of {JUDGEMENTS}" for card, v in verdicts.items() if v not in JUDGEMENTS
        ]
        problems += [f"{qid}: label {card} is not judged" for card in record["relevant"] if card not in verdicts]
    return problems


def load_silver(path: Path = SILVER_FILE) -> list[Query]:
    """The silver set as eval queries (every one a positive)."""
    return [query_from_record(r) for r in load_records(path)]


def validate_silver(
    records: Sequence[dict[str, Any]], card_ids: Iterable[str], outside_reports: Iterable[str]
) -> list[str]:
    """Every problem with the silver set, as sentences; an empty list means the file is sound.

    Besides the outside set's record checks: ids are ``silNNN``, every record is a positive
    (``error`` or ``symptom``) with a ``link`` saying where the thread and the card are linked, and of
    which kind (it starts with ``thread:`` or ``card-side:``, ``LINK_KINDS``), its report is
    in neither the KB nor the outside set, and its query does not give the answer away (no number of
    a relevant card appears in it).
    """
    cards = set(card_ids)
    outside = set(outside_reports)
    problems: list[str] = []
    for r, qid, found in _each_record(records, cards):
        if not SILVER_ID.match(qid):
            problems.append(f"{qid}: id is not silNNN")
        problems += found
        if str(r.get("report", "")) in outside:
            problems.append(f"{qid}: report {r.get('report')} is already in the outside set")
        if r.get("category") not in ("error", "symptom"):
            problems.append(f"{qid}: category {r.get('category')!r} is not error or symptom")
        query = str(r.get("query", ""))
        if not query.strip():
            problems.append(f"{qid}: empty query")
        link = str(r.get("link", "")).strip()
        if not link:
            problems.append(f"{qid}: no link saying where the thread names its card")
        elif not link.startswith(LINK_KINDS):
            problems.append(f"{qid}: link does not start with {' or '.join(LINK_KINDS)}")
        relevant = r.get("relevant") or []
        if not relevant:
            problems.append(f"{qid}: no relevant card")
        problems += _label_problems(qid, relevant, cards)
        for label in relevant:
            number = label.partition("#")[2]
            if number and re.search(rf"(?<![0-9]){re.escape(number)}(?![0-9])", query):
                problems.append(f"{qid}: query names the number of its label {label}")
        expect = r.get("expect") or {}
        if expect.get("no_match"):
            problems.append(f"{qid}: a silver record is a positive, no expect.no_match")
        if expect.get("side") is not None and expect["side"] not in SIDES:
            problems.append(f"{qid}: unknown side {expect['side']!r}")
    return problems


def _split_problems(records: Sequence[dict[str, Any]]) -> list[str]:
    """Splits must match the seeded draw and be balanced within each category and overall."""
    problems = []
    unknown = sorted({str(r.get("batch")) for r in records if r.get("batch", 1) not in BATCH_SEEDS})
    if unknown:
        return [f"batch {', '.join(unknown)} has no seed in BATCH_SEEDS"]
    drawn = assign_splits(records)
    for r in records:
        if r.get("split") in SPLITS and drawn.get(r["id"]) != r["split"]:
            problems.append(f"{r['id']}: split {r['split']} differs from the seeded draw ({drawn[r['id']]})")
    counts = Counter((batch_of(r), r.get("category"), r.get("split")) for r in records)
    for batch, category in {(batch_of(r), r.get("category")) for r in records}:
        if abs(counts[(batch, category, "tune")] - counts[(batch, category, "heldout")]) > 1:
            problems.append(f"batch {batch}, category {category}: tune and heldout differ by more than one")
    totals = Counter(r.get("split") for r in records)
    if abs(totals["tune"] - totals["heldout"]) > 1:
        problems.append(f"splits unbalanced: {dict(totals)}")
    return problems


VARIANTS = ("pasted", "in-log", "in-report")
"""The bare query, the same inside its engine's log (``bench/outside_log.py``), and as the description
of a bug report in its tracker's template (``bench/outside_report.py``; reported, not a target)."""


def evaluate_outside(
    systems: dict[str, Callable[[Query], Outcome]],
    *,
    limit: int | None = None,
    path: Path = OUTSIDE_FILE,
    judged_path: Path = JUDGED_FILE,
) -> dict[str, Any]:
    """Metrics of each system per split (tune, heldout) and variant (pasted, in-log), plus misses.

    Only the tune half's misses are recorded: the held-out half must not show which queries fail,
    or tuning would drift towards it.

    ``systems`` maps a name to a callable as in :func:`bench.quality.evaluate`; ``limit`` keeps an
    even sample of at most that many queries per split (the bench's ``--quick``).
    """
    from bench.phases import subset

    records = load_records(path)
    engine_of = engines(records)
    judged = load_judged(judged_path)
    out: dict[str, Any] = {"file": str(path.name), "misses": {}, "label_agreement": {}}
    for split in SPLITS:
        out["label_agreement"][split] = label_agreement([r for r in records if r.get("split") == split], judged)
        pasted = subset(load_outside(split, path), limit)
        for variant, row, misses in _pasted_and_in_log(pasted, engine_of, systems, judged):
            if split == "tune":
                out["misses"][f"{split}/{variant}"] = misses  # held-out misses stay unseen
            out.setdefault(split, {})[variant] = row
    return out


def _pasted_and_in_log(
    pasted: Sequence[Query],
    engine_of: dict[str, str | None],
    systems: dict[str, Callable[[Query], Outcome]],
    judged: dict[str, dict[str, str]] | None = None,
) -> Iterator[tuple[str, dict[str, Any], list[str]]]:
    """Per variant (pasted, buried in its engine's log, inside a bug report): each system's metrics (with
    how an assessor judged its first answers, where ``judged`` covers the queries), and the pipeline's
    misses. A judgement is of the report against a card, so it holds for every variant of the report."""
    from bench.outside_log import in_log
    from bench.outside_report import in_report

    variants = (pasted, in_log(pasted, engine_of), in_report(pasted, engine_of))
    for variant, queries in zip(VARIANTS, variants, strict=True):
        row: dict[str, Any] = {"queries": len(queries)}
        misses: list[str] = []
        labels = {q.id: q.relevant for q in queries}
        for name, system in systems.items():
            metrics = evaluate(queries, system)
            row[name] = metrics.as_dict()
            assessed = judged_top1(metrics.tops, judged or {}, metrics.top_high, labels)
            if assessed is not None:
                row[name]["judged_top1"] = assessed
            if name == "pipeline":
                misses = metrics.misses
        yield variant, row, misses


def evaluate_outside_formats(
    pipeline: Callable[[Query], Outcome],
    *,
    limit: int | None = None,
    path: Path = OUTSIDE_FILE,
) -> dict[str, Any]:
    """The pipeline on the outside set's positives of each split, buried in each log format of ``LOGS``,
    and their in-log variant as each of ``RELAYS`` delivers it (docker compose, kubectl, journald, colours).

    A user may paste the same failure inside any engine's log, so a distiller gap for one format shows
    here even when no record of that engine exists. One row per split and format (positives, hit@1,
    hit@5, MRR@10), and per split the lowest hit@1 over the formats with the formats that have it.
    Reporting only, not a target; no misses are recorded, of either split. ``limit`` keeps an even sample
    of at most that many positives per split (the bench's ``--quick``).
    """
    from bench.outside_log import LOGS, RELAYS, in_format, in_log, relayed
    from bench.phases import subset

    started = time.perf_counter()
    engine_of = engines(load_records(path))
    relays = [f"in-log via {relay}" for relay in RELAYS]
    out: dict[str, Any] = {"file": str(path.name), "formats": [*LOGS, *relays], "rows": [], "min_hit1": {}}
    for split in SPLITS:
        positives = subset([q for q in load_outside(split, path) if q.relevant], limit)
        variants = [(family, in_format(positives, engine_of, family)) for family in LOGS]
        logged = in_log(positives, engine_of)
        variants += [(name, relayed(logged, positives, relay)) for name, relay in zip(relays, RELAYS, strict=True)]
        rows = []
        for family, queries in variants:
            metrics = evaluate(queries, pipeline).as_dict()  # misses dropped
            rows.append({"split": split, "format": family, **{k: metrics[k] for k in ("n", "hit1", "hit5", "mrr10")}})
        out["rows"] += rows
        if positives:
            low = min(row["hit1"] for row in rows)
            out["min_hit1"][split] = {"hit1": low, "formats": [row["format"] for row in rows if row["hit1"] == low]}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def evaluate_silver(
    systems: dict[str, Callable[[Query], Outcome]],
    *,
    limit: int | None = None,
    path: Path = SILVER_FILE,
) -> dict[str, Any]:
    """Metrics of each system on the silver set, pasted and in-log, plus the pipeline's misses.

    The silver set is for tuning, so its misses are recorded (like the outside set's tune half).
    """
    from bench.phases import subset

    pasted = subset(load_silver(path), limit)
    out: dict[str, Any] = {"file": str(path.name), "misses": {}}
    for variant, row, misses in _pasted_and_in_log(pasted, engines(load_records(path)), systems):
        out["misses"][variant] = misses
        out[variant] = row
    return out


def _write_splits(path: Path) -> None:
    records = load_records(path)
    splits = assign_splits(records)
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            r["split"] = splits[r["id"]]
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.outside", description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=OUTSIDE_FILE)
    parser.add_argument("--assign-splits", action="store_true", help="Write the seeded splits into the file.")
    parser.add_argument("--silver", type=Path, default=SILVER_FILE)
    parser.add_argument(
        "--check", action="store_true", help="Validate the outside and silver files against the bundled KB."
    )
    args = parser.parse_args(argv)
    if args.assign_splits:
        _write_splits(args.file)
    records = load_records(args.file)
    if args.check:
        from indexer.sources.cards import bundled_cards

        card_ids = [c.id for c in bundled_cards()]
        problems = validate(records, card_ids)
        problems += [
            f"silver: {p}"
            for p in validate_silver(load_records(args.silver), card_ids, (r.get("report", "") for r in records))
        ]
        if JUDGED_FILE.exists():
            problems += [f"judged: {p}" for p in validate_judged(load_records(JUDGED_FILE), records)]
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            return 1
    counts = Counter((r["category"], r.get("split")) for r in records)
    for (category, split), n in sorted(counts.items()):
        print(f"{category:20} {split}: {n}")
    silver = Counter(r["category"] for r in load_records(args.silver))
    for category, n in sorted(silver.items()):
        print(f"{category:20} silver: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
