"""Parallel segments of a translated benchmark: every utterance of an item in the source language
paired with the same utterance of the item's translation in each other language.

An item's rows share ``item_id`` and differ in ``language`` (xDial-Eval: one row per language). Its
utterances are the context turns followed by the response (turn level) or the dialogue's turns
(dialogue level), paired by position. A translation whose utterance count differs from the source's
cannot be paired reliably: the item is flagged ``segment_count_mismatch`` for that language and none of
its utterances is scored. A back-translation column (``bt_column``) holds, per translated row, the
back-translations of its utterances in the same order (a list, or a JSON list string; a plain string
for a one-utterance row); a malformed cell is an error naming the config, row and column.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.qa.records import Misaligned


@dataclass
class Segment:
    config: str
    item_id: str
    position: int
    language: str
    source: str
    target: str
    row_id: str
    back_translation: str | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.config, self.item_id, self.position)


def _turn_texts(turns: object) -> list[str]:
    if not isinstance(turns, Sequence):
        raise ValueError(f"expected a list of turns, got {type(turns).__name__}")
    return [str((t.get("text") if isinstance(t, Mapping) else None) or "") for t in turns]


def row_texts(row: Mapping[str, object]) -> list[str]:
    """The utterances of a common-schema row, in order."""
    if row.get("turns") is not None and row.get("level") == "dialogue":
        return _turn_texts(row["turns"])
    ctx = _turn_texts(row.get("context") or [])
    return [*ctx, str(row.get("response") or "")]


def _back_translations(row: Mapping[str, object], column: str, config: str, n: int) -> list[str]:
    cell = row.get(column)
    where = f"config {config!r}, row {row.get('id')!r}, column {column!r}"
    if isinstance(cell, str):
        stripped = cell.strip()
        if stripped.startswith("["):
            try:
                cell = json.loads(stripped)
            except ValueError as e:
                raise ValueError(
                    f"{where}: not a JSON list of back-translations ({e}); give one string per utterance"
                ) from None
        else:
            cell = [cell]
    if not isinstance(cell, Sequence) or isinstance(cell, str) or not all(isinstance(x, str) for x in cell):
        raise ValueError(
            f"{where}: expected a list of {n} back-translated utterance(s) (strings), got {type(cell).__name__}"
        )
    if len(cell) != n:
        raise ValueError(
            f"{where}: {len(cell)} back-translation(s) for {n} utterance(s); list one per utterance "
            "(context turns, then the response; or the dialogue's turns)"
        )
    return list(cell)


def parallel_segments(
    rows: Sequence[Mapping[str, object]],
    config: str,
    source_language: str = "en",
    languages: Sequence[str] | None = None,
    bt_column: str | None = None,
) -> tuple[list[Segment], list[Misaligned]]:
    """(segments, misaligned rows ``{row_id, item_id, language, reason}``) of one config."""
    by_item: dict[str, dict[str, Mapping[str, object]]] = {}
    for r in rows:
        by_item.setdefault(str(r.get("item_id")), {})[str(r.get("language"))] = r
    segments: list[Segment] = []
    misaligned: list[Misaligned] = []
    for item_id, per_lang in by_item.items():
        src = per_lang.get(source_language)
        if src is None:
            continue
        src_texts = row_texts(src)
        for lang, row in per_lang.items():
            if lang == source_language or (languages and lang not in languages):
                continue
            texts = row_texts(row)
            if len(texts) != len(src_texts):
                misaligned.append(
                    {
                        "row_id": row.get("id"),
                        "item_id": item_id,
                        "language": lang,
                        "reason": f"segment_count_mismatch ({len(texts)} vs {len(src_texts)} in {source_language})",
                    }
                )
                continue
            bts = _back_translations(row, bt_column, config, len(texts)) if bt_column else [None] * len(texts)
            for k, (s, t, b) in enumerate(zip(src_texts, texts, bts, strict=True)):
                segments.append(Segment(config, item_id, k, lang, s, t, str(row.get("id")), b))
    return segments, misaligned


def sample_segments(segments: Sequence[Segment], n: int, seed: int = 0) -> list[Segment]:
    """``n`` source utterances per config, drawn at random (seeded) among those with a non-empty source
    text, each kept in every language (xDial-Eval §3.2: 100 utterances per translated dataset); ``n <=
    0`` keeps everything."""
    if n <= 0:
        return list(segments)
    by_config: dict[str, set[tuple[str, str, int]]] = {}
    for s in segments:
        if s.source.strip():
            by_config.setdefault(s.config, set()).add(s.key)
    keep: set[tuple[str, str, int]] = set()
    for config, keys in by_config.items():
        uniq = sorted(keys, key=lambda k: (k[1], k[2]))
        keep |= set(random.Random(f"{seed}:{config}").sample(uniq, min(n, len(uniq))))
    return [s for s in segments if s.key in keep]
