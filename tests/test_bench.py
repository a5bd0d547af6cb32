"""The bench harness's own logic, kept from rotting: targets, report, load inputs, clients, memory rule.

A whole ``python -m bench.run --quick`` builds a real index and takes minutes, so it is not run here;
these tests cover the pieces with a real local HTTP server and no timed assertions.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bench import speed
from bench.load import big_log, concurrent, interleaved, interleaved_many, percentile, summarize
from bench.quality import Outcome, PipelineSystem, Query
from bench.report import markdown, targets
from bench.run import parse_args
from bench.served import BIG_EVERY, load_mix, rss_report
from service.models import AnalysisOut, FixOut, IndexInfo, IssueOut, LookupResponse, OriginOut, QueryInfo


def _results(**overrides: Any) -> dict[str, Any]:
    pipe = {"n": 10, "hit1": 0.95, "hit5": 1.0, "mrr10": 0.97, "negatives_no_match": 1.0, "origin_accuracy": 1.0}
    base = {"n": 10, "hit1": 0.8, "hit5": 0.9, "mrr10": 0.85}
    r: dict[str, Any] = {
        "latency": {
            "single": {"p50_ms": 10.0, "p99_ms": 40.0, "by_kind": {"short": {"n": 3, "p50_ms": 9.0}}},
            "naive_encode": {"p50_ms": 20.0},
            "in_process": {"p50_ms": 8.0},
            "concurrent": {"clients": 8, "errors": 0, "throughput_rps": 120.0},
        },
        "cold_start": {"lookup_ok_s": 4.0},
        "index": {"fresh_s": 75.0},
        "github": {"idle_requests": 3},
        "quality": {name: {"pipeline": pipe, "bm25": base, "dense": base} for name in ("dev.jsonl", "dev-hard.jsonl")},
        "load": {
            "overall": {"errors": 0},
            "reindex": {"completed": 1},
            "rss": {"flat": True, "growth_mb": 3.0, "rule": "r"},
        },
    }
    r.update(overrides)
    return r


def _by_name(r: dict[str, Any]) -> dict[str, bool | None]:
    return {t.name: t.passed for t in targets(r)}


def test_targets_judge_each_measured_value() -> None:
    got = _by_name(_results())
    assert got["served p50 / naive encode p50"] is False  # 10 / 20 = 0.5 > 0.45
    assert got["served p50 / in-process p50"] is True  # 10 / 8 = 1.25
    assert got["served p99 / p50 (one client)"] is False  # 40 / 10 = 4
    assert got["8 concurrent clients: req/s"] is False  # 120 < 150
    assert got["8 concurrent clients: errors"] is True
    assert got["full index, fresh data dir (docs + bundled KB)"] is False  # 75 s > 60 s
    assert got["idle GitHub re-sync (2 repos): requests"] is True
    assert got["dev.jsonl: pipeline hit@1 beats both baselines"] is True
    assert got["load run: service memory flat"] is True


def test_targets_not_measured_when_a_phase_is_missing() -> None:
    r = _results()
    del r["github"], r["quality"]
    got = _by_name(r)
    assert got["idle GitHub re-sync (2 repos): requests"] is None
    assert got["dev.jsonl: pipeline hit@1 beats both baselines"] is None
    assert got["dev.jsonl hit@1"] is None


def test_a_tie_with_a_baseline_does_not_beat_it() -> None:
    r = _results()
    r["quality"]["dev.jsonl"]["bm25"] = dict(r["quality"]["dev.jsonl"]["pipeline"])
    assert _by_name(r)["dev.jsonl: pipeline hit@1 beats both baselines"] is False


def test_markdown_lists_every_target_and_the_phase_errors() -> None:
    r = _results(errors={"github": "RuntimeError: boom"})
    r["targets"] = [t.as_dict() for t in targets(r)]
    text = markdown(r)
    for t in r["targets"]:
        assert t["name"] in text
    assert "FAIL" in text and "pass" in text
    assert "RuntimeError: boom" in text


def test_percentiles_and_summary() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0
    s = summarize([float(v) for v in range(1, 101)])
    assert s["n"] == 100 and s["p50_ms"] == 50.5 and s["max_ms"] == 100.0


def test_big_log_is_about_100kb_and_buries_the_error_once() -> None:
    error = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    log = big_log(error, seed=3)
    assert 100_000 <= len(log) < 101_000
    assert log.count(error) == 1
    assert 0.5 < log.index(error) / len(log) < 0.9
    assert big_log(error, seed=3) == log  # deterministic: runs compare


def test_load_mix_interleaves_big_logs() -> None:
    mix = load_mix([("short", "KeyError: 'tool_calls'"), ("log", "x" * 5000), ("short", "ValueError: bad")])
    big = [kind for kind, _ in mix if kind == "100KB log"]
    assert len(big) == len(mix) // BIG_EVERY
    assert all(len(text) < 2000 for kind, text in mix if kind == "short error")


def test_rss_report_tells_a_plateau_from_a_leak() -> None:
    cycles = [(0.0, 25.0), (25.0, 50.0)]
    # Rises with concurrency inside each cycle, back to the same peak: flat.
    plateau = [(t * 0.5, 300.0 + (t % 50)) for t in range(100)]
    leak = [(t * 0.5, 300.0 + 2 * t) for t in range(100)]
    flat = rss_report(plateau, cycles=cycles, after=None)
    assert flat["flat"] is True and flat["cycle_peaks_mb"] == [349.0, 349.0]
    grew = rss_report(leak, cycles=cycles, after={"rss_mb": 500.0})
    assert grew["flat"] is False and grew["growth_mb"] > 90 and grew["after_mb"] == 500.0
    assert rss_report([], cycles=cycles, after=None) == {"samples": 0}
    # Private memory per cycle is reported beside RSS (mapped files paging in are not a leak).
    anon = [(t * 0.5, 200.0 + (t % 50) / 2) for t in range(100)]
    split = rss_report(leak, cycles=cycles, after=None, anon=anon)
    assert split["anon_cycle_peaks_mb"] == [224.5, 224.5] and split["flat"] is False
    assert split["anon_growth_mb"] == 0.0 and split["first_step_mb"] is None


def test_rss_report_judges_the_reindexes_after_the_first_and_reports_the_first_step() -> None:
    # Three quiet cycles: one step up over the first re-index, then flat over the judged ones.
    cycles = [(0.0, 10.0), (20.0, 30.0), (40.0, 50.0)]
    step = [(float(t), 300.0 if t < 15 else 345.0) for t in range(51)]
    report = rss_report(step, cycles=cycles, after=None, baseline=1)
    assert report["first_step_mb"] == 45.0 and report["growth_mb"] == 0.0 and report["flat"] is True
    # Judged from the first cycle instead, the same series is the one-time step: not flat.
    assert rss_report(step, cycles=cycles, after=None)["flat"] is False
    creep = [(float(t), 300.0 + (45.0 if t >= 15 else 0.0) + (30.0 if t >= 35 else 0.0)) for t in range(51)]
    assert rss_report(creep, cycles=cycles, after=None, baseline=1)["flat"] is False


def test_proc_memory_reads_private_and_mapped_memory_of_a_live_process() -> None:
    import os

    from bench.procs import proc_memory

    mem = proc_memory(os.getpid())
    assert mem is not None
    assert 0 < mem["anon_mb"] <= mem["rss_mb"] and 0 < mem["file_mb"] <= mem["rss_mb"] <= mem["peak_mb"]


class _Handler(BaseHTTPRequestHandler):
    """/lookup answers 200 with a tiny body, or 500 when the error text contains "boom"."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = 500 if "boom" in body["error"] else 200
        payload = json.dumps({"ok": status == 200}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def local_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_concurrent_clients_stop_at_the_count_and_count_errors(local_server: str) -> None:
    texts = [("short", "fine"), ("short", "boom"), ("short", "fine again"), ("short", "ok")]
    run = concurrent(local_server, texts, clients=4, seconds=30, max_requests=20)
    report = run.report()
    assert report["requests"] == 20
    assert report["errors"] == 5  # every 4th request is the "boom" text
    assert report["error_causes"]


def test_interleaved_runs_the_baseline_before_each_request(local_server: str) -> None:
    seen: list[str] = []
    run, base = interleaved(local_server, [("short", "a"), ("short", "b")], seen.append, deadline_s=30)
    assert seen == ["a", "b"] and len(base) == 2
    assert [s.status for s in run.samples] == [200, 200]


def test_interleaved_many_runs_every_baseline_in_order_before_each_request(local_server: str) -> None:
    seen: list[str] = []
    baselines = {"first": lambda t: seen.append(f"1{t}"), "second": lambda t: seen.append(f"2{t}")}
    run, base = interleaved_many(local_server, [("short", "a"), ("short", "b")], baselines, deadline_s=30)
    assert seen == ["1a", "2a", "1b", "2b"]
    assert {name: len(ms) for name, ms in base.items()} == {"first": 2, "second": 2}
    assert len(run.samples) == 2


def _speed_run(served: float, naive: float, floor: float, rps: float) -> dict[str, Any]:
    return {
        "single": {"p50_ms": served, "p99_ms": 2 * served},
        "naive_encode": {"p50_ms": naive},
        "in_process": {"p50_ms": floor},
        "concurrent": {"throughput_rps": rps, "errors": 0},
        "cold_cli": {"via_service_s": 0.8, "in_process_s": 3.0, "naive_cold_s": 6.0},
    }


def test_speed_targets_judge_the_median_of_the_runs_ratios() -> None:
    # Ratios per run: 0.4, 0.6 (a noisy run), 0.42; the median (0.42) is judged, not the mean or the worst.
    runs = [_speed_run(10, 25, 8, 160), _speed_run(15, 25, 8, 100), _speed_run(10.5, 25, 8, 155)]
    mid = speed.medians(runs)
    assert mid["served_over_naive"] == 0.42
    assert mid["throughput_rps"] == 155
    assert mid["cold_cli_via_service_over_naive"] == round(0.8 / 6.0, 3)
    got = {name: passed for name, _, _, passed in speed.targets(runs)}
    assert got["served p50 / naive encode p50 (median of 3 runs)"] is True
    assert got["served p50 / in-process p50 (median of 3 runs)"] is True  # 10.5 / 8 = 1.31
    assert got["8 concurrent clients: req/s (median of 3 runs)"] is True
    r = _results()
    r["latency"]["runs"] = runs
    r["targets"] = [t.as_dict() for t in targets(r)]
    text = markdown(r)
    assert "**median**" in text and "served p50 / naive encode p50 (median of 3 runs)" in text


def test_speed_targets_not_measured_without_a_baseline() -> None:
    run = _speed_run(10, 25, 8, 160)
    del run["in_process"]
    got = {name: passed for name, _, _, passed in speed.targets([run])}
    assert got["served p50 / in-process p50"] is None
    assert got["served p50 / naive encode p50"] is True


def test_quick_mode_shortens_everything_and_unknown_phases_are_refused() -> None:
    args = parse_args(["--quick"])
    assert args.limit == 12 and args.load_seconds == 6.0 and args.fuzz_cases == 0
    assert parse_args([]).load_seconds == 60.0 and parse_args([]).repeat == 1
    assert parse_args(["--repeat", "5"]).repeat == 5
    with pytest.raises(SystemExit):
        parse_args(["--skip", "nonsense"])
    with pytest.raises(SystemExit):
        parse_args(["--repeat", "0"])


class _Engine:
    def __init__(self, response: LookupResponse) -> None:
        self.response = response
        self.calls: list[tuple[str, int]] = []

    def lookup(self, text: str, top_k: int = 5) -> LookupResponse:
        self.calls.append((text, top_k))
        return self.response


def _issue(number: int, confidence: str) -> IssueOut:
    return IssueOut.model_validate(
        {
            "id": f"vllm-project/vllm#{number}",
            "repo": "vllm-project/vllm",
            "number": number,
            "kind": "issue",
            "title": "t",
            "score": 0.5,
            "confidence": confidence,
        }
    )


def test_pipeline_adapter_reads_ranking_confidence_origin_and_answer_text() -> None:
    response = LookupResponse(
        query=QueryInfo(signatures=[], normalized=""),
        analysis=AnalysisOut(origin=OriginOut(side="server", component="vllm", explanation="e"), category="c"),
        issues=[_issue(2, "medium"), _issue(1, "high")],
        no_confident_match=False,
        fixes=[FixOut(summary="Upgrade vLLM", steps=["pip install -U vllm"], sources=["x"])],
        advice=[],
        index=IndexInfo(documents=1, issues=1),
    )
    engine = _Engine(response)
    out = PipelineSystem(engine)(Query("q1", "exact", "text", [], None, [], False))
    assert engine.calls == [("text", 10)]
    assert out.ranked == ["vllm-project/vllm#2", "vllm-project/vllm#1"]
    assert out.high_confidence is True and out.side == "server"
    assert "pip install -U vllm" in out.answer_text


def test_outside_set_is_valid_against_the_bundled_kb() -> None:
    """The outside set's file: ids, reports outside the KB, labels that are cards, seeded balanced splits."""
    from bench.outside import load_outside, load_records, validate
    from indexer.sources.cards import bundled_cards

    records = load_records()
    assert validate(records, [c.id for c in bundled_cards()]) == []
    tune, heldout = load_outside("tune"), load_outside("heldout")
    assert len(records) >= 50 and abs(len(tune) - len(heldout)) <= 1
    assert {q.id for q in tune}.isdisjoint(q.id for q in heldout)
    assert sum(bool(r["relevant"]) for r in records) >= 30


def test_outside_validation_reports_each_kind_of_bad_record() -> None:
    from bench.outside import assign_splits, validate

    good = {
        "id": "out001",
        "report": "acme/tool#7",
        "source": "https://github.com/acme/tool/issues/7",
        "category": "error",
        "query": "HarmonyError: boom",
        "relevant": ["vllm-project/vllm#1"],
        "expect": {"side": "server"},
    }
    neg = dict(
        good,
        id="out002",
        report="acme/tool#8",
        source="https://github.com/acme/tool/issues/8",
        category="negative-unrelated",
        relevant=[],
        expect={"no_match": True},
    )
    records = [dict(good), dict(neg)]
    for r, split in assign_splits(records).items():
        next(x for x in records if x["id"] == r)["split"] = split
    assert validate(records, ["vllm-project/vllm#1"]) == []
    bad = [dict(records[0], report="vllm-project/vllm#1", relevant=["acme/other#3"]), records[1]]
    problems = " | ".join(validate(bad, ["vllm-project/vllm#1"]))
    assert "is a bundled card" in problems and "not a bundled card" in problems
    flipped = [dict(records[0], split="heldout" if records[0]["split"] == "tune" else "tune"), records[1]]
    assert "seeded draw" in " | ".join(validate(flipped, ["vllm-project/vllm#1"]))


def test_silver_set_is_valid_against_the_kb_and_the_outside_set() -> None:
    """The silver file: silNNN ids, threads in neither the KB nor the outside set, labels that are cards,
    a link for each, and no query naming its label's number."""
    from bench.outside import SILVER_FILE, load_records, load_silver, validate_silver
    from indexer.sources.cards import bundled_cards

    silver = load_records(SILVER_FILE)
    outside = [r["report"] for r in load_records()]
    assert validate_silver(silver, [c.id for c in bundled_cards()], outside) == []
    assert silver and all(q.relevant for q in load_silver())


def test_silver_validation_reports_each_kind_of_bad_record() -> None:
    from bench.outside import validate_silver

    good = {
        "id": "sil001",
        "report": "acme/tool#7",
        "source": "https://github.com/acme/tool/issues/7",
        "category": "error",
        "query": "HarmonyError: boom at line 12",
        "relevant": ["vllm-project/vllm#1234"],
        "expect": {"side": "server"},
        "link": "thread: comment by x: duplicate of vllm-project/vllm#1234",
    }
    cards = ["vllm-project/vllm#1234"]
    assert validate_silver([good], cards, ["acme/other#1"]) == []
    card_side = dict(good, link="card-side: vllm-project/vllm#1234 lists it in fixes")
    assert validate_silver([card_side], cards, ["acme/other#1"]) == []
    cases = {
        "is a bundled card": dict(
            good, report="vllm-project/vllm#1234", source="https://github.com/vllm-project/vllm/issues/1234"
        ),
        "already in the outside set": dict(
            good, report="acme/other#1", source="https://github.com/acme/other/issues/1"
        ),
        "not a bundled card": dict(good, relevant=["acme/other#3"]),
        "names the number of its label": dict(good, query="same as vllm issue 1234: HarmonyError"),
        "no link": dict(good, link=""),
        "link does not start with": dict(good, link="comment by x: duplicate of vllm-project/vllm#1234"),
        "not silNNN": dict(good, id="out001"),
        "is not error or symptom": dict(good, category="negative-unrelated"),
    }
    for expected, record in cases.items():
        assert expected in " | ".join(validate_silver([record], cards, ["acme/other#1"])), expected
    assert "appears twice" in " | ".join(validate_silver([good, dict(good, id="sil002")], cards, []))


def test_in_log_variant_buries_each_query_once_in_its_engines_log() -> None:
    from bench.outside import engines, load_outside, load_records
    from bench.outside_log import LOG_LINES, bury, in_log

    records = load_records()
    queries = load_outside()
    engine_of = engines(records)
    logs = in_log(queries, engine_of)
    assert [q.id for q in logs] == [q.id for q in queries]
    assert in_log(queries, engine_of) == logs  # deterministic: runs compare
    for pasted, logged in zip(queries, logs, strict=True):
        assert logged.relevant == pasted.relevant and logged.no_match == pasted.no_match
        assert logged.text.count(pasted.text) == 1
        assert abs(len(logged.text.splitlines()) - LOG_LINES) <= 5
        start = logged.text.index(pasted.text) / len(logged.text)
        assert 0.3 < start < 0.95  # after the start-up block, amid the traffic
    by_id = {q.id: q for q in queries}
    ollama = next(qid for qid, e in engine_of.items() if e == "ollama")
    assert "[GIN]" in bury(by_id[ollama], "ollama") and "APIServer" not in bury(by_id[ollama], "ollama")
    unrelated = next(q for q in queries if q.category == "negative-unrelated")
    assert "gpt-oss" not in bury(unrelated, "vllm").replace(unrelated.text, "")
    assert bury(unrelated, "vllm", seed=1) != bury(unrelated, "vllm", seed=2)


def test_wrong_high_counts_positives_rated_high_on_an_irrelevant_issue() -> None:
    from bench.quality import Outcome, evaluate

    queries = [
        Query("a", "error", "x", ["o/r#1"], None, [], False),
        Query("b", "error", "y", ["o/r#2"], None, [], False),
        Query("c", "negative-unrelated", "z", [], None, [], True),
    ]
    answers = {
        "a": Outcome(ranked=["o/r#1"], high_confidence=True, high_ids=["o/r#1"]),
        "b": Outcome(ranked=["o/r#9", "o/r#2"], high_confidence=True, high_ids=["o/r#9"]),
        "c": Outcome(ranked=["o/r#3"], high_confidence=True, high_ids=["o/r#3"]),
    }
    m = evaluate(queries, lambda q: answers[q.id])
    assert m.positives_wrong_high == 0.5 and m.negatives_no_match == 0.0 and m.hit1 == 0.5


def test_outside_targets_and_table_read_the_heldout_figures() -> None:
    cell = {"n": 17, "negatives": 11, "hit1": 0.5, "hit5": 0.9, "mrr10": 0.6, "origin_accuracy": 0.95}
    cell |= {"negatives_no_match": 1.0, "positives_wrong_high": 0.1}
    split = {v: {"queries": 28, "pipeline": cell, "bm25": dict(cell)} for v in ("pasted", "in-log")}
    r = _results(quality={"outside": {"tune": split, "heldout": split}})
    got = _by_name(r)
    assert got["outside set, held out, pasted: hit@1"] is False
    assert got["outside set, held out, pasted: origin accuracy"] is True
    assert got["outside set, held out, in-log: positives with a wrong high issue"] is False
    assert _by_name(_results())["outside set, held out, pasted: hit@1"] is None
    r["targets"] = [t.as_dict() for t in targets(r)]
    text = markdown(r)
    assert "## Outside set" in text and "| heldout | in-log | BM25 over cards | 17 + 11 neg |" in text


def test_a_wrong_high_on_a_positive_is_counted_and_costs_the_fit_most() -> None:
    from bench.calibrate import objective
    from bench.quality import Outcome, evaluate

    queries = [
        Query("a", "exact", "x", ["r/r#1"], None, [], False),
        Query("b", "exact", "y", ["r/r#2"], None, [], False),
        Query("n", "negative", "z", [], None, [], True),
    ]
    answers = {
        "a": Outcome(ranked=["r/r#1"], high_confidence=True, high_ids=["r/r#1"]),
        "b": Outcome(ranked=["r/r#9", "r/r#2"], high_confidence=True, high_ids=["r/r#9"]),
        "n": Outcome(ranked=["r/r#3"]),
    }
    metrics = evaluate(queries, lambda q: answers[q.id])
    assert metrics.positives_wrong_high == 0.5 and metrics.negatives_no_match == 1.0
    careful = evaluate(queries, lambda q: Outcome(ranked=answers[q.id].ranked))
    assert careful.positives_wrong_high == 0.0
    assert objective([careful]) > objective([metrics])


def test_evaluate_outside_covers_both_splits_and_variants_within_the_limit() -> None:
    from bench.outside import evaluate_outside
    from bench.quality import Outcome

    seen: list[str] = []

    def system(q: Query) -> Outcome:
        seen.append(q.text)
        return Outcome(ranked=q.relevant[:1])

    out = evaluate_outside({"pipeline": system}, limit=4)
    for split in ("tune", "heldout"):
        for variant in ("pasted", "in-log", "in-report"):
            cell = out[split][variant]
            assert cell["queries"] <= 4 and cell["pipeline"]["hit1"] == 1.0
    assert sum(text.count("\n") >= 100 for text in seen) == len(seen) // 3  # the in-log third: whole logs
    reports = [text for text in seen if text.lstrip().startswith(("###", "**Describe"))]
    assert len(reports) == len(seen) // 3  # the in-report third: a template around the query


def test_the_in_report_variant_writes_each_engines_template_around_the_query() -> None:
    from bench.outside_report import TEMPLATES, in_report
    from service.analysis.input import parse_input

    text = "gpt-oss tool calls come back as plain text in the answer"
    query = Query("x", "symptom", text, ["o/r#1"], None, [], False)
    for engine in [*TEMPLATES, None, "lm-studio"]:
        (reported,) = in_report([query], {"x": engine})
        assert reported.id == "x" and reported.relevant == query.relevant
        assert query.text in reported.text and reported.text != query.text
        assert in_report([query], {"x": engine})[0].text == reported.text  # seeded: the same every run
        parsed = parse_input(reported.text)
        assert parsed.prose == [query.text]  # the headings, checklist and environment are not the account
        assert parsed.body and "environment" not in parsed.query_text.lower()


def test_a_new_batch_of_outside_records_leaves_earlier_splits_where_they_were() -> None:
    from bench.outside import assign_splits, load_records, validate
    from indexer.sources.cards import bundled_cards

    records = load_records()
    first = [r for r in records if r.get("batch", 1) == 1]
    later = [r for r in records if r.get("batch", 1) != 1]
    assert first and later
    # Batch 1 drawn alone gives the splits it has in the whole file: a batch never moves another's.
    alone = assign_splits(first)
    assert all(alone[r["id"]] == r["split"] for r in first)
    # A batch without a seed is refused rather than drawn with some default.
    bad = [*records[:-1], dict(records[-1], batch=99)]
    assert any("no seed" in p for p in validate(bad, [c.id for c in bundled_cards()]))


def test_outside_formats_give_one_row_per_split_and_format_and_record_no_query(tmp_path: Any) -> None:
    """Every positive of each split buried in each of the seven log formats; negatives left out; the
    output names no query (no misses, held-out or tune); the lowest hit@1 names its format."""
    from bench.outside import SPLITS, evaluate_outside_formats, load_outside
    from bench.outside_log import LOGS, RELAYS, in_format, in_log

    def record(qid: str, split: str, engine: str | None, relevant: list[str]) -> dict[str, Any]:
        expect: dict[str, Any] = {"engine": engine} if relevant else {"no_match": True}
        return {
            "id": qid,
            "split": split,
            "category": "error" if relevant else "negative-unrelated",
            "query": f"RuntimeError: failure number {qid}",
            "relevant": relevant,
            "expect": expect,
        }

    path = tmp_path / "outside.jsonl"
    records = [
        record("out901", "tune", "mlx", ["o/r#1"]),
        record("out902", "heldout", None, ["o/r#2"]),
        record("out903", "tune", "ollama", []),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    seen: list[str] = []

    def system(q: Query) -> Outcome:
        seen.append(q.text)
        missed = "[GIN]" in q.text  # ollama's access lines: this stub ranks the label second there
        return Outcome(ranked=["o/r#9", *q.relevant] if missed else q.relevant)

    out = evaluate_outside_formats(system, path=path)
    relays = [f"in-log via {relay}" for relay in RELAYS]
    assert [(row["split"], row["format"]) for row in out["rows"]] == [(s, f) for s in SPLITS for f in [*LOGS, *relays]]
    for row in out["rows"]:
        want = (0.0, 1.0, 0.5) if row["format"] == "ollama" else (1.0, 1.0, 1.0)
        assert (row["n"], row["hit1"], row["hit5"], row["mrr10"]) == (1, *want), row
    assert out["min_hit1"] == {s: {"hit1": 0.0, "formats": ["ollama"]} for s in SPLITS}
    assert len(seen) == 2 * (len(LOGS) + len(RELAYS)) and not any("out903" in text for text in seen)  # positives
    # The relays deliver each record's own in-log text (out901: mlx, a Python server's log).
    assert sum("[GIN]" in t for t in seen) == 2 and sum("mlx_lm.server" in t for t in seen) == 1 + len(RELAYS)
    dumped = json.dumps(out)
    assert not any(r["id"] in dumped or r["query"] in dumped for r in records)
    queries = load_outside("tune", path)[:1]
    engine_of = {"out901": "mlx"}
    assert in_format(queries, engine_of, "python") == in_log(queries, engine_of)  # own format: the in-log text
    assert in_format(queries, engine_of, "vllm") != in_log(queries, engine_of)
    with pytest.raises(ValueError, match="unknown log format"):
        in_format(queries, engine_of, "mlx")
    records.append(record("out904", "tune", "vllm", ["o/r#3"]))
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    limited = evaluate_outside_formats(system, limit=1, path=path)
    assert {row["n"] for row in limited["rows"]} == {1}
    r = _results(quality={"outside_formats": out})
    text = markdown(r)
    assert "## Outside set in every engine's log format" in text
    assert (
        "| heldout | ollama | 1 | 0 | 1 | 0.5 |" in text
        and "| tune | lowest hit@1 over formats |  | 0 (ollama) |" in text
    )


def test_a_fitted_move_must_gain_two_queries_worth_of_rank() -> None:
    from bench.calibrate import min_gain, objective
    from bench.quality import Outcome, evaluate

    queries = [Query(str(i), "exact", "x", [f"r/r#{i}"], None, [], False) for i in range(40)]
    negative = [Query("n", "negative", "z", [], None, [], True)]
    first = {q.id: Outcome(ranked=[f"r/r#{q.id}"]) for q in queries}
    second = {q.id: Outcome(ranked=["r/r#999", f"r/r#{q.id}"]) for q in queries}

    def score(moved: int) -> float:
        answers = {**second, **{q.id: first[q.id] for q in queries[:moved]}, "n": Outcome(ranked=[])}
        return objective([evaluate(queries + negative, lambda q: answers[q.id])])

    bar = min_gain([queries, negative])
    assert bar == pytest.approx(2 * 1.25 / 40)  # negatives do not count: they have no rank to gain
    assert score(1) - score(0) < bar <= score(2) - score(0) + 1e-12


def test_a_relayed_log_rewrites_the_records_but_not_the_users_own_sentence() -> None:
    from bench.outside_log import RELAYS, in_log, relayed

    symptom = Query("s", "symptom", "every tool call comes back as plain text", ["o/r#1"], None, [], False)
    error = Query(
        "e", "error", "ValueError: Expected 2 output messages (reasoning and final), but got 3.", [], None, [], False
    )
    logged = in_log([symptom, error], {"s": "vllm", "e": "vllm"})
    for relay in RELAYS:
        out = {q.id: q for q in relayed(logged, [symptom, error], relay)}
        assert symptom.text in out["s"].text.splitlines()  # the user's sentence arrives as written
        if relay != "terminal colours":  # (a colour code marks a level word; this error line has none)
            assert error.text not in out["e"].text.splitlines()  # the error line came from the log: relayed too
        assert len(out["s"].text.splitlines()) == len(logged[0].text.splitlines())
        assert out["s"].text != logged[0].text


def test_judged_first_answers_count_direct_related_no_and_outside_the_pool() -> None:
    from bench.outside import judged_top1
    from bench.quality import Outcome, evaluate

    queries = [Query(q, "error", q, [f"o/r#{i}"], None, [], False) for i, q in enumerate(("a", "b", "c", "d"), 1)]
    answers = {"a": ["o/r#1"], "b": ["o/r#7", "o/r#2"], "c": ["o/r#8"], "d": []}
    highs = {"a": ["o/r#1"], "b": ["o/r#2"]}  # b's high is its second answer, not its first
    m = evaluate(queries, lambda q: Outcome(ranked=answers[q.id], high_ids=highs.get(q.id, [])))
    assert m.tops == {"a": "o/r#1", "b": "o/r#7", "c": "o/r#8", "d": None} and "tops" not in m.as_dict()
    assert m.top_high == {"a"} and "top_high" not in m.as_dict()
    judged = {
        "a": {"o/r#1": "direct"},
        "b": {"o/r#7": "direct", "o/r#2": "related"},
        "c": {"o/r#3": "direct", "o/r#9": "no"},  # its first answer was not pooled
        "d": {"o/r#4": "direct"},
    }
    labels = {q.id: q.relevant for q in queries}
    got = judged_top1(m.tops, judged, high={"a", "b", "c"}, labels=labels)
    assert got == {
        "n": 4,
        "hit1": 0.25,
        "direct": 0.5,
        "related": 0.0,
        "no": 0.0,
        "unjudged": 2,
        "high_n": 3,
        "high_direct": 2,
    }
    assert judged_top1(m.tops, {"x": {}}) is None  # nothing here was judged: no figure, not a zero


def test_label_agreement_and_judged_file_validation() -> None:
    from bench.outside import label_agreement, validate_judged

    records = [
        {"id": "p1", "relevant": ["o/r#1", "o/r#2"]},
        {"id": "p2", "relevant": ["o/r#3"]},
        {"id": "n1", "relevant": []},
    ]
    judged = {"p1": {"o/r#1": "related", "o/r#2": "direct"}, "p2": {"o/r#3": "no", "o/r#5": "direct"}}
    got = label_agreement(records, judged)
    assert got == {
        "reports": 2,
        "labels": 3,
        "labels_direct": 0.333,
        "reports_with_a_direct_label": 0.5,
        "reports_with_any_direct": 1.0,
    }
    bad = [
        {"id": "p1", "judgments": {"o/r#1": "direct"}},  # label o/r#2 left unjudged
        {"id": "p2", "judgments": {"o/r#3": "maybe"}},
        {"id": "n1", "judgments": {}},
        {"id": "p2", "judgments": {"o/r#3": "no"}},
    ]
    problems = validate_judged(bad, records)
    assert any("o/r#2 is not judged" in p for p in problems)
    assert any("'maybe'" in p for p in problems)
    assert any(p.startswith("n1: not a positive") for p in problems)
    assert any("judged twice" in p for p in problems)
    assert validate_judged([{"id": "p2", "judgments": {"o/r#3": "no"}}], records) == []


def test_the_judged_table_reports_each_systems_first_answers_and_the_label_agreement() -> None:
    cell = {"n": 10, "negatives": 0, "hit1": 0.4, "hit5": 0.8, "mrr10": 0.5}
    judged = {"n": 9, "hit1": 0.333, "direct": 0.6, "related": 0.3, "no": 0.1, "unjudged": 1}
    judged |= {"high_n": 4, "high_direct": 3}
    split = {"pasted": {"queries": 10, "pipeline": cell | {"judged_top1": judged}, "bm25": dict(cell)}}
    agreement = {"heldout": {"labels": 12, "reports": 9, "labels_direct": 0.7, "reports_with_a_direct_label": 0.8}}
    text = markdown(_results(quality={"outside": {"heldout": split, "label_agreement": agreement}}))
    assert "| heldout | pasted | full pipeline | 9 | 0.333 | 0.6 | 0.3 | 0.1 | 1 | 3 of 4 |" in text
    assert "BM25 over cards | 10 |" not in text  # BM25's answers were not judged here: no row
    assert "heldout: 0.7 of 12 labels judged direct, a direct label for 0.8 of 9 reports" in text
