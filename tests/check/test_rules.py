"""What the action words mean: set, avoid, upgrade and check, under a when condition.

These tests use small hand-made problems so each meaning is pinned on its own; the rules drawn from
the real reference docs are tested in test_check_docs.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from service.check.conditions import CONDITIONS
from service.check.facts import read_setup
from service.check.rules import evaluate, matches


@dataclass(frozen=True)
class A:
    kind: str
    target: str
    value: str | None
    when: tuple[str, ...] = ("always",)
    text: str = "do it"
    sources: tuple[str, ...] = ("vllm-project/vllm#1",)


@dataclass(frozen=True)
class P:
    actions: tuple[A, ...]
    anchor: str = "reference/known-issues.md#x"
    title: str = "X"


TOOLS = P(
    (
        A("set", "--tool-call-parser", "openai", ("tools",)),
        A("set", "--enable-auto-tool-choice", None, ("tools",)),
    )
)


def findings(text: str, *problems: P) -> list[tuple[str, str, str]]:
    return [(f.severity, f.kind, f.target) for f in evaluate(read_setup(text), problems)]


def test_set_is_a_warning_on_a_command_that_cannot_say_if_tools_come() -> None:
    assert findings("vllm serve openai/gpt-oss-20b", TOOLS) == [
        ("warning", "set", "--enable-auto-tool-choice"),
        ("warning", "set", "--tool-call-parser"),
    ]


def test_set_with_the_right_value_is_quiet_and_a_wrong_value_is_not() -> None:
    good = "vllm serve m --tool-call-parser openai --enable-auto-tool-choice"
    assert findings(good, TOOLS) == []
    assert findings("vllm serve m --tool-call-parser hermes --enable-auto-tool-choice", TOOLS) == [
        ("warning", "set", "--tool-call-parser")
    ]


def test_a_finding_says_what_the_setup_has_now() -> None:
    [wrong] = evaluate(read_setup("vllm serve m --tool-call-parser hermes --enable-auto-tool-choice"), [TOOLS])
    assert wrong.found == ("hermes",)
    [missing] = evaluate(read_setup("vllm serve m --enable-auto-tool-choice"), [TOOLS])
    assert missing.found == ()


def test_a_request_with_tools_cannot_show_server_flags() -> None:
    body = json.dumps({"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert findings(body, TOOLS) == []


def test_avoid_fires_on_the_request_and_on_the_benchmark_flag() -> None:
    eos = P((A("avoid", "ignore_eos", "true"),))
    assert findings(json.dumps({"messages": [], "ignore_eos": True}), eos) == [("error", "avoid", "ignore_eos")]
    assert findings(json.dumps({"messages": [], "ignore_eos": False}), eos) == []
    assert findings("vllm bench serve --model m --ignore-eos", eos) == [("error", "avoid", "ignore_eos")]


def test_vllm_bench_serve_on_a_random_dataset_sends_ignore_eos_without_the_flag() -> None:
    eos = P((A("avoid", "ignore_eos", "true"),))
    # vllm#28227 (0.11.1): random and random-mm, the default dataset included, force ignore_eos on.
    assert findings("vllm bench serve --model m", eos) == [("error", "avoid", "ignore_eos")]
    assert findings("vllm bench serve --model m --dataset-name random-mm", eos) == [("error", "avoid", "ignore_eos")]
    assert findings("vllm bench serve --model m --dataset-name sharegpt --dataset-path d.json", eos) == []
    assert findings("vllm==0.10.2\nvllm bench serve --model m --dataset-name random", eos) == []
    setup = read_setup("vllm bench serve --model m")
    assert any("vllm-project/vllm#28227" in note for note in setup.notes)
    assert not any("28227" in note for note in read_setup("vllm bench serve --model m --ignore-eos").notes)
    assert not any("28227" in note for note in read_setup("vllm==0.10.2\nvllm bench serve --model m").notes)


def test_guidellm_and_the_old_benchmark_script_are_read_as_benchmark_clients() -> None:
    bench = P((*TOOLS.actions, A("avoid", "--ignore-eos", None, ("benchmark",))))
    guidellm = read_setup("guidellm benchmark --target http://h:8000 --model m")
    assert guidellm.program == "guidellm" and any("vllm-project/guidellm#982" in n for n in guidellm.notes)
    assert findings("guidellm benchmark --target http://h:8000 --model m", bench) == []
    eos = P((A("avoid", "ignore_eos", "true"),))
    sized = "guidellm run --backend kind=openai_http,model=m --data kind=synthetic_text,output_tokens=128"
    assert findings(sized, eos) == [("error", "avoid", "ignore_eos")]
    off = sized.replace("model=m", "model=m,extras.body.ignore_eos=false")
    assert findings(off, eos) == []
    as_json = """guidellm run --backend '{"extras":{"body":{"ignore_eos":false}}}' --data output_tokens=64"""
    assert findings(as_json, eos) == []
    script = "python benchmarks/benchmark_serving.py --model m --ignore-eos"
    assert read_setup(script).program == "benchmark_serving.py"
    assert findings(script, bench) == [("error", "avoid", "--ignore-eos")]


def test_a_benchmark_command_is_not_judged_on_server_flags() -> None:
    bench = P((*TOOLS.actions, A("avoid", "--ignore-eos", None, ("benchmark",))))
    assert findings("vllm bench serve --model m --dataset-name sharegpt", bench) == []
    assert findings("vllm bench serve --model m --dataset-name sharegpt --ignore-eos", bench) == [
        ("error", "avoid", "--ignore-eos")
    ]
    assert findings("vllm serve m", bench) == [
        ("warning", "set", "--enable-auto-tool-choice"),
        ("warning", "set", "--tool-call-parser"),
    ]


def test_avoid_with_a_numeric_bound() -> None:
    interval = P((A("avoid", "--stream-interval", ">1"),))
    assert findings("vllm serve m --stream-interval 4", interval) == [("error", "avoid", "--stream-interval")]
    assert findings("vllm serve m --stream-interval 1", interval) == []


def test_upgrade_needs_a_stated_older_version() -> None:
    up = P((A("upgrade", "vllm", "0.10.2", ("tools",)),))
    old = "vLLM API server version 0.10.1\nnon-default args: {'tool_call_parser': 'openai'}"
    new = "vLLM API server version 0.11.0\nnon-default args: {'tool_call_parser': 'openai'}"
    assert findings(old, up) == [("warning", "upgrade", "vllm")]
    [finding] = evaluate(read_setup(old), [up])
    assert finding.applies_to == "vllm < 0.10.2"
    assert findings(new, up) == []
    assert findings("non-default args: {'tool_call_parser': 'openai'}", up) == []  # no version: nothing claimed


def test_offline_condition_reads_the_environment() -> None:
    vocab = P((A("set", "TIKTOKEN_ENCODINGS_BASE", None, ("offline",)),))
    assert findings("HF_HUB_OFFLINE=1 vllm serve m", vocab) == [("error", "set", "TIKTOKEN_ENCODINGS_BASE")]
    assert findings("HF_HUB_OFFLINE=1 TIKTOKEN_ENCODINGS_BASE=/v vllm serve m", vocab) == []
    assert findings("vllm serve m", vocab) == []  # an online host is not told to provision the vocab


def test_every_condition_of_a_row_has_to_hold() -> None:
    both = P((A("avoid", "stream", "true", ("responses-api", "tool-choice-required")),))
    responses = {"input": "hi", "stream": True, "tool_choice": "required"}
    assert findings(json.dumps(responses), both) == [("error", "avoid", "stream")]
    assert findings(json.dumps({**responses, "tool_choice": "auto"}), both) == []
    assert findings(json.dumps({"messages": [], "stream": True, "tool_choice": "required"}), both) == []


def test_an_undecided_condition_warns_only_when_it_is_one_to_prepare_for() -> None:
    tools_and_multi_gpu = P((A("set", "--enable-expert-parallel", None, ("tools", "multi-gpu")),))
    assert findings("vllm serve m --tensor-parallel-size 2", tools_and_multi_gpu) == [
        ("warning", "set", "--enable-expert-parallel")
    ]
    assert findings("vllm serve m", tools_and_multi_gpu) == []  # one GPU: the rule does not hold
    offline_checkpoint = P((A("set", "--tokenizer", None, ("custom-checkpoint",)),))
    assert findings("vllm serve ./my-finetune", offline_checkpoint) == [("error", "set", "--tokenizer")]
    assert findings("vllm serve openai/gpt-oss-20b", offline_checkpoint) == []


def test_check_generation_config_stop_tokens() -> None:
    stops = P((A("check", "generation_config.json", "200002,200012"),))
    assert findings(json.dumps({"eos_token_id": [200002, 199999]}), stops) == [
        ("error", "check", "generation_config.json")
    ]
    assert findings(json.dumps({"eos_token_id": [200002, 199999, 200012]}), stops) == []


def test_workarounds_are_never_checked_and_duplicates_merge_their_sources() -> None:
    twice = [
        P((A("avoid", "ignore_eos", "true", sources=("a/b#1",)),), anchor="reference/k.md#one"),
        P((A("avoid", "ignore_eos", "true", sources=("a/b#2",)), A("workaround", "ignore_eos", "false")),
          anchor="reference/k.md#two"),
    ]
    [finding] = evaluate(read_setup(json.dumps({"messages": [], "ignore_eos": True})), twice)
    assert finding.sources == ("reference/k.md#one", "a/b#1", "reference/k.md#two", "a/b#2")


@pytest.mark.parametrize(
    ("actual", "expected", "result"),
    [("openai", "openai", True), ("OpenAI", "openai", True), ("hermes", "openai", False), ("4", ">1", True),
     ("1", ">1", False), ("x", None, True), ("true", "true|1", True), ("0", "!=0", False), ("a", "!=b", True),
     ("1", "true", True), ("0", "true", False), ("False", "false", True), ("2", ">1", True)],
)
def test_matches(actual: str, expected: str | None, result: bool) -> None:
    assert matches(actual, expected) is result


def test_every_condition_answers_for_every_kind_of_input() -> None:
    for text in ("vllm serve m", "non-default args: {'a': 1}", '{"messages": []}', '{"eos_token_id": 1}'):
        setup = read_setup(text)
        for name, fn in CONDITIONS.items():
            assert fn(setup) in (True, False, None), name


def test_a_dotted_target_reads_through_lists() -> None:
    no_namespace = P((A("avoid", "tools.type", "namespace"),))
    body = {"input": "x", "tools": [{"type": "function"}, {"type": "namespace"}]}
    assert findings(json.dumps(body), no_namespace) == [("error", "avoid", "tools.type")]
    assert findings(json.dumps({"input": "x", "tools": [{"type": "function"}]}), no_namespace) == []
    assert findings(json.dumps({"input": "x"}), no_namespace) == []
