"""Utterance lists of the generic importer (a turn's ``context``, a dialogue's ``turns``): a list,
a JSON list in a cell or separated text, with roles alternating or read from speaker prefixes /
speaker keys (``TextSpec``, documented in ``mappings/README.md``)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from dataset_builders.importer.mapping import TextSpec


def parse_messages(spec: TextSpec, t: Any, rowno: int, row: dict, level: str) -> list[dict[str, str]]:
    items, col, kind = row.get(spec.column), spec.column, "dialogue" if level == "dialogue" else "context"
    fmt = spec.format
    if isinstance(items, str) and (fmt == "json" or (fmt == "auto" and items.lstrip()[:1] == "[")):
        try:
            items = json.loads(items)
        except json.JSONDecodeError as e:
            if fmt == "json":
                raise t.error(rowno, col, f"invalid JSON list: {e.msg}") from None
    if isinstance(items, str) and fmt != "list":
        items = (
            items.replace("\r\n", "\n").replace("\r", "\n").strip().split(spec.separator)
            if items.strip()
            else []
        )
    items = [] if items is None or (isinstance(items, float) and math.isnan(items)) else items
    if not isinstance(items, list):
        raise t.error(rowno, col, f"expected a list of utterances, got {type(items).__name__}")
    if not items and level == "dialogue":
        raise t.error(rowno, col, "empty dialogue (no utterances)")
    speakers, texts = [], []
    for k, item in enumerate(items, start=1):
        spk = None
        if isinstance(item, dict):
            spk = (
                _cell_text(_key(item, spec.speaker_key, SPEAKER_KEYS, t, rowno, col, k, "speaker_key"))
                or None
            )
            item = _key(item, spec.text_key, TEXT_KEYS, t, rowno, col, k, "text_key")
        if not isinstance(item, str) or not item.strip():
            raise t.error(rowno, col, f"empty utterance {k} of {len(items)} in the {kind}")
        speakers.append(spk)
        texts.append(item.strip())
    n, mode = len(texts), spec.roles or ("prefixed" if any(speakers) else None)
    if (mode or ("alternate_from_end" if level == "turn" else "")) == "alternate_from_end":
        roles = ["user" if (n - i) % 2 == 1 else "assistant" for i in range(n)]
    elif mode != "prefixed":
        roles = ["user" if i % 2 == 0 else "assistant" for i in range(n)]
    else:
        roles = []
        for k, spk in enumerate(speakers):
            if spk is None and (m := re.match(r"\s*([^:\n]{1,40}?)\s*:\s*(.*)$", texts[k], re.S)):
                spk, texts[k] = m[1], m[2].strip()
            if (role := spec.speakers.get((spk or "").strip().casefold())) is None or not texts[k]:
                what = f"unknown speaker {spk!r}" if spk else "no 'speaker:' prefix"
                known = sorted(spec.speakers)
                raise t.error(
                    rowno,
                    col,
                    f"utterance {k + 1} of the {kind}: {what} (known: {known}); map it to user/assistant "
                    f"under the mapping key '{'turns' if level == 'dialogue' else 'context'}.speakers'",
                )
            roles.append(role)
    return [{"role": r, "text": x} for r, x in zip(roles, texts, strict=True)]


#: Keys tried, in order, when an utterance object lacks the mapping's ``speaker_key`` / ``text_key``
#: (releases name them differently: ComperDial-style dialogues carry ``persona_id``).
SPEAKER_KEYS = ("speaker", "persona_id", "speaker_id", "role", "author", "sender", "agent")
TEXT_KEYS = ("text", "utterance", "content", "message", "turn")


def _key(
    item: dict, key: str, fallbacks: tuple[str, ...], t: Any, rowno: int, col: str, k: int, name: str
) -> Any:
    """``item[key]``, else the first known alternative present; an object with none of them is an
    error naming the mapping key to set."""
    for cand in (key, *fallbacks):
        if cand in item:
            return item[cand]
    raise t.error(
        rowno,
        col,
        f"utterance {k}: the object has no {key!r} (keys: {sorted(item)}); set the mapping key "
        f"'{name}' of this field to the key that holds the {name.removesuffix('_key')}",
    )


def _cell_text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()
