"""The cases of the pages the project started from (../shared/seeds) stay answerable: thread in the top 5, and a fix.

The queries are ours: each seed's error string (a fact) with a line of context in our words, the way a user
would paste it. Each case names the threads that answer it and what a matching fix must say.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from service.config import Settings
from service.engine import LookupEngine
from service.models import LookupResponse

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class SeedCase:
    seed: str
    query: str
    threads: frozenset[str]
    problem: str
    """A fragment of the anchor of the reference section that must lead the diagnosis."""
    action: str
    """A word that a diagnosis action (its target, value or text) must carry: the seed's fix."""


CASES = [
    SeedCase(
        "000 token 12606",
        "openai_harmony.HarmonyError: Unexpected token 12606 while expecting start token 200006",
        frozenset({"openai/harmony#60", "vllm-project/vllm#22519", "vllm-project/vllm#22515"}),
        "unexpected-token-12606",
        "generation_config.json",
    ),
    SeedCase(
        "000 header",
        "openai_harmony.HarmonyError: unexpected tokens remaining in message header",
        frozenset({"vllm-project/vllm#23567", "openai/harmony#38", "openai/harmony#82"}),
        "unexpected-tokens-remaining-in-message-header",
        "retry",
    ),
    SeedCase(
        "001 benchmark 200002",
        "running vllm bench serve against gpt-oss-120b\n"
        "ERROR [serving_chat.py:1305] Error in chat completion stream generator.\n"
        "    harmony_parser.process(token_id)\n"
        "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006",
        frozenset({"vllm-project/vllm#46464", "vllm-project/vllm#50690", "vllm-project/guidellm#979"}),
        "unexpected-token-200002",
        "ignore-eos",
    ),
    SeedCase(
        "002 assistantary",
        "POST /v1/responses stream=true with a tool server, second turn:\n"
        "openai_harmony.HarmonyError: Unknown role: assistantary",
        frozenset({"vllm-project/vllm#29044", "vllm-project/vllm#28635"}),
        "unknown-role",
        "stream",
    ),
    SeedCase(
        "003 vllm-mlx tool history",
        "vllm-mlx serving gpt-oss: after the first tool call the history shows [Calling tool: get_weather(...)] "
        "as plain text and the model stops calling tools",
        frozenset({"waybarrios/vllm-mlx#581", "waybarrios/vllm-mlx#568"}),
        "vllm-mlx",
        "vllm-mlx",
    ),
    SeedCase(
        "004 streaming tokens",
        "gpt-oss-120b on vLLM, Responses API with stream=True: the joined response.output_text.delta text is "
        "not equal to the final output_text; tokens are missing",
        frozenset({"vllm-project/vllm#30437", "vllm-project/vllm#28635"}),
        "missing-or-scrambled-tokens",
        "30437",
    ),
]


@pytest.fixture(scope="module")
def engine(built_index: Settings) -> Iterator[LookupEngine]:
    engine = LookupEngine.open(built_index, build_if_empty=False)
    yield engine
    engine.close()


def _action_words(answer: LookupResponse) -> str:
    assert answer.diagnosis is not None
    return " ".join(f"{a.target or ''} {a.value or ''} {a.text}" for a in answer.diagnosis.actions).lower()


@pytest.mark.parametrize("case", CASES, ids=[c.seed for c in CASES])
def test_seed_case_brings_back_its_thread_and_fix(engine: LookupEngine, case: SeedCase) -> None:
    answer = engine.lookup(case.query, top_k=5)
    ids = [issue.id for issue in answer.issues]
    assert case.threads & set(ids), ids
    assert answer.diagnosis is not None, ids
    assert case.problem in answer.diagnosis.problem, answer.diagnosis.problem
    assert case.action.lower() in _action_words(answer), answer.diagnosis.actions
    assert all(action.sources for action in answer.diagnosis.actions)
