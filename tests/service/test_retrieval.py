"""The hybrid retriever on the real bundled KB (lexical + signature legs; a failing dense leg)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import pytest

from indexer.documents import Document, ThreadKind
from indexer.sources.cards import card_documents
from service.analysis.input import ParsedInput, parse_input
from service.retrieval import LegHit, LegUnavailable, Retriever
from service.vectors import VectorIndex


class _BrokenDense:
    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        raise ConnectionError("chroma server went away")


class _OneHotEmbedder:
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2.0


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever(card_documents(), None, None)


def test_exact_signature_ranks_a_thread_carrying_it_first(retriever: Retriever) -> None:
    parsed = parse_input(
        "(APIServer pid=8) ERROR 08-14 03:27:40 [serving_chat.py:1206] ValueError: Expected 2 output "
        "messages (reasoning and final), but got 3."
    )
    result = retriever.search(parsed, top_k=5)
    top = result.hits[0]
    assert any("Expected 2 output messages" in s for s in top.doc.error_signatures)
    assert top.confidence == "high"
    assert any("error signature matches" in why for why in top.why)
    assert result.confident


def test_token_ids_in_the_signature_are_distinctive(retriever: Retriever) -> None:
    result = retriever.search(
        parse_input("openai_harmony.HarmonyError: Unexpected token 200003 while expecting start token 200006")
    )
    top_sigs = " ".join(result.hits[0].doc.error_signatures)
    assert "200003" in top_sigs


def test_unrelated_error_gets_no_confident_match(retriever: Retriever) -> None:
    parsed = parse_input(
        "anthropic.AuthenticationError: Error code: 401 - {'type': 'error', 'error': "
        "{'type': 'authentication_error', 'message': 'invalid x-api-key'}}"
    )
    result = retriever.search(parsed)
    assert not result.confident
    assert all(hit.confidence != "high" for hit in result.hits)


def test_repos_filter_keeps_only_those_repositories(retriever: Retriever) -> None:
    parsed = parse_input("HarmonyError: unexpected tokens remaining in message header")
    result = retriever.search(parsed, top_k=10, repos=["openai/harmony"])
    assert result.hits
    assert {hit.doc.repo for hit in result.hits} == {"openai/harmony"}


def test_scores_are_bounded_and_sorted_by_fusion(retriever: Retriever) -> None:
    result = retriever.search(parse_input("tool calls arrive inside content instead of tool_calls"), top_k=10)
    assert len(result.hits) == 10
    assert all(0.0 <= hit.score <= 1.0 for hit in result.hits)
    assert len({hit.doc.id for hit in result.hits}) == 10
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True), scores


def test_a_failing_dense_leg_raises_and_the_search_without_it_still_answers() -> None:
    # The retriever does not decide the fallback (the engine does, test_engine_and_answer.py): it says
    # the leg failed, and answers without the leg when asked to.
    retriever = Retriever(card_documents(), _OneHotEmbedder(), _BrokenDense())
    parsed = parse_input("Unexpected token 200002 while expecting start token 200006")
    with pytest.raises(LegUnavailable, match="ConnectionError: chroma server went away"):
        retriever.search(parsed)
    result = retriever.search(parsed, dense=False)
    assert result.hits and "200002" in " ".join(result.hits[0].doc.error_signatures)


def test_the_in_memory_vector_index_ranks_by_cosine_like_the_store() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.normal(size=(50, 8)).astype(np.float32)
    ids = [f"doc{i}" for i in range(50)]
    index = VectorIndex(ids, matrix * 3.0)  # unnormalised rows: cosine, not the dot product
    query = rng.normal(size=8).astype(np.float32)
    expected = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)) @ (query / np.linalg.norm(query))
    found = index.query(query, 5)
    assert [doc_id for doc_id, _ in found] == [ids[i] for i in np.argsort(-expected)[:5]]
    assert [sim for _, sim in found] == pytest.approx(sorted(expected, reverse=True)[:5], abs=1e-5)
    assert len(index.query(query, 500)) == 50 and index.query(query, 0) == []
    assert VectorIndex([], np.zeros((0, 8), dtype=np.float32)).query(query, 5) == []
    with pytest.raises(ValueError):
        VectorIndex(ids[:3], matrix)


def test_sections_pass_their_score_to_the_threads_they_cite() -> None:
    cards = card_documents()
    target = next(d for d in cards if d.id == "vllm-project/vllm#22137")
    section = Document(
        id="reference/known-issues.md#responses-store",
        kind="reference-section",
        title="Responses API store disabled",
        text="zebracorn quokkafish: the Responses API store is off by default",
        references=[target.id],
    )
    retriever = Retriever([*cards, section], None, None)
    result = retriever.search(parse_input("zebracorn quokkafish"), top_k=3)
    assert result.hits[0].doc.id == target.id
    assert any("cited by reference/known-issues.md#responses-store" in w for w in result.hits[0].why)
    assert result.sections[0].doc.id == section.id


def test_same_template_with_another_token_id_is_not_a_confident_match(retriever: Retriever) -> None:
    result = retriever.search(
        parse_input("openai_harmony.HarmonyError: Unexpected token 12606 while expecting start token 200006"),
        top_k=10,
    )
    for hit in result.hits:
        sigs = " ".join(hit.doc.error_signatures)
        if "Unexpected token 200002 while expecting" in sigs and "12606" not in sigs:
            assert hit.confidence != "high", hit.doc.id
    assert "12606" in " ".join(result.hits[0].doc.error_signatures)
    assert result.hits[0].confidence == "high"


def test_a_validation_error_of_another_model_is_not_a_confident_match(retriever: Retriever) -> None:
    """pydantic's "validation error(s) for <Model>": another model's validation error is another failure."""
    card = "ollama/ollama#11691"
    error = "pydantic_core._pydantic_core.ValidationError: {} for {}"
    assert error.format("1 validation error", "Response") in retriever.by_id[card].error_signatures
    ollama = "Ollama serving gpt-oss:20b, the OpenAI SDK raises:\n"
    same = retriever.search(parse_input(ollama + error.format("1 validation error", "Response")))
    assert same.hits[0].doc.id == card and same.hits[0].confidence == "high"
    other = retriever.search(parse_input(ollama + error.format("3 validation errors", "AcmeCompletion")))
    assert [hit.confidence for hit in other.hits if hit.doc.id == card] == ["medium"]


def test_threads_of_the_named_engine_rank_first(retriever: Retriever) -> None:
    on_ollama = retriever.search(parse_input("tool calls come back empty with gpt-oss, ollama 0.11.4"))
    assert on_ollama.hits[0].doc.repo == "ollama/ollama"
    assert any("same engine (ollama)" in why for why in on_ollama.hits[0].why)
    on_vllm = retriever.search(parse_input("tool calls come back empty with gpt-oss on vllm 0.11.0"))
    assert all(hit.doc.repo != "ollama/ollama" for hit in on_vllm.hits[:3])


def test_another_engines_thread_with_the_same_error_string_is_not_demoted(retriever: Retriever) -> None:
    result = retriever.search(parse_input("vllm 0.11.0 logs: harmony parser: no reverse mapping found"))
    assert result.hits[0].doc.id == "ollama/ollama#12187"
    assert "another engine (ollama)" not in result.hits[0].why


def test_the_upstream_thread_a_platform_copy_cites_ranks_above_it(retriever: Retriever) -> None:
    copy = retriever.by_id["tenstorrent/vllm#393"]
    upstream = next(ref for ref in copy.references if ref.startswith("vllm-project/vllm#"))
    hits = retriever.search(parse_input(copy.title), top_k=10).hits
    ids = [hit.doc.id for hit in hits]
    assert ids[:2] == [upstream, copy.id]
    assert f"upstream of {copy.id}" in hits[0].why


def test_an_input_about_another_model_is_never_high(retriever: Retriever) -> None:
    parsed = parse_input(
        "vllm serve meta-llama/Llama-3.1-8B-Instruct: ValueError: Expected 2 output messages "
        "(reasoning and final), but got 3."
    )
    assert parsed.other_model is not None
    assert all(hit.confidence != "high" for hit in retriever.search(parsed).hits)


@pytest.mark.parametrize(
    "model",
    [
        "QwQ-32B",
        "baidu/ERNIE-4.5-21B-A3B-Thinking",
        "Holo2-8B",
        "tencent/Hunyuan-A13B-Instruct",
        "MiniMaxAI/MiniMax-M2",
        "CohereLabs/command-a-reasoning-08-2025",
    ],
)
def test_the_other_reasoning_models_vllm_documents_are_another_model(retriever: Retriever, model: str) -> None:
    # vLLM's reasoning-outputs page lists these series beside gpt-oss; an exact vLLM error string seen
    # with one of them is that model's failure, not a gpt-oss one.
    error = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    parsed = parse_input(f"vllm serve {model}: {error}")
    assert parsed.other_model is not None
    assert all(hit.confidence != "high" for hit in retriever.search(parsed).hits)
    # The same words beside gpt-oss stay in scope.
    assert parse_input(f"openai/gpt-oss-20b compared with {model}: {error}").other_model is None


def test_a_users_name_is_not_a_model_family() -> None:
    # "ernie" names the ERNIE series only with its version; a login in a shell prompt is not a model.
    assert parse_input("ernie@gpu01:~$ vllm serve ./model\nValueError: something failed").other_model is None


def test_a_log_without_a_failure_line_matches_nothing_confidently(retriever: Retriever) -> None:
    log = "\n".join(
        f"(APIServer pid=7) INFO 03-02 10:0{i}:00 [loggers.py:123] Engine 000: Avg prompt throughput: 8{i}.0 "
        "tokens/s, Running: 1 reqs, GPU KV cache usage: 2.0%"
        for i in range(8)
    )
    result = retriever.search(parse_input(log + "\n(APIServer pid=7) WARNING 03-02 10:09:00 [x.py:1] slow step"))
    assert all(hit.confidence == "low" for hit in result.hits)
    assert not result.confident


def test_a_users_line_among_the_records_is_a_lead_but_never_a_certainty(retriever: Retriever) -> None:
    """No failing line, but an issue title the user put among the records: its match is worth showing
    (and voting on the origin), capped at medium because no failing line backs it."""
    records = [
        f"(APIServer pid=7) INFO 03-02 10:0{i}:00 [loggers.py:123] Engine 000: Avg prompt throughput: 8{i}.0 "
        "tokens/s, Running: 1 reqs, GPU KV cache usage: 2.0%"
        for i in range(8)
    ]
    title = "[Bug]: gpt-oss-120b Expected 2 output messages (reasoning and final), but got 3"
    parsed = parse_input("\n".join([*records[:4], title, *records[4:]]))
    assert not parsed.failure_found and parsed.plain == [title]
    result = retriever.search(parsed)
    top = result.hits[0]
    assert any("Expected 2 output messages" in s for s in top.doc.error_signatures)
    assert top.confidence == "medium" and not result.confident
    assert "not on a failing line" in top.why[-1]
    # The same title as a pasted line on its own is a match to trust.
    assert retriever.search(parse_input(title)).hits[0].confidence == "high"


def test_a_thread_the_user_names_comes_first_and_is_trusted(retriever: Retriever) -> None:
    parsed = parse_input("is https://github.com/vllm-project/vllm/issues/22403 fixed in 0.11.0?")
    top = retriever.search(parsed).hits[0]
    assert top.doc.id == "vllm-project/vllm#22403" and top.confidence == "high"
    assert "the input names this thread" in top.why
    # Restricted to other repositories, a named thread is not brought in.
    only = retriever.search(parsed, repos=["ollama/ollama"]).hits
    assert all(hit.doc.repo == "ollama/ollama" for hit in only)
    # A thread the index does not hold changes nothing.
    unknown = parse_input("is vllm-project/vllm#1 fixed in 0.11.0?")
    assert all(hit.doc.id != "vllm-project/vllm#1" for hit in retriever.search(unknown).hits)


def test_a_bare_number_is_the_thread_of_that_number_in_the_named_engines_tracker(retriever: Retriever) -> None:
    assert retriever.resolve_numbers(parse_input("is #22403 fixed?")) == ["vllm-project/vllm#22403"]  # vLLM's
    assert retriever.resolve_numbers(parse_input("ollama issue 12187 still happens")) == ["ollama/ollama#12187"]
    assert retriever.resolve_numbers(parse_input("ollama issue 22403 still happens")) == []  # not Ollama's


def test_the_calibration_object_sets_the_thresholds() -> None:
    from service.calibration import Calibration

    strict = Retriever(card_documents(), None, None, calibration=Calibration(signature_high=1.01))
    parsed = parse_input("ValueError: Expected 2 output messages (reasoning and final), but got 3.")
    assert strict.search(parsed).hits[0].confidence == "medium"


def test_only_the_best_thread_and_its_fix_links_are_high(retriever: Retriever) -> None:
    result = retriever.search(
        parse_input("openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"),
        top_k=10,
    )
    first = result.hits[0]
    assert first.confidence == "high"
    linked = {first.doc.id, *first.doc.fixed_by, *first.doc.fixes, *first.doc.references}
    assert all(h.doc.id in linked for h in result.hits if h.confidence == "high")
    assert any("same error string as" in why for h in result.hits for why in h.why)


def test_an_unmerged_pr_linked_from_the_best_thread_is_not_high(retriever: Retriever) -> None:
    """Open PRs that quote the issue's error propose a fix; only the issue (and merged work) is "high"."""
    result = retriever.search(
        parse_input('unexpected status 400 Bad Request: {"error":{"message":"tool type namespace not supported"}}'),
        top_k=10,
    )
    first = result.hits[0]
    assert first.confidence == "high" and first.doc.thread_kind is ThreadKind.ISSUE
    proposals = [h for h in result.hits if h.doc.id in first.doc.references and h.doc.state == "open"]
    assert proposals and all(h.doc.thread_kind is ThreadKind.PULL for h in proposals)
    assert all(h.confidence == "medium" for h in proposals)
    assert all(any("a proposal, not a fix" in why for why in h.why) for h in proposals)


def test_the_same_error_string_from_another_engine_is_not_high(retriever: Retriever) -> None:
    result = retriever.search(parse_input("sglang 0.5.1: harmony parser: no reverse mapping found"))
    ollama = next(h for h in result.hits if h.doc.id == "ollama/ollama#12187")
    assert ollama.confidence == "medium" and "another engine's thread" in ollama.why


def test_a_title_quoting_the_message_of_an_http_error_body_counts_as_titled() -> None:
    from service.retrieval import titled

    body = '{"error":{"message":"Unexpected token 200002 while expecting start token 200006","type":"X","code":500}}'
    title = '[Bug]: chat completions return 500 "Unexpected token 200002 while expecting start token 200006"'
    assert titled(body, title)
    assert titled("Unexpected token 200002 while expecting start token 200006", title)
    assert not titled(body, "[Bug]: chat completions return 500")
    assert not titled('{"error":{"message":"short"}}', 'a title with "short" in it')


def test_the_thread_that_shows_an_error_ranks_above_the_merged_pr_that_removed_it(retriever: Retriever) -> None:
    # vllm#22137 introduced the 501 refusal of store=True; merged vllm#22185 removed it. Both quote the
    # error's first sentence, and #22185's title shares more words with it; the user who sees it runs a
    # build without #22185.
    text = "Responses API request failed: `store=True` (default) is not supported."
    result = retriever.search(parse_input(text))
    ids = [hit.doc.id for hit in result.hits]
    assert ids[:2] == ["vllm-project/vllm#22137", "vllm-project/vllm#22185"]
    assert any("vllm-project/vllm#22185 removed" in why for why in result.hits[0].why)
    # The whole message is #22137's own string (the PR added it): it leads on the error string itself.
    whole = text + " Please set `store=False` in Responses API or set `VLLM_ENABLE_RESPONSES_API_STORE=1`"
    assert retriever.search(parse_input(whole)).hits[0].doc.id == "vllm-project/vllm#22137"


def test_a_thread_of_the_named_client_near_the_top_is_worth_showing(retriever: Retriever) -> None:
    # A described symptom (no error line) that names the benchmark client: its own tracker's thread is
    # shown as medium (so its fix counts as evidence), never high without the error string.
    parsed = parse_input("benchmarking gpt-oss with guidellm, most requests fail unless outputs are short")
    hits = {hit.doc.id: hit for hit in retriever.search(parsed, top_k=10).hits}
    assert hits["vllm-project/guidellm#979"].confidence == "medium"


def test_another_client_applications_thread_ranks_below_the_engines_own() -> None:
    # tensorzero#3018 is tensorzero's own report of vLLM's reasoning field rename; a user of another
    # frontend is better served by the engine's thread and the other engine-side threads.
    from service.calibration import Calibration

    text = (
        "my chat frontend stopped showing the thinking after a vLLM upgrade: the server sends the field as "
        "reasoning instead of reasoning_content"
    )
    plain = Retriever(card_documents(), None, None, calibration=Calibration(other_client_factor=1.0))
    demoted = Retriever(card_documents(), None, None)
    before = [h.doc.id for h in plain.search(parse_input(text), top_k=10).hits]
    after = demoted.search(parse_input(text), top_k=10).hits
    ids = [h.doc.id for h in after]
    # The engine's own threads on the rename: the RFC, or the merged PR that removed reasoning_content.
    assert ids[0] in {"vllm-project/vllm#27755", "vllm-project/vllm#33402"}
    assert ids.index("tensorzero/tensorzero#3018") > before.index("tensorzero/tensorzero#3018")
    assert any("another client (tensorzero)" in why for why in after[ids.index("tensorzero/tensorzero#3018")].why)
    # Named, it is the user's own application: no demotion.
    named = demoted.search(parse_input("tensorzero: " + text), top_k=10).hits
    own = [hit for hit in named if hit.doc.repo == "tensorzero/tensorzero"]
    assert own and not any("another client" in why for hit in own for why in hit.why)


def test_a_client_relaying_the_servers_error_gets_no_lift_for_its_own_tracker(retriever: Retriever) -> None:
    # The failing line is the server's message inside LiteLLM's exception: LiteLLM's threads are not
    # lifted for being LiteLLM's. Described in words, the same client's threads are.
    relayed = parse_input(
        "litellm.BadRequestError: OpenAIException - Error code: 400 - unexpected tokens remaining in message "
        'header: Some("to=functions.get_weather")'
    )
    assert relayed.client == "litellm"
    assert retriever._relays_server_error(relayed)
    hits = retriever.search(relayed, top_k=20).hits
    assert not any("same client (litellm)" in why for hit in hits for why in hit.why)
    described = parse_input("the litellm proxy drops reasoning_effort for gpt-oss on every request")
    assert not retriever._relays_server_error(described)
    lifted = retriever.search(described, top_k=20).hits
    assert any("same client (litellm)" in why for hit in lifted for why in hit.why)


def test_a_dotted_module_name_names_its_repository(retriever: Retriever) -> None:
    words = retriever._input_words(parse_input("python -m mlx_lm.server --model mlx-community/gpt-oss-20b"))
    assert "mlx-lm" in words


def test_the_same_error_from_another_engine_ranks_below_the_engine_neutral_threads() -> None:
    # The vocab download error comes from openai-harmony; on SGLang, vLLM's threads with the same string
    # are look-alikes: the library's own threads come before them (all stay visible).
    from service.calibration import Calibration

    text = "sglang server: openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download"
    plain = Retriever(card_documents(), None, None, calibration=Calibration(other_engine_same_error_factor=1.0))
    before = [h.doc.id for h in plain.search(parse_input(text), top_k=10).hits]
    after = [h.doc.id for h in Retriever(card_documents(), None, None).search(parse_input(text), top_k=10).hits]
    assert before.index("vllm-project/vllm#22259") < before.index("openai/harmony#146")
    assert after.index("openai/harmony#146") < after.index("vllm-project/vllm#22259")


class _NearDense:
    """The dense leg finding one thread very close (cosine 0.9)."""

    def __init__(self, doc_id: str) -> None:
        self.doc_id = doc_id

    def query(self, vector: np.ndarray, k: int) -> list[tuple[str, float]]:
        return [(self.doc_id, 0.9)]


def test_a_semantic_high_needs_the_engine_named() -> None:
    # Words alone ("high" without an error string) need the same engine; an input that names none
    # only most likely runs vLLM, which is not enough to call the thread the same failure.
    retriever = Retriever(card_documents(), _OneHotEmbedder(), _NearDense("vllm-project/vllm#22337"))
    symptom = "gpt-oss-120b tool calls: the tool call JSON comes back in content and tool_calls stays empty"

    def confidence(text: str) -> str:
        hits = {hit.doc.id: hit for hit in retriever.search(parse_input(text)).hits}
        return hits["vllm-project/vllm#22337"].confidence

    assert confidence(symptom) == "medium"
    assert confidence("vllm serving " + symptom) == "high"


def test_a_semantic_high_needs_a_distinctive_word_of_the_error_line_in_the_thread() -> None:
    """An error line the software wrote that the thread shows nothing like is another failure of the same
    engine, however close the words around it: "medium". One distinctive word of the line in the thread is
    enough ("tool_calls" here); an input with no error line goes by its words as before."""
    retriever = Retriever(card_documents(), _OneHotEmbedder(), _NearDense("vllm-project/vllm#22337"))
    symptom = "vllm serving gpt-oss-120b: the tool call JSON comes back in content and tool_calls stays empty"
    thread = retriever.by_id["vllm-project/vllm#22337"]

    def confidence(text: str) -> str:
        hits = {hit.doc.id: hit for hit in retriever.search(parse_input(text)).hits}
        return hits[thread.id].confidence

    assert confidence(symptom) == "high"
    record = "\nERROR 11-23 10:00:01 [loader.py:12] acme_blob_reader: "
    assert confidence(symptom + record + "tensor blk.0.qzx has invalid qzx kind 39") == "medium"
    shared = symptom + record + "tool_calls is empty for choice 0"
    assert confidence(shared) == "high"


def test_a_semantic_high_needs_the_engine_named_by_the_failure_not_by_the_log_around_it() -> None:
    # A vLLM log names vLLM on every start-up line, and most threads are vLLM's: that the symptom sits
    # in such a log says nothing about which failure it is. The engine counts when the failing lines or
    # the user's own sentence name it, as in a pasted report.
    retriever = Retriever(card_documents(), _OneHotEmbedder(), _NearDense("vllm-project/vllm#22337"))
    symptom = "gpt-oss-120b tool calls: the tool call JSON comes back in content and tool_calls stays empty"
    boilerplate = [
        "(APIServer pid=7) INFO 11-23 10:00:01 [api_server.py:1839] vLLM API server version 0.10.2",
        "(APIServer pid=7) INFO 11-23 10:00:01 [utils.py:233] non-default args: {'model': 'openai/gpt-oss-120b'}",
        "(EngineCore_DP0 pid=9) INFO 11-23 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.10.2)",
        "(EngineCore_DP0 pid=9) INFO 11-23 10:00:40 [gpu_worker.py:298] Available KV cache memory: 20.1 GiB",
        "(APIServer pid=7) INFO 11-23 10:01:02 [launcher.py:44] Route: /v1/chat/completions, Methods: POST",
        '(APIServer pid=7) INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]

    def in_log(sentence: str) -> tuple[str, list[str], list[str]]:
        parsed = parse_input("\n".join([*boilerplate[:4], sentence, *boilerplate[4:]]))
        hits = {hit.doc.id: hit for hit in retriever.search(parsed).hits}
        return hits["vllm-project/vllm#22337"].confidence, parsed.engines, parsed.failure_engines

    assert in_log(symptom) == ("medium", ["vllm"], [])
    assert in_log("with vllm serve: " + symptom) == ("high", ["vllm"], ["vllm"])


def test_a_warning_line_that_is_word_for_word_a_known_error_string_is_high(retriever: Retriever) -> None:
    # A line logged below ERROR counts for less: most warnings are not the failure. But when the
    # knowledge base records that very string as a failure's error string, the log level does not
    # make it any less the same error.
    known = "Failed to import Triton kernels. Please make sure your triton version is compatible."
    line = f"(EngineCore_DP0 pid=42) WARNING 01-28 06:35:44 [gpt_oss_triton_kernels_moe.py:34] {known}"
    parsed = parse_input(line)
    assert [e.kind for e in parsed.evidence] == ["warning"]
    hits = {hit.doc.id: hit for hit in retriever.search(parsed, top_k=10).hits}
    assert hits["vllm-project/vllm#26582"].confidence == "high"
    assert any("error signature matches" in why for why in hits["vllm-project/vllm#26582"].why)
    # Only part of the string at WARNING level keeps the warning's weight: not the same error.
    partial = parse_input("(EngineCore_DP0 pid=42) WARNING 01-28 06:35:44 [x.py:34] Failed to import Triton kernels.")
    found = {hit.doc.id: hit for hit in retriever.search(partial, top_k=10).hits}
    assert all(hit.confidence != "high" for hit in found.values())


def _bridge_corpus() -> list[Document]:
    """The bundled KB plus threads whose titles carry two made-up words and whose text carries a third.

    The target shares no word with the query: only the words of the threads the query finds lead to it.
    """
    found = [
        Document(
            id=f"example/bridge#{n}",
            kind="issue",
            repo="example/bridge",
            number=n,
            title=f"zebracorn quokkafish report {n}",
            text="the flibbertigibbet pipeline fails; flibbertigibbet again. build 31337 31337 31337",
        )
        for n in (1, 2, 3)
    ]
    target = Document(
        id="example/bridge#4",
        kind="issue",
        repo="example/bridge",
        number=4,
        title="flibbertigibbet pipeline",
        text="flibbertigibbet flibbertigibbet pipeline",
    )
    number_only = Document(
        id="example/bridge#5", kind="issue", repo="example/bridge", number=5, title="release 31337", text="31337"
    )
    return [*card_documents(), *found, target, number_only]


def test_lexical_feedback_reaches_a_thread_in_the_words_of_the_threads_the_query_finds() -> None:
    # RM3-style feedback (issue 12): a report worded unlike a card still finds the card through the
    # vocabulary of the documents its own words find. Switched off, the target has no lexical rank at all.
    from service.calibration import Calibration

    docs = _bridge_corpus()
    parsed = parse_input("zebracorn quokkafish")
    assert not parsed.is_log
    # The shipped calibration has it off (bench/README.md, Calibration); the seam is what is tested here.
    with_feedback = Retriever(docs, None, None, calibration=Calibration(lexical_feedback_prose=0.1))
    without = Retriever(docs, None, None, calibration=Calibration(lexical_feedback_prose=0.0))

    def ids(retriever: Retriever) -> list[str]:
        return [retriever.documents[i].id for i, _ in retriever._lexical_leg(parsed)]

    assert "example/bridge#4" not in ids(without)
    assert "example/bridge#4" in ids(with_feedback)
    hits = [hit.doc.id for hit in with_feedback.search(parsed, top_k=5).hits]
    assert set(hits[:3]) == {f"example/bridge#{n}" for n in (1, 2, 3)}
    assert "example/bridge#4" in hits
    assert "example/bridge#4" not in [hit.doc.id for hit in without.search(parsed, top_k=10).hits]
    # A number is not a word of the problem: the build number the found threads share lends nothing.
    assert "example/bridge#5" not in ids(with_feedback)


def test_input_with_error_lines_gets_no_lexical_feedback() -> None:
    # An error line's words are exact: feedback there would only pull in the neighbours' vocabulary.
    from service.calibration import Calibration

    docs = _bridge_corpus()
    parsed = parse_input("ERROR 08-14 03:27:40 [core.py:12] RuntimeError: zebracorn quokkafish failed")
    assert parsed.is_log
    with_feedback = Retriever(docs, None, None, calibration=Calibration(lexical_feedback_prose=0.1))
    without = Retriever(docs, None, None, calibration=Calibration(lexical_feedback_prose=0.0))
    assert with_feedback._lexical_leg(parsed) == without._lexical_leg(parsed)
    logs_too = Retriever(docs, None, None, calibration=Calibration(lexical_feedback_log=0.1))
    assert "example/bridge#4" in [logs_too.documents[i].id for i, _ in logs_too._lexical_leg(parsed)]


_TIED = [
    f"{w}fern" for w in ("amber", "birch", "cedar", "delta", "ember", "flint", "grove", "heath", "ivory", "juniper")
]


def _tied_corpus() -> list[Document]:
    # One thread the query finds, holding ten words of exactly equal weight (once each, each in two
    # documents), and ten threads that each hold one of those words: which of them the feedback reaches
    # depends only on how ties between equal words are broken.
    found = Document(
        id="example/tie#0", kind="issue", repo="example/tie", number=0, title="zebracorn", text=" ".join(_TIED)
    )
    others = [
        Document(id=f"example/tie#{n}", kind="issue", repo="example/tie", number=n, title=f"thread {n}", text=word)
        for n, word in enumerate(_TIED, start=1)
    ]
    return [*card_documents(), found, *others]


def test_equal_feedback_words_are_chosen_by_the_word_not_the_vocabulary_id() -> None:
    from service.calibration import Calibration

    retriever = Retriever(_tied_corpus(), None, None, calibration=Calibration(lexical_feedback_prose=0.1))
    reached = {retriever.documents[i].id for i, _ in retriever._lexical_leg(parse_input("zebracorn"))}
    terms = retriever.calibration.lexical_feedback_terms
    assert terms < len(_TIED)
    expected = {f"example/tie#{n}" for n in range(1, terms + 1)}  # the alphabetically first words
    assert reached - {"example/tie#0"} == expected


def test_answers_do_not_depend_on_the_string_hash_seed() -> None:
    # bm25s numbers its vocabulary in set order, which follows PYTHONHASHSEED.
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json\n"
        "from tests.service.test_retrieval import _tied_corpus\n"
        "from service.analysis.input import parse_input\n"
        "from service.calibration import Calibration\n"
        "from service.retrieval import Retriever\n"
        "r = Retriever(_tied_corpus(), None, None, calibration=Calibration(lexical_feedback_prose=0.1))\n"
        "queries = ['zebracorn', 'tool calls come back inside the message text instead of tool_calls',\n"
        "           'reasoning shows up in the answer on the chat completions endpoint']\n"
        "print(json.dumps([[[r.documents[i].id, round(s, 9)] for i, s in r._lexical_leg(parse_input(q))]\n"
        "                  for q in queries]))\n"
    )
    outputs = set()
    for seed in ("0", "1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True, timeout=300
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
    assert json.loads(outputs.pop())[0]


def test_the_dense_leg_embeds_the_query_through_encode_query_when_the_embedder_has_it() -> None:
    class _QueryEmbedder(_OneHotEmbedder):
        def __init__(self) -> None:
            self.queries: list[str] = []

        def encode_query(self, text: str) -> np.ndarray:
            self.queries.append(text)
            return self.encode([text])[0]

    docs = card_documents()[:20]
    embedder = _QueryEmbedder()
    vectors = VectorIndex([d.id for d in docs], embedder.encode([d.text for d in docs]))
    retriever = Retriever(docs, embedder, vectors)
    retriever.search(parse_input("tool calls arrive as text in content"), top_k=3)
    assert embedder.queries == ["tool calls arrive as text in content"]


def test_the_query_encode_runs_on_the_calling_thread_while_the_python_legs_run_beside_it() -> None:
    # The encode starts at once (no wait for the GIL behind the Python legs), and the legs overlap it.
    legs_done = threading.Event()

    class _Retriever(Retriever):
        def _python_legs(self, parsed: ParsedInput) -> tuple[list[list[LegHit]], frozenset[str], set[str]]:
            out = super()._python_legs(parsed)
            legs_done.set()
            return out

    class _WaitingEmbedder(_OneHotEmbedder):
        def __init__(self) -> None:
            self.threads: list[threading.Thread] = []
            self.legs_done_meanwhile: list[bool] = []

        def encode_query(self, text: str) -> np.ndarray:
            self.threads.append(threading.current_thread())
            self.legs_done_meanwhile.append(legs_done.wait(timeout=10))
            return self.encode([text])[0]

    docs = card_documents()
    embedder = _WaitingEmbedder()
    retriever = _Retriever(docs, embedder, VectorIndex([d.id for d in docs], embedder.encode([d.text for d in docs])))
    parsed = parse_input("Unexpected token 200002 while expecting start token 200006")
    result = retriever.search(parsed, top_k=3)
    assert embedder.threads == [threading.current_thread()]
    assert embedder.legs_done_meanwhile == [True]
    assert "200002" in " ".join(result.hits[0].doc.error_signatures)


def test_a_community_authors_threads_count_once_and_the_facts_follow_each_document() -> None:
    cards = card_documents()

    def thread(number: int, author: str, association: str) -> Document:
        return Document(
            id=f"someone/zebra-tool#{number}",
            kind="issue",
            repo="someone/zebra-tool",
            number=number,
            title=f"zebracorn quokkafish crash number {number}",
            text="zebracorn quokkafish crash when streaming",
            author=author,
            author_association=association,
            sources=["github"],
        )

    spam = [thread(1, "mallory", "NONE"), thread(2, "mallory", "NONE")]
    member = [thread(3, "maria", "MEMBER"), thread(4, "maria", "MEMBER")]
    retriever = Retriever([*cards, *spam, *member], None, None)
    at = {doc.id: i for i, doc in enumerate(retriever.documents)}
    ranked = [(4.0 - n, at[f"someone/zebra-tool#{n}"]) for n in (1, 2, 3, 4)]
    kept = [retriever.documents[i].id for _, i in retriever._one_per_author(ranked)]
    # One account repeating itself counts once (its best thread); a maintainer's threads all count.
    assert kept == ["someone/zebra-tool#1", "someone/zebra-tool#3", "someone/zebra-tool#4"]
    # The per-position facts the fusion reads are each document's own.
    for i, doc in enumerate(retriever.documents):
        assert retriever._is_thread[i] is doc.is_thread
        assert retriever._component[i] == doc.component
        facts = retriever._facts[i]
        assert facts.repo_name == (doc.repo or "").split("/", 1)[-1].lower()
        assert (facts.engine, facts.client) == (
            retriever.engines.engine.get(doc.id),
            retriever.engines.client.get(doc.id),
        )
        assert facts.platform_copy is retriever.engines.is_platform_copy(doc)
        assert facts.base_boost == retriever._thread_boost(doc)


def test_a_tie_between_a_thread_and_the_pr_that_removed_its_error_goes_to_the_thread(retriever: Retriever) -> None:
    """Two docs rewrites left vllm#22137 and its fix PR #22185 with the very same score for the store=True
    error; the sort then put the PR first by position. A tie goes to the thread, as a lower score does."""
    from service.retrieval import _Evidence

    position = {doc.id: i for i, doc in enumerate(retriever.documents)}
    thread, pr = position["vllm-project/vllm#22137"], position["vllm-project/vllm#22185"]
    scores = {thread: 0.64, pr: 0.64}
    evidence = {thread: _Evidence(signature=0.77), pr: _Evidence(signature=0.77)}
    retriever._report_before_fix(scores, evidence)
    assert scores[thread] > scores[pr]
    assert evidence[thread].adjusted == ["shows the error vllm-project/vllm#22185 removed"]
