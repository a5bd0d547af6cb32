"""Configuration advice rules, driven by the input and by real KB cards as hits."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.documents import DocKind, Document, SourceName
from indexer.trust import trust_level
from service.analysis.advice import (
    REASONING_SECTION,
    Advice,
    CuratedThreads,
    advise,
    card_flags,
    fixing_version,
    seen_flags,
    settings_in_effect,
)
from service.analysis.engines import ThreadEngines
from service.analysis.input import parse_input
from service.models import FlagOut
from service.versions import parse_version

TOOLS_IN_CONTENT = (
    "vLLM serving gpt-oss-120b on chat completions with a tools array: the model clearly wants to call a "
    "function, but the call arrives as JSON inside message.content and tool_calls is empty."
)


def _hits(cards: dict[str, Document], *ids: str) -> list[Document]:
    return [cards[i] for i in ids]


PARSER_ADVICE = ("Start vLLM with `--tool-call-parser openai", "Check that vLLM runs with `--tool-call-parser openai")
"""How the tool-parser advice starts: a finding when the input shows the command, a check when it shows none."""


def _parser_advice(advice: list[Advice]) -> list[Advice]:
    return [a for a in advice if a.summary.startswith(PARSER_ADVICE)]


def _about(advice: list[Advice], needle: str) -> list[Advice]:
    return [a for a in advice if needle.lower() in (a.summary + " " + " ".join(f.text() for f in a.flags)).lower()]


def test_missing_tool_parser_flags_are_advised_with_sources(cards: dict[str, Document], kb: CuratedThreads) -> None:
    advice = advise(parse_input(TOOLS_IN_CONTENT), _hits(cards, "vllm-project/vllm#22337"), kb)
    rule = _parser_advice(advice)
    assert len(rule) == 1
    assert rule[0].flags == [
        FlagOut(flag="--tool-call-parser", value="openai", action="set"),
        FlagOut(flag="--enable-auto-tool-choice", action="set"),
    ]
    assert "vllm-project/vllm#22337" in rule[0].sources
    assert "0.10.2" in rule[0].summary  # the KB's minimum version for the openai parser


def test_no_tool_flag_advice_when_both_flags_are_already_set(cards: dict[str, Document], kb: CuratedThreads) -> None:
    text = "$ vllm serve openai/gpt-oss-120b --tool-call-parser openai --enable-auto-tool-choice\n" + TOOLS_IN_CONTENT
    advice = advise(parse_input(text), _hits(cards, "vllm-project/vllm#22337"), kb)
    assert not _parser_advice(advice)


@pytest.mark.parametrize("wording", ["native function calling", "function-calling", "supports_function_calling"])
def test_function_calling_wording_counts_as_a_tool_symptom(wording: str, kb: CuratedThreads) -> None:
    # "function calling" is how the KB's own threads name tool use (crewAI#4036's title, LiteLLM's
    # supports_function_calling); a report in those words gets the server flags, with no hit to lean on.
    text = f"gpt-oss-20b on vLLM 0.11.0: {wording} never produces a structured call, the JSON lands in the text"
    rule = _parser_advice(advise(parse_input(text), [], kb))
    assert len(rule) == 1


def test_a_responses_api_function_call_item_is_not_a_missing_parser_flag(kb: CuratedThreads) -> None:
    text = "vLLM Responses API returns function_call items with status null for gpt-oss"
    assert not _about(advise(parse_input(text), [], kb), "--tool-call-parser")


def test_flags_named_inside_an_error_message_do_not_count_as_set(kb: CuratedThreads) -> None:
    text = (
        "openai.BadRequestError: Error code: 400 - {'message': '\"auto\" tool choice requires "
        "--enable-auto-tool-choice and --tool-call-parser to be set', 'code': 400}"
    )
    assert "enable-auto-tool-choice" not in seen_flags(parse_input(text))
    advice = advise(parse_input(text), [], kb)
    assert _about(advice, "--enable-auto-tool-choice")


def test_non_default_args_count_as_set_flags() -> None:
    text = (
        "INFO [utils.py:326] non-default args: {'model': 'openai/gpt-oss-120b', "
        "'enable_auto_tool_choice': True, "
        "'tool_call_parser': 'openai', 'reasoning_parser': 'openai_gptoss'}"
    )
    flags = seen_flags(parse_input(text))
    assert flags["tool-call-parser"] == "openai"
    assert flags["enable-auto-tool-choice"].lower() == "true"
    assert flags["reasoning-parser"] == "openai_gptoss"


def test_tool_flag_advice_is_not_given_for_another_engine(kb: CuratedThreads) -> None:
    text = "ollama: gpt-oss tool calls come back as text inside content instead of tool_calls"
    assert not _about(advise(parse_input(text), [], kb), "--tool-call-parser")


def test_old_vllm_without_the_openai_parser_is_told_the_minimum_version(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    log = (
        "(APIServer pid=7) INFO [api_server.py:1805] vLLM API server version 0.10.1\n"
        "KeyError: 'invalid tool call parser: openai (chose from { hermes, mistral, pythonic })'"
    )
    advice = advise(parse_input(log), _hits(cards, "vllm-project/recipes#51"), kb)
    upgrade = [a for a in advice if a.summary.startswith("Upgrade vLLM to 0.10.2")]
    assert upgrade and "your vLLM 0.10.1 " in upgrade[0].summary
    assert all(s for s in upgrade[0].sources)


@pytest.mark.parametrize(
    ("version", "verdict"),
    [
        ("0.10.1+gptoss", "you are affected"),
        ("0.10.2.dev71+g4e8614e88", "you are affected"),  # a pre-release of the fixing version
        ("0.11.0", "already has"),
    ],
)
def test_version_aware_advice_compares_with_the_fixing_release(
    cards: dict[str, Document], version: str, verdict: str, kb: CuratedThreads
) -> None:
    log = (
        f"(APIServer pid=1) INFO [api_server.py:1805] vLLM API server version {version}\n"
        "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    )
    advice = advise(parse_input(log), _hits(cards, "vllm-project/vllm#22386"), kb)
    versioned = [a for a in advice if a.summary.startswith(f"Your vLLM {version}")]
    assert len(versioned) == 1
    assert verdict in versioned[0].summary
    assert "vllm-project/vllm#22386" in versioned[0].sources


def test_fixing_version_is_read_from_the_card_text(cards: dict[str, Document]) -> None:
    assert fixing_version(cards["vllm-project/vllm#22386"]) == "0.10.2"
    assert fixing_version(cards["vllm-project/recipes#83"]) == "0.10.2"
    assert fixing_version(cards["vllm-project/vllm#22337"]) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0.10.1+gptoss", "0.10.1"),
        ("v0.11.0", "0.11.0"),
        ("0.10.2.dev71+g4e8614e88", "0.10.2.dev71"),
        ("x", None),
    ],
)
def test_version_normalisation_tolerates_local_and_dev_suffixes(raw: str, expected: str | None) -> None:
    normalised = parse_version(raw)
    assert (str(normalised) if normalised else None) == expected


def test_offline_vocab_advises_the_env_var(cards: dict[str, Document], kb: CuratedThreads) -> None:
    log = "openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download or load vocab file"
    advice = advise(parse_input(log), _hits(cards, "vllm-project/vllm#22525"), kb)
    rule = _about(advice, "TIKTOKEN_ENCODINGS_BASE")
    assert rule and rule[0].flags == [FlagOut(flag="TIKTOKEN_ENCODINGS_BASE", action="set")]
    assert rule[0].sources  # backed by KB cards that give the workaround
    assert "gptoss-doctor vocab export DIR" in rule[0].summary  # the command that writes the file


def test_return_token_error_advises_against_ignore_eos(cards: dict[str, Document], kb: CuratedThreads) -> None:
    text = (
        '{"error":{"message":"Unexpected token 200002 while expecting start token 200006","code":500}}\n'
        "sampling params {'max_tokens': 2048, 'ignore_eos': True}"
    )
    advice = advise(parse_input(text), _hits(cards, "vllm-project/vllm#50690"), kb)
    rule = [a for a in advice if a.summary.startswith("Do not send `ignore_eos`")]
    assert rule and "200002" in rule[0].summary and "generation_config" in rule[0].summary
    assert "vllm-project/vllm#50690" in rule[0].sources
    assert FlagOut(flag="ignore_eos", action="avoid") in rule[0].flags


def test_what_a_reporter_ran_is_never_advice(cards: dict[str, Document], kb: CuratedThreads) -> None:
    # #50690's card lists ignore_eos=true, the very trigger of the error: as context it is no advice,
    # as avoid it is advice to avoid, never to set.
    text = "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006"
    card = cards["vllm-project/vllm#50690"]
    for roles in ({}, {"ignore_eos=true": "avoid"}):
        doc = card.model_copy(update={"flag_roles": roles})
        advice = advise(parse_input(text), [doc], kb)
        typed = [f for a in advice for f in a.flags]
        assert not [f for f in typed if f.flag == "ignore_eos" and f.action == "set"]
        assert not [f for f in typed if f.flag == "max_completion_tokens"]  # context: what was run
        if roles:
            assert FlagOut(flag="ignore_eos", action="avoid") in [
                f for a in advice if a.sources == [card.id] for f in a.flags
            ]


def test_card_flags_keep_only_fix_and_avoid_roles(cards: dict[str, Document]) -> None:
    card = cards["vllm-project/vllm#28635"].model_copy(
        update={"flag_roles": {"--enforce-eager": "fix", "--async-scheduling": "avoid"}}
    )
    assert card_flags(card) == [
        FlagOut(flag="--enforce-eager", action="set"),
        FlagOut(flag="--async-scheduling", action="avoid"),
    ]


def test_a_flag_quoted_as_a_request_field_is_read_by_its_name(cards: dict[str, Document]) -> None:
    # guidellm#979 quotes the field as the request carried it, ``ignore_eos: true``.
    assert FlagOut(flag="ignore_eos", action="avoid") in card_flags(cards["vllm-project/guidellm#979"])


def test_disabled_ignore_eos_in_sampling_params_is_not_a_stop_symptom(kb: CuratedThreads) -> None:
    text = "SamplingParams(n=1, stop=[], ignore_eos=False, max_tokens=128, min_tokens=0) finish_reason=length"
    assert not [a for a in advise(parse_input(text), [], kb) if a.summary.startswith("Do not send `ignore_eos`")]


def test_boolean_enable_auto_tool_choice_is_not_mistaken_for_a_tool_choice(kb: CuratedThreads) -> None:
    text = "non-default args: {'enable_auto_tool_choice': True, 'tool_call_parser': 'openai'}"
    assert not [a for a in advise(parse_input(text), [], kb) if a.summary.startswith("tool_choice=")]


def test_tool_choice_other_than_auto_is_flagged(cards: dict[str, Document], kb: CuratedThreads) -> None:
    text = 'vLLM gpt-oss-20b: request with tool_choice="required" returns plain prose and no tool_calls'
    advice = advise(parse_input(text), _hits(cards, "vllm-project/vllm#44216"), kb)
    rule = [a for a in advice if a.summary.startswith("tool_choice='required'")]
    assert rule and "vllm-project/vllm#44216" in rule[0].sources


def test_reasoning_leak_on_vllm_points_at_the_endpoint_not_the_parser_flag(kb: CuratedThreads) -> None:
    """vLLM's Chat Completions splits gpt-oss reasoning with or without --reasoning-parser (the release
    packages; vllm-project/vllm#22334): the advice names where raw analysis text comes from and sets no flag,
    with the flag given or not."""
    text = "vLLM gpt-oss: the analysis channel text ends up in content and reasoning_content is null"
    with_flag = "$ vllm serve openai/gpt-oss-20b --reasoning-parser openai_gptoss\n" + text
    for given in (text, with_flag):
        advice = _about(advise(parse_input(given), [], kb), "/v1/completions")
        assert advice and not advice[0].flags, advice
        assert advice[0].sources[0] == REASONING_SECTION
    from indexer.problems import load_problems, problem_by_anchor

    section = problem_by_anchor(load_problems(Path(__file__).resolve().parents[2]), REASONING_SECTION)
    assert section is not None and "vllm-project/vllm#22334" in section.sources


def test_attention_sink_errors_advise_the_triton_backend(cards: dict[str, Document], kb: CuratedThreads) -> None:
    log = "NotImplementedError: FlashInfer backend currently does not support attention sinks"
    advice = advise(parse_input(log), _hits(cards, "vllm-project/vllm#30919"), kb)
    assert _about(advice, "TRITON_ATTN")


def test_card_workarounds_and_flags_of_the_top_hit_are_included(cards: dict[str, Document], kb: CuratedThreads) -> None:
    log = (
        "(Worker_TP1 pid=214) ERROR [multiproc_executor.py:671] RuntimeError: CUDA driver error: invalid device ordinal"
    )
    advice = advise(parse_input(log), _hits(cards, "vllm-project/vllm#26525"), kb)
    from_card = [a for a in advice if a.sources == ["vllm-project/vllm#26525"]]
    assert from_card and "VLLM_ALLREDUCE_USE_SYMM_MEM" in from_card[0].summary


def test_cards_quoting_the_same_error_contribute_their_workaround(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    # The hit is about the same parser error in general; a card with the very same string knows more.
    log = "openai_harmony.HarmonyError: Unexpected token 173781 while expecting start token 200006"
    advice = advise(parse_input(log), _hits(cards, "vllm-project/vllm#22519"), kb)
    assert _about(advice, "RedHatAI/gpt-oss-120b")


def test_lower_ranked_hits_about_something_else_are_ignored(cards: dict[str, Document], kb: CuratedThreads) -> None:
    log = "RuntimeError: CUDA driver error: invalid device ordinal"
    advice = advise(parse_input(log), _hits(cards, "vllm-project/vllm#26525", "vllm-project/vllm#22137"), kb)
    assert not [a for a in advice if "vllm-project/vllm#22137" in a.sources]


@pytest.mark.parametrize(
    "text",
    [
        TOOLS_IN_CONTENT,
        "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006",
        "openai_harmony.HarmonyError: error downloading or loading vocab file",
        "vLLM API server version 0.10.1\nKeyError: 'invalid tool call parser: openai (chose from { x })'",
    ],
)
def test_every_piece_of_advice_cites_a_source(cards: dict[str, Document], text: str, kb: CuratedThreads) -> None:
    hits = _hits(cards, "vllm-project/vllm#22337", "vllm-project/vllm#50690", "vllm-project/recipes#51")
    advice = advise(parse_input(text), hits, kb)
    assert advice
    for item in advice:
        assert item.sources, item.summary
        assert all("#" in source for source in item.sources)


def test_no_gpt_oss_flags_for_another_model_family(kb: CuratedThreads) -> None:
    text = (
        "KeyError: 'invalid reasoning parser: deepseek-r1 (chose from { deepseek_r1, qwen3 })'\n"
        "vllm serve deepseek-ai/DeepSeek-R1-Distill-Llama-70B --reasoning-parser deepseek-r1"
    )
    assert not _about(advise(parse_input(text), [], kb), "openai_gptoss")


def test_advice_reads_the_generations_curated_threads_never_synced_community_text(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    log = "openai_harmony.HarmonyError: Unexpected token 173781 while expecting start token 200006"
    hits = _hits(cards, "vllm-project/vllm#22519")
    helped = _about(advise(parse_input(log), hits, kb), "RedHatAI/gpt-oss-120b")
    assert helped
    source = helped[0].sources[0]
    others = [d for d in cards.values() if d.id != source]
    # A generation without that thread gives no such advice: advice reads the generation, not the bundled file.
    assert not _about(advise(parse_input(log), hits, CuratedThreads(others)), "RedHatAI/gpt-oss-120b")
    # The same text synced from GitHub with no card behind it (community) never becomes advice.
    synced = cards[source].model_copy(
        update={
            "id": "someone/else#1",
            "repo": "someone/else",
            "number": 1,
            "kind": DocKind.ISSUE,
            "curated": False,
            "sources": [SourceName.GITHUB],
            "author_association": "NONE",
        }
    )
    assert trust_level(synced) == "community"
    community = CuratedThreads([*others, synced])
    assert synced.id not in community.by_id
    assert not _about(advise(parse_input(log), hits, community), "RedHatAI/gpt-oss-120b")
    # A curated thread this generation holds (and the bundled file does not) backs advice.
    added = cards[source].model_copy(update={"id": "someone/else#2", "repo": "someone/else", "number": 2})
    advice = advise(parse_input(log), hits, CuratedThreads([*others, added]))
    assert [a for a in advice if a.sources == [added.id] and "RedHatAI/gpt-oss-120b" in a.summary]


def test_curated_threads_do_not_depend_on_the_order_documents_come_in(cards: dict[str, Document]) -> None:
    forward, backward = CuratedThreads(cards.values()), CuratedThreads(reversed(list(cards.values())))
    for pattern in (r"tool-call-parser openai", r"enable-auto-tool-choice", r"ignore_eos", r"TRITON_ATTN"):
        assert forward.sources(pattern) == backward.sources(pattern)
        assert forward.min_version_for(pattern) == backward.min_version_for(pattern)
    assert [d.id for d, _ in forward.actionable] == [d.id for d, _ in backward.actionable]
    # Three threads name 0.10.2 for the openai parser: the merged PR is cited, not the open PR or the issue.
    assert forward.min_version_for(r"tool-call-parser openai") == ("0.10.2", "vllm-project/vllm#22386")


def test_a_source_is_cited_once_per_piece_of_advice(kb: CuratedThreads) -> None:
    # With no hits, the tool-flag advice takes its sources from the generation's curated threads, and the
    # release that brought the parser is cited by the very PR those threads already name.
    advice = advise(parse_input(TOOLS_IN_CONTENT), [], kb)
    tool_flags = [a for a in advice if "--tool-call-parser openai" in a.summary]
    assert tool_flags
    for item in advice:
        assert len(set(item.sources)) == len(item.sources), item.sources


def test_seen_flags_read_underscores_as_dashes_on_vllm_command_lines_only() -> None:
    """vLLM reads --tool_call_parser as --tool-call-parser; SGLang's plain argparse does not, so its flag is
    kept as written (it is no --tool-call-parser setting)."""
    vllm = seen_flags(parse_input("vllm serve openai/gpt-oss-20b --tool_call_parser openai --enable_auto_tool_choice"))
    assert vllm["tool-call-parser"] == "openai" and vllm["enable-auto-tool-choice"] == "true"
    sglang = seen_flags(
        parse_input("python -m sglang.launch_server --model-path openai/gpt-oss-20b --tool_call_parser gpt-oss")
    )
    assert sglang.get("tool_call_parser") == "gpt-oss" and "tool-call-parser" not in sglang


@pytest.mark.parametrize(
    "text",
    [
        # SGLang and lmdeploy take a --tool-call-parser too
        "lmdeploy serve api_server openai/gpt-oss-20b --tool-call-parser gpt-oss: tool calls arrive as text in content",
        "python -m sglang.launch_server --model openai/gpt-oss-20b: the tool calls arrive as text in the content",
        # vLLM's Responses API builds gpt-oss tool calls from the Harmony messages, not with the parser
        "vLLM /v1/responses with gpt-oss-20b and a tools array: the function call never comes back as an item",
        # the SDK's repr of a Responses object
        "vLLM: Response(id='resp_1', object='response', output=[], tools=[FunctionTool(name='acme')], "
        "status='incomplete') and the tool call never comes",
        # a pasted request that sends no tools, whose prompt talks about functions
        '{"model": "gpt-oss-20b", "messages": [{"role": "system", "content": "Call a function only when the data '
        'is missing; tool calls are routed by you."}]}\nvLLM returns 500 with an empty body',
    ],
)
def test_vllms_tool_parser_flags_are_not_advised_where_they_do_not_apply(
    text: str, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    advice = advise(parse_input(text), _hits(cards, "vllm-project/vllm#22337"), kb)
    assert not _parser_advice(advice)
    chat = "vLLM /v1/chat/completions (the Responses API works) with a tools array: tool calls arrive as text"
    advice = advise(parse_input(chat), _hits(cards, "vllm-project/vllm#22337"), kb)
    assert _parser_advice(advice)


def test_an_unmatched_inputs_neighbours_fixes_say_they_are_a_related_issues(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """With no issue known to be this failure, a related thread's own fix is offered as that thread's."""
    parsed = parse_input("acme server crashes on the second request with a strange fault")
    hits = _hits(cards, "vllm-project/vllm#22337")
    matched = [a.summary for a in advise(parsed, hits, kb) if a.summary.startswith("From vllm-project/vllm#22337")]
    assert matched and "related issue" not in matched[0]
    related = [a.summary for a in advise(parsed, hits, kb, matched=False) if a.summary.startswith("From ")]
    assert related == [matched[0].replace(":", ", a related issue not known to be this failure:", 1)]


@pytest.mark.parametrize(
    ("report", "parser_on"),
    [
        ("With stream: true the tool calls are populated properly in the delta chunks.", True),
        ("Non-streaming requests return the tool calls correctly.", True),
        ("The tool calls do not work with streaming either.", False),
        ("Reasoning works fine when streaming, but the tool calls arrive as text.", False),
        ("It fails the same way with streaming on: no tool calls.", False),
    ],
)
def test_tool_calls_that_work_in_one_mode_show_the_parser_on(
    report: str, parser_on: bool, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """vLLM parses tool calls with one --tool-call-parser in both modes: a report that they work in one mode
    shows it on, and advice to turn it on would contradict the report."""
    text = "vLLM serving gpt-oss-20b, chat completions with tools: the call arrives in content. " + report
    parsed = parse_input(text)
    advice = advise(parsed, _hits(cards, "vllm-project/vllm#22337"), kb)
    told = _parser_advice(advice)
    told += [a for a in advice for f in a.flags if f.flag == "--tool-call-parser"]
    assert bool(told) is not parser_on
    assert ("tool-call-parser" in settings_in_effect(parsed)) is parser_on
    assert "tool-call-parser" not in seen_flags(parsed)  # inferred, never shown as seen


def test_the_parser_inferred_from_working_tool_calls_is_vllms_only(kb: CuratedThreads) -> None:
    parsed = parse_input("SGLang serving gpt-oss: with streaming the tool calls work as expected")
    assert "tool-call-parser" not in settings_in_effect(parsed)


def test_only_the_users_sentences_say_that_tool_calls_work() -> None:
    """A log record is not the user's report: its words about streamed tool calls infer nothing."""
    text = (
        "vLLM serving gpt-oss-20b, chat completions with tools: the call arrives in content.\n"
        "(APIServer pid=1) INFO 08-07 12:00:01 [logger.py:41] Received request chatcmpl-1: stream=True, "
        "tool calls work as expected\n"
    )
    assert "tool-call-parser" not in settings_in_effect(parse_input(text))
    said = text.replace("(APIServer pid=1) INFO 08-07 12:00:01 [logger.py:41] Received request chatcmpl-1: ", "With ")
    assert "tool-call-parser" in settings_in_effect(parse_input(said))


LLAMA_GARBAGE = "the model answers with garbage after the first turn"


@pytest.mark.parametrize(
    ("text", "told"),
    [
        ("llama-server -m gpt-oss-20b.gguf --ctx-size 65536 --flash-attn on\n" + LLAMA_GARBAGE, False),
        ("llama-server -m gpt-oss-20b.gguf --ctx-size 65536 --jinja\n" + LLAMA_GARBAGE, True),
        ("I run llama-server with --ctx-size 65536 and " + LLAMA_GARBAGE, True),  # one option: not a command
        ("llama-server: " + LLAMA_GARBAGE, True),
    ],
)
def test_an_option_to_avoid_that_the_shown_command_lacks_is_no_advice(
    text: str, told: bool, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    card = cards["ggml-org/llama.cpp#15091"]
    assert any(f.flag == "--jinja" and f.action == "avoid" for f in card_flags(card))  # the card this is about
    advice = [a for a in advise(parse_input(text), [card], kb) if a.summary.startswith(f"From {card.id}")]
    assert advice  # its other workaround stays
    assert ("--jinja" in advice[0].summary) is told
    assert any(f.flag == "--jinja" for f in advice[0].flags) is told


@pytest.mark.parametrize(
    ("command", "told"),
    [
        ("--attention-backend FLASHINFER --max-model-len 8192", True),
        ("--attention-backend TRITON_ATTN --max-model-len 8192", False),
        ("--max-model-len 8192 --max-num-seqs 4", False),
    ],
)
def test_an_option_to_avoid_counts_with_its_value(
    command: str, told: bool, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """Avoiding ``--attention-backend flashinfer`` is advice only to a command that passes that value; a step
    that names the option with another value (use ``--attention-backend flash_attn``) stays either way."""
    card = cards["Dao-AILab/flash-attention#2336"]
    text = f"$ vllm serve openai/gpt-oss-20b {command}\nthe server crashes in attention on an RTX 4090 (SM89)"
    advice = [a for a in advise(parse_input(text), [card], kb) if a.summary.startswith(f"From {card.id}")]
    assert advice and "--attention-backend flash_attn" in advice[0].summary
    assert ("do not force --attention-backend flashinfer" in advice[0].summary) is told
    assert any(f.action == "avoid" for f in advice[0].flags) is told


def test_an_issues_release_note_leaves_its_steps_as_the_fixes_say_them(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """The note goes before the steps: a step the answer's fixes already state is still dropped from advice."""
    card = cards["vllm-project/vllm#22337"]
    summary = next(a.summary for a in advise(parse_input(f"vllm==0.12.0\n{TOOLS_IN_CONTENT}"), [card], kb)
                   if "#22337" in a.summary)  # fmt: skip
    head, _, steps = summary.partition(": ")
    assert "its fix, was first released in" in head and steps.split(" / ")[0] in [card.fix, *card.workarounds]


def test_a_flag_the_input_sets_as_the_card_says_is_not_repeated(cards: dict[str, Document], kb: CuratedThreads) -> None:
    text = "$ vllm serve openai/gpt-oss-20b --reasoning-parser openai_gptoss --max-model-len 8192\n" + TOOLS_IN_CONTENT
    advice = [
        a for a in advise(parse_input(text), _hits(cards, "vllm-project/vllm#22337"), kb) if "#22337" in a.summary
    ]
    flags = [f.flag for a in advice for f in a.flags]
    assert "--reasoning-parser" not in flags
    assert "--tool-call-parser" in flags  # not set in the command: still advice


@pytest.mark.parametrize(
    ("version", "note"),
    [
        ("Ollama version 0.12.3", "(reported on Ollama 0.11.0, and you run 0.12.3, so a fix released in between"),
        ("Ollama version 0.11.0", None),
        ("", None),
    ],
)
def test_an_issue_reported_on_an_older_release_says_so(
    version: str, note: str | None, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    card = cards["ollama/ollama#11691"]
    assert card.versions == {"ollama": ["0.11.0"]} and not card.fixed_by  # no fix release known
    text = f"{version}\nOllama gpt-oss:20b with a format schema: the content is empty"
    advice = [a.summary for a in advise(parse_input(text), [card], kb) if a.summary.startswith(f"From {card.id}")]
    assert advice
    assert (note in advice[0]) if note else "reported on" not in advice[0]


@pytest.mark.parametrize(
    ("version", "noted"), [("vllm==0.12.0", True), ("vllm==0.11.0", True), ("vllm==0.10.2", False)]
)
def test_an_issue_whose_fix_release_the_input_has_says_so(
    version: str, noted: bool, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    card = cards["vllm-project/vllm#22337"]
    assert card.fixed_by == ["vllm-project/vllm#25514"] and cards[card.fixed_by[0]].released_in == "v0.11.0"
    advice = [
        a.summary for a in advise(parse_input(f"{version}\n{TOOLS_IN_CONTENT}"), [card], kb) if "#22337" in a.summary
    ]
    assert advice
    said = "(vllm-project/vllm#25514, its fix, was first released in v0.11.0, and you run vLLM " in advice[0]
    assert said is noted


@pytest.mark.parametrize(
    ("field", "symptom"),
    [('"reasoning_content": "We need to call the weather tool."', False), ('"reasoning_content": null', True)],
)
def test_a_response_that_holds_its_reasoning_apart_is_no_reasoning_symptom(
    field: str, symptom: bool, kb: CuratedThreads
) -> None:
    text = (
        "vLLM serving gpt-oss-20b returns this for a tools request:\n"
        f'{{"message": {{"content": "{{\\"city\\": \\"Paris\\"}}", {field}, "tool_calls": []}}}}'
    )
    advice = advise(parse_input(text), [], kb)
    assert bool([a for a in advice if REASONING_SECTION in a.sources]) is symptom


@pytest.mark.parametrize(
    ("command", "lead"),
    [
        ("$ vllm serve openai/gpt-oss-120b --max-model-len 8192 --port 8001\n", "Start vLLM with"),
        ("", "Check that vLLM runs with"),
    ],
)
def test_flags_not_seen_in_a_command_are_a_finding_and_without_one_a_check(
    command: str, lead: str, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """With no server command in the input, "not seen" says nothing about the server: the advice asks the
    user to check the flags instead of saying they are missing."""
    advice = _parser_advice(
        advise(parse_input(command + TOOLS_IN_CONTENT), _hits(cards, "vllm-project/vllm#22337"), kb)
    )
    assert len(advice) == 1 and advice[0].summary.startswith(lead)
    assert ("not seen:" in advice[0].summary) is bool(command)
    assert [f.text() for f in advice[0].flags] == ["--tool-call-parser openai", "--enable-auto-tool-choice"]


@pytest.mark.parametrize(("parser", "told"), [("openai_gptoss", False), ("deepseek_r1", True), (None, True)])
def test_a_step_that_sets_only_what_the_command_sets_is_left_out(
    parser: str | None, told: bool, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    card = cards["vllm-project/vllm#22334"]
    step = next(w for w in card.workarounds if "--reasoning-parser openai_gptoss" in w)
    option = f" --reasoning-parser {parser}" if parser else ""
    text = f"$ vllm serve openai/gpt-oss-20b --max-model-len 8192{option}\nthe reasoning shows up in the content field"
    advice = [a.summary for a in advise(parse_input(text), [card], kb) if a.summary.startswith(f"From {card.id}")]
    assert any(step in a for a in advice) is told


@pytest.mark.parametrize(("engine", "told"), [("TensorRT-LLM", False), ("vLLM", True)])
def test_a_threads_fix_for_another_engine_than_the_failures_is_no_advice(
    engine: str, told: bool, cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """A thread about no engine whose fix names one (vLLM's attention backends) advises only that engine's
    users."""
    card = cards["Dao-AILab/flash-attention#2336"]
    text = f"{engine} serving gpt-oss-20b on an RTX 5090: AssertionError: acme sinks are only supported on SM90"
    advice = advise(parse_input(text), [card], kb, threads=ThreadEngines())
    assert any(a.summary.startswith(f"From {card.id}") for a in advice) is told


def test_no_parser_advice_when_the_input_names_no_tools(cards: dict[str, Document], kb: CuratedThreads) -> None:
    """A tool-calling thread among the hits is not enough: the input's own words must be about tool calls."""
    hits = _hits(cards, "vllm-project/vllm#22337")
    assert hits[0].component == "tool-calling"
    dropped = "vLLM serving gpt-oss-20b returns content null with finish_reason stop: the acme answer is dropped"
    assert not _parser_advice(advise(parse_input(dropped), hits, kb))
    assert _parser_advice(advise(parse_input(dropped + " when the request has a tools array"), hits, kb))


def test_a_related_threads_fix_is_offered_only_for_the_inputs_engine_and_client(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """With no thread known to be this failure, another engine's or another application's related thread has
    that engine's or application's fix: it is left out; a thread of the input's engine stays."""
    threads = ThreadEngines.from_documents(list(cards.values()))
    ollama, vllm = cards["ollama/ollama#11691"], cards["vllm-project/vllm#22337"]
    assert threads.engine[ollama.id] == "ollama" and threads.engine[vllm.id] == "vllm"

    def related(text: str, *hits: Document) -> list[str]:
        advice = advise(parse_input(text), list(hits), kb, matched=False, threads=threads)
        return [a.sources[0] for a in advice if "a related issue" in a.summary]

    assert related("acme server: the tool call arrives in content", ollama) == []  # no engine named: the default
    assert related("Ollama gpt-oss:20b: the structured output is empty", ollama) == [ollama.id]
    assert related("vLLM: the tool call arrives in content", vllm) == [vllm.id]
    assert related("Ollama gpt-oss:20b: the tool call arrives in content", vllm) == []
    # A thread in a client's tracker: left out only when the input names another client.
    app = next(d for d in cards.values() if threads.client.get(d.id) == "litellm" and (d.fix or d.workarounds))
    assert related("LiteLLM proxy to gpt-oss: the acme call fails", app) == [app.id]
    assert related("acme call fails with gpt-oss", app) == [app.id]
    assert related("LangChain ChatOpenAI with gpt-oss: the acme call fails", app) == []


def test_a_related_threads_upgrade_is_no_lead_when_the_input_runs_a_later_release(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """A related thread reported on an older release than the input's: its fix and its steps to upgrade (or meant
    for the time until the fix) are left out; its other workarounds stay, with the note."""
    threads = ThreadEngines.from_documents(list(cards.values()))
    card = cards["ollama/ollama#11722"]
    assert card.workarounds == ["reduce the context size", "upgrade Ollama"] and card.versions["ollama"]

    def related(text: str) -> list[str]:
        advice = advise(parse_input(text), [card], kb, matched=False, threads=threads)
        return [a.summary for a in advice if a.sources == [card.id]]

    [old] = related("Ollama 0.11.0 with gpt-oss:20b: the acme runner stops")
    assert old.endswith(": reduce the context size / upgrade Ollama")
    [new] = related("Ollama 0.12.6 with gpt-oss:20b: the acme runner stops")
    assert new.endswith(": reduce the context size") and "you run 0.12.6" in new


def test_a_related_threads_fix_needs_a_word_of_the_inputs_error_line(
    cards: dict[str, Document], kb: CuratedThreads
) -> None:
    """``related`` names the threads that use a distinctive word of the input's error line (the retriever's
    check): a thread close only in the words around the error gives no fix of its own."""
    threads = ThreadEngines.from_documents(list(cards.values()))
    vllm = cards["vllm-project/vllm#22337"]
    parsed = parse_input("vLLM: the tool call arrives in content")

    def related(ids: set[str] | None) -> list[str]:
        advice = advise(parsed, [vllm], kb, matched=False, threads=threads, related=ids)
        return [a.sources[0] for a in advice if "a related issue" in a.summary]

    assert related(None) == [vllm.id] and related({vllm.id}) == [vllm.id]
    assert related(set()) == []
