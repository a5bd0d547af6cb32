"""Vocab provisioning, decoding and reproductions against the real openai-harmony (no mocks)."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from service.analysis import advice
from service.analysis.harmony import (
    VOCAB_FILE,
    VOCAB_SHA256,
    HarmonyAnalyzer,
    build_vocab_bytes,
    ensure_vocab,
)
from service.analysis.input import parse_input
from service.config import Settings
from service.errors import VocabError


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def vocab_bytes() -> bytes:
    return build_vocab_bytes()


def test_build_vocab_reproduces_the_file_openai_harmony_expects(vocab_bytes: bytes) -> None:
    assert hashlib.sha256(vocab_bytes).hexdigest() == VOCAB_SHA256
    first = vocab_bytes.split(b"\n", 1)[0]
    assert first.endswith(b" 0")


def test_ensure_vocab_writes_verified_file_atomically(tmp_path: Path, vocab_bytes: bytes) -> None:
    vocab_dir = ensure_vocab(tmp_path / "vocab", source=lambda: vocab_bytes)
    assert _sha256(vocab_dir / VOCAB_FILE) == VOCAB_SHA256
    assert sorted(p.name for p in vocab_dir.iterdir()) == [VOCAB_FILE]  # no temp file left behind


def test_ensure_vocab_reuses_a_verified_file_without_rebuilding(tmp_path: Path, vocab_bytes: bytes) -> None:
    vocab_dir = ensure_vocab(tmp_path / "vocab", source=lambda: vocab_bytes)
    before = (vocab_dir / VOCAB_FILE).stat().st_mtime_ns

    def must_not_build() -> bytes:
        raise AssertionError("a verified vocab file must be reused, not rebuilt")

    assert ensure_vocab(tmp_path / "vocab", source=must_not_build) == vocab_dir
    assert (vocab_dir / VOCAB_FILE).stat().st_mtime_ns == before


def test_ensure_vocab_reuses_a_file_verified_by_another_process(tmp_path: Path, vocab_bytes: bytes) -> None:
    # A file this process never wrote is hashed once, then trusted.
    vocab_dir = tmp_path / "vocab"
    vocab_dir.mkdir()
    (vocab_dir / VOCAB_FILE).write_bytes(vocab_bytes)

    def must_not_build() -> bytes:
        raise AssertionError("an existing file with the right hash must be reused")

    assert ensure_vocab(vocab_dir, source=must_not_build) == vocab_dir


def test_ensure_vocab_rebuilds_a_corrupted_file(tmp_path: Path, vocab_bytes: bytes) -> None:
    vocab_dir = ensure_vocab(tmp_path / "vocab", source=lambda: vocab_bytes)
    target = vocab_dir / VOCAB_FILE
    corrupted = bytearray(target.read_bytes())
    corrupted[10] ^= 0x01
    target.write_bytes(bytes(corrupted))
    os.utime(target, ns=(1, 1))  # a different mtime, as any real modification would leave
    assert _sha256(target) != VOCAB_SHA256

    ensure_vocab(vocab_dir, source=lambda: vocab_bytes)
    assert _sha256(target) == VOCAB_SHA256


def test_ensure_vocab_refuses_content_that_fails_the_hash(tmp_path: Path, vocab_bytes: bytes) -> None:
    # One rank's bytes changed: a vocabulary that looks right but is not the one openai-harmony needs.
    lines = vocab_bytes.split(b"\n")
    lines[1000] = b"QUJD " + lines[1000].split(b" ")[1]
    bad = b"\n".join(lines)
    vocab_dir = tmp_path / "vocab"

    with pytest.raises(VocabError, match="sha256") as info:
        ensure_vocab(vocab_dir, source=lambda: bad)
    assert VOCAB_SHA256 in info.value.detail
    assert info.value.status == 503
    assert not (vocab_dir / VOCAB_FILE).exists()
    assert list(vocab_dir.iterdir()) == []


def test_analyzer_loads_offline_and_leaves_the_environment_as_found(
    harmony_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIKTOKEN_ENCODINGS_BASE", raising=False)
    analyzer = HarmonyAnalyzer(Settings(data_dir=harmony_data_dir))
    assert analyzer.decode([200006])[0].text == "<|start|>"
    assert "TIKTOKEN_ENCODINGS_BASE" not in os.environ


def test_decode_names_harmony_and_text_tokens(analyzer: HarmonyAnalyzer) -> None:
    tokens = {t.id: t for t in analyzer.decode([200002, 200006, 200007, 200012, 200005, 12606, 815, 173781])}
    assert (tokens[200002].text, tokens[200002].special) == ("<|return|>", True)
    assert (tokens[200006].text, tokens[200006].special) == ("<|start|>", True)
    assert (tokens[200007].text, tokens[200012].text, tokens[200005].text) == (
        "<|end|>",
        "<|call|>",
        "<|channel|>",
    )
    assert (tokens[12606].text, tokens[12606].special) == ("comment", False)
    assert (tokens[815].text, tokens[815].special) == ("ary", False)
    assert tokens[173781].text == "assistant"


def test_decode_out_of_range_ids_without_crashing(analyzer: HarmonyAnalyzer) -> None:
    infos = analyzer.decode([-1, 10**9, 2**70, 201_089])
    assert [(t.text, t.special) for t in infos] == [(None, False)] * 4


def test_advice_stop_tokens_are_the_real_encodings(analyzer: HarmonyAnalyzer) -> None:
    real = set(analyzer.encoding.stop_tokens_for_assistant_actions())
    assert real == {advice.RETURN_TOKEN, advice.CALL_TOKEN}


def test_reproduces_return_token_error_with_the_parsers_exact_text(analyzer: HarmonyAnalyzer) -> None:
    log = (
        "(APIServer pid=1) ERROR 06-23 09:42:17 [serving.py:932] openai_harmony.HarmonyError: "
        "Unexpected token 200002 while expecting start token 200006"
    )
    repro = analyzer.reproduce(parse_input(log))
    assert repro is not None
    assert repro.error == "Unexpected token 200002 while expecting start token 200006"
    assert repro.matches_input
    assert [(t.id, t.text) for t in repro.tokens] == [(200002, "<|return|>")]
    assert "stop token" in repro.explanation


def test_reproduces_error_carried_by_a_client_exception(analyzer: HarmonyAnalyzer) -> None:
    text = (
        "openai.APIStatusError: Error code: 503 - {'error': {'message': 'Unexpected token 200007 while "
        "expecting start token 200006', 'type': 'ServiceUnavailableError', 'param': None, 'code': 503}}"
    )
    repro = analyzer.reproduce(parse_input(text))
    assert repro is not None and repro.matches_input
    assert repro.tokens[0].text == "<|end|>"


def test_truncated_error_counts_as_a_match_when_the_parser_text_extends_it(analyzer: HarmonyAnalyzer) -> None:
    repro = analyzer.reproduce(parse_input("HarmonyError: Unexpected token 200003 while expect"))
    assert repro is not None
    assert repro.error == "Unexpected token 200003 while expecting start token 200006"
    assert repro.matches_input


def test_a_different_expected_token_is_reported_as_not_matching(analyzer: HarmonyAnalyzer) -> None:
    repro = analyzer.reproduce(
        parse_input("HarmonyError: Unexpected token 200002 while expecting start token 200005")
    )
    assert repro is not None
    assert repro.error == "Unexpected token 200002 while expecting start token 200006"
    assert not repro.matches_input


def test_plain_text_token_is_explained_as_text_where_start_was_expected(analyzer: HarmonyAnalyzer) -> None:
    repro = analyzer.reproduce(
        parse_input("HarmonyError: Unexpected token 12606 while expecting start token 200006")
    )
    assert repro is not None and repro.matches_input
    assert repro.tokens[0].text == "comment" and not repro.tokens[0].special
    assert "ordinary text" in repro.explanation


@pytest.mark.parametrize(
    "tool", ["functions.search_docs", "functions.web-browsing", "functions.kb_lookup_v2"]
)
def test_reproduces_header_leftover_quoted_by_the_error(analyzer: HarmonyAnalyzer, tool: str) -> None:
    error = f'openai_harmony.HarmonyError: unexpected tokens remaining in message header: Some("to={tool}")'
    repro = analyzer.reproduce(parse_input(error))
    assert repro is not None
    assert repro.error == f'unexpected tokens remaining in message header: Some("to={tool}")'
    assert repro.matches_input
    texts = [t.text for t in repro.tokens]
    assert texts[0] == "<|start|>" and "<|channel|>" in texts and "<|message|>" in texts


def test_header_leftover_that_is_not_a_recipient(analyzer: HarmonyAnalyzer) -> None:
    repro = analyzer.reproduce(
        parse_input('HarmonyError: unexpected tokens remaining in message header: Some("<|constrain|>json")')
    )
    assert repro is not None
    assert repro.error == 'unexpected tokens remaining in message header: Some("<|constrain|>json")'
    assert repro.matches_input


def test_header_error_without_leftover_is_reproduced_as_a_prefix(analyzer: HarmonyAnalyzer) -> None:
    repro = analyzer.reproduce(parse_input("HarmonyError: unexpected tokens remaining in message header"))
    assert repro is not None and repro.error is not None
    assert repro.error.startswith("unexpected tokens remaining in message header: Some(")
    assert repro.matches_input
    assert "does not show what was left in the header" in repro.explanation, "a guessed header says it is one"


def test_a_shown_leftover_is_not_called_a_guess(analyzer: HarmonyAnalyzer) -> None:
    error = 'HarmonyError: unexpected tokens remaining in message header: Some("to=functions.acme")'
    repro = analyzer.reproduce(parse_input(error))
    assert repro is not None and repro.matches_input and "does not show" not in repro.explanation


def test_a_list_of_leftover_parts_is_the_text_they_split(analyzer: HarmonyAnalyzer) -> None:
    """openai-harmony up to 0.0.4 printed the leftover's whitespace-separated parts as a list."""
    text = 'HarmonyError unexpected tokens remaining in message header: ["acme_id=[1,", "2,", "3]", "more"]'
    repro = analyzer.reproduce(parse_input(text))
    assert repro is not None and repro.matches_input
    assert repro.error == 'unexpected tokens remaining in message header: Some("acme_id=[1, 2, 3] more")'
    assert "does not show" not in repro.explanation
    cut = 'HarmonyError unexpected tokens remaining in message header: ["acme_id=[1,", "2,", "3]"'
    repro = analyzer.reproduce(parse_input(cut))
    assert repro is not None and repro.matches_input, "a list cut off in the paste matches as a prefix"
    prefix = 'unexpected tokens remaining in message header: Some("acme'
    assert repro.error is not None and repro.error.startswith(prefix)


def test_list_style_leftover_is_compared_by_content(analyzer: HarmonyAnalyzer) -> None:
    text = 'Error in request: unexpected tokens remaining in message header: ["to=functions.get_weather"]'
    repro = analyzer.reproduce(parse_input(text))
    assert repro is not None and repro.matches_input
    assert repro.error == 'unexpected tokens remaining in message header: Some("to=functions.get_weather")'


@pytest.mark.parametrize(
    "message",
    [
        "channel marker present but no channel value found in header",
        "Unexpected EOS while waiting for message header to complete",
        "Unknown role: narrator",
        "message header did not contain a role",
    ],
)
def test_other_parser_errors_are_reproduced(analyzer: HarmonyAnalyzer, message: str) -> None:
    repro = analyzer.reproduce(parse_input(f"openai_harmony.HarmonyError: {message}"))
    assert repro is not None
    assert repro.error == message
    assert repro.matches_input


def test_a_valid_role_named_as_unknown_is_not_reproduced(analyzer: HarmonyAnalyzer) -> None:
    # "tool" is a Harmony role: the parser accepts it, so the error must come from elsewhere.
    repro = analyzer.reproduce(parse_input("ValueError: Unknown role: tool"))
    assert repro is not None
    assert repro.error is None and not repro.matches_input


def test_no_reproduction_for_errors_that_name_no_parser_failure(analyzer: HarmonyAnalyzer) -> None:
    assert analyzer.reproduce(parse_input("ValueError: Unknown recipient: <|constrain|>functions.x")) is None
    assert analyzer.reproduce(parse_input("RuntimeError: CUDA driver error: invalid device ordinal")) is None


def test_analyzer_is_safe_to_share_between_threads(analyzer: HarmonyAnalyzer) -> None:
    inputs = [
        parse_input(f"HarmonyError: Unexpected token {t} while expecting start token 200006")
        for t in (200002, 200007, 12606, 200003) * 8
    ]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(analyzer.reproduce, inputs))
    assert all(r is not None and r.matches_input for r in results)
    for repro, parsed in zip(results, inputs, strict=True):
        assert repro is not None
        assert f"Unexpected token {repro.tokens[0].id} " in parsed.text
