"""The bundled KB snapshot: cards.jsonl loaded through the validated Card model."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from indexer.documents import Card, DocKind, Document, ReleaseSource, SourceName
from indexer.errors import SnapshotError
from indexer.meta import Cursor
from indexer.signatures import normalize_signature

if TYPE_CHECKING:
    from indexer.sources.base import Batch, SourceReader, SourceRun

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
CARDS_PATH = DATA_DIR / "cards.jsonl"
SNAPSHOT_META_PATH = DATA_DIR / "SNAPSHOT.json"


def load_cards(path: Path = CARDS_PATH) -> list[Card]:
    """Read and validate every card; a malformed line raises SnapshotError naming file and line."""
    cards: list[Card] = []
    seen: dict[str, int] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SnapshotError(f"cannot read KB snapshot {path}: {exc}") from exc
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            card = Card.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SnapshotError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "card"
            raise SnapshotError(f"{path}:{lineno}: invalid card field {where!r}: {first['msg']}") from exc
        if card.id in seen:
            raise SnapshotError(f"{path}:{lineno}: duplicate card id {card.id} (first on line {seen[card.id]})")
        seen[card.id] = lineno
        cards.append(card)
    if not cards:
        raise SnapshotError(f"{path}: the KB snapshot holds no cards")
    return cards


@lru_cache(maxsize=1)
def bundled_cards() -> tuple[Card, ...]:
    """The bundled snapshot, parsed once per process."""
    return tuple(load_cards())


def snapshot_meta() -> dict[str, Any]:
    """Snapshot date and provenance of the bundled KB."""
    return json.loads(SNAPSHOT_META_PATH.read_text(encoding="utf-8"))


def card_text(card: Card) -> str:
    """The searchable text of a card: title, error strings, our summary/cause/fix, flags."""
    parts = [card.title, *card.error_signatures]
    parts += [p for p in (card.summary, card.cause, card.fix) if p]
    parts += card.workarounds
    if card.flags:
        parts.append("Flags: " + ", ".join(card.flags))
    return "\n".join(parts)


def fixed_by_index(cards: tuple[Card, ...] | list[Card]) -> dict[str, list[str]]:
    """Map each thread id to the PRs whose card says they fix it."""
    index: dict[str, list[str]] = {}
    for card in cards:
        for target in card.fixes:
            index.setdefault(target, []).append(card.id)
    return index


SHARED_FIELDS: frozenset[str] = frozenset(Card.model_fields) & frozenset(Document.model_fields) - {"kind", "merged_at"}
"""The curated fields a card and its Document have in common, copied as they are (a Document's ``kind`` is
``card``; its ``merged_at`` is a time where the card has a date)."""


def card_to_document(card: Card, fixed_by: list[str] | None = None) -> Document:
    """Turn a card into the shared Document model: the shared fields as they are, plus what is derived."""
    return Document.model_validate(
        card.model_dump(include=set(SHARED_FIELDS))
        | {
            "kind": DocKind.CARD,
            "text": card_text(card),
            "normalized_signatures": [normalize_signature(s) for s in card.error_signatures],
            "fixed_by": sorted(set(fixed_by or [])),
            "merged_at": datetime.combine(card.merged_at, time(), tzinfo=UTC) if card.merged_at else None,
            "release_source": ReleaseSource.CARD if card.released_in else None,
            "curated": True,
            "sources": [SourceName.SNAPSHOT],
        }
    )


def card_documents(cards: tuple[Card, ...] | list[Card] | None = None) -> list[Document]:
    """Every card as a Document, with ``fixed_by`` filled from the PR cards that fix it."""
    cards = bundled_cards() if cards is None else cards
    fixed = fixed_by_index(cards)
    return [card_to_document(card, fixed.get(card.id)) for card in cards]


def with_live_threads(store: SourceReader, cards: Sequence[Document]) -> tuple[list[Document], int]:
    """Cards to write, and how many are held back: a card whose thread the GitHub sync already holds
    merges into the live document."""
    existing = store.get_many([c.id for c in cards])
    live = {i: d for i, d in existing.items() if d.from_github}
    if not live:
        return list(cards), 0
    try:
        from indexer.sources.github_threads import merge_live
    except ImportError:  # no GitHub support installed: keep what the sync stored
        kept = [c for c in cards if c.id not in live]
        return kept, len(cards) - len(kept)
    return [merge_live(c, live[c.id]) if c.id in live else c for c in cards], 0


class CardSource:
    """The bundled KB snapshot (``cards.jsonl``): every card, each run, merged into its live thread if synced."""

    name = SourceName.SNAPSHOT.value
    complete = True
    network = False

    def fetch(self, run: SourceRun, cursor: Cursor) -> Iterator[Batch]:
        from indexer.sources.base import Batch

        docs, held = with_live_threads(run.store, card_documents())
        run.skipped += held
        yield Batch(docs)


SOURCE = CardSource()
